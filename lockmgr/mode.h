// The six lock modes of the classic (VMS) distributed lock manager, from weakest to strongest,
// with the two constant tables every part of the lock manager decides by: which modes may be
// granted together, and what kind of conversion one mode to another is.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tidepool::lockmgr {

enum class Mode : std::uint8_t {
  null = 0,          // NL: holds nothing; keeps the lock (and its value block) alive
  concurrent_read,   // CR: read while others may write (no cache of the data)
  concurrent_write,  // CW: write while others may write (the caller orders the writes)
  protected_read,    // PR: read, and nobody may write: what a cache of the data needs
  protected_write,   // PW: write, while others may only read concurrently (CR)
  exclusive,         // EX: nobody else holds anything but NL
};
inline constexpr std::size_t kModeCount = 6;

// The compatibility matrix: whether a lock in `held` and one in `wanted` may be granted at the
// same time on overlapping ranges. Symmetric.
inline constexpr std::array<std::array<bool, kModeCount>, kModeCount> kCompatible = {{
    //  NL     CR     CW     PR     PW     EX
    {true, true, true, true, true, true},       // NL
    {true, true, true, true, true, false},      // CR
    {true, true, true, false, false, false},    // CW
    {true, true, false, true, false, false},    // PR
    {true, true, false, false, false, false},   // PW
    {true, false, false, false, false, false},  // EX
}};

constexpr bool compatible(Mode held, Mode wanted) {
  return kCompatible[static_cast<std::size_t>(held)][static_cast<std::size_t>(wanted)];
}

// A conversion is `down` when the new mode is compatible with everything the old one was, so
// it is granted at once; `up` (including the sideways CW <-> PR) when it must wait for the
// holders it now conflicts with.
enum class Conversion : std::uint8_t { same, down, up };

inline constexpr std::array<std::array<Conversion, kModeCount>, kModeCount> kConversion = [] {
  using enum Conversion;
  return std::array<std::array<Conversion, kModeCount>, kModeCount>{{
      // to NL, CR, CW, PR, PW, EX
      {same, up, up, up, up, up},            // from NL
      {down, same, up, up, up, up},          // from CR
      {down, down, same, up, up, up},        // from CW
      {down, down, up, same, up, up},        // from PR
      {down, down, down, down, same, up},    // from PW
      {down, down, down, down, down, same},  // from EX
  }};
}();

constexpr Conversion conversion(Mode from, Mode to) {
  return kConversion[static_cast<std::size_t>(from)][static_cast<std::size_t>(to)];
}

// What a lock still protects while it converts from `a` to `b` (or the other way): only what
// both modes protect, since the holder gives up the rest the moment it asks. The strongest mode
// compatible with every mode that either of them is compatible with: `b` converting down, `a`
// converting up, CR between CW and PR.
constexpr Mode protected_by_both(Mode a, Mode b) {
  for (std::size_t m = kModeCount - 1; m > 0; --m) {
    bool covers = true;
    for (std::size_t other = 0; other < kModeCount; ++other) {
      const auto o = static_cast<Mode>(other);
      if ((compatible(a, o) || compatible(b, o)) && !compatible(static_cast<Mode>(m), o)) {
        covers = false;
      }
    }
    if (covers) return static_cast<Mode>(m);
  }
  return Mode::null;
}

// "NL", "CR", "CW", "PR", "PW", "EX": how the CLI and the logs show a mode.
std::string_view mode_name(Mode mode);
// The inverse of mode_name (case-insensitive); nullopt for anything else.
std::optional<Mode> parse_mode(std::string_view name);

}  // namespace tidepool::lockmgr
