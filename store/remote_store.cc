#include "store/remote_store.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "store/internal/store_messages.h"

namespace tidepool::store {
namespace {

using namespace internal;

std::uint64_t draw_salt() {
  std::random_device device;
  return (std::uint64_t{device()} << 32) ^ device();
}

Status malformed_reply() { return error(Errc::io_error, "malformed reply from the shard's home"); }

class RemoteStore final : public Store {
 public:
  explicit RemoteStore(std::shared_ptr<ShardChannel> channel)
      : channel_(std::move(channel)), salt_(draw_salt()) {}

  std::uint64_t write_verifier() const override { return home_verifier_.load() ^ salt_; }

  void close() override { closed_ = true; }

  // The home runs every operation under its own atime sysctls, whoever sent it.
  void set_atime_policy(bool, std::chrono::seconds) override {}

  awaitable<Result<Attributes>> getattr(InodeId inode) override {
    return ship<Attributes>(StoreMethod::getattr, InodeArgs{inode});
  }

  awaitable<Result<Wcc>> setattr(InodeId inode, AttributeChanges changes, Caller caller,
                                 std::optional<std::int64_t> guard_ctime_ns) override {
    return ship<Wcc>(StoreMethod::setattr,
                     SetattrArgs{inode, changes, std::move(caller), guard_ctime_ns});
  }

  awaitable<Result<LookupResult>> lookup(InodeId directory, std::string name,
                                         Caller caller) override {
    return ship<LookupResult>(StoreMethod::lookup,
                              NameArgs{directory, std::move(name), std::move(caller)});
  }

  awaitable<Result<AccessResult>> check_access(InodeId inode, Caller caller,
                                               std::uint32_t requested) override {
    return ship<AccessResult>(StoreMethod::check_access,
                              AccessArgs{inode, std::move(caller), requested});
  }

  awaitable<Result<ReadlinkResult>> readlink(InodeId inode) override {
    return ship<ReadlinkResult>(StoreMethod::readlink, InodeArgs{inode});
  }

  awaitable<Result<Layout>> layout(InodeId inode) override {
    return ship<Layout>(StoreMethod::layout, InodeArgs{inode});
  }

  awaitable<Result<Layout>> set_access_pattern(InodeId inode, std::string pattern) override {
    return ship<Layout>(StoreMethod::set_access_pattern,
                        AccessPatternArgs{inode, std::move(pattern)});
  }

  // Asks for no more than one message may carry: a short read is a valid answer.
  awaitable<Result<ReadResult>> read(InodeId inode, std::uint64_t offset,
                                     std::span<std::uint8_t> into, Caller caller) override {
    const auto count = static_cast<std::uint32_t>(std::min(into.size(), kMaxDataBytes));
    auto reading = read_pieces(inode, offset, count, std::move(caller));
    Result<ReadPieces> read = co_await std::move(reading);
    if (!read.ok()) co_return read.status();
    if (!read->pieces.empty()) {
      std::memcpy(into.data(), read->pieces.front().data(), read->pieces.front().size());
    }
    co_return read->result;
  }

  // The bytes stay in the reply message they came in, which `keep` holds: one piece, or none.
  awaitable<Result<ReadPieces>> read_pieces(InodeId inode, std::uint64_t offset,
                                            std::uint32_t count, Caller caller) override {
    count = static_cast<std::uint32_t>(std::min<std::size_t>(count, kMaxDataBytes));
    auto op = exchange(StoreMethod::read, ReadArgs{inode, offset, count, std::move(caller)});
    auto reply = co_await std::move(op);
    if (!reply.ok()) co_return reply.status();
    auto message = std::make_shared<const xdr::Buffer>(std::move(reply).value());
    auto decoded = decode<ReadReply>(*message);
    if (!decoded || decoded->data.size() > count || decoded->result.count != decoded->data.size()) {
      co_return malformed_reply();
    }
    ReadPieces read{decoded->result, {}, message};
    if (!decoded->data.empty()) read.pieces.push_back(decoded->data);
    co_return read;
  }

