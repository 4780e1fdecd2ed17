#include "store/internal/pack.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include "common/crc32c.h"
#include "common/thread_name.h"

namespace tidepool::store::internal {

namespace {

// A record's header, little-endian: magic, blocks, inode, sequence, kind, the blocks'
// checksums, and last the header's own CRC32C. Its data follows it.
constexpr std::uint64_t kHeaderBytes = 256;
constexpr std::uint32_t kMagic = 0x314B5054;  // "TPK1"
constexpr std::size_t kBlocksAt = 4;
constexpr std::size_t kInodeAt = 8;
constexpr std::size_t kSequenceAt = 16;
constexpr std::size_t kKindAt = 24;
constexpr std::size_t kSumsAt = 32;
constexpr std::size_t kHeaderCrcAt = kHeaderBytes - 4;
static_assert(kSumsAt + 4 * kMaxPackedBlocks <= kHeaderCrcAt);
constexpr std::uint32_t kDataRecord = 1;
constexpr std::uint32_t kRemovalRecord = 2;

using Header = std::array<std::uint8_t, kHeaderBytes>;

void put32(std::uint8_t* at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) at[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
void put64(std::uint8_t* at, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) at[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
std::uint32_t get32(const std::uint8_t* at) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | at[i];
  return v;
}
std::uint64_t get64(const std::uint8_t* at) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | at[i];
  return v;
}

Status errno_status(const std::string& what, int err) {
  const Errc code = err == ENOSPC || err == EDQUOT ? Errc::no_space : Errc::io_error;
  return error(code, what + ": " + std::strerror(err));
}

Header make_header(std::uint32_t kind, std::uint64_t inode, std::uint64_t sequence,
                   std::span<const std::uint32_t> sums) {
  Header h{};
  put32(h.data(), kMagic);
  put32(h.data() + kBlocksAt, static_cast<std::uint32_t>(sums.size()));
  put64(h.data() + kInodeAt, inode);
  put64(h.data() + kSequenceAt, sequence);
  put32(h.data() + kKindAt, kind);
  for (std::size_t i = 0; i < sums.size(); ++i) put32(h.data() + kSumsAt + 4 * i, sums[i]);
  put32(h.data() + kHeaderCrcAt, crc32c(std::span(h).first(kHeaderCrcAt)));
  return h;
}

// A header as read back: what it says, if it is whole and well formed.
struct ParsedHeader {
  std::uint32_t kind;
  std::uint64_t blocks;
  std::uint64_t inode;
  std::uint64_t sequence;
  std::uint64_t size() const { return kHeaderBytes + blocks * kPackBlock; }
  std::uint32_t sum(const Header& h, std::uint64_t block) const {
    return get32(h.data() + kSumsAt + 4 * block);
  }
};

std::optional<ParsedHeader> parse(const Header& h) {
  if (get32(h.data()) != kMagic) return std::nullopt;
  if (get32(h.data() + kHeaderCrcAt) != crc32c(std::span(h).first(kHeaderCrcAt)))
    return std::nullopt;
  ParsedHeader p{get32(h.data() + kKindAt), get32(h.data() + kBlocksAt), get64(h.data() + kInodeAt),
                 get64(h.data() + kSequenceAt)};
  if (p.kind != kDataRecord && p.kind != kRemovalRecord) return std::nullopt;
  if (p.blocks > kMaxPackedBlocks || (p.kind == kRemovalRecord && p.blocks != 0))
    return std::nullopt;
  return p;
}

// After a transfer of `n` bytes from pieces[first] on: skips what it covered.
void advance(std::span<iovec> pieces, std::size_t& first, std::size_t n) {
  while (n > 0) {
    const std::size_t step = std::min(n, pieces[first].iov_len);
    pieces[first].iov_base = static_cast<std::uint8_t*>(pieces[first].iov_base) + step;
    pieces[first].iov_len -= step;
    n -= step;
    if (pieces[first].iov_len == 0) ++first;
  }
}

// Reads all of `pieces` from `position` on; false when `nowait` and the page cache does not
// hold them, or when the file ends first.
Result<bool> read_fully(int fd, std::span<iovec> pieces, std::uint64_t position, bool nowait) {
  std::size_t first = 0;
  while (first < pieces.size()) {
    const ssize_t n = ::preadv2(fd, pieces.data() + first, static_cast<int>(pieces.size() - first),
                                static_cast<off_t>(position), nowait ? RWF_NOWAIT : 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (nowait && (errno == EAGAIN || errno == EOPNOTSUPP)) return false;
      return errno_status("read a pack segment", errno);
    }
    if (n == 0) return false;
    position += static_cast<std::uint64_t>(n);
    advance(pieces, first, static_cast<std::size_t>(n));
  }
  return true;
}

Result<bool> read_header(int fd, std::uint64_t position, Header& header, bool nowait = false) {
  iovec v{header.data(), header.size()};
  return read_fully(fd, std::span(&v, 1), position, nowait);
}

bool data_matches(std::span<const std::uint8_t> blocks, const ParsedHeader& p, const Header& h) {
  for (std::uint64_t b = 0; b < p.blocks; ++b) {
    const std::uint32_t expected = p.sum(h, b);
    if (expected == 0) continue;
    if (stored_sum(blocks.subspan(b * kPackBlock, kPackBlock)) != expected) return false;
  }
  return true;
}

// A segment's number from its file's name: exactly 16 lowercase hex digits, as written.
std::optional<std::uint64_t> segment_number(const std::string& name) {
  if (name.size() != 16) return std::nullopt;
  std::uint64_t n = 0;
  for (char c : name) {
    const bool digit = c >= '0' && c <= '9', letter = c >= 'a' && c <= 'f';
    if (!digit && !letter) return std::nullopt;
    n = n << 4 | static_cast<std::uint64_t>(digit ? c - '0' : c - 'a' + 10);
  }
  // The next segment's number must not wrap around.
  if (n == std::numeric_limits<std::uint64_t>::max()) return std::nullopt;
  return n;
}

std::string segment_path(const std::string& directory, std::uint64_t number) {
  char name[24];
  std::snprintf(name, sizeof name, "/%016llx", static_cast<unsigned long long>(number));
  return directory + name;
}

}  // namespace

std::uint32_t stored_sum(std::span<const std::uint8_t> block) {
  const std::uint32_t crc = crc32c(block);
  return crc == 0 ? 1 : crc;
}

struct Pack::Segment {
  Segment(std::uint64_t n, std::string p, int f) : number(n), path(std::move(p)), fd(f) {}
  ~Segment() { ::close(fd); }
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  const std::uint64_t number;
  const std::string path;
  const int fd;
  // Held around each fdatasync of it (the seal's and the syncs'), so that a failure is noted
  // before another runs.
  std::mutex sync_mutex;
  // Guarded by the pack's mutex_.
  std::uint64_t size = 0;  // where the next record goes: the end of its last whole record
  std::uint64_t live = 0;  // bytes of the records the index points at
  // Bytes of removal records written while the record they kill was in another segment: kept
  // through a compaction, so counted with the live ones.
  std::uint64_t pinned = 0;
  bool broken = false;  // its compaction failed: not tried again until the next start
  bool sealed = true;   // takes no more records (every segment but the active one)
};

// What the segments of a directory hold, read from their headers.
struct Pack::Scan {
  struct Found {
    std::uint64_t segment;
    std::uint64_t position;
    std::uint64_t blocks;
    std::uint64_t sequence;
  };
  struct SegmentFound {
    std::uint64_t size = 0;  // its whole records
    std::uint64_t file_size = 0;
  };
  std::map<std::uint64_t, SegmentFound> segments;
  std::unordered_map<std::uint64_t, Found> newest;           // each inode's newest data record
  std::unordered_map<std::uint64_t, std::uint64_t> records;  // its data records
  std::unordered_map<std::uint64_t, std::uint64_t> removed;  // its newest removal's sequence
  std::uint64_t max_sequence = 0;

