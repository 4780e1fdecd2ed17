#include "store/remote_store.h"

#include <algorithm>
#include <atomic>
#include <concepts>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace tidepool::store {
namespace {

// What one message may carry. A decoder refuses more before allocating anything for it, and
// the remote store asks for no more, so an honest peer never meets these bounds.
constexpr std::size_t kMaxGroups = 16;  // as AUTH_SYS
constexpr std::size_t kMaxDataBytes = std::size_t{4} << 20;
constexpr std::size_t kMaxDirectoryEntries = 4096;

// The arguments of each operation, and the replies that carry more than the store's result.
struct InodeArgs {
  InodeId inode = 0;
};

struct NameArgs {
  InodeId directory = 0;
  std::string name;
  Caller caller;
};

struct NoArgs {};

struct MigrateArgs {
  InodeId inode = 0;
  std::string pool;
  std::uint32_t protection = 0;
  std::uint64_t bytes_per_second = 0;
};

struct RecordReadsArgs {
  std::vector<InodeId> inodes;
};

struct FindFilesArgs {
  std::string where;
  std::vector<std::int64_t> values;
  InodeId after = 0;
  std::uint32_t limit = 0;
};

struct AccessPatternArgs {
  InodeId inode = 0;
  std::string pattern;
};

struct SetattrArgs {
  InodeId inode = 0;
  AttributeChanges changes;
  Caller caller;
  std::optional<std::int64_t> guard_ctime_ns;
};

struct AccessArgs {
  InodeId inode = 0;
  Caller caller;
  std::uint32_t requested = 0;
};

struct ReadArgs {
  InodeId inode = 0;
  std::uint64_t offset = 0;
  std::uint32_t count = 0;
  Caller caller;
};

struct WriteArgs {
  InodeId inode = 0;
  std::uint64_t offset = 0;
  std::span<const std::uint8_t> data;  // views the caller's buffer, or the request's
  Stability stability = Stability::unstable;
  Caller caller;
};

struct CreateArgs {
  InodeId directory = 0;
  std::string name;
  CreateMode mode = CreateMode::unchecked;
  AttributeChanges initial;
  CreateVerifier verifier{};
  Caller caller;
};

struct MkdirArgs {
  InodeId directory = 0;
  std::string name;
  AttributeChanges initial;
  Caller caller;
};

struct SymlinkArgs {
  InodeId directory = 0;
  std::string name;
  std::string target;
  AttributeChanges initial;
  Caller caller;
};

struct MknodArgs {
  InodeId directory = 0;
  std::string name;
  FileType type = FileType::regular;
  std::uint32_t rdev_major = 0;
  std::uint32_t rdev_minor = 0;
  AttributeChanges initial;
  Caller caller;
};

struct RenameArgs {
  InodeId from_directory = 0;
  std::string from_name;
  InodeId to_directory = 0;
  std::string to_name;
  Caller caller;
};

struct LinkArgs {
  InodeId file = 0;
  InodeId directory = 0;
  std::string name;
  Caller caller;
};

struct ReaddirArgs {
  InodeId directory = 0;
  std::uint64_t cookie = 0;
  std::uint64_t cookie_verifier = 0;
  std::uint32_t max_entries = 0;
  bool with_attributes = false;
  Caller caller;
};

// The data comes first so that the home can read from disk straight into the reply before it
// knows the result (read_reply writes this layout by hand).
struct ReadReply {
  std::span<const std::uint8_t> data;  // views the reply
  ReadResult result;
};

struct CommitReply {
  Wcc file;
  std::uint64_t verifier = 0;  // the home's, once the data is durable
};

struct VerifierReply {
  std::uint64_t verifier = 0;
};

// One field list per message, walked by Writer to encode and by Reader to decode. A second
// argument bounds a string, a count, data or a list.

template <class Io>
void fields(Io& io, Attributes& a) {
  io(a.inode);
  io(a.generation);
  io(a.type);
  io(a.mode);
  io(a.nlink);
  io(a.uid);
  io(a.gid);
  io(a.size);
  io(a.used);
  io(a.rdev_major);
  io(a.rdev_minor);
  io(a.atime_ns);
  io(a.mtime_ns);
  io(a.ctime_ns);
  io(a.birth_ns);
}

template <class Io>
void fields(Io& io, PreAttributes& a) {
  io(a.size);
  io(a.mtime_ns);
  io(a.ctime_ns);
}

template <class Io>
void fields(Io& io, Wcc& w) {
  io(w.before);
  io(w.after);
}

template <class Io>
void fields(Io& io, Caller& c) {
  io(c.uid);
  io(c.gid);
  io(c.groups, kMaxGroups);
}

template <class Io>
void fields(Io& io, AttributeChanges& c) {
  io(c.mode);
  io(c.uid);
  io(c.gid);
  io(c.size);
  io(c.atime);
  io(c.atime_ns);
  io(c.mtime);
  io(c.mtime_ns);
}

template <class Io>
void fields(Io& io, LookupResult& r) {
  io(r.object);
  io(r.directory);
}

template <class Io>
void fields(Io& io, AccessResult& r) {
  io(r.granted);
  io(r.attributes);
}

template <class Io>
void fields(Io& io, ReadlinkResult& r) {
  io(r.target, kMaxSymlinkBytes);
  io(r.attributes);
}

template <class Io>
void fields(Io& io, Layout& l) {
  io(l.pool, kMaxLayoutNameBytes);
  io(l.stripe_unit);
  io(l.protection);
  io(l.access_pattern, kMaxLayoutNameBytes);
  io(l.nodes, kMaxPoolNodes);
  io(l.moving_to, kMaxLayoutNameBytes);
  io(l.moving_protection);
  io(l.moving_nodes, kMaxPoolNodes);
  io(l.moved_bytes);
}

template <class Io>
void fields(Io& io, Move& m) {
  io(m.layout);
  io(m.resumed_at);
  io(m.bytes_copied);
}

template <class Io>
void fields(Io& io, ReadResult& r) {
  io(r.count);
  io(r.eof);
  io(r.attributes);
}

template <class Io>
void fields(Io& io, WriteResult& r) {
  io(r.count);
  io(r.committed);
  io(r.file);
  io(r.verifier);
}

template <class Io>
void fields(Io& io, NewObject& r) {
  io(r.attributes);
  io(r.directory);
}

template <class Io>
void fields(Io& io, RenameResult& r) {
  io(r.from_directory);
  io(r.to_directory);
}

template <class Io>
void fields(Io& io, LinkResult& r) {
  io(r.file);
  io(r.directory);
}

template <class Io>
void fields(Io& io, DirectoryEntry& e) {
  io(e.inode);
  io(e.name, kMaxNameBytes);
  io(e.cookie);
  io(e.attributes);
}

template <class Io>
void fields(Io& io, DirectoryPage& p) {
  io(p.entries, kMaxDirectoryEntries);
  io(p.eof);
  io(p.cookie_verifier);
  io(p.directory);
}

template <class Io>
void fields(Io& io, FsStatistics& s) {
  io(s.total_bytes);
  io(s.free_bytes);
  io(s.available_bytes);
  io(s.total_files);
  io(s.free_files);
  io(s.available_files);
}

template <class Io>
void fields(Io& io, InodeArgs& a) {
  io(a.inode);
}

template <class Io>
void fields(Io& io, AccessPatternArgs& a) {
  io(a.inode);
  io(a.pattern, kMaxLayoutNameBytes);
}

template <class Io>
void fields(Io& io, NameArgs& a) {
  io(a.directory);
  io(a.name, kMaxNameBytes);
  io(a.caller);
}

template <class Io>
void fields(Io&, NoArgs&) {}

template <class Io>
void fields(Io& io, MigrateArgs& a) {
  io(a.inode);
  io(a.pool, kMaxLayoutNameBytes);
  io(a.protection);
  io(a.bytes_per_second);
}

template <class Io>
void fields(Io& io, RecordReadsArgs& a) {
  io(a.inodes, kMaxRecordedReads);
}

template <class Io>
void fields(Io& io, FindFilesArgs& a) {
  io(a.where, kMaxPredicateBytes);
  io(a.values, kMaxPredicateValues);
  io(a.after);
  io(a.limit, kMaxCandidatePage);
}

template <class Io>
void fields(Io& io, Candidate& c) {
  io(c.attributes);
  io(c.path, kMaxPathBytes);
}

template <class Io>
void fields(Io& io, CandidatePage& p) {
  io(p.files, kMaxCandidatePage);
  io(p.next);
}

template <class Io>
void fields(Io& io, SetattrArgs& a) {
  io(a.inode);
  io(a.changes);
  io(a.caller);
  io(a.guard_ctime_ns);
}

template <class Io>
void fields(Io& io, AccessArgs& a) {
  io(a.inode);
  io(a.caller);
  io(a.requested);
}

template <class Io>
void fields(Io& io, ReadArgs& a) {
  io(a.inode);
  io(a.offset);
  io(a.count, kMaxDataBytes);
  io(a.caller);
}

template <class Io>
void fields(Io& io, WriteArgs& a) {
  io(a.inode);
  io(a.offset);
  io(a.data, kMaxDataBytes);
  io(a.stability);
  io(a.caller);
}

template <class Io>
void fields(Io& io, CreateArgs& a) {
  io(a.directory);
  io(a.name, kMaxNameBytes);
  io(a.mode);
  io(a.initial);
  io(a.verifier);
  io(a.caller);
}

template <class Io>
void fields(Io& io, MkdirArgs& a) {
  io(a.directory);
  io(a.name, kMaxNameBytes);
  io(a.initial);
  io(a.caller);
}

template <class Io>
void fields(Io& io, SymlinkArgs& a) {
  io(a.directory);
  io(a.name, kMaxNameBytes);
  io(a.target, kMaxSymlinkBytes);
  io(a.initial);
  io(a.caller);
}

template <class Io>
void fields(Io& io, MknodArgs& a) {
  io(a.directory);
  io(a.name, kMaxNameBytes);
  io(a.type);
  io(a.rdev_major);
  io(a.rdev_minor);
  io(a.initial);
  io(a.caller);
}

template <class Io>
void fields(Io& io, RenameArgs& a) {
  io(a.from_directory);
  io(a.from_name, kMaxNameBytes);
  io(a.to_directory);
  io(a.to_name, kMaxNameBytes);
  io(a.caller);
}

template <class Io>
void fields(Io& io, LinkArgs& a) {
  io(a.file);
  io(a.directory);
  io(a.name, kMaxNameBytes);
  io(a.caller);
}

template <class Io>
void fields(Io& io, ReaddirArgs& a) {
  io(a.directory);
  io(a.cookie);
  io(a.cookie_verifier);
  io(a.max_entries, kMaxDirectoryEntries);
  io(a.with_attributes);
  io(a.caller);
}

template <class Io>
void fields(Io& io, ReadReply& r) {
  io(r.data, kMaxDataBytes);
  io(r.result);
}

template <class Io>
void fields(Io& io, CommitReply& r) {
  io(r.file);
  io(r.verifier);
}

template <class Io>
void fields(Io& io, VerifierReply& r) {
  io(r.verifier);
}

// A shard's part in changes across shards.
struct TransactionArgs {
  TransactionId id = 0;
};

struct MadeInodes {
  std::vector<InodeId> inodes;
};

struct OutcomeReply {
  Outcome outcome = Outcome::prepared;
};

struct PendingReply {
  std::vector<PendingPart> parts;
};

template <class Io>
void fields(Io& io, ShardStep& s) {
  io(s.kind);
  io(s.directory);
  io(s.name, kMaxNameBytes);
  io(s.inode);
  io(s.delta);
  io(s.parent);
  io(s.attributes);
}

template <class Io>
void fields(Io& io, TransactionPart& p) {
  io(p.id);
  io(p.coordinator);
  io(p.participants, kMaxShards);
  io(p.steps, kMaxStepsPerPart);
}

template <class Io>
void fields(Io& io, PendingPart& p) {
  io(p.id);
  io(p.coordinator);
  io(p.participants, kMaxShards);
  io(p.decided);
}

template <class Io>
void fields(Io& io, TransactionArgs& a) {
  io(a.id);
}

template <class Io>
void fields(Io& io, MadeInodes& m) {
  io(m.inodes, kMaxStepsPerPart);
}

template <class Io>
void fields(Io& io, OutcomeReply& r) {
  io(r.outcome);
}

template <class Io>
void fields(Io& io, PendingReply& r) {
  io(r.parts, kMaxPendingParts);
}

// The values each enum may take on the wire; anything else is malformed.
template <class E>
struct EnumRange;
template <>
struct EnumRange<FileType> {
  static constexpr FileType first = FileType::regular, last = FileType::fifo;
};
template <>
struct EnumRange<SetTime> {
  static constexpr SetTime first = SetTime::keep, last = SetTime::client_time;
};
template <>
struct EnumRange<CreateMode> {
  static constexpr CreateMode first = CreateMode::unchecked, last = CreateMode::exclusive;
};
template <>
struct EnumRange<Stability> {
  static constexpr Stability first = Stability::unstable, last = Stability::file_sync;
};
template <>
struct EnumRange<StepKind> {
  static constexpr StepKind first = StepKind::add_entry, last = StepKind::set_parent;
};
template <>
struct EnumRange<Outcome> {
  static constexpr Outcome first = Outcome::prepared, last = Outcome::aborted;
};

template <class T>
concept Enum = std::is_enum_v<T>;

// Encodes a message. What the peer's Reader would refuse is refused here, before it travels,
// with the error the local store gives for it: a name too long is name_too_long, as it is when
// no shipping is involved, not a malformed request.
class Writer {
 public:
  explicit Writer(xdr::Buffer& out) : out_(out) {}