  // Sends no more than one message may carry: a short write is a valid answer.
  awaitable<Result<WriteResult>> write(InodeId inode, std::uint64_t offset,
                                       std::span<const std::uint8_t> data, Stability stability,
                                       Caller caller) override {
    return ship<WriteResult>(
        StoreMethod::write,
        WriteArgs{inode, offset, data.first(std::min(data.size(), kMaxDataBytes)), stability,
                  std::move(caller)});
  }

  awaitable<Result<WriteResult>> record_write(InodeId inode, std::uint64_t offset,
                                              std::uint32_t count, Stability stability,
                                              Caller caller, Layout written_under) override {
    return ship<WriteResult>(StoreMethod::record_write,
                             RecordWriteArgs{inode, offset, count, stability, std::move(caller),
                                             std::move(written_under)});
  }

  awaitable<Result<NewObject>> create(InodeId directory, std::string name, CreateMode mode,
                                      AttributeChanges initial, CreateVerifier verifier,
                                      Caller caller) override {
    return ship<NewObject>(StoreMethod::create, CreateArgs{directory, std::move(name), mode,
                                                           initial, verifier, std::move(caller)});
  }

  awaitable<Result<NewObject>> mkdir(InodeId directory, std::string name, AttributeChanges initial,
                                     Caller caller) override {
    return ship<NewObject>(StoreMethod::mkdir,
                           MkdirArgs{directory, std::move(name), initial, std::move(caller)});
  }

  awaitable<Result<NewObject>> symlink(InodeId directory, std::string name, std::string target,
                                       AttributeChanges initial, Caller caller) override {
    return ship<NewObject>(
        StoreMethod::symlink,
        SymlinkArgs{directory, std::move(name), std::move(target), initial, std::move(caller)});
  }

  awaitable<Result<NewObject>> mknod(InodeId directory, std::string name, FileType type,
                                     std::uint32_t rdev_major, std::uint32_t rdev_minor,
                                     AttributeChanges initial, Caller caller) override {
    return ship<NewObject>(StoreMethod::mknod,
                           MknodArgs{directory, std::move(name), type, rdev_major, rdev_minor,
                                     initial, std::move(caller)});
  }

  awaitable<Result<Wcc>> remove(InodeId directory, std::string name, Caller caller) override {
    return ship<Wcc>(StoreMethod::remove, NameArgs{directory, std::move(name), std::move(caller)});
  }

  awaitable<Result<Wcc>> rmdir(InodeId directory, std::string name, Caller caller) override {
    return ship<Wcc>(StoreMethod::rmdir, NameArgs{directory, std::move(name), std::move(caller)});
  }

  awaitable<Result<RenameResult>> rename(InodeId from_directory, std::string from_name,
                                         InodeId to_directory, std::string to_name,
                                         Caller caller) override {
    return ship<RenameResult>(StoreMethod::rename,
                              RenameArgs{from_directory, std::move(from_name), to_directory,
                                         std::move(to_name), std::move(caller)});
  }

  awaitable<Result<LinkResult>> link(InodeId file, InodeId directory, std::string name,
                                     Caller caller) override {
    return ship<LinkResult>(StoreMethod::link,
                            LinkArgs{file, directory, std::move(name), std::move(caller)});
  }

  // Asks for no more entries than one message may carry: a short page is a valid answer.
  awaitable<Result<DirectoryPage>> readdir(InodeId directory, std::uint64_t cookie,
                                           std::uint64_t cookie_verifier, std::uint32_t max_entries,
                                           bool with_attributes, Caller caller) override {
    return ship<DirectoryPage>(
        StoreMethod::readdir,
        ReaddirArgs{directory, cookie, cookie_verifier,
                    std::min(max_entries, static_cast<std::uint32_t>(kMaxDirectoryEntries)),
                    with_attributes, std::move(caller)});
  }

  awaitable<Result<FsStatistics>> fsstat() override {
    return ship<FsStatistics>(StoreMethod::fsstat, NoArgs{});
  }

  awaitable<Result<Move>> migrate(InodeId inode, std::string pool, std::uint32_t protection,
                                  std::uint64_t bytes_per_second) override {
    return ship<Move>(StoreMethod::migrate,
                      MigrateArgs{inode, std::move(pool), protection, bytes_per_second});
  }

