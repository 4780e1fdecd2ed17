// File pool policies, and which applies to a file, through the admin API of a one-node
// cluster.
#include <gtest/gtest.h>

#include "daemon/admin/test_node.h"

namespace tidepool::daemon::admin::testing {
namespace {

class FilepoolRoutesTest : public OneNodeClusterTest {
 protected:
  HttpResponse create(const json& body) {
    return node_.call("POST", "/v1/filepool/policies", body);
  }
  std::vector<std::string> names_in_order() {
    const json listed = json_of(node_.call("GET", "/v1/filepool/policies"));
    std::vector<std::string> names;
    for (const json& p : listed["policies"]) names.push_back(p["name"]);
    return names;
  }
};

// A new cluster's: new files go to the pool of the node that made it.
const json kDefaultPolicy{{"name", "default"},
                          {"storage_target", std::string(kPool)},
                          {"protection", "2x"},
                          {"access_pattern", "concurrency"}};

TEST_F(FilepoolRoutesTest, ANewClusterHasTheDefaultPolicyAlone) {
  EXPECT_EQ(json_of(node_.call("GET", "/v1/filepool/policies")),
            (json{{"policies", json::array()}, {"default", kDefaultPolicy}}));
  EXPECT_EQ(json_of(node_.call("GET", "/v1/filepool/policies/default")), kDefaultPolicy);
}

TEST_F(FilepoolRoutesTest, APolicyIsCreatedReadChangedAndDeleted) {
  const HttpResponse created =
      create(json{{"name", "cold"}, {"filter", "accessed > 30d"}, {"storage_target", "f800"}});
  EXPECT_EQ(created.status, 201u) << created.body;
  const json cold{{"name", "cold"},           {"apply_order", 1},      {"filter", "accessed > 30d"},
                  {"storage_target", "f800"}, {"protection", nullptr}, {"access_pattern", nullptr}};
  EXPECT_EQ(json_of(created), cold);
  EXPECT_EQ(json_of(node_.call("GET", "/v1/filepool/policies/cold")), cold);

  const HttpResponse changed = node_.call("PUT", "/v1/filepool/policies/cold",
                                          json{{"storage_target", nullptr}, {"protection", "3x"}});
  EXPECT_EQ(changed.status, 200u) << changed.body;
  const json now = json_of(node_.call("GET", "/v1/filepool/policies/cold"));
  EXPECT_TRUE(now["storage_target"].is_null());
  EXPECT_EQ(now["protection"], "3x");
  EXPECT_EQ(now["filter"], "accessed > 30d");

  EXPECT_EQ(node_.call("DELETE", "/v1/filepool/policies/cold").status, 204u);
  const HttpResponse gone = node_.call("GET", "/v1/filepool/policies/cold");
  EXPECT_EQ(gone.status, 404u);
  EXPECT_EQ(error_of(gone), "no file pool policy 'cold'");
}

TEST_F(FilepoolRoutesTest, ApplyOrderPlacesAPolicyInTheList) {
  ASSERT_EQ(create(json{{"name", "a"}, {"filter", "size >= 1GiB"}}).status, 201u);
  ASSERT_EQ(create(json{{"name", "b"}, {"filter", "size >= 1GiB"}}).status, 201u);
  const HttpResponse first =
      create(json{{"name", "c"}, {"filter", "size >= 1GiB"}, {"apply_order", 1}});
  EXPECT_EQ(json_of(first)["apply_order"], 1);
  EXPECT_EQ(names_in_order(), (std::vector<std::string>{"c", "a", "b"}));
  const HttpResponse moved = node_.call("PUT", "/v1/filepool/policies/c", json{{"apply_order", 3}});
  EXPECT_EQ(json_of(moved)["apply_order"], 3);
  EXPECT_EQ(names_in_order(), (std::vector<std::string>{"a", "b", "c"}));
  const HttpResponse beyond =
      node_.call("PUT", "/v1/filepool/policies/c", json{{"apply_order", 4}});
  EXPECT_EQ(beyond.status, 400u);
  EXPECT_EQ(error_of(beyond), "'apply_order' must be 1 to 3");
}

TEST_F(FilepoolRoutesTest, TheDefaultPolicyChangesItsActionsOnlyAndStays) {
  const HttpResponse changed =
      node_.call("PUT", "/v1/filepool/policies/default", json{{"access_pattern", "streaming"}});
  EXPECT_EQ(changed.status, 200u) << changed.body;
  EXPECT_EQ(json_of(changed)["access_pattern"], "streaming");
  EXPECT_EQ(node_.call("PUT", "/v1/filepool/policies/default", json{{"filter", "size > 1"}}).status,
            400u);
  const HttpResponse kept = node_.call("DELETE", "/v1/filepool/policies/default");
  EXPECT_EQ(kept.status, 400u);
  EXPECT_EQ(error_of(kept), "the default policy cannot be deleted");
  EXPECT_EQ(json_of(node_.call("GET", "/v1/filepool/policies/default"))["access_pattern"],
            "streaming");
}

TEST_F(FilepoolRoutesTest, APolicyIsRefusedWhatItCannotBe) {
  ASSERT_EQ(create(json{{"name", "cold"}, {"filter", "accessed > 30d"}}).status, 201u);
  const HttpResponse twice = create(json{{"name", "cold"}, {"filter", "accessed > 30d"}});
  EXPECT_EQ(twice.status, 409u);
  EXPECT_EQ(error_of(twice), "file pool policy 'cold' already exists");
  const HttpResponse unfiltered = create(json{{"name", "x"}});
  EXPECT_EQ(error_of(unfiltered), "a policy needs a filter: 'filter' or 'filter_flags'");
  EXPECT_EQ(create(json{{"filter", "accessed > 30d"}}).status, 400u);
  EXPECT_EQ(create(json{{"name", "x"}, {"filter", "accessed >"}}).status, 400u);
  EXPECT_EQ(create(json{{"name", "x"}, {"filter", "size > 1"}, {"storage_target", "h500"}}).status,
            400u);
  const HttpResponse renamed =
      node_.call("PUT", "/v1/filepool/policies/cold", json{{"name", "warm"}});
  EXPECT_EQ(error_of(renamed), "a policy keeps its name: delete it and create another");
  EXPECT_EQ(node_.call("PUT", "/v1/filepool/policies/none", json{{"protection", "3x"}}).status,
            404u);
  EXPECT_EQ(node_.call("DELETE", "/v1/filepool/policies/none").status, 404u);
  EXPECT_EQ(names_in_order(), (std::vector<std::string>{"cold"}));
}

TEST_F(FilepoolRoutesTest, ExplainSaysWhichPolicyAppliesToAFileAndWhereEachActionComesFrom) {
  ASSERT_NE(node_.create_in_root("photo.jpg"), 0u);
  ASSERT_NE(node_.create_in_root("notes.txt"), 0u);
  ASSERT_EQ(
      create(json{{"name", "photos"}, {"filter", "name =~ *.jpg"}, {"protection", "3x"}}).status,
      201u);
  const HttpResponse photo = node_.call("GET", "/v1/filepool/explain/ifs/photo.jpg");
  ASSERT_EQ(photo.status, 200u) << photo.body;
  EXPECT_EQ(json_of(photo),
            (json{{"path", "/ifs/photo.jpg"},
                  {"policy", "photos"},
                  {"filter", R"(name =~ "*.jpg")"},
                  {"storage_target", {{"value", std::string(kPool)}, {"from", "default"}}},
                  {"protection", {{"value", "3x"}, {"from", "photos"}}},
                  {"access_pattern", {{"value", "concurrency"}, {"from", "default"}}}}));
  const json notes = json_of(node_.call("GET", "/v1/filepool/explain/ifs/notes.txt"));
  EXPECT_EQ(notes["policy"], "default");
  EXPECT_TRUE(notes["filter"].is_null());
  const HttpResponse missing = node_.call("GET", "/v1/filepool/explain/ifs/none");
  EXPECT_EQ(missing.status, 404u);
  EXPECT_EQ(error_of(missing), "no such file: /ifs/none");
}

}  // namespace
}  // namespace tidepool::daemon::admin::testing
