// The store: the namespace (inodes, directory entries, layouts) and file data.
//
// Callers name inodes, never files or databases, so where a shard lives can change without
// changing this API. Every operation is a coroutine that completes on the caller's executor;
// blocking work (SQLite, pread/pwrite, fsync) runs on the store's own threads.
//
// Durability: a metadata change is durable before its operation completes (concurrent changes
// share one transaction: group commit). UNSTABLE writes may stay volatile until commit();
// DATA_SYNC/FILE_SYNC writes are durable on completion. write_verifier() changes on every open.
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/piped_bytes.h"
#include "common/status.h"
#include "store/l2.h"

namespace tidepool::store {

using boost::asio::awaitable;

// 64-bit inode numbers: the shard id in the top 16 bits, a per-shard sequence below.
using InodeId = std::uint64_t;
inline constexpr int kShardShift = 48;
inline constexpr InodeId kRootInode = 1;  // shard 0, sequence 1
using ShardId = std::uint16_t;
inline ShardId shard_of(InodeId inode) { return static_cast<ShardId>(inode >> kShardShift); }
// The most shards a namespace is cut into.
inline constexpr std::uint32_t kMaxShards = 256;

inline constexpr std::size_t kMaxNameBytes = 255;
inline constexpr std::size_t kMaxSymlinkBytes = 4096;
// The longest path a candidate of find_files() carries (PATH_MAX).
inline constexpr std::size_t kMaxPathBytes = 4096;
inline constexpr std::uint64_t kMaxFileSize = std::uint64_t{1} << 43;  // 8 TiB
inline constexpr std::uint32_t kMaxLinks = 65000;
// The most files one record_reads() names.
inline constexpr std::size_t kMaxRecordedReads = 4096;

// Values match NFSv3's ftype3 so the protocol layer can pass them through.
enum class FileType : std::uint8_t {
  regular = 1,
  directory = 2,
  block_device = 3,
  char_device = 4,
  symlink = 5,
  socket = 6,
  fifo = 7,
};

struct Attributes {
  InodeId inode = 0;
  std::uint32_t generation = 0;
  FileType type = FileType::regular;
  std::uint32_t mode = 0;  // permission bits and setuid/setgid/sticky (07777)
  std::uint32_t nlink = 0;
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::uint64_t size = 0;
  std::uint64_t used = 0;  // bytes allocated on disk
  std::uint32_t rdev_major = 0;
  std::uint32_t rdev_minor = 0;
  std::int64_t atime_ns = 0;
  std::int64_t mtime_ns = 0;
  std::int64_t ctime_ns = 0;
  std::int64_t birth_ns = 0;
};

// The attributes NFSv3 reports before an operation (wcc_attr).
struct PreAttributes {
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  std::int64_t ctime_ns = 0;
};

inline PreAttributes pre_of(const Attributes& a) { return {a.size, a.mtime_ns, a.ctime_ns}; }

struct Wcc {
  std::optional<PreAttributes> before;
  std::optional<Attributes> after;
};

// Who is asking, after the export's squashing rules were applied.
struct Caller {
  std::uint32_t uid = 65534;
  std::uint32_t gid = 65534;
  std::vector<std::uint32_t> groups;
  // Where the call came from (the client's IPv4 address), for per-reader state such as
  // read-ahead streams. Never part of a permission check, and not shipped to other nodes.
  std::uint64_t client = 0;
};

enum class SetTime : std::uint8_t { keep, server_time, client_time };

struct AttributeChanges {
  std::optional<std::uint32_t> mode;
  std::optional<std::uint32_t> uid;
  std::optional<std::uint32_t> gid;
  std::optional<std::uint64_t> size;
  SetTime atime = SetTime::keep;
  std::int64_t atime_ns = 0;
  SetTime mtime = SetTime::keep;
  std::int64_t mtime_ns = 0;
};

// Access bits, as NFSv3's ACCESS3_*.
namespace access {
inline constexpr std::uint32_t read = 0x01;
inline constexpr std::uint32_t lookup = 0x02;
inline constexpr std::uint32_t modify = 0x04;
inline constexpr std::uint32_t extend = 0x08;
inline constexpr std::uint32_t erase = 0x10;
inline constexpr std::uint32_t execute = 0x20;
}  // namespace access

enum class CreateMode : std::uint8_t { unchecked, guarded, exclusive };
using CreateVerifier = std::array<std::uint8_t, 8>;

enum class Stability : std::uint8_t { unstable = 0, data_sync = 1, file_sync = 2 };

struct LookupResult {
  Attributes object;
  Attributes directory;
  // The object lives on another shard: `object` holds only its inode number, and the namespace
  // over the shards (store/namespace.h) asks that shard for the rest. Never set by a namespace.
  bool object_elsewhere = false;
};

struct AccessResult {
  std::uint32_t granted = 0;
  Attributes attributes;
};

struct ReadlinkResult {
  std::string target;
  Attributes attributes;
};

// How a regular file's data is laid out: its layouts row.
struct Layout {
  std::string pool;               // the node pool holding its data, or kWithShard
  std::uint32_t stripe_unit = 0;  // bytes per stripe unit
  std::uint32_t protection = 0;   // copies kept of every unit: 2 is OneFS's 2x
  std::string access_pattern;     // concurrency, streaming or random: how reads prefetch
  // In a node pool: the pool's nodes when the data moved there, over which its units are
  // placed (store/pool_data.h). Empty while the data is kept with the shard.
  std::vector<std::uint64_t> nodes;
  // While the data is being moved to another node pool (Store::migrate): that pool (empty when
  // no move is under way or left to go on), its protection and nodes, and how many bytes from
  // the start of the file the new copy holds durably (the move's watermark).
  std::string moving_to;
  std::uint32_t moving_protection = 0;
  std::vector<std::uint64_t> moving_nodes;
  std::uint64_t moved_bytes = 0;
  // Some copy of its units missed writes while its node was down, and is not to be read until
  // the home has put them back (only the home knows which: reads and writes go its way).
  bool copies_behind = false;
  // The truncations and moves the home had counted for the file when it answered (in memory,
  // not kept in its row): record_write() refuses a write made under a layout read before either.
  std::uint64_t epoch = 0;
};

// A node of a file's layout that a COMMIT's initiator synced itself (UnitClient::sync), and the
// boot id it answered with.
struct SyncedNode {
  std::uint64_t node = 0;
  std::uint64_t boot = 0;
};

// What a COMMIT's initiator made durable before it asked the home: the nodes of `layout` it
// synced. Empty when it synced none (the file kept with its shard, or not a member).
struct SyncedCopies {
  Layout layout;
  std::vector<SyncedNode> nodes;
};

// What Store::migrate did.
struct Move {
  Layout layout;  // the file's, after the move
  // Where this call took the copy up: past what an earlier attempt (cut short by a crash, or
  // still under way when this call came and waited for it) had already copied; 0 for a move
  // from the start, or none.
  std::uint64_t resumed_at = 0;
  // Read and copied from there on: a range copied again after a node restarted counts again, and
  // a unit a restripe leaves on a node that keeps it does not count.
  std::uint64_t bytes_copied = 0;
};
// Whether two layouts' nodes are the same, in any order: a unit's owners do not depend on it.
bool same_nodes(std::vector<std::uint64_t> a, std::vector<std::uint64_t> b);
// The most nodes a layout names.
inline constexpr std::size_t kMaxPoolNodes = 1024;
inline constexpr std::uint32_t kDefaultProtection = 2;
// The pool a layout names while the file's data is kept with its shard, on the shard's home and
// mirror, rather than on the nodes of a node pool (store/pool_data.h): no pool's name can be it
// (common/config.h, is_valid_name), so a pool called "default", a new node's, is a pool like any
// other. Layouts written before it was this say "default" (StoreImpl::initialize reads them so).
inline constexpr std::string_view kWithShard = "(shard)";
// The most copies of a unit a layout may ask for.
inline constexpr std::uint32_t kMaxProtection = 3;
// The longest pool or access pattern name a layout carries.
inline constexpr std::size_t kMaxLayoutNameBytes = 255;
// How a file's reads prefetch, as OneFS names it: no prefetch, moderate, aggressive.
inline constexpr const char* kAccessPatterns[] = {"random", "concurrency", "streaming"};

struct ReadResult {
  std::uint32_t count = 0;
  bool eof = false;
  Attributes attributes;
};

// A read's bytes where they lie (a cache's blocks): `pieces`, in order, hold `result.count`
// bytes, valid as long as `keep` is held. Or, with `piped`, the pipe holds them all by
// reference to the page cache, for a reply to splice on (DataFiles::lend), and `pieces` is
// empty.
struct ReadPieces {
  ReadResult result;
  std::vector<std::span<const std::uint8_t>> pieces;
  std::shared_ptr<const void> keep;
  // `keep` pins another cache's blocks (the home's L2): fine for a reply on its way, but a
  // cache that would keep the bytes for long copies them instead.
  bool pins_a_cache = false;
  std::shared_ptr<PipedBytes> piped;
};

// Copies piped bytes out into memory of their own, for a caller that keeps them or cannot
// send them from a pipe: `read` then has pieces.
Status take_out_of_pipe(ReadPieces& read);

struct WriteResult {
  std::uint32_t count = 0;
  Stability committed = Stability::unstable;
  Wcc file;
  // The write verifier when the data was taken: a client that later sees another one resends.
  std::uint64_t verifier = 0;
};

struct NewObject {
  Attributes attributes;
  Wcc directory;
};

struct RenameResult {
  Wcc from_directory;
  Wcc to_directory;
};

struct LinkResult {
  Attributes file;
  Wcc directory;
};

struct DirectoryEntry {
  InodeId inode = 0;
  std::string name;
  std::uint64_t cookie = 0;
  // Filled when asked for (READDIRPLUS); by one shard, only for the objects it holds: the
  // namespace over the shards fills in the others.
  std::optional<Attributes> attributes;
};

struct DirectoryPage {
  std::vector<DirectoryEntry> entries;
  bool eof = false;
  std::uint64_t cookie_verifier = 0;
  Attributes directory;
};

struct FsStatistics {
  std::uint64_t total_bytes = 0;
  std::uint64_t free_bytes = 0;
  std::uint64_t available_bytes = 0;
  std::uint64_t total_files = 0;
  std::uint64_t free_files = 0;
  std::uint64_t available_files = 0;
};

// What the checks of file data found, counted across the stores a process opens one after the
// other (a node closes and opens its store as its role changes; its counters never go back).
struct IntegrityCounters {
  std::atomic<std::uint64_t> checksum_failures{0};  // reads or writes that met a bad block
  std::atomic<std::uint64_t> checksum_repairs{0};   // blocks put back from the mirror's copy
  // Copies of placed files' data on nodes that missed writes while down, one per file and
  // node, until caught up (a gauge); and the units put back on such nodes.
  std::atomic<std::uint64_t> copies_behind{0};
  std::atomic<std::uint64_t> units_caught_up{0};
  // Nodes keeping units of a file where no placement reads them (down when they were to go),
  // one per file, pool and node, until removed there (a gauge).
  std::atomic<std::uint64_t> units_left{0};
  // Low-water marks of protection since the process started: the fewest up-to-date copies on
  // members up that any unit of a placed file this node homed could count on (kNotSeen until a
  // shard homed here placed a file), and the fewest whole copies any shard of the namespace had
  // (home and in-step mirror up), counted once every shard had two.
  static constexpr std::uint64_t kNotSeen = ~std::uint64_t{0};
  std::atomic<std::uint64_t> unit_copies_low_water{kNotSeen};
  std::atomic<std::uint64_t> shard_copies_low_water{kNotSeen};
  // Lowers `mark` to `copies` if that is fewer.
  static void lower(std::atomic<std::uint64_t>& mark, std::uint64_t copies) {
    std::uint64_t now = mark.load();
    while (copies < now && !mark.compare_exchange_weak(now, copies)) {
    }
  }
};

// A regular file a policy's SQL predicate selected, with its path (its first name, when it has
// several).
struct Candidate {
  Attributes attributes;
  std::string path;  // /ifs/...
};
// One page of a shard's regular files that meet a policy's SQL predicate, in inode order.
struct CandidatePage {
  std::vector<Candidate> files;
  InodeId next = 0;  // pass as `after` for the next page; 0: no more
};
// The most files one find_files() page holds.
inline constexpr std::uint32_t kMaxCandidatePage = 4096;
// The longest predicate, and the most values, find_files() takes.
inline constexpr std::size_t kMaxPredicateBytes = 64 << 10;
inline constexpr std::size_t kMaxPredicateValues = 4096;

class PoolPeers;

// The cluster's lock on a file's data, as the nodes' caches take it (cache/layout_locks.h): a
// node reads and writes a file's units at their owners directly (store/unit_client.h) only
// under that lock, with the layout it read under it; so a layout changes only while the lock is
// held exclusively — or in PW by the writer whose write changes it (a copy its write missed),
// which no other node's reader shares.
class LayoutLocks {
 public:
  virtual ~LayoutLocks() = default;
  // Holds the file's data lock exclusively until the returned object goes: by then every node
  // has dropped the layout it cached, and what it read or wrote under that layout is done.
  virtual awaitable<Result<std::shared_ptr<void>>> exclusive(InodeId inode) = 0;
};

// A regular file being created, as the file pool policies see it.
struct NewFile {
  std::string path;  // /ifs/...; empty unless the placement needs_path()
  std::uint32_t uid = 0;
  std::int64_t now_ns = 0;
};
struct PoolChoice {
  std::string pool;
  std::uint32_t protection = kDefaultProtection;
};
// Where a new regular file's data goes (placement on create follows the file pool policy that
// matches the file).
class NewFilePlacement {
 public:
  virtual ~NewFilePlacement() = default;
  // Whether any file may be placed, and whether where depends on its path: when not, the shard
  // does not work out new files' paths (a walk up their directories).
  virtual bool places_any() = 0;
  virtual bool needs_path() = 0;
  // The node pool, and how many copies, for `file`; none keeps its data with the shard. Called
  // on the shard's thread while the file is created: it answers from memory, never waits.
  virtual std::optional<PoolChoice> place(const NewFile& file) = 0;
};

struct StoreOptions {
  std::string data_dir;
  // The shard of the namespace this store holds: its new inodes' numbers carry it, and shard 0
  // holds the root directory. Its directories' entries may name inodes of other shards
  // (store/namespace.h puts new directories on hashed shards).
  ShardId shard = 0;
  // How the home reaches the node pools that hold file data; null outside a cluster, where
  // files keep their data with the shard and migrate() is not supported.
  std::shared_ptr<PoolPeers> peers;
  // Taken around every change of a placed file's layout; null where no other node caches
  // layouts (outside a cluster).
  std::shared_ptr<LayoutLocks> layout_locks;
  // Null, or without peers: every new file keeps its data with the shard. A pool with a node
  // down is not chosen.
  std::shared_ptr<NewFilePlacement> placement;
  std::uint32_t threads = 4;
  std::uint32_t stripe_unit_bytes = 128u << 10;
  // The node's L2 (its own data kept in memory as it is read, and its count of reads), shared
  // with the units it holds for node pools. Never null: a budget of 0 keeps no units.
  std::shared_ptr<L2> l2 = L2::make(0);
  bool atime_enabled = true;
  std::chrono::seconds atime_grace_period{24 * 3600};
  Clock* clock = nullptr;  // null: the real clock
  std::shared_ptr<IntegrityCounters> integrity = std::make_shared<IntegrityCounters>();

