// The messages of function shipping (store/remote_store.h) and how they are written and read:
// each operation's arguments, the replies that carry more than the store's result, one field
// list per message that Writer walks to encode and Reader to decode, with the bounds a decoder
// holds before it allocates anything. Internal to the store's backend protocol.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/xdr.h"
#include "store/cross_shard.h"
#include "store/store.h"

namespace tidepool::store::internal {

// What one message may carry. A decoder refuses more before allocating anything for it, and
// the remote store asks for no more, so an honest peer never meets these bounds.
inline constexpr std::size_t kMaxGroups = 16;  // as AUTH_SYS
inline constexpr std::size_t kMaxDataBytes = std::size_t{4} << 20;
inline constexpr std::size_t kMaxDirectoryEntries = 4096;

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

struct RecordWriteArgs {
  InodeId inode = 0;
  std::uint64_t offset = 0;
  std::uint32_t count = 0;
  Stability stability = Stability::unstable;
  Caller caller;
  Layout written_under;
};

struct CommitArgs {
  InodeId inode = 0;
  SyncedCopies synced;
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
  io(l.copies_behind);
  io(l.epoch);
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
void fields(Io& io, RecordWriteArgs& a) {
  io(a.inode);
  io(a.offset);
  io(a.count, kMaxDataBytes);
  io(a.stability);
  io(a.caller);
  io(a.written_under);
}

template <class Io>
void fields(Io& io, SyncedNode& n) {
  io(n.node);
  io(n.boot);
}

template <class Io>
void fields(Io& io, CommitArgs& a) {
  io(a.inode);
  io(a.synced.layout);
  io(a.synced.nodes, kMaxPoolNodes);
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
inline Result<xdr::Buffer> encode(xdr::Buffer& encoded) { return std::move(encoded); }

template <class T>
std::optional<T> decode(std::span<const std::uint8_t> bytes) {
  T message{};
  Reader reader(bytes);
  reader(message);
  if (!reader.read_all()) return std::nullopt;
  return message;
}

}  // namespace tidepool::store::internal