  const Status& status() const { return status_; }

  void operator()(std::uint16_t& v) { out_.u32(v); }
  void operator()(std::uint32_t& v) { out_.u32(v); }
  void operator()(std::int32_t& v) { out_.i32(v); }
  void operator()(std::uint64_t& v) { out_.u64(v); }
  void operator()(std::int64_t& v) { out_.i64(v); }
  void operator()(bool& v) { out_.boolean(v); }
  void operator()(CreateVerifier& v) { out_.fixed_opaque(v); }
  template <Enum E>
  void operator()(E& v) {
    out_.u32(static_cast<std::uint32_t>(v));
  }
  template <class T>
  void operator()(std::optional<T>& v) {
    out_.boolean(v.has_value());
    if (v) (*this)(*v);
  }
  template <class T>
  void operator()(T& message) {
    fields(*this, message);
  }

  void operator()(std::uint32_t& v, std::size_t max) {
    if (v > max) refuse(Errc::invalid_argument, "a count above " + std::to_string(max));
    out_.u32(v);
  }
  void operator()(std::string& s, std::size_t max) {
    if (s.size() > max) {
      refuse(Errc::name_too_long, "a name or link target over " + std::to_string(max) + " bytes");
    }
    out_.string(s);
  }
  void operator()(std::span<const std::uint8_t>& bytes, std::size_t max) {
    if (bytes.size() > max) {
      refuse(Errc::invalid_argument, "data over " + std::to_string(max) + " bytes");
    }
    out_.opaque(bytes);
  }
  template <class T>
  void operator()(std::vector<T>& v, std::size_t max) {
    if (v.size() > max) {
      refuse(Errc::invalid_argument, "a list longer than " + std::to_string(max));
    }
    out_.u32(static_cast<std::uint32_t>(v.size()));
    for (auto& item : v) (*this)(item);
  }

