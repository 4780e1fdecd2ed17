// libFuzzer target: what a shard's home sends the node that keeps its mirror (store/
// shard_mirror.h) — rows as SQLite changesets, file data, truncations and removals, reads, and a
// whole copy with its database image — applied in turn to a real ShardCopy that starts each
// input in step with a real home. The input is a sequence of messages, each
// [method: u8][length: u32, big-endian][bytes]. A changes message carries its changeset
// unsealed, and the fuzzer seals it as any member can: the seal catches damage on the way, not
// a member's own changeset (store/internal/shard_replication.h).
//
// Nothing may crash, hang or allocate without bound, and whatever the input left behind, the
// copy must take a whole copy from the home again, or the fuzzer aborts.
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/endian/conversion.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "store/internal/shard_replication.h"
#include "store/shard_mirror.h"
#include "store/store.h"

namespace {

using namespace tidepool;
using namespace tidepool::store;

// Hands the home's messages to the copy, as the mirror's node does.
class CopyTarget final : public MirrorTarget {
 public:
  explicit CopyTarget(ShardCopy& copy) : copy_(copy) {}
  Status call(MirrorMethod method, std::span<const std::uint8_t> request) override {
    return copy_.apply(static_cast<std::uint32_t>(method), request);
  }
  Result<xdr::Buffer> fetch(MirrorMethod, std::span<const std::uint8_t> request) override {
    return copy_.read(request);
  }

 private:
  ShardCopy& copy_;
};

struct Mirror {
  explicit Mirror(const std::filesystem::path& dir) {
    std::filesystem::remove_all(dir);
    StoreOptions options;
    options.data_dir = dir / "home";
    options.threads = 1;
    auto opened = Store::open(options);
    auto made = ShardCopy::open(dir / "copy");
    if (!opened.ok() || !made.ok()) std::abort();
    home = std::move(opened).value();
    copy = std::move(made).value();
    target = std::make_shared<CopyTarget>(*copy);
    take_whole_copy();
  }

  void take_whole_copy() {
    boost::asio::io_context io;
    auto done = boost::asio::co_spawn(io, home->mirror_to(target), boost::asio::use_future);
    io.run();
    if (const Status taken = done.get(); !taken.ok()) {
      std::fprintf(stderr, "mirror_fuzzer: the copy took no whole copy: %s\n",
                   taken.to_string().c_str());
      std::abort();
    }
  }

  std::unique_ptr<LocalStore> home;
  std::unique_ptr<ShardCopy> copy;
  std::shared_ptr<CopyTarget> target;
};

// A refusal that leaves the copy as it was: the message did not decode, or was not taken.
bool changed_nothing(const Status& outcome) {
  return outcome.code() == Errc::invalid_argument || outcome.code() == Errc::not_supported ||
         outcome.code() == Errc::unavailable;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Mirror mirror("/dev/shm/tidepool-mirror-fuzz-" + std::to_string(::getpid()));
  std::span<const std::uint8_t> input(data, size);
  bool in_step = true;
  while (input.size() >= 5) {
    const std::uint8_t method = input[0];
    const std::uint32_t length = boost::endian::load_big_u32(input.data() + 1);
    input = input.subspan(5);
    std::vector<std::uint8_t> request(input.begin(),
                                      input.begin() + std::min<std::size_t>(length, input.size()));
    input = input.subspan(request.size());
    if (method == static_cast<std::uint8_t>(MirrorMethod::read)) {
      (void)mirror.copy->read(request);
      continue;
    }
    if (method == static_cast<std::uint8_t>(MirrorMethod::changes)) {
      internal::seal_changeset(request);
    }
    if (!changed_nothing(mirror.copy->apply(method, request))) in_step = false;
  }
  // Each input starts from the same copy.
  if (!in_step) mirror.take_whole_copy();
  return 0;
}