  // More files than one message names go in several.

  awaitable<Result<std::uint32_t>> record_reads(std::vector<InodeId> inodes) override {
    std::uint32_t moved = 0;
    for (std::size_t at = 0; at < inodes.size(); at += kMaxRecordedReads) {
      const auto end = inodes.begin() +
                       static_cast<std::ptrdiff_t>(std::min(inodes.size(), at + kMaxRecordedReads));
      RecordReadsArgs args{{inodes.begin() + static_cast<std::ptrdiff_t>(at), end}};
      auto op = ship<std::uint32_t>(StoreMethod::record_reads, std::move(args));
      Result<std::uint32_t> recorded = co_await std::move(op);
      if (!recorded.ok()) co_return recorded.status();
      moved += *recorded;
    }
    co_return moved;
  }

  awaitable<Result<CandidatePage>> find_files(std::string where, std::vector<std::int64_t> values,
                                              InodeId after, std::uint32_t limit) override {
    return ship<CandidatePage>(StoreMethod::find_files,
                               FindFilesArgs{std::move(where), std::move(values), after, limit});
  }

  awaitable<Result<Wcc>> commit(InodeId inode, SyncedCopies synced) override {
    auto op = ship<CommitReply>(StoreMethod::commit, CommitArgs{inode, std::move(synced)});
    auto reply = co_await std::move(op);
    if (!reply.ok()) co_return reply.status();
    co_return reply->file;
  }

 private:
  template <class Args>
  awaitable<Result<xdr::Buffer>> exchange(StoreMethod method, Args args) {
    if (closed_) co_return error(Errc::unavailable, "the remote store is closed");
    auto request = encode(args);
    if (!request.ok()) co_return request.status();
    auto call = channel_->call(method, std::move(request).value());
    co_return co_await std::move(call);
  }

  template <class Reply, class Args>
  awaitable<Result<Reply>> ship(StoreMethod method, Args args) {
    auto op = exchange(method, std::move(args));
    auto reply = co_await std::move(op);
    if (!reply.ok()) co_return reply.status();
    auto decoded = decode<Reply>(*reply);
    if (!decoded) co_return malformed_reply();
    received(*decoded);
    co_return std::move(*decoded);
  }

  // Replies that carry the home's write verifier keep write_verifier() current; a write's is
  // folded as write_verifier() is, so a client compares like with like.
  void received(WriteResult& r) {
    home_verifier_ = r.verifier;
    r.verifier ^= salt_;
  }
  void received(const CommitReply& r) { home_verifier_ = r.verifier; }
  template <class Reply>
  void received(const Reply&) {}