  Clock& time_source() const { return clock_or_real(clock); }
};

// Where shard `shard` of a node's namespace lives under its data directory: shard 0 in the
// directory itself (where a namespace of one shard always was), shard k in "shard-k" (hex).
std::string shard_directory(const std::string& data_dir, ShardId shard);

// Whether `caller` may read a file's data as the store's own read checks it: is_a_directory,
// invalid_argument for another file that is not regular, access_denied when the permission bits
// refuse (a file's owner always may, as NFS servers allow).
Status check_read_access(const Attributes& a, const Caller& caller);
// The same for a write of the file's data.
Status check_write_access(const Attributes& a, const Caller& caller);
// The bits of `requested` (ACCESS3_*) that `caller` is granted on a file with attributes `a`,
// as the store's own check_access() answers.
std::uint32_t access_granted(const Attributes& a, const Caller& caller, std::uint32_t requested);

class LocalStore;
class MirrorTarget;
class ShardParticipant;

class Store {
 public:
  // Opens (or creates) the store under options.data_dir. Fails with a reason when the directory
  // cannot be created or written, or the database is unusable.
  static Result<std::unique_ptr<LocalStore>> open(const StoreOptions& options);
  virtual ~Store() = default;

  // Changes on every open; a client that sees it change resends uncommitted writes.
  virtual std::uint64_t write_verifier() const = 0;
  // Makes everything durable and stops the store's threads. Idempotent. Operations still under
  // way finish; later ones fail as unavailable.
  virtual void close() = 0;
  // The sysctls efs.bam.atime_enabled and efs.bam.atime_grace_period, changed while serving.
  virtual void set_atime_policy(bool enabled, std::chrono::seconds grace_period) = 0;