  // With `check_newest`, the records of the newest segment are read whole and checked: it alone
  // may hold records never synced, and the first that is not whole ends it.
  static Result<Scan> of(const std::string& directory, bool check_newest) {
    Scan scan;
    std::error_code ec;
    for (const auto& file : std::filesystem::directory_iterator(directory, ec)) {
      std::error_code type_error;  // a dangling link, say: not a segment either
      if (!file.is_regular_file(type_error)) continue;
      if (auto n = segment_number(file.path().filename().string())) scan.segments[*n] = {};
    }
    if (ec) return error(Errc::io_error, "cannot list " + directory + ": " + ec.message());
    for (auto& [number, found] : scan.segments) {
      const bool newest = number == scan.segments.rbegin()->first;
      TP_RETURN_IF_ERROR(scan.read_segment(directory, number, found, check_newest && newest));
    }
    return scan;
  }

  bool live(std::uint64_t inode, const Found& f) const {
    auto r = removed.find(inode);
    return r == removed.end() || f.sequence > r->second;
  }

 private:
  Status read_segment(const std::string& directory, std::uint64_t number, SegmentFound& found,
                      bool check_data) {
    const std::string path = segment_path(directory, number);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno_status("open pack segment " + path, errno);
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      return errno_status("stat pack segment " + path, err);
    }
    found.file_size = static_cast<std::uint64_t>(st.st_size);
    std::vector<std::uint8_t> data;
    Status status;
    std::uint64_t position = 0;
    while (position + kHeaderBytes <= found.file_size) {
      Header header;
      Result<bool> got = read_header(fd, position, header);
      if (!got.ok()) {
        status = got.status();
        break;
      }
      const std::optional<ParsedHeader> p = parse(header);
      if (!*got || !p || position + p->size() > found.file_size) break;
      if (check_data && p->blocks > 0) {
        data.resize(p->blocks * kPackBlock);
        iovec v{data.data(), data.size()};
        Result<bool> read = read_fully(fd, std::span(&v, 1), position + kHeaderBytes, false);
        if (!read.ok()) {
          status = read.status();
          break;
        }
        if (!*read || !data_matches(data, *p, header)) break;
      }
      max_sequence = std::max(max_sequence, p->sequence);
      if (p->kind == kRemovalRecord) {
        auto [it, added] = removed.emplace(p->inode, p->sequence);
        if (!added) it->second = std::max(it->second, p->sequence);
      } else {
        ++records[p->inode];
        auto [it, added] =
            newest.try_emplace(p->inode, Found{number, position, p->blocks, p->sequence});
        if (!added && it->second.sequence <= p->sequence)
          it->second = {number, position, p->blocks, p->sequence};
      }
      position += p->size();
    }
    ::close(fd);
    found.size = position;
    return status;
  }
};