  std::shared_ptr<ShardChannel> channel_;
  const std::uint64_t salt_;
  std::atomic<std::uint64_t> home_verifier_ = 0;  // 0 until a write or commit replies
  std::atomic<bool> closed_ = false;
};

#ifdef TIDEPOOL_FUZZ_ROUND_TRIPS
// In the fuzz build only: what a request decodes to must encode, and decode back to what
// encodes to the same bytes. A request the Reader takes and the Writer refuses, or one that
// comes back otherwise, stops the fuzzer.
template <class Args>
void check_round_trip(Args args) {
  const Result<xdr::Buffer> once = encode(args);
  if (!once.ok()) std::abort();
  std::optional<Args> back = decode<Args>(*once);
  if (!back) std::abort();
  const Result<xdr::Buffer> twice = encode(*back);
  if (!twice.ok() || *twice != *once) std::abort();
}
#endif

// Decodes Args, runs the operation and encodes its result; the store's errors go back as is.
template <class Args, class Handler>
awaitable<Result<xdr::Buffer>> serve(const char* name, std::span<const std::uint8_t> request,
                                     Handler handler) {
  auto args = decode<Args>(request);
  if (!args) co_return error(Errc::invalid_argument, std::string("malformed ") + name + " request");
#ifdef TIDEPOOL_FUZZ_ROUND_TRIPS
  check_round_trip(*args);
#endif
  auto op = handler(*args);
  auto result = co_await std::move(op);
  if (!result.ok()) co_return result.status();
  co_return encode(*result);
}

// Reads from disk straight into the reply, in ReadReply's layout.
// More than a read reply's count, eof flag and attributes, and the RPC's trailer, take after
// its data.
constexpr std::size_t kReadReplyTailBytes = 512;

awaitable<Result<xdr::Buffer>> read_reply(Store& store, ReadArgs args) {
  xdr::Buffer reply;
  // Room for the attributes after the data too: growing the buffer would copy the data.
  reply.reserve(args.count + kReadReplyTailBytes);
  xdr::Encoder out(reply);
  auto into = out.begin_opaque(args.count);
  auto op = store.read(args.inode, args.offset, into, std::move(args.caller));
  auto result = co_await std::move(op);
  if (!result.ok()) co_return result.status();
  out.finish_opaque(result->count);
  Writer rest(reply);
  rest(*result);
  co_return reply;
}

awaitable<Result<CommitReply>> commit_reply(Store& store, InodeId inode, SyncedCopies synced) {
  auto op = store.commit(inode, std::move(synced));
  auto file = co_await std::move(op);
  if (!file.ok()) co_return file.status();
  CommitReply reply;
  reply.file = std::move(file).value();
  reply.verifier = store.write_verifier();
  co_return reply;
}

awaitable<Result<VerifierReply>> verifier_reply(Store& store) {
  co_return VerifierReply{store.write_verifier()};
}

awaitable<Result<xdr::Buffer>> fail_with(Status status) { co_return status; }

template <class Reply, class Args>
awaitable<Result<Reply>> call_participant(ParticipantChannel& channel, ParticipantMethod method,
                                          Args args) {
  auto request = encode(args);
  if (!request.ok()) co_return request.status();
  auto call = channel.call(method, std::move(request).value());
  auto reply = co_await std::move(call);
  if (!reply.ok()) co_return reply.status();
  auto decoded = decode<Reply>(*reply);
  if (!decoded) co_return malformed_reply();
  co_return std::move(*decoded);
}

awaitable<Status> call_for_status(ParticipantChannel& channel, ParticipantMethod method,
                                  TransactionId id) {
  auto op = call_participant<NoArgs>(channel, method, TransactionArgs{id});
  const Result<NoArgs> done = co_await std::move(op);
  co_return done.status();
}

class RemoteParticipant final : public ShardParticipant {
 public:
  explicit RemoteParticipant(std::shared_ptr<ParticipantChannel> channel)
      : channel_(std::move(channel)) {}

  awaitable<Result<std::vector<InodeId>>> prepare(TransactionPart part) override {
    auto op = call_participant<MadeInodes>(*channel_, ParticipantMethod::prepare, std::move(part));
    Result<MadeInodes> made = co_await std::move(op);
    if (!made.ok()) co_return made.status();
    co_return std::move(made->inodes);
  }
  awaitable<Status> decide(TransactionId id) override {
    return call_for_status(*channel_, ParticipantMethod::decide, id);
  }
  awaitable<Status> commit(TransactionId id) override {
    return call_for_status(*channel_, ParticipantMethod::commit, id);
  }
  awaitable<Status> abort(TransactionId id) override {
    return call_for_status(*channel_, ParticipantMethod::abort, id);
  }
  awaitable<Status> finish(TransactionId id) override {
    return call_for_status(*channel_, ParticipantMethod::finish, id);
  }
  awaitable<Result<Outcome>> outcome(TransactionId id) override {
    auto op =
        call_participant<OutcomeReply>(*channel_, ParticipantMethod::outcome, TransactionArgs{id});
    Result<OutcomeReply> reply = co_await std::move(op);
    if (!reply.ok()) co_return reply.status();
    co_return reply->outcome;
  }
  awaitable<Result<std::vector<PendingPart>>> pending() override {
    auto op = call_participant<PendingReply>(*channel_, ParticipantMethod::pending, NoArgs{});
    Result<PendingReply> reply = co_await std::move(op);
    if (!reply.ok()) co_return reply.status();
    co_return std::move(reply->parts);
  }

