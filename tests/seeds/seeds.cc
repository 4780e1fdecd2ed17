#include "tests/seeds/seeds.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace tidepool::test {
namespace {

#ifdef TIDEPOOL_SANITIZED_BUILD
constexpr std::uint64_t kFirstFixedSeed = 1'000'001;
constexpr std::string_view kPass = "sanitizers";
#else
constexpr std::uint64_t kFirstFixedSeed = 1;
constexpr std::string_view kPass = "release";
#endif

// FNV-1a, then SplitMix64's finaliser: a few bits changed in the text change every bit.
std::uint64_t hash(std::string_view text) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const unsigned char c : text) h = (h ^ c) * 0x100000001b3ull;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

}  // namespace

bool sanitized_build() { return kPass == "sanitizers"; }

std::uint64_t first_fixed_seed() { return kFirstFixedSeed; }

std::vector<std::uint64_t> commit_seeds(std::string_view salt, std::size_t count) {
  const char* commit = std::getenv("TIDEPOOL_TEST_COMMIT");
  if (commit == nullptr || *commit == '\0') return {};
  std::vector<std::uint64_t> seeds;
  std::string printed;
  for (std::size_t i = 0; i < count; ++i) {
    const std::string text = std::string(commit) + "/" + std::string(kPass) + "/" +
                             std::string(salt) + "/" + std::to_string(i);
    seeds.push_back(hash(text) | (std::uint64_t{1} << 32));
    printed += (i ? ", " : "") + std::to_string(seeds.back());
  }
  std::printf("seeds of commit %s for %.*s: %s\n", commit, static_cast<int>(salt.size()),
              salt.data(), printed.c_str());
  return seeds;
}

std::vector<std::uint64_t> shard_seeds(std::string_view test, std::uint64_t shard,
                                       std::uint64_t per_shard, std::size_t from_commit) {
  std::vector<std::uint64_t> seeds;
  const std::uint64_t first = kFirstFixedSeed + shard * per_shard;
  for (std::uint64_t i = 0; i < per_shard; ++i) seeds.push_back(first + i);
  for (const std::uint64_t seed :
       commit_seeds(std::string(test) + "/" + std::to_string(shard), from_commit)) {
    seeds.push_back(seed);
  }
  return seeds;
}

}  // namespace tidepool::test