Pack::Pack(std::string directory, std::uint64_t segment_bytes)
    : directory_(std::move(directory)), segment_bytes_(segment_bytes) {}

Pack::~Pack() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  compaction_wake_.notify_all();
  if (compactor_.joinable()) compactor_.join();
  if (directory_fd_ >= 0) ::close(directory_fd_);
}

Status Pack::open() {
  std::error_code ec;
  std::filesystem::create_directories(directory_, ec);
  if (ec) return error(Errc::io_error, "cannot create " + directory_ + ": " + ec.message());
  directory_fd_ = ::open(directory_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (directory_fd_ < 0) return errno_status("open " + directory_, errno);
  TP_ASSIGN_OR_RETURN(Scan scan, Scan::of(directory_, true));
  std::lock_guard lock(mutex_);
  for (const auto& [number, found] : scan.segments) {
    const std::string path = segment_path(directory_, number);
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return errno_status("open pack segment " + path, errno);
    auto segment = std::make_shared<Segment>(number, path, fd);
    segment->size = found.size;
    // Whatever follows the newest segment's whole records was never synced: cut, for good,
    // so that no later start finds a record of it whole. What is left may not be durable
    // either (a process killed, not the machine): it is made so, as the index says it is.
    if (number == scan.segments.rbegin()->first) {
      if (found.size < found.file_size) {
        spdlog::warn("pack: cutting {} at {} of {} bytes (records not synced before a crash)", path,
                     found.size, found.file_size);
        if (::ftruncate(fd, static_cast<off_t>(found.size)) != 0) {
          return errno_status("cut pack segment " + path, errno);
        }
      }
      if (::fdatasync(fd) != 0) return errno_status("sync pack segment " + path, errno);
    }
    next_segment_ = number + 1;
    if (found.file_size == 0) {  // nothing in it: never compacted, so it goes now
      if (::unlink(path.c_str()) != 0) return errno_status("remove " + path, errno);
      continue;
    }
    if (found.size < found.file_size && number != scan.segments.rbegin()->first) {
      spdlog::error("pack: {} holds no record this can read past {} of its {} bytes", path,
                    found.size, found.file_size);
    }
    segments_.emplace(number, std::move(segment));
  }
  for (const auto& [inode, found] : scan.newest) {
    const bool live = scan.live(inode, found);
    if (live) {
      const std::shared_ptr<Segment>& segment = segments_.at(found.segment);
      index_.emplace(inode, Entry{segment, found.position, found.blocks, found.sequence, 0});
      segment->live += kHeaderBytes + found.blocks * kPackBlock;
    }
    if (const std::uint64_t dead = scan.records.at(inode) - (live ? 1 : 0); dead > 0) {
      dead_records_[inode] = dead;
    }
  }
  next_sequence_ = scan.max_sequence + 1;
  compactor_ = std::thread([this] {
    name_this_thread("pack-compact");
    compact_loop();
  });
  if (!index_.empty()) {
    spdlog::info("pack {}: {} files in {} segments", directory_, index_.size(), segments_.size());
  }
  return {};
}

bool Pack::contains(std::uint64_t inode) const {
  std::lock_guard lock(mutex_);
  return index_.contains(inode);
}

std::vector<std::uint64_t> Pack::inodes() const {
  std::lock_guard lock(mutex_);
  std::vector<std::uint64_t> all;
  all.reserve(index_.size());
  for (const auto& [inode, entry] : index_) all.push_back(inode);
  return all;
}

Result<std::shared_ptr<Pack::Segment>> Pack::create_segment_locked() {
  // A name taken by something that is not a segment (a directory, say) is passed over.
  constexpr int kNamesTried = 64;
  std::uint64_t number = 0;
  std::string path;
  int fd = -1;
  for (int tried = 0; fd < 0 && tried < kNamesTried; ++tried) {
    number = next_segment_++;
    path = segment_path(directory_, number);
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) return errno_status("create pack segment " + path, errno);
  // Its directory entry is durable before any record in it is said to be.
  if (::fsync(directory_fd_) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(path.c_str());
    return errno_status("sync " + directory_, err);
  }
  auto segment = std::make_shared<Segment>(number, path, fd);
  segment->sealed = false;
  segments_.emplace(number, segment);
  return segment;
}

Status Pack::seal_active_locked() {
  // Durable before it stops taking records: a sync waits only for the active segment.
  TP_RETURN_IF_ERROR(sync_segment(*active_));
  note_synced_locked(appended_);
  active_->sealed = true;
  active_.reset();
  compaction_wake_.notify_all();
  return {};
}

Result<std::uint64_t> Pack::append_locked(std::span<const std::span<const std::uint8_t>> pieces,
                                          std::uint64_t size) {
  TP_RETURN_IF_ERROR(check_not_failed());
  if (active_ && active_->size > 0 && active_->size + size > segment_bytes_) {
    TP_RETURN_IF_ERROR(seal_active_locked());
  }
  if (!active_) {
    TP_ASSIGN_OR_RETURN(active_, create_segment_locked());
  }
  std::vector<iovec> vectors;
  for (std::span<const std::uint8_t> piece : pieces) {
    if (!piece.empty()) vectors.push_back({const_cast<std::uint8_t*>(piece.data()), piece.size()});
  }
  const std::uint64_t position = active_->size;
  std::uint64_t done = 0;
  std::size_t first = 0;
  while (done < size) {
    const ssize_t n =
        ::pwritev(active_->fd, vectors.data() + first, static_cast<int>(vectors.size() - first),
                  static_cast<off_t>(position + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      // What was written of it lies past the segment's end: the next record goes over it.
      return errno_status("write pack segment " + active_->path, errno);
    }
    done += static_cast<std::uint64_t>(n);
    advance(vectors, first, static_cast<std::size_t>(n));
  }
  active_->size += size;
  appended_ += size;
  return position;
}

void Pack::index_locked(std::uint64_t inode, Entry entry) {
  forget_locked(inode);
  entry.segment->live += kHeaderBytes + entry.blocks * kPackBlock;
  index_.insert_or_assign(inode, std::move(entry));
}

void Pack::forget_locked(std::uint64_t inode) {
  auto it = index_.find(inode);
  if (it == index_.end()) return;
  Segment& segment = *it->second.segment;
  segment.live -= kHeaderBytes + it->second.blocks * kPackBlock;
  index_.erase(it);
  ++dead_records_[inode];
  if (segment.sealed && (segment.live + segment.pinned) * 2 < segment.size) {
    compaction_wake_.notify_all();
  }
}

Status Pack::put(std::uint64_t inode, std::span<const std::uint8_t> bytes,
                 std::span<const std::uint32_t> sums) {
  if (sums.size() > kMaxPackedBlocks || bytes.size() > sums.size() * kPackBlock ||
      bytes.size() + kPackBlock <= sums.size() * kPackBlock) {
    return error(Errc::invalid_argument, "packed data is whole blocks up to 128 KiB, one sum each");
  }
  static const std::array<std::uint8_t, kPackBlock> kZeros{};
  const std::uint64_t blocks = sums.size();
  const std::uint64_t size = kHeaderBytes + blocks * kPackBlock;
  std::lock_guard lock(mutex_);
  const std::uint64_t sequence = next_sequence_++;
  const Header header = make_header(kDataRecord, inode, sequence, sums);
  const std::span<const std::uint8_t> pieces[] = {
      header, bytes, std::span(kZeros).first(blocks * kPackBlock - bytes.size())};
  TP_ASSIGN_OR_RETURN(std::uint64_t position, append_locked(pieces, size));
  index_locked(inode, {active_, position, blocks, sequence, appended_});
  return {};
}

std::optional<Pack::Entry> Pack::entry_of(std::uint64_t inode) const {
  std::lock_guard lock(mutex_);
  auto it = index_.find(inode);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

Result<std::optional<PackedData>> Pack::load(std::uint64_t inode) const {
  const std::optional<Entry> entry = entry_of(inode);
  if (!entry) return std::optional<PackedData>();
  PackedData data;
  data.blocks.resize(entry->blocks * kPackBlock);
  data.sums.resize(entry->blocks);
  TP_RETURN_IF_ERROR(read_entry(*entry, inode, 0, data.blocks, data.sums, false).status());
  return std::optional<PackedData>(std::move(data));
}

Result<Pack::ReadOutcome> Pack::read(std::uint64_t inode, std::uint64_t first,
                                     std::span<std::uint8_t> blocks, std::span<std::uint32_t> sums,
                                     bool nowait) const {
  const std::optional<Entry> entry = entry_of(inode);
  if (!entry) return ReadOutcome::not_packed;
  return read_entry(*entry, inode, first, blocks, sums, nowait);
}

Result<Pack::ReadOutcome> Pack::read_entry(const Entry& entry, std::uint64_t inode,
                                           std::uint64_t first, std::span<std::uint8_t> blocks,
                                           std::span<std::uint32_t> sums, bool nowait) const {
  const std::uint64_t count = blocks.size() / kPackBlock;
  const std::uint64_t held = first >= entry.blocks ? 0 : std::min(count, entry.blocks - first);
  Header header;
  std::vector<iovec> pieces{{header.data(), header.size()}};
  const std::uint64_t data_at = entry.position + kHeaderBytes + first * kPackBlock;
  if (first == 0 && held > 0) pieces.push_back({blocks.data(), held * kPackBlock});
  TP_ASSIGN_OR_RETURN(bool got, read_fully(entry.segment->fd, pieces, entry.position, nowait));
  if (got && first > 0 && held > 0) {
    iovec v{blocks.data(), held * kPackBlock};
    TP_ASSIGN_OR_RETURN(got, read_fully(entry.segment->fd, std::span(&v, 1), data_at, nowait));
  }
  if (!got && nowait) return ReadOutcome::would_block;
  const std::optional<ParsedHeader> p = got ? parse(header) : std::nullopt;
  if (!p || p->inode != inode || p->sequence != entry.sequence || p->blocks != entry.blocks) {
    return error(Errc::corrupt, "the packed record of inode " + std::to_string(inode) + " in " +
                                    entry.segment->path + " at " + std::to_string(entry.position) +
                                    " is damaged");
  }
  for (std::uint64_t b = 0; b < held; ++b) sums[b] = p->sum(header, first + b);
  std::fill(sums.begin() + static_cast<std::ptrdiff_t>(held), sums.end(), 0);
  std::fill(blocks.begin() + static_cast<std::ptrdiff_t>(held * kPackBlock), blocks.end(), 0);
  return ReadOutcome::read;
}

Status Pack::remove(std::uint64_t inode) {
  std::lock_guard lock(mutex_);
  auto it = index_.find(inode);
  if (it == index_.end()) return {};
  const std::shared_ptr<Segment> killed = it->second.segment;
  // Still packed if the removal cannot be written: compaction would drop the record, and a
  // restart would then find an older one of the inode live.
  TP_RETURN_IF_ERROR(append_removal_locked(inode));
  if (killed != active_) active_->pinned += kHeaderBytes;
  forget_locked(inode);
  return {};
}

Status Pack::append_removal_locked(std::uint64_t inode) {
  const Header header = make_header(kRemovalRecord, inode, next_sequence_++, {});
  const std::span<const std::uint8_t> pieces[] = {header};
  TP_RETURN_IF_ERROR(append_locked(pieces, kHeaderBytes).status());
  pending_removals_[inode] = appended_;
  pending_order_.emplace_back(appended_, inode);
  return {};
}

Status Pack::settle(std::uint64_t inode) {
  std::uint64_t mark = 0;
  {
    std::lock_guard lock(mutex_);
    auto pending = pending_removals_.find(inode);
    if (pending == pending_removals_.end()) return {};
    mark = pending->second;
  }
  return sync_up_to(mark);
}

void Pack::note_synced_locked(std::uint64_t upto) {
  std::uint64_t synced = synced_.load();
  while (synced < upto && !synced_.compare_exchange_weak(synced, upto)) {
  }
  while (!pending_order_.empty() && pending_order_.front().first <= synced_.load()) {
    const auto [mark, inode] = pending_order_.front();
    if (auto it = pending_removals_.find(inode);
        it != pending_removals_.end() && it->second == mark) {
      pending_removals_.erase(it);
    }
    pending_order_.pop_front();
  }
}

Status Pack::sync_segment(Segment& segment) {
  // The kernel reports a failed writeback once and may then call the pages clean: a failure is
  // noted before any other sync of the segment can run, and no later sync is trusted.
  std::lock_guard one_at_a_time(segment.sync_mutex);
  TP_RETURN_IF_ERROR(check_not_failed());
  if (::fdatasync(segment.fd) != 0) {
    const int err = errno;
    failed_ = true;
    return errno_status("sync pack segment " + segment.path, err);
  }
  return {};
}

Status Pack::check_not_failed() const {
  if (!failed_) return {};
  return error(Errc::io_error, "a sync of " + directory_ +
                                   " failed: the pack takes and syncs nothing more until the "
                                   "store is opened again");
}

Status Pack::sync(std::uint64_t inode) {
  std::uint64_t mark = 0;
  {
    std::lock_guard lock(mutex_);
    auto it = index_.find(inode);
    mark = it != index_.end() ? it->second.appended_mark : appended_;
  }
  return sync_up_to(mark);
}

Status Pack::sync() {
  std::uint64_t mark = 0;
  {
    std::lock_guard lock(mutex_);
    mark = appended_;
  }
  return sync_up_to(mark);
}

Status Pack::sync_up_to(std::uint64_t mark) {
  TP_RETURN_IF_ERROR(check_not_failed());
  if (synced_.load() >= mark) return {};
  std::lock_guard one_at_a_time(sync_mutex_);
  // A sync that ran while this one waited may have covered it.
  if (synced_.load() >= mark) return {};
  std::shared_ptr<Segment> segment;
  std::uint64_t upto = 0;
  {
    std::lock_guard lock(mutex_);
    segment = active_;
    upto = appended_;
  }
  // Every segment but the active one was synced when it was sealed.
  if (segment) TP_RETURN_IF_ERROR(sync_segment(*segment));
  std::lock_guard lock(mutex_);
  note_synced_locked(upto);
  return {};
}

std::optional<ByteOnDisk> Pack::locate(std::uint64_t inode, std::uint64_t offset) const {
  std::lock_guard lock(mutex_);
  auto it = index_.find(inode);
  if (it == index_.end() || offset >= it->second.blocks * kPackBlock) return std::nullopt;
  return ByteOnDisk{it->second.segment->path, it->second.position + kHeaderBytes + offset};
}

Result<std::optional<ByteOnDisk>> Pack::locate_on_disk(const std::string& directory,
                                                       std::uint64_t inode, std::uint64_t offset) {
  if (!std::filesystem::exists(directory)) return std::optional<ByteOnDisk>();
  // Not checked: a test damages data on purpose, and may look for it again.
  TP_ASSIGN_OR_RETURN(Scan scan, Scan::of(directory, false));
  auto it = scan.newest.find(inode);
  if (it == scan.newest.end() || !scan.live(inode, it->second) ||
      offset >= it->second.blocks * kPackBlock) {
    return std::optional<ByteOnDisk>();
  }
  return std::optional<ByteOnDisk>(ByteOnDisk{segment_path(directory, it->second.segment),
                                              it->second.position + kHeaderBytes + offset});
}

Status Pack::drop_page_cache() const {
  std::lock_guard lock(mutex_);
  for (const auto& [number, segment] : segments_) {
    if (const int advised = ::posix_fadvise(segment->fd, 0, 0, POSIX_FADV_DONTNEED); advised != 0) {
      return errno_status("drop the page cache of " + segment->path, advised);
    }
  }
  return {};
}

Pack::Usage Pack::usage() const {
  std::lock_guard lock(mutex_);
  Usage usage;
  for (const auto& [number, segment] : segments_) {
    ++usage.segments;
    usage.bytes += segment->size;
    usage.live_bytes += segment->live;
  }
  return usage;
}

void Pack::wait_for_compaction() {
  std::unique_lock lock(mutex_);
  compaction_wake_.wait(
      lock, [this] { return stopping_ || (!compacting_ && !compaction_candidate_locked()); });
}

std::shared_ptr<Pack::Segment> Pack::compaction_candidate_locked() const {
  for (const auto& [number, segment] : segments_) {
    if (segment->sealed && !segment->broken &&
        (segment->live + segment->pinned) * 2 < segment->size) {
      return segment;
    }
  }
  return nullptr;
}

void Pack::compact_loop() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    std::shared_ptr<Segment> segment = compaction_candidate_locked();
    if (!segment) {
      compaction_wake_.wait(lock);
      continue;
    }
    compacting_ = true;
    lock.unlock();
    const Status compacted = compact(segment);
    lock.lock();
    compacting_ = false;
    compaction_wake_.notify_all();
    if (!compacted.ok()) {
      spdlog::error("pack: compacting {} failed: {}", segment->path, compacted.to_string());
      segment->broken = true;
    }
  }
}

Status Pack::compact(const std::shared_ptr<Segment>& segment) {
  std::uint64_t end = 0;
  {
    std::lock_guard lock(mutex_);
    end = segment->size;
  }
  // The data records that go with the segment, per inode: dead ones, and the old places of
  // those copied forward.
  std::unordered_map<std::uint64_t, std::uint64_t> dropped;
  std::vector<std::uint8_t> record;
  for (std::uint64_t position = 0; position < end;) {
    Header header;
    TP_ASSIGN_OR_RETURN(bool got, read_header(segment->fd, position, header));
    const std::optional<ParsedHeader> p = got ? parse(header) : std::nullopt;
    if (!p) return error(Errc::io_error, "a damaged record header in " + segment->path);
    const std::uint64_t at = position;
    position += p->size();
    if (p->kind == kDataRecord) ++dropped[p->inode];
    // Whether the record is copied forward: a data record while the index points at it, a
    // removal while a dead record of its inode is left in another segment, which it may kill.
    // A record not wanted now never is again, so only those wanted are read whole.
    auto wanted_locked = [&] {
      if (p->kind == kRemovalRecord) {
        auto dead = dead_records_.find(p->inode);
        return dead != dead_records_.end() && dead->second > dropped[p->inode];
      }
      auto it = index_.find(p->inode);
      return it != index_.end() && it->second.segment == segment && it->second.position == at;
    };
    {
      std::lock_guard lock(mutex_);
      if (!wanted_locked()) continue;
    }
    record.resize(p->size());
    iovec v{record.data(), record.size()};
    TP_ASSIGN_OR_RETURN(got, read_fully(segment->fd, std::span(&v, 1), at, false));
    if (!got) return error(Errc::io_error, "a record cut short in " + segment->path);
    const std::span<const std::uint8_t> pieces[] = {record};
    std::lock_guard lock(mutex_);
    if (!wanted_locked()) continue;
    TP_ASSIGN_OR_RETURN(std::uint64_t moved, append_locked(pieces, p->size()));
    if (p->kind == kRemovalRecord) {
      active_->pinned += p->size();
      continue;
    }
    Entry entry = index_.at(p->inode);
    entry.segment = active_;
    entry.position = moved;
    entry.appended_mark = appended_;
    index_locked(p->inode, std::move(entry));
  }
  TP_RETURN_IF_ERROR(sync());
  if (::unlink(segment->path.c_str()) != 0) return errno_status("remove " + segment->path, errno);
  // Gone for good before the removals it made needless may go too.
  if (::fsync(directory_fd_) != 0) return errno_status("sync " + directory_, errno);
  std::lock_guard lock(mutex_);
  segments_.erase(segment->number);
  for (const auto& [inode, count] : dropped) {
    auto dead = dead_records_.find(inode);
    if (dead == dead_records_.end()) continue;
    dead->second -= std::min(dead->second, count);
    if (dead->second == 0) dead_records_.erase(dead);
  }
  return {};
}

}  // namespace tidepool::store::internal