 private:
  const std::shared_ptr<ParticipantChannel> channel_;
};

// The participant's answers as messages.
awaitable<Result<NoArgs>> empty_reply(awaitable<Status> op) {
  const Status done = co_await std::move(op);
  if (!done.ok()) co_return done;
  co_return NoArgs{};
}

template <class Reply, class T>
awaitable<Result<Reply>> reply_of(awaitable<Result<T>> op) {
  Result<T> answer = co_await std::move(op);
  if (!answer.ok()) co_return answer.status();
  co_return Reply{std::move(answer).value()};
}

}  // namespace

std::unique_ptr<ShardParticipant> make_remote_participant(
    std::shared_ptr<ParticipantChannel> channel) {
  return std::make_unique<RemoteParticipant>(std::move(channel));
}

awaitable<Result<xdr::Buffer>> serve_participant_call(ShardParticipant& participant,
                                                      std::uint32_t method,
                                                      std::span<const std::uint8_t> request) {
  ShardParticipant* p = &participant;
  switch (static_cast<ParticipantMethod>(method)) {
    case ParticipantMethod::prepare:
      return serve<TransactionPart>("prepare", request, [p](TransactionPart& part) {
        return reply_of<MadeInodes>(p->prepare(std::move(part)));
      });
    case ParticipantMethod::decide:
      return serve<TransactionArgs>(
          "decide", request, [p](TransactionArgs& a) { return empty_reply(p->decide(a.id)); });
    case ParticipantMethod::commit:
      return serve<TransactionArgs>(
          "commit", request, [p](TransactionArgs& a) { return empty_reply(p->commit(a.id)); });
    case ParticipantMethod::abort:
      return serve<TransactionArgs>(
          "abort", request, [p](TransactionArgs& a) { return empty_reply(p->abort(a.id)); });
    case ParticipantMethod::finish:
      return serve<TransactionArgs>(
          "finish", request, [p](TransactionArgs& a) { return empty_reply(p->finish(a.id)); });
    case ParticipantMethod::outcome:
      return serve<TransactionArgs>("outcome", request, [p](TransactionArgs& a) {
        return reply_of<OutcomeReply>(p->outcome(a.id));
      });
    case ParticipantMethod::pending:
      return serve<NoArgs>("pending", request,
                           [p](NoArgs&) { return reply_of<PendingReply>(p->pending()); });
  }
  return fail_with(
      error(Errc::not_supported, "unknown participant method " + std::to_string(method)));
}

std::unique_ptr<Store> make_remote_store(std::shared_ptr<ShardChannel> channel) {
  return std::make_unique<RemoteStore>(std::move(channel));
}

awaitable<Result<xdr::Buffer>> serve_store_call(Store& store, std::uint32_t method,
                                                std::span<const std::uint8_t> request) {
  Store* s = &store;
  switch (static_cast<StoreMethod>(method)) {
    case StoreMethod::getattr:
      return serve<InodeArgs>("getattr", request,
                              [s](InodeArgs& a) { return s->getattr(a.inode); });
    case StoreMethod::setattr:
      return serve<SetattrArgs>("setattr", request, [s](SetattrArgs& a) {
        return s->setattr(a.inode, a.changes, std::move(a.caller), a.guard_ctime_ns);
      });
    case StoreMethod::lookup:
      return serve<NameArgs>("lookup", request, [s](NameArgs& a) {
        return s->lookup(a.directory, std::move(a.name), std::move(a.caller));
      });
    case StoreMethod::check_access:
      return serve<AccessArgs>("check_access", request, [s](AccessArgs& a) {
        return s->check_access(a.inode, std::move(a.caller), a.requested);
      });
    case StoreMethod::readlink:
      return serve<InodeArgs>("readlink", request,
                              [s](InodeArgs& a) { return s->readlink(a.inode); });
    case StoreMethod::read:
      return serve<ReadArgs>("read", request,
                             [s](ReadArgs& a) { return read_reply(*s, std::move(a)); });
    case StoreMethod::write:
      return serve<WriteArgs>("write", request, [s](WriteArgs& a) {
        return s->write(a.inode, a.offset, a.data, a.stability, std::move(a.caller));
      });
    case StoreMethod::record_write:
      return serve<RecordWriteArgs>("record_write", request, [s](RecordWriteArgs& a) {
        return s->record_write(a.inode, a.offset, a.count, a.stability, std::move(a.caller),
                               std::move(a.written_under));
      });
    case StoreMethod::create:
      return serve<CreateArgs>("create", request, [s](CreateArgs& a) {
        return s->create(a.directory, std::move(a.name), a.mode, a.initial, a.verifier,
                         std::move(a.caller));
      });
    case StoreMethod::mkdir:
      return serve<MkdirArgs>("mkdir", request, [s](MkdirArgs& a) {
        return s->mkdir(a.directory, std::move(a.name), a.initial, std::move(a.caller));
      });
    case StoreMethod::symlink:
      return serve<SymlinkArgs>("symlink", request, [s](SymlinkArgs& a) {
        return s->symlink(a.directory, std::move(a.name), std::move(a.target), a.initial,
                          std::move(a.caller));
      });
    case StoreMethod::mknod:
      return serve<MknodArgs>("mknod", request, [s](MknodArgs& a) {
        return s->mknod(a.directory, std::move(a.name), a.type, a.rdev_major, a.rdev_minor,
                        a.initial, std::move(a.caller));
      });
    case StoreMethod::remove:
      return serve<NameArgs>("remove", request, [s](NameArgs& a) {
        return s->remove(a.directory, std::move(a.name), std::move(a.caller));
      });
    case StoreMethod::rmdir:
      return serve<NameArgs>("rmdir", request, [s](NameArgs& a) {
        return s->rmdir(a.directory, std::move(a.name), std::move(a.caller));
      });
    case StoreMethod::rename:
      return serve<RenameArgs>("rename", request, [s](RenameArgs& a) {
        return s->rename(a.from_directory, std::move(a.from_name), a.to_directory,
                         std::move(a.to_name), std::move(a.caller));
      });
    case StoreMethod::link:
      return serve<LinkArgs>("link", request, [s](LinkArgs& a) {
        return s->link(a.file, a.directory, std::move(a.name), std::move(a.caller));
      });
    case StoreMethod::readdir:
      return serve<ReaddirArgs>("readdir", request, [s](ReaddirArgs& a) {
        return s->readdir(a.directory, a.cookie, a.cookie_verifier, a.max_entries,
                          a.with_attributes, std::move(a.caller));
      });
    case StoreMethod::fsstat:
      return serve<NoArgs>("fsstat", request, [s](NoArgs&) { return s->fsstat(); });
    case StoreMethod::commit:
      return serve<CommitArgs>("commit", request, [s](CommitArgs& a) {
        return commit_reply(*s, a.inode, std::move(a.synced));
      });
    case StoreMethod::write_verifier:
      return serve<NoArgs>("write_verifier", request, [s](NoArgs&) { return verifier_reply(*s); });
    case StoreMethod::layout:
      return serve<InodeArgs>("layout", request, [s](InodeArgs& a) { return s->layout(a.inode); });
    case StoreMethod::set_access_pattern:
      return serve<AccessPatternArgs>("set_access_pattern", request, [s](AccessPatternArgs& a) {
        return s->set_access_pattern(a.inode, std::move(a.pattern));
      });
    case StoreMethod::record_reads:
      return serve<RecordReadsArgs>("record_reads", request, [s](RecordReadsArgs& a) {
        return s->record_reads(std::move(a.inodes));
      });
    case StoreMethod::migrate:
      return serve<MigrateArgs>("migrate", request, [s](MigrateArgs& a) {
        return s->migrate(a.inode, std::move(a.pool), a.protection, a.bytes_per_second);
      });
    case StoreMethod::find_files:
      return serve<FindFilesArgs>("find_files", request, [s](FindFilesArgs& a) {
        return s->find_files(std::move(a.where), std::move(a.values), a.after, a.limit);
      });
  }
  return fail_with(error(Errc::not_supported, "unknown store method " + std::to_string(method)));
}

}  // namespace tidepool::store
