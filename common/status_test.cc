#include "common/status.h"

#include <gtest/gtest.h>

namespace tidepool {
namespace {

Result<int> parse_digit(char c) {
  if (c < '0' || c > '9') return error(Errc::invalid_argument, "not a digit");
  return c - '0';
}

Result<int> sum_of_digits(char a, char b) {
  TP_ASSIGN_OR_RETURN(int x, parse_digit(a));
  TP_ASSIGN_OR_RETURN(int y, parse_digit(b));
  return x + y;
}

TEST(Status, DefaultIsSuccess) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.to_string(), "ok");
}

TEST(Status, ErrorCarriesCodeAndMessage) {
  Status s = error(Errc::not_found, "no entry 'x'");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Errc::not_found);
  EXPECT_EQ(s.to_string(), "not_found: no entry 'x'");
}

TEST(Result, AssignOrReturnPropagatesTheFirstError) {
  EXPECT_EQ(*sum_of_digits('3', '4'), 7);
  auto bad = sum_of_digits('3', 'x');
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.code(), Errc::invalid_argument);
}

}  // namespace
}  // namespace tidepool
