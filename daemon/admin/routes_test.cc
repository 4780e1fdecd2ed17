// Matching requests against the route table: patterns, parameters, 404 against 405, and the
// table against the API's documentation.
#include "daemon/admin/routes.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace tidepool::daemon::admin {
namespace {

HttpResponse unused_reply;

boost::asio::awaitable<HttpResponse> first(Context&, Request) { co_return unused_reply; }
boost::asio::awaitable<HttpResponse> second(Context&, Request) { co_return unused_reply; }

constexpr Route kTable[] = {
    {"GET", "/v1/things", Access::token, &first},
    {"GET", "/v1/things/{name}", Access::token, &first},
    {"PUT", "/v1/things/{name}", Access::token, &second},
    {"GET", "/v1/things/{name}/parts/{part}", Access::token, &first},
    {"GET", "/v1/files/{path...}", Access::token, &first},
    {"GET", "/v1/overlap/{name}", Access::token, &first},
    {"GET", "/v1/overlap/fixed", Access::token, &second},
    {"GET", "/open", Access::open, &first},
};

RouteMatch match(std::string method, std::string target) {
  return match_route(kTable, HttpRequest{std::move(method), std::move(target), "", "body"});
}

TEST(RouteMatchTest, ALiteralPathMatchesItsMethodsRoute) {
  const RouteMatch found = match("GET", "/v1/things");
  ASSERT_NE(found.route, nullptr);
  EXPECT_EQ(found.route->pattern, "/v1/things");
  EXPECT_TRUE(found.request.params.empty());
  EXPECT_EQ(found.request.body, "body");
}

TEST(RouteMatchTest, ParametersAreCapturedByNameAndDecoded) {
  const RouteMatch found = match("GET", "/v1/things/a%20b/parts/7");
  ASSERT_NE(found.route, nullptr);
  EXPECT_EQ(found.route->pattern, "/v1/things/{name}/parts/{part}");
  EXPECT_EQ(found.request.param("name"), "a b");
  EXPECT_EQ(found.request.param("part"), "7");
  EXPECT_EQ(found.request.param("absent"), "");
}

TEST(RouteMatchTest, TheMethodChoosesBetweenRoutesOfOnePath) {
  const RouteMatch found = match("PUT", "/v1/things/x");
  ASSERT_NE(found.route, nullptr);
  EXPECT_EQ(found.route->handler, &second);
}

TEST(RouteMatchTest, ATrailingRestParameterTakesNoneOrManySegments) {
  const RouteMatch many = match("GET", "/v1/files/ifs/a%2Fb/c");
  ASSERT_NE(many.route, nullptr);
  EXPECT_EQ(many.request.rest, (std::vector<std::string>{"ifs", "a/b", "c"}));
  const RouteMatch none = match("GET", "/v1/files");
  ASSERT_NE(none.route, nullptr);
  EXPECT_TRUE(none.request.rest.empty());
}

TEST(RouteMatchTest, EmptySegmentsAndTheQueryDoNotChangeThePath) {
  const RouteMatch found = match("GET", "//v1//things/x/?kind=data&path=%2Fifs%2Fa&flag");
  ASSERT_NE(found.route, nullptr);
  EXPECT_EQ(found.request.param("name"), "x");
  EXPECT_EQ(found.request.query_value("kind"), "data");
  EXPECT_EQ(found.request.query_value("path"), "/ifs/a");
  EXPECT_EQ(found.request.query_value("flag"), "");
  EXPECT_EQ(found.request.query_value("other"), std::nullopt);
  EXPECT_EQ(found.request.target, "//v1//things/x/?kind=data&path=%2Fifs%2Fa&flag");
}

TEST(RouteMatchTest, TheFirstOfTwoMatchingRoutesWins) {
  const RouteMatch found = match("GET", "/v1/overlap/fixed");
  ASSERT_NE(found.route, nullptr);
  EXPECT_EQ(found.route->handler, &first);
}

TEST(RouteMatchTest, APathServedWithAnotherMethodIsTold) {
  const RouteMatch found = match("DELETE", "/v1/things/x");
  EXPECT_EQ(found.route, nullptr);
  EXPECT_TRUE(found.path_served);
  EXPECT_TRUE(found.request.params.empty());
}

TEST(RouteMatchTest, APathNoRouteServesIsTold) {
  for (const char* target : {"/v1/thing", "/v1/things/x/y", "/v1/things/x/parts", "/", ""}) {
    const RouteMatch found = match("GET", target);
    EXPECT_EQ(found.route, nullptr) << target;
    EXPECT_FALSE(found.path_served) << target;
  }
}

TEST(RouteMatchTest, TheRequestKeepsItsDecodedPath) {
  EXPECT_EQ(match("GET", "/v1/no%20such?x=1").request.path,
            (std::vector<std::string>{"v1", "no such"}));
}

TEST(RouteTableTest, NoTwoRoutesShareMethodAndPattern) {
  std::set<std::pair<std::string_view, std::string_view>> seen;
  for (const Route& route : api_routes()) {
    EXPECT_TRUE(seen.emplace(route.method, route.pattern).second)
        << route.method << " " << route.pattern;
  }
}

TEST(RouteTableTest, OnlyProbesAreOpenAndOnlyFormingAClusterTakesTheSetupSecret) {
  std::map<Access, std::set<std::string>> by_access;
  for (const Route& route : api_routes()) {
    by_access[route.access].insert(std::string(route.method) + " " + std::string(route.pattern));
  }
  EXPECT_EQ(by_access[Access::open],
            (std::set<std::string>{"GET /health", "GET /metrics", "GET /v1/node"}));
  EXPECT_EQ(by_access[Access::setup],
            (std::set<std::string>{"POST /v1/cluster/create", "POST /v1/cluster/join"}));
}

// The rows of admin_api.md's endpoint table: "| `GET /v1/sysctl/NAME` | ...".
std::vector<std::pair<std::string, std::string>> documented_endpoints() {
  std::ifstream file(TIDEPOOL_ADMIN_API_DOC);
  std::stringstream text;
  text << file.rdbuf();
  const std::string doc = text.str();
  const std::regex row(R"(\n\| `(GET|POST|PUT|DELETE) (/[^`]*)` \|)");
  std::vector<std::pair<std::string, std::string>> endpoints;
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), row); it != std::sregex_iterator();
       ++it) {
    endpoints.emplace_back((*it)[1], (*it)[2]);
  }
  return endpoints;
}

TEST(RouteTableTest, EveryDocumentedEndpointHasARouteAndEveryRouteIsDocumented) {
  const auto endpoints = documented_endpoints();
  ASSERT_GT(endpoints.size(), 40u) << "the endpoint table of " << TIDEPOOL_ADMIN_API_DOC;
  std::set<const Route*> documented;
  for (const auto& [method, path] : endpoints) {
    const RouteMatch found = match_route(api_routes(), HttpRequest{method, path, "", ""});
    EXPECT_NE(found.route, nullptr) << method << " " << path << " is documented, not routed";
    documented.insert(found.route);
  }
  for (const Route& route : api_routes()) {
    EXPECT_TRUE(documented.contains(&route))
        << route.method << " " << route.pattern << " is routed, not documented";
  }
}

}  // namespace
}  // namespace tidepool::daemon::admin
