// Seeds of the randomised tests (the lock and group simulations, the coherence checker). A run
// takes fixed seeds, the same every time, and a few derived from the commit under test, so that
// every commit tries schedules no earlier one did while a rerun of the same commit runs the same
// ones again: never a seed from the date or a clock, as a failure must replay. The sanitizers'
// pass takes fixed seeds the release pass does not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace tidepool::test {

// Whether this is the sanitizers' build (and pass): what a test leaves to the other pass.
bool sanitized_build();

// The first of this pass's fixed seeds: 1 in the release pass, 1,000,001 in the sanitizers'.
std::uint64_t first_fixed_seed();

// `count` seeds derived from the commit under test (TIDEPOOL_TEST_COMMIT, which `./dev test`
// sets to the commit it builds), the pass and `salt` (a test's name and shard, so that tests
// and shards differ); none when the variable is unset. Each is at least 2^32, above every fixed
// seed; the seeds are printed with the commit they come from.
std::vector<std::uint64_t> commit_seeds(std::string_view salt, std::size_t count);

// The seeds of shard `shard` (from 0) of test `test`, whose fixed seeds are cut into shards of
// `per_shard`: those, then `from_commit` commit seeds salted with the test and shard.
std::vector<std::uint64_t> shard_seeds(std::string_view test, std::uint64_t shard,
                                       std::uint64_t per_shard, std::size_t from_commit);

}  // namespace tidepool::test
