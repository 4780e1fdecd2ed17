// Writes a seed corpus for store_call_fuzzer: the requests a remote store and a remote
// participant really ship (one file each: the method, big-endian — a participant's with the
// top bit set — then the request), recorded while they run a few of every operation against a
// store in a scratch directory. And one for mirror_fuzzer: the messages a home sends its mirror
// while the same operations run on it, as that fuzzer reads them.
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/endian/conversion.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "store/remote_store.h"
#include "store/shard_mirror.h"

namespace {

using namespace tidepool;
using namespace tidepool::store;

constexpr std::uint32_t kParticipantBit = 0x80000000u;

void record(const std::filesystem::path& file, std::uint32_t method, const xdr::Buffer& request) {
  std::uint8_t prefix[4];
  boost::endian::store_big_u32(prefix, method);
  std::ofstream out(file, std::ios::binary);
  out.write(reinterpret_cast<const char*>(prefix), sizeof prefix);
  out.write(reinterpret_cast<const char*>(request.data()),
            static_cast<std::streamsize>(request.size()));
}

class RecordingChannel final : public ShardChannel {
 public:
  RecordingChannel(Store& home, std::filesystem::path corpus)
      : home_(home), corpus_(std::move(corpus)) {}

  awaitable<Result<xdr::Buffer>> call(StoreMethod method, xdr::Buffer request) override {
    record(corpus_ / ("store-" + std::to_string(count_++)), static_cast<std::uint32_t>(method),
           request);
    auto served = serve_store_call(home_, static_cast<std::uint32_t>(method), request);
    co_return co_await std::move(served);
  }

 private:
  Store& home_;
  std::filesystem::path corpus_;
  int count_ = 0;
};

class RecordingParticipantChannel final : public ParticipantChannel {
 public:
  RecordingParticipantChannel(ShardParticipant& home, std::filesystem::path corpus)
      : home_(home), corpus_(std::move(corpus)) {}

  awaitable<Result<xdr::Buffer>> call(ParticipantMethod method, xdr::Buffer request) override {
    record(corpus_ / ("participant-" + std::to_string(count_++)),
           static_cast<std::uint32_t>(method) | kParticipantBit, request);
    auto served = serve_participant_call(home_, static_cast<std::uint32_t>(method), request);
    co_return co_await std::move(served);
  }

 private:
  ShardParticipant& home_;
  std::filesystem::path corpus_;
  int count_ = 0;
};

// A part another shard coordinates, then one this shard coordinates, each carried through.
awaitable<void> exercise_participant(ShardParticipant& p) {
  ShardStep add;
  add.kind = StepKind::add_entry;
  add.directory = kRootInode;
  add.name = "moved-in";
  add.inode = (InodeId{1} << kShardShift) | 2;
  add.delta = 1;
  TransactionPart elsewhere;
  elsewhere.id = 1;
  elsewhere.coordinator = 1;
  elsewhere.steps.push_back(add);
  auto preparing = p.prepare(std::move(elsewhere));
  (void)co_await std::move(preparing);
  (void)co_await p.pending();
  (void)co_await p.commit(1);
  ShardStep remove = add;
  remove.kind = StepKind::remove_entry;
  remove.delta = -1;
  TransactionPart here;
  here.id = 2;
  here.participants.push_back(1);
  here.steps.push_back(remove);
  auto preparing_here = p.prepare(std::move(here));
  (void)co_await std::move(preparing_here);
  (void)co_await p.outcome(2);
  (void)co_await p.decide(2);
  (void)co_await p.finish(2);
  (void)co_await p.abort(3);
}

awaitable<void> exercise(Store& s) {
  const Caller user{1000, 1000, {}};
  AttributeChanges mode;
  mode.mode = 0644;
  auto made = co_await s.create(kRootInode, "file", CreateMode::guarded, mode, {}, user);
  if (!made.ok()) co_return;
  const InodeId file = made->attributes.inode;
  const std::uint8_t bytes[] = {'s', 'e', 'e', 'd'};
  (void)co_await s.write(file, 0, bytes, Stability::unstable, user);
  std::uint8_t into[16];
  (void)co_await s.read(file, 0, into, user);
  // Each call made before its co_await, as everywhere: GCC 12 destroys a temporary argument of a
  // coroutine called within a co_await expression wrongly.
  auto committing = s.commit(file, {});
  (void)co_await std::move(committing);
  SyncedCopies synced;
  synced.layout.pool = "f800";
  synced.layout.stripe_unit = 128 * 1024;
  synced.layout.protection = 2;
  synced.layout.nodes = {1, 2, 3};
  synced.nodes = {{1, 0x1234}, {3, 0x5678}};
  auto committing_synced = s.commit(file, synced);
  (void)co_await std::move(committing_synced);
  (void)co_await s.getattr(file);
  (void)co_await s.layout(file);
  (void)co_await s.set_access_pattern(file, "streaming");
  (void)co_await s.migrate(file, "h500", 2, 0);
  const std::vector<std::int64_t> values{5, 4096, 1000};
  (void)co_await s.find_files("(atime < ?1) OR (size >= ?2 AND uid = ?3)", values, 0, 10);
  AttributeChanges truncate;
  truncate.size = 2;
  (void)co_await s.setattr(file, truncate, user, std::nullopt);
  (void)co_await s.check_access(file, user, 0x3f);
  auto dir = co_await s.mkdir(kRootInode, "dir", mode, user);
  (void)co_await s.lookup(kRootInode, "dir", user);
  (void)co_await s.symlink(kRootInode, "link", "file", mode, user);
  if (auto link = co_await s.lookup(kRootInode, "link", user); link.ok()) {
    (void)co_await s.readlink(link->object.inode);
  }
  (void)co_await s.mknod(kRootInode, "fifo", FileType::fifo, 0, 0, mode, user);
  (void)co_await s.link(file, kRootInode, "hard", user);
  (void)co_await s.rename(kRootInode, "hard", kRootInode, "moved", user);
  (void)co_await s.readdir(kRootInode, 0, 0, 100, true, user);
  (void)co_await s.remove(kRootInode, "moved", user);
  if (dir.ok()) (void)co_await s.rmdir(kRootInode, "dir", user);
  (void)co_await s.fsstat();
}

// Keeps what a home sends its mirror, in mirror_fuzzer's form ([method: u8][length: u32][bytes],
// a changeset without its seal), and hands it on to a copy.
class RecordingTarget final : public MirrorTarget {
 public:
  explicit RecordingTarget(ShardCopy& copy) : copy_(copy) {}
  Status call(MirrorMethod method, std::span<const std::uint8_t> request) override {
    keep(method, method == MirrorMethod::changes && request.size() >= 4
                     ? request.first(request.size() - 4)
                     : request);
    return copy_.apply(static_cast<std::uint32_t>(method), request);
  }
  Result<xdr::Buffer> fetch(MirrorMethod method, std::span<const std::uint8_t> request) override {
    keep(method, request);
    return copy_.read(request);
  }
  std::vector<std::vector<std::uint8_t>> messages;