 private:
  void refuse(Errc code, std::string why) {
    if (status_.ok()) status_ = error(code, std::move(why));
  }

  xdr::Encoder out_;
  Status status_;
};

// Decodes a message; failure is sticky, as the xdr::Decoder's it wraps.
class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> in) : in_(in) {}

  // A message is well formed only when its last field ends the buffer.
  bool read_all() const { return in_.ok() && in_.remaining() == 0; }

  void operator()(std::uint16_t& v) {
    const std::uint32_t raw = in_.u32();
    if (raw > std::numeric_limits<std::uint16_t>::max()) {
      in_.fail();
      return;
    }
    v = static_cast<std::uint16_t>(raw);
  }
  void operator()(std::uint32_t& v) { v = in_.u32(); }
  void operator()(std::int32_t& v) { v = in_.i32(); }
  void operator()(std::uint64_t& v) { v = in_.u64(); }
  void operator()(std::int64_t& v) { v = in_.i64(); }
  void operator()(bool& v) { v = in_.boolean(); }
  void operator()(CreateVerifier& v) {
    auto bytes = in_.fixed_opaque(v.size());
    std::copy(bytes.begin(), bytes.end(), v.begin());
  }
  template <Enum E>
  void operator()(E& v) {
    const std::uint32_t raw = in_.u32();
    if (raw < static_cast<std::uint32_t>(EnumRange<E>::first) ||
        raw > static_cast<std::uint32_t>(EnumRange<E>::last)) {
      in_.fail();
      return;
    }
    v = static_cast<E>(raw);
  }
  template <class T>
  void operator()(std::optional<T>& v) {
    if (in_.boolean()) {
      (*this)(v.emplace());
    } else {
      v.reset();
    }
  }
  template <class T>
  void operator()(T& message) {
    fields(*this, message);
  }

  void operator()(std::uint32_t& v, std::size_t max) {
    v = in_.u32();
    if (v > max) in_.fail();
  }
  void operator()(std::string& s, std::size_t max) { s = in_.string(max); }
  void operator()(std::span<const std::uint8_t>& bytes, std::size_t max) {
    bytes = in_.opaque(max);
  }
  template <class T>
  void operator()(std::vector<T>& v, std::size_t max) {
    v.resize(in_.array_count(max));
    for (auto& item : v) (*this)(item);
  }

 private:
  xdr::Decoder in_;
};

