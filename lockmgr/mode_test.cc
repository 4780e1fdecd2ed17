#include "lockmgr/mode.h"

#include <gtest/gtest.h>

namespace tidepool::lockmgr {
namespace {

constexpr Mode kModes[] = {Mode::null,           Mode::concurrent_read, Mode::concurrent_write,
                           Mode::protected_read, Mode::protected_write, Mode::exclusive};

TEST(Mode, CompatibilityIsSymmetric) {
  for (Mode a : kModes) {
    for (Mode b : kModes)
      EXPECT_EQ(compatible(a, b), compatible(b, a)) << mode_name(a) << mode_name(b);
  }
}

TEST(Mode, TheMatrixIsTheClassicOne) {
  // Each mode with the modes it may share a range with, as the VMS lock manager defines them.
  auto shares = [](Mode held) {
    std::string names;
    for (Mode m : kModes) {
      if (compatible(held, m)) names += std::string(mode_name(m)) + " ";
    }
    return names;
  };
  EXPECT_EQ(shares(Mode::null), "NL CR CW PR PW EX ");
  EXPECT_EQ(shares(Mode::concurrent_read), "NL CR CW PR PW ");
  EXPECT_EQ(shares(Mode::concurrent_write), "NL CR CW ");
  EXPECT_EQ(shares(Mode::protected_read), "NL CR PR ");
  EXPECT_EQ(shares(Mode::protected_write), "NL CR ");
  EXPECT_EQ(shares(Mode::exclusive), "NL ");
}

TEST(Mode, AConversionIsDownExactlyWhenTheNewModeSharesEverythingTheOldOneDid) {
  for (Mode from : kModes) {
    for (Mode to : kModes) {
      bool shares_at_least = true;
      for (Mode other : kModes) {
        if (compatible(from, other) && !compatible(to, other)) shares_at_least = false;
      }
      Conversion expected = from == to        ? Conversion::same
                            : shares_at_least ? Conversion::down
                                              : Conversion::up;
      EXPECT_EQ(conversion(from, to), expected) << mode_name(from) << " -> " << mode_name(to);
    }
  }
}

TEST(Mode, CwAndPrAreSidewaysBothWays) {
  EXPECT_EQ(conversion(Mode::concurrent_write, Mode::protected_read), Conversion::up);
  EXPECT_EQ(conversion(Mode::protected_read, Mode::concurrent_write), Conversion::up);
}

TEST(Mode, AConvertingLockProtectsWhatBothModesProtect) {
  for (Mode from : kModes) {
    for (Mode to : kModes) {
      Mode expected = conversion(from, to) == Conversion::up ? from : to;
      if (conversion(from, to) == Conversion::up && conversion(to, from) == Conversion::up) {
        expected = Mode::concurrent_read;  // sideways
      }
      EXPECT_EQ(protected_by_both(from, to), expected) << mode_name(from) << " " << mode_name(to);
      EXPECT_EQ(protected_by_both(from, to), protected_by_both(to, from));
    }
  }
}

TEST(Mode, NamesRoundTripAndParseIgnoresCase) {
  for (Mode m : kModes) EXPECT_EQ(parse_mode(mode_name(m)), m);
  EXPECT_EQ(parse_mode("ex"), Mode::exclusive);
  EXPECT_EQ(parse_mode("Pr"), Mode::protected_read);
  EXPECT_EQ(parse_mode("EXCL"), std::nullopt);
  EXPECT_EQ(parse_mode(""), std::nullopt);
}

}  // namespace
}  // namespace tidepool::lockmgr