 private:
  void keep(MirrorMethod method, std::span<const std::uint8_t> bytes) {
    std::vector<std::uint8_t> message(5);
    message[0] = static_cast<std::uint8_t>(method);
    boost::endian::store_big_u32(message.data() + 1, static_cast<std::uint32_t>(bytes.size()));
    message.insert(message.end(), bytes.begin(), bytes.end());
    messages.push_back(std::move(message));
  }
  ShardCopy& copy_;
};

// Each message the home sends after the whole copy, alone; and the whole copy with all of them
// in turn, which applies cleanly to a copy in any state.
Status write_mirror_seeds(const std::filesystem::path& corpus, const std::string& scratch) {
  std::filesystem::create_directories(corpus);
  StoreOptions options;
  options.data_dir = scratch + "/home";
  options.threads = 1;
  TP_ASSIGN_OR_RETURN(auto home, Store::open(options));
  TP_ASSIGN_OR_RETURN(auto copy, ShardCopy::open(scratch + "/copy"));
  auto target = std::make_shared<RecordingTarget>(*copy);
  boost::asio::io_context io;
  auto mirrored = boost::asio::co_spawn(io, home->mirror_to(target), boost::asio::use_future);
  io.run();
  TP_RETURN_IF_ERROR(mirrored.get());
  const std::size_t whole_copy = target->messages.size();
  io.restart();
  auto done = boost::asio::co_spawn(io, exercise(*home), boost::asio::use_future);
  io.run();
  done.get();
  home->close();
  const auto save = [&corpus](const std::string& name, std::span<const std::uint8_t> bytes) {
    std::ofstream(corpus / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
  };
  std::vector<std::uint8_t> all;
  for (std::size_t i = 0; i < target->messages.size(); ++i) {
    const auto& message = target->messages[i];
    if (i >= whole_copy) save("message-" + std::to_string(i - whole_copy), message);
    all.insert(all.end(), message.begin(), message.end());
  }
  save("whole-copy-and-changes", all);
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: write_store_seeds STORE_DIR MIRROR_DIR\n");
    return 2;
  }
  const std::filesystem::path corpus = argv[1];
  std::filesystem::create_directories(corpus);
  const std::string scratch = "/dev/shm/tidepool-store-seeds-" + std::to_string(::getpid());
  StoreOptions options;
  options.data_dir = scratch;
  options.threads = 1;
  auto home = Store::open(options);
  if (!home.ok()) {
    std::fprintf(stderr, "write_store_seeds: %s\n", home.status().to_string().c_str());
    return 1;
  }
  {
    auto remote = make_remote_store(std::make_shared<RecordingChannel>(**home, corpus));
    auto participant = make_remote_participant(
        std::make_shared<RecordingParticipantChannel>((*home)->participant(), corpus));
    boost::asio::io_context io;
    auto done = boost::asio::co_spawn(io, exercise(*remote), boost::asio::use_future);
    io.run();
    done.get();
    io.restart();
    auto carried =
        boost::asio::co_spawn(io, exercise_participant(*participant), boost::asio::use_future);
    io.run();
    carried.get();
  }
  (*home)->close();
  const Status mirrored = write_mirror_seeds(argv[2], scratch + "-mirror");
  std::filesystem::remove_all(scratch);
  std::filesystem::remove_all(scratch + "-mirror");
  if (!mirrored.ok()) {
    std::fprintf(stderr, "write_store_seeds: %s\n", mirrored.to_string().c_str());
    return 1;
  }
  return 0;
}