template <class T>
Result<xdr::Buffer> encode(T& message) {
  xdr::Buffer out;
  Writer writer(out);
  writer(message);
  if (!writer.status().ok()) return writer.status();
  return out;
}

// A reply its handler encoded itself (read's, straight into the reply).
Result<xdr::Buffer> encode(xdr::Buffer& encoded) { return std::move(encoded); }

template <class T>
std::optional<T> decode(std::span<const std::uint8_t> bytes) {
  T message{};
  Reader reader(bytes);
  reader(message);
  if (!reader.read_all()) return std::nullopt;
  return message;
}

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

  awaitable<Result<Wcc>> commit(InodeId inode) override {
    auto op = ship<CommitReply>(StoreMethod::commit, InodeArgs{inode});
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

// Decodes Args, runs the operation and encodes its result; the store's errors go back as is.
template <class Args, class Handler>
awaitable<Result<xdr::Buffer>> serve(const char* name, std::span<const std::uint8_t> request,
                                     Handler handler) {
  auto args = decode<Args>(request);
  if (!args) co_return error(Errc::invalid_argument, std::string("malformed ") + name + " request");
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

awaitable<Result<CommitReply>> commit_reply(Store& store, InodeId inode) {
  auto op = store.commit(inode);
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
      return serve<InodeArgs>("commit", request,
                              [s](InodeArgs& a) { return commit_reply(*s, a.inode); });
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
