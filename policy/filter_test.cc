#include "policy/filter.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <random>

namespace tidepool::policy {
namespace {

constexpr std::int64_t kDay = 86400;
constexpr std::int64_t kNow = 1'750'000'000;  // 2025-06-15

FileFacts file(std::string path, std::uint64_t size, std::int64_t accessed_days_ago) {
  FileFacts f;
  f.path = std::move(path);
  f.size = size;
  f.atime = kNow - accessed_days_ago * kDay;
  f.mtime = f.ctime = f.birth = f.atime;
  return f;
}

Filter parsed(std::string_view text) {
  auto filter = parse_expression(text);
  EXPECT_TRUE(filter.ok()) << text << ": " << filter.status().message();
  return filter.ok() ? *filter : Filter{};
}

std::string parse_error(std::string_view text) {
  auto filter = parse_expression(text);
  EXPECT_FALSE(filter.ok()) << text << " was accepted";
  return filter.ok() ? "" : filter.status().message();
}

TEST(PolicyFilter, TheSeedsColdDataFilterPicksOldLargeFilesUnderTheirDirectory) {
  const Filter cold = parsed("accessed > 30d and size >= 1GiB and path =~ /ifs/data/**");
  ASSERT_EQ(cold.clauses.size(), 1u);
  EXPECT_TRUE(matches(cold, file("/ifs/data/train/shard-0001.tar", 2ull << 30, 45), kNow));
  EXPECT_FALSE(matches(cold, file("/ifs/data/train/shard-0001.tar", 2ull << 30, 29), kNow))
      << "read 29 days ago";
  EXPECT_FALSE(matches(cold, file("/ifs/data/small", (1ull << 30) - 1, 45), kNow));
  EXPECT_FALSE(matches(cold, file("/ifs/home/old.tar", 2ull << 30, 45), kNow));
}

TEST(PolicyFilter, OrJoinsClausesOfAndsAndAnEmptyFilterMatchesEverything) {
  const Filter f = parsed("name =~ *.jpg and size < 200KB or type == directory");
  ASSERT_EQ(f.clauses.size(), 2u);
  EXPECT_TRUE(matches(f, file("/ifs/a/cat.jpg", 115'000, 0), kNow));
  EXPECT_FALSE(matches(f, file("/ifs/a/cat.jpg", 1'300'000, 0), kNow));
  FileFacts dir = file("/ifs/a", 0, 0);
  dir.type = "directory";
  EXPECT_TRUE(matches(f, dir, kNow));
  EXPECT_TRUE(matches(Filter{}, file("/ifs/x", 1, 1), kNow));
}

TEST(PolicyFilter, GlobsKeepStarsWithinANameAndDoubleStarsAcrossNames) {
  const Filter one = parsed("path =~ /ifs/*/x");
  EXPECT_TRUE(matches(one, file("/ifs/a/x", 1, 0), kNow));
  EXPECT_FALSE(matches(one, file("/ifs/a/b/x", 1, 0), kNow));
  const Filter any = parsed("path =~ /ifs/**/x");
  EXPECT_TRUE(matches(any, file("/ifs/a/b/x", 1, 0), kNow));
  const Filter question = parsed("name =~ f?.bin");
  EXPECT_TRUE(matches(question, file("/ifs/f1.bin", 1, 0), kNow));
  EXPECT_FALSE(matches(question, file("/ifs/f12.bin", 1, 0), kNow));
  EXPECT_FALSE(matches(parsed("name =~ *.JPG"), file("/ifs/a.jpg", 1, 0), kNow));
  EXPECT_TRUE(matches(parsed("iname =~ *.JPG"), file("/ifs/a.jpg", 1, 0), kNow));
  EXPECT_TRUE(matches(parsed("name !~ *.tmp"), file("/ifs/a.jpg", 1, 0), kNow));
  EXPECT_TRUE(matches(parsed("path =~ \"/ifs/my data/**\""), file("/ifs/my data/f", 1, 0), kNow));
}

TEST(PolicyFilter, APathologicalPatternTakesNoLongerThanItsLengthTimesThePaths) {
  const Filter f = parsed("path =~ " + std::string(200, '*') + "x");
  EXPECT_FALSE(matches(f, file("/" + std::string(4000, 'a'), 1, 0), kNow));
  const FileFacts too_long = file("/ifs/keep/" + std::string(5000, 'a'), 1, 0);
  EXPECT_FALSE(matches(parsed("path =~ /ifs/keep/**"), too_long, kNow));
  EXPECT_FALSE(matches(parsed("path !~ /ifs/keep/**"), too_long, kNow))
      << "a path too long to match is no reason to act on it either";
}

TEST(PolicyFilter, SizesAgesDatesOwnersAndTypesReadAsTheySay) {
  EXPECT_EQ(std::get<std::uint64_t>(parsed("size > 1GB").clauses[0][0].value), 1'000'000'000u);
  EXPECT_EQ(std::get<std::uint64_t>(parsed("size > 1.5KiB").clauses[0][0].value), 1536u);
  EXPECT_EQ(std::get<std::uint64_t>(parsed("size > 42").clauses[0][0].value), 42u);
  EXPECT_EQ(std::get<Age>(parsed("modified > 2w").clauses[0][0].value).seconds, 14 * kDay);
  EXPECT_EQ(std::get<Age>(parsed("changed > 3MO").clauses[0][0].value).seconds, 90 * kDay);
  EXPECT_EQ(std::get<Age>(parsed("birth > 1y").clauses[0][0].value).seconds, 365 * kDay);
  EXPECT_EQ(std::get<Age>(parsed("birth > 90min").clauses[0][0].value).seconds, 5400);
  EXPECT_EQ(std::get<Moment>(parsed("accessed < 2024-01-31").clauses[0][0].value).unix_seconds,
            1'706'659'200);
  EXPECT_EQ(
      std::get<Moment>(parsed("accessed < 2024-01-31T12:00:00Z").clauses[0][0].value).unix_seconds,
      1'706'702'400);
  FileFacts mine = file("/ifs/f", 1, 0);
  mine.uid = 1000;
  EXPECT_TRUE(matches(parsed("owner == 1000"), mine, kNow));
  EXPECT_FALSE(matches(parsed("owner != 1000"), mine, kNow));
  EXPECT_TRUE(matches(parsed("accessed < 2030-01-01"), mine, kNow));
  EXPECT_TRUE(matches(parsed("TYPE == File AND Size > 0"), mine, kNow));
  EXPECT_STREQ(type_name(2), "directory");
  EXPECT_STREQ(type_name(4), "char");
  EXPECT_STREQ(type_name(0), "unknown");
  EXPECT_STREQ(type_name(8), "unknown");
}

TEST(PolicyFilter, MistakesSayWhereAndWhatWasExpected) {
  EXPECT_EQ(parse_error(""),
            "at column 1: expected a condition such as size > 1GiB, found the end");
  EXPECT_EQ(parse_error("sise > 1GB"),
            "at column 1: expected a field: path, name, iname, size, accessed, modified, "
            "changed, birth, type or owner, found 'sise'");
  EXPECT_EQ(parse_error("size >= 1GiB and accessed > 30 days"),
            "at column 29: expected an age such as 30d (s, min, h, d, w, mo, y; at most 100y) or "
            "a date such as 2024-01-31, found '30'");
  EXPECT_EQ(parse_error("size 1GB"),
            "at column 6: expected a comparison: < <= > >= == != =~ !~, found '1GB'");
  EXPECT_EQ(parse_error("size > 1XB"),
            "at column 8: expected a size such as 1GiB or 500MB (B, KB, MB, GB, TB, PB or "
            "KiB...PiB), found '1XB'");
  EXPECT_EQ(parse_error("size > 1GB but size < 2GB"),
            "at column 12: expected 'and', 'or' or the end, found 'but'");
  EXPECT_EQ(parse_error("size > 1GB and"),
            "at column 15: expected a field (path, name, size, "
            "...), found the end");
  EXPECT_NE(parse_error("accessed == 30d").find("times compare with <, <=, > or >= only"),
            std::string::npos);
  EXPECT_NE(parse_error("accessed > 30m").find("expected an age"), std::string::npos)
      << "a lone m could be minutes or months";
  EXPECT_NE(parse_error("path > /ifs").find("path compares with =~ (matches) or !~ only"),
            std::string::npos);
  EXPECT_NE(parse_error("type == pipe").find("expected a type"), std::string::npos);
  EXPECT_NE(parse_error("owner == alice").find("expected an owner's uid"), std::string::npos);
  EXPECT_NE(parse_error("path =~ \"/ifs").find("a quote that is never closed"), std::string::npos);
  EXPECT_NE(parse_error("accessed < 2024-02-30x").find("expected a date"), std::string::npos);
  EXPECT_NE(parse_error(std::string(5000, 'a')).find("at most 4096"), std::string::npos);
  EXPECT_NE(parse_error("accessed > 101y").find("at most 100y"), std::string::npos);
  EXPECT_NE(parse_error("accessed < 0999-01-01").find("from 1970 to 2200"), std::string::npos);
  EXPECT_NE(parse_error("modified < 9999-01-01").find("from 1970 to 2200"), std::string::npos);
  EXPECT_EQ(parse_error("path =~ /ifs/a=b"),
            "at column 15: '=' is no comparison; quote values that hold it");
}

TEST(PolicyFilter, TheReadableFormReadsBackToTheSameFilter) {
  for (const char* text :
       {"accessed > 30d and size >= 1GiB and path =~ /ifs/data/**",
        "name =~ \"a \\\"b\\\"\" or iname !~ *.TMP and type != symlink",
        "modified <= 2024-01-31T12:00:00Z or owner == 0 or birth >= 1y and changed < 2h"}) {
    const Filter first = parsed(text);
    EXPECT_EQ(parsed(to_expression(first)), first) << text << " -> " << to_expression(first);
  }
}

std::vector<std::string> args(std::initializer_list<const char*> list) {
  return {list.begin(), list.end()};
}

TEST(PolicyFilter, OneFsFlagsSayTheSameAsTheExpression) {
  auto flags = parse_flags(args({"--begin-filter", "--accessed-time=30D", "--operator=gt", "--and",
                                 "--size=1GB", "--operator=ge", "--end-filter"}));
  ASSERT_TRUE(flags.ok()) << flags.status().message();
  EXPECT_EQ(*flags, parsed("accessed > 30d and size >= 1GB"));

  auto paths = parse_flags(args({"--begin-filter", "--path=/ifs/data/", "--or", "--name=*.JPG",
                                 "--case-sensitive=false", "--operator=ne", "--end-filter"}));
  ASSERT_TRUE(paths.ok()) << paths.status().message();
  EXPECT_EQ(*paths, parsed("path =~ /ifs/data/** or iname !~ *.JPG"))
      << "a path without wildcards is the tree under it";
  auto root = parse_flags(args({"--begin-filter", "--path=/", "--end-filter"}));
  ASSERT_TRUE(root.ok()) << root.status().message();
  EXPECT_TRUE(matches(*root, file("/ifs/x", 1, 0), kNow));
}

TEST(PolicyFilter, OneFsFlagMistakesNameTheArgument) {
  auto message = [](std::vector<std::string> a) {
    auto f = parse_flags(a);
    EXPECT_FALSE(f.ok());
    return f.ok() ? "" : f.status().message();
  };
  EXPECT_EQ(message(args({"--size=1GB"})),
            "argument 1: expected --begin-filter, found '--size=1GB'");
  EXPECT_EQ(message(args({"--begin-filter", "--size=1GB"})),
            "argument 3: expected --and, --or or --end-filter, found the end");
  EXPECT_EQ(message(args({"--begin-filter", "--size=1GB", "--operator=bigger", "--end-filter"})),
            "argument 3: expected --operator=lt, le, gt, ge, eq or ne, found '--operator=bigger'");
  EXPECT_EQ(message(args({"--begin-filter", "--colour=red", "--end-filter"})),
            "argument 2: expected a condition such as --size=1GB or --accessed-time=30D, found "
            "'--colour=red'");
  EXPECT_NE(message(args({"--begin-filter", "--size=1GB", "--end-filter", "--and"}))
                .find("expected nothing after --end-filter"),
            std::string::npos);
  EXPECT_NE(message(args({"--begin-filter", "--path=/ifs", "--operator=gt", "--end-filter"}))
                .find("paths and names take --operator=eq or ne"),
            std::string::npos);
}

// The SQL predicate over a real inodes table selects what matches() does (exactly, without
// path conditions; a superset with them).
class PolicySql : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(sqlite3_open(":memory:", &db_), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db_,
                           "CREATE TABLE inodes(ino INTEGER PRIMARY KEY, type INTEGER, uid INTEGER,"
                           " size INTEGER, atime INTEGER, mtime INTEGER, ctime INTEGER,"
                           " birth INTEGER)",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    std::mt19937_64 random(11);
    const char* types[] = {"file", "directory", "block", "char", "symlink", "socket", "fifo"};
    for (int ino = 1; ino <= 400; ++ino) {
      FileFacts f;
      const int type = static_cast<int>(random() % 7) + 1;
      f.type = types[type - 1];
      f.uid = static_cast<std::uint32_t>(random() % 3);
      f.size = random() % (4ull << 30);
      // Around the thresholds to the second: ages of 29-31 days, some exactly 30.
      f.atime = kNow - 29 * kDay - static_cast<std::int64_t>(random() % (2 * kDay + 1));
      if (ino % 10 == 0) f.atime = kNow - 30 * kDay;
      f.mtime = kNow - static_cast<std::int64_t>(random() % (400 * kDay));
      f.ctime = f.mtime;
      f.birth = f.mtime - 100;
      f.path = "/ifs/f" + std::to_string(ino);
      facts_.push_back(f);
      const std::string insert =
          "INSERT INTO inodes VALUES(" + std::to_string(ino) + "," + std::to_string(type) + "," +
          std::to_string(f.uid) + "," + std::to_string(f.size) + "," + ns(f.atime, ino) + "," +
          ns(f.mtime, ino) + "," + ns(f.ctime, ino) + "," + ns(f.birth, ino) + ")";
      ASSERT_EQ(sqlite3_exec(db_, insert.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    }
  }
  void TearDown() override { sqlite3_close(db_); }

  // Nanoseconds of a time in whole seconds, with a fraction that must not change the answer.
  static std::string ns(std::int64_t seconds, int ino) {
    return std::to_string(seconds * 1'000'000'000 + (ino % 3) * 333'333'333);
  }

  std::vector<int> selected(const Filter& filter) {
    const SqlPredicate sql = to_sql(filter, kNow);
    const std::string query = "SELECT ino FROM inodes WHERE " + sql.where + " ORDER BY ino";
    sqlite3_stmt* statement = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, query.c_str(), -1, &statement, nullptr), SQLITE_OK) << query;
    for (std::size_t i = 0; i < sql.values.size(); ++i) {
      sqlite3_bind_int64(statement, static_cast<int>(i + 1), sql.values[i]);
    }
    std::vector<int> inos;
    while (sqlite3_step(statement) == SQLITE_ROW) inos.push_back(sqlite3_column_int(statement, 0));
    sqlite3_finalize(statement);
    return inos;
  }

  std::vector<int> evaluated(const Filter& filter) {
    std::vector<int> inos;
    for (std::size_t i = 0; i < facts_.size(); ++i) {
      if (matches(filter, facts_[i], kNow)) inos.push_back(static_cast<int>(i + 1));
    }
    return inos;
  }

  sqlite3* db_ = nullptr;
  std::vector<FileFacts> facts_;
};

TEST_F(PolicySql, SelectsExactlyWhatTheEvaluatorMatches) {
  for (const char* text :
       {"accessed > 30d", "accessed >= 30d", "accessed < 30d", "accessed <= 30d",
        "accessed > 30d and size >= 1GiB", "size < 100MB or type == directory",
        "type != file and owner == 2", "modified < 2025-01-01 or birth >= 2025-05-01T00:00:00Z",
        "changed <= 2024-12-31 and size > 2GiB or owner != 0 and accessed > 30d"}) {
    const Filter filter = parsed(text);
    EXPECT_TRUE(to_sql(filter, kNow).exact) << text;
    const std::vector<int> expected = evaluated(filter);
    EXPECT_EQ(selected(filter), expected) << text << "\nWHERE " << to_sql(filter, kNow).where;
    EXPECT_FALSE(expected.empty()) << text << ": the data set should exercise it";
  }
}

TEST_F(PolicySql, PathConditionsLeaveASupersetToCheckWithTheEvaluator) {
  const Filter filter = parsed("path =~ /ifs/f1* and size > 1GiB or name =~ f3?");
  const SqlPredicate sql = to_sql(filter, kNow);
  EXPECT_FALSE(sql.exact);
  const std::vector<int> candidates = selected(filter);
  for (int ino : evaluated(filter)) {
    EXPECT_NE(std::find(candidates.begin(), candidates.end(), ino), candidates.end()) << ino;
  }
  EXPECT_EQ(to_sql(Filter{}, kNow).where, "1");
}

}  // namespace
}  // namespace tidepool::policy