  virtual awaitable<Result<Attributes>> getattr(InodeId inode) = 0;
  // With guard_ctime_ns, fails with precondition_failed unless the ctime still matches.
  virtual awaitable<Result<Wcc>> setattr(InodeId inode, AttributeChanges changes, Caller caller,
                                         std::optional<std::int64_t> guard_ctime_ns) = 0;
  virtual awaitable<Result<LookupResult>> lookup(InodeId directory, std::string name,
                                                 Caller caller) = 0;
  virtual awaitable<Result<AccessResult>> check_access(InodeId inode, Caller caller,
                                                       std::uint32_t requested) = 0;
  virtual awaitable<Result<ReadlinkResult>> readlink(InodeId inode) = 0;
  // A regular file's layout; invalid_argument for any other type.
  virtual awaitable<Result<Layout>> layout(InodeId inode) = 0;
  // Sets how reads of a regular file prefetch (`tide set -a`): `pattern` is one of
  // kAccessPatterns; invalid_argument for another or for a file of any other type. The new
  // layout.
  virtual awaitable<Result<Layout>> set_access_pattern(InodeId inode, std::string pattern) = 0;
  // Reads up to into.size() bytes at offset into the caller's buffer.
  virtual awaitable<Result<ReadResult>> read(InodeId inode, std::uint64_t offset,
                                             std::span<std::uint8_t> into, Caller caller) = 0;
  // Reads up to `count` bytes at offset and leaves them where they are, for a caller that sends
  // them on from there instead of copying them (NFS READ replies). By default, read() into a
  // buffer made for the read.
  virtual awaitable<Result<ReadPieces>> read_pieces(InodeId inode, std::uint64_t offset,
                                                    std::uint32_t count, Caller caller);
  virtual awaitable<Result<WriteResult>> write(InodeId inode, std::uint64_t offset,
                                               std::span<const std::uint8_t> data,
                                               Stability stability, Caller caller) = 0;
  // Bytes [offset, offset + count) of a regular file went to every owner of its units directly
  // (store/unit_client.h), under `written_under`, the layout the caller read while it held the
  // file's data lock: its size, times and mode change as a write() changes them, and the result
  // is what write() would answer. Unavailable when the file is laid out otherwise now (a move
  // began, a copy fell behind): the caller writes the bytes again through write().
  virtual awaitable<Result<WriteResult>> record_write(InodeId inode, std::uint64_t offset,
                                                      std::uint32_t count, Stability stability,
                                                      Caller caller, Layout written_under) = 0;
  virtual awaitable<Result<NewObject>> create(InodeId directory, std::string name,
                                              CreateMode mode, AttributeChanges initial,
                                              CreateVerifier verifier, Caller caller) = 0;
  virtual awaitable<Result<NewObject>> mkdir(InodeId directory, std::string name,
                                             AttributeChanges initial, Caller caller) = 0;
  virtual awaitable<Result<NewObject>> symlink(InodeId directory, std::string name,
                                               std::string target, AttributeChanges initial,
                                               Caller caller) = 0;
  // Devices, sockets and FIFOs exist as attributes only.
  virtual awaitable<Result<NewObject>> mknod(InodeId directory, std::string name, FileType type,
                                             std::uint32_t rdev_major, std::uint32_t rdev_minor,
                                             AttributeChanges initial, Caller caller) = 0;
  virtual awaitable<Result<Wcc>> remove(InodeId directory, std::string name, Caller caller) = 0;
  virtual awaitable<Result<Wcc>> rmdir(InodeId directory, std::string name, Caller caller) = 0;
  virtual awaitable<Result<RenameResult>> rename(InodeId from_directory, std::string from_name,
                                                 InodeId to_directory, std::string to_name,
                                                 Caller caller) = 0;
  virtual awaitable<Result<LinkResult>> link(InodeId file, InodeId directory, std::string name,
                                             Caller caller) = 0;
  // Entries after `cookie` (0: from the start), at most max_entries. Cookies stay valid while
  // entries are added and removed; a non-zero cookie with another verifier is bad_cookie.
  virtual awaitable<Result<DirectoryPage>> readdir(InodeId directory, std::uint64_t cookie,
                                                   std::uint64_t cookie_verifier,
                                                   std::uint32_t max_entries, bool with_attributes,
                                                   Caller caller) = 0;
  virtual awaitable<Result<FsStatistics>> fsstat() = 0;
  // Makes the file's data and attributes durable. Each node of the file's placement is synced
  // unless `synced` names it under the layout the file still has (same placement, no move, the
  // same epoch): then its boot id is noted as if this had synced it, so that a restart of it
  // still changes the write verifier.
  virtual awaitable<Result<Wcc>> commit(InodeId inode, SyncedCopies synced) = 0;
  // Moves a regular file's data to node pool `pool` (each unit on `protection` of its nodes,
  // fewer when the pool has fewer), while the file stays readable and writable: its data is
  // copied under the file's old layout, with writes made meanwhile going to both, then one
  // metadata change switches the layout and the old copy is freed. A file already there is
  // left as it is — but for one placed over other nodes than the pool places on now (a node
  // lost, or back), which is restriped over those unless that would keep fewer copies.
  // invalid_argument for another type, a pool name that is not one, or a
  // protection of 0 or over kMaxProtection; unavailable while a node of either pool that holds
  // its units cannot be reached (the move is then given up, and the old copy stays in use).
  // The copy goes no faster than `bytes_per_second` (0: as fast as it can).
  // A move's watermark is kept with the shard: a move cut short by a crash of the home goes on
  // from it when it is asked for again (writes meanwhile go to both copies), and is given up
  // when the file is asked to go elsewhere, or to stay where it is (`pool` kWithShard for data
  // kept with the shard; moving data back there is not supported). A call for a move under
  // way waits for it, then asks again.
  virtual awaitable<Result<Move>> migrate(InodeId inode, std::string pool,
                                          std::uint32_t protection,
                                          std::uint64_t bytes_per_second) = 0;
  // The regular files `inodes` were just read from a cache on another node: their atime moves
  // as a read here would move it (past the grace period only, persisted by the next flush).
  // Files that are gone are passed over. How many atimes moved.
  virtual awaitable<Result<std::uint32_t>> record_reads(std::vector<InodeId> inodes) = 0;
  // The regular files of the shard of inode `after` whose inode follows it (shard << kShardShift:
  // from the shard's start), and whose row in the shard's inodes table meets `where`, at most
  // `limit` (1..kMaxCandidatePage), in inode order: how the policy engine finds its candidates in
  // each shard's database instead of walking the namespace. `where` and `values` are
  // policy::to_sql()'s SqlPredicate, `values` bound as ?1..?N; nothing else is taken (the
  // predicate travels between nodes). Files are chosen by the attributes the shard's database
  // holds: an atime or size that a read or an UNSTABLE write changed less than a flush ago
  // (about a second) is in the returned attributes but not yet in the choice.
  // Cost: SQLite reads the inodes table from `after` on, in inode order, until the page is full
  // (it does not pick the atime or size index for this order), on the shard's thread, through
  // at most 2^20 inode numbers a call: a page may hold fewer files than `limit`, even none, and
  // still have a `next`. A file whose path is longer than kMaxPathBytes is passed over.
  // invalid_argument for a predicate of another shape, whose parameters are not ?1..?N, or a
  // limit out of range.
  virtual awaitable<Result<CandidatePage>> find_files(std::string where,
                                                      std::vector<std::int64_t> values,
                                                      InodeId after, std::uint32_t limit) = 0;
};

// The store holding the copy of the namespace on this node's disks, as its home serves it.
class LocalStore : public Store {
 public:
  // Keeps `mirror` in step from now on: first a whole copy of the shard (while it is taken,
  // changes wait), then every change before the operation that made it completes (metadata
  // durable on the mirror; data as durable as the write asked). Null stops mirroring. Fails,
  // leaving the store unmirrored, when the copy did not complete. While it is mirrored, a
  // block that fails its checksum here is put back from the mirror's copy.
  virtual awaitable<Status> mirror_to(std::shared_ptr<MirrorTarget> mirror) = 0;
  // Empties the store's caches (tide flush --l2): its attribute, name and listing caches, and
  // L2 and the page cache's clean pages of its data files. Data written and not yet durable
  // stays.
  virtual awaitable<Status> drop_caches() = 0;
  // The shard's part in changes that span shards (store/cross_shard.h); lives as long as the
  // store.
  virtual ShardParticipant& participant() = 0;
  // Whether the file's data is placed in a node pool now (read and written at its units'
  // owners, store/unit_client.h) rather than kept with the shard; without waiting.
  virtual bool data_in_node_pool(InodeId inode) const = 0;
  // Lowers the node's low-water mark of unit copies (IntegrityCounters) to the fewest copies
  // the shard's placed files can count on now, as its peers last followed the view: a scan of
  // every placed file, for when an owner went down or away or the shard came here.
  virtual void note_protection() = 0;
};

}  // namespace tidepool::store
