#include "store/l2.h"

#include <algorithm>
#include <array>
#include <bit>
#include <mutex>

#include "store/store.h"

namespace tidepool::store {

namespace {

// Units of a file fit in 2^26 (kMaxFileSize / kCachedUnitBytes): the space goes above them.
constexpr unsigned kSpaceShift = 32;
static_assert(kMaxFileSize / kCachedUnitBytes <= std::uint64_t{1} << kSpaceShift);

BlockKey key_of(std::uint64_t space, std::uint64_t inode, std::uint64_t unit) {
  return {inode, space << kSpaceShift | unit};
}

}  // namespace

// Which units were read whole lately: two generations of a Bloom filter (two bits per unit, 16
// bits per unit the L2 holds, so about 5 % false marks when full), in shards of their own so
// that readers of different units do not wait for each other. A generation is full after twice
// as many units as the L2 holds; the older one then goes. A false mark keeps a unit on its first
// read, which costs only the copy the doorkeeper is there to save.
class L2::Doorkeeper {
 public:
  explicit Doorkeeper(std::size_t l2_units) {
    const std::size_t limit = std::max<std::size_t>(2 * l2_units / kShards, 64);
    const std::size_t bits = std::bit_ceil(std::max<std::size_t>(16 * l2_units / kShards, 1024));
    for (Shard& shard : shards_) {
      shard.limit = limit;
      shard.bits = bits;
      shard.current.assign(bits / 64, 0);
      shard.previous.assign(bits / 64, 0);
    }
  }

  // Marks the unit; whether it was marked already.
  bool seen_before(const BlockKey& key) {
    const std::uint64_t hash =
        (key.inode * 0x9e3779b97f4a7c15ull) ^ (key.block * 0xc2b2ae3d27d4eb4full);
    Shard& shard = shards_[(hash >> 59) % kShards];
    const std::size_t first = static_cast<std::size_t>(hash) & (shard.bits - 1);
    const std::size_t second = static_cast<std::size_t>(hash >> 32 ^ hash >> 7) & (shard.bits - 1);
    std::lock_guard lock(shard.mutex);
    if (marked(shard.current, first, second)) return true;
    const bool seen = marked(shard.previous, first, second);
    mark(shard.current, first);
    mark(shard.current, second);
    if (++shard.marks >= shard.limit) {
      shard.previous.swap(shard.current);
      std::fill(shard.current.begin(), shard.current.end(), 0);
      shard.marks = 0;
    }
    return seen;
  }

  void clear() {
    for (Shard& shard : shards_) {
      std::lock_guard lock(shard.mutex);
      std::fill(shard.current.begin(), shard.current.end(), 0);
      std::fill(shard.previous.begin(), shard.previous.end(), 0);
      shard.marks = 0;
    }
  }

 private:
  static constexpr std::size_t kShards = 16;
  struct Shard {
    std::size_t limit = 0;
    std::size_t bits = 0;
    std::mutex mutex;
    std::vector<std::uint64_t> current;   // guarded by mutex
    std::vector<std::uint64_t> previous;  // guarded by mutex
    std::size_t marks = 0;                // units marked in current; guarded by mutex
  };

  static bool marked(const std::vector<std::uint64_t>& words, std::size_t a, std::size_t b) {
    return (words[a / 64] >> (a % 64) & 1) != 0 && (words[b / 64] >> (b % 64) & 1) != 0;
  }
  static void mark(std::vector<std::uint64_t>& words, std::size_t bit) {
    words[bit / 64] |= std::uint64_t{1} << (bit % 64);
  }

  std::array<Shard, kShards> shards_;
};

class L2::ReplyPin {
 public:
  ReplyPin(CachedUnits units, std::uint64_t bytes) : units_(std::move(units)), bytes_(bytes) {}
  ~ReplyPin() { units_.l2->reply_pins_.fetch_sub(bytes_, std::memory_order_relaxed); }
  ReplyPin(const ReplyPin&) = delete;
  ReplyPin& operator=(const ReplyPin&) = delete;

  const CachedUnits& units() const { return units_; }

 private:
  CachedUnits units_;
  std::uint64_t bytes_;
};

L2::L2(std::uint64_t budget_bytes)
    : units_(budget_bytes > 0 ? std::make_unique<BlockCache>(budget_bytes) : nullptr),
      doorkeeper_(budget_bytes > 0 ? std::make_unique<Doorkeeper>(budget_bytes / kCachedUnitBytes)
                                   : nullptr) {}

std::shared_ptr<L2> L2::make(std::uint64_t budget_bytes) {
  return std::shared_ptr<L2>(new L2(budget_bytes));
}

L2::~L2() = default;

std::uint64_t L2::new_space() { return next_space_.fetch_add(1); }

CachedUnits L2::lookup(std::uint64_t space, std::uint64_t inode, std::uint64_t offset,
                       std::uint64_t length) {
  if (!units_ || length == 0) return {};
  CachedUnits cached{shared_from_this(), {}, offset / kCachedUnitBytes};
  const std::uint64_t last = (offset + length - 1) / kCachedUnitBytes;
  cached.units.reserve(last - cached.first_unit + 1);
  for (std::uint64_t u = cached.first_unit; u <= last; ++u) {
    BlockCache::Handle unit = units_->lookup(key_of(space, inode, u));
    if (!unit) return {};
    cached.units.push_back(std::move(unit));
  }
  return cached;
}

bool L2::read_before(std::uint64_t space, std::uint64_t inode, std::uint64_t unit) {
  return doorkeeper_ && doorkeeper_->seen_before(key_of(space, inode, unit));
}

BlockCache::Filling L2::allocate(std::uint64_t space, std::uint64_t inode, std::uint64_t unit) {
  return BlockCache::allocate(key_of(space, inode, unit), kCachedUnitBytes);
}

void L2::keep(BlockCache::Filling unit) {
  if (units_) units_->insert(std::move(unit), kCachedUnitBytes);
}

void L2::forget(std::uint64_t space, std::uint64_t inode, std::uint64_t unit) {
  if (units_) units_->erase(key_of(space, inode, unit));
}

void L2::forget_file(std::uint64_t inode) {
  if (units_) units_->erase_file(inode);
}

std::uint64_t L2::reply_pin_limit() const { return units_->capacity() / 4; }

bool L2::may_pin(std::uint64_t bytes) const {
  return units_ && reply_pins_.load(std::memory_order_relaxed) + bytes <= reply_pin_limit();
}

std::shared_ptr<const CachedUnits> L2::pin_for_reply(CachedUnits units, std::uint64_t bytes) {
  if (!units_ || units.units.empty() || units.l2.get() != this) return nullptr;
  if (reply_pins_.fetch_add(bytes, std::memory_order_relaxed) + bytes > reply_pin_limit()) {
    reply_pins_.fetch_sub(bytes, std::memory_order_relaxed);
    return nullptr;
  }
  auto pin = std::make_shared<const ReplyPin>(std::move(units), bytes);
  return std::shared_ptr<const CachedUnits>(pin, &pin->units());
}

void L2::clear() {
  if (!units_) return;
  units_->clear();
  doorkeeper_->clear();
}

L2Usage L2::usage() const {
  if (!units_) return {};
  return {units_->statistics().bytes, units_->capacity()};
}

BlockCacheStatistics L2::statistics() const {
  return units_ ? units_->statistics() : BlockCacheStatistics{};
}

std::vector<std::span<const std::uint8_t>> CachedUnits::pieces(std::uint64_t offset,
                                                               std::uint64_t length) const {
  std::vector<std::span<const std::uint8_t>> found;
  found.reserve(units.size());
  std::uint64_t at = offset;
  for (std::size_t i = 0; i < units.size(); ++i) {
    const std::uint64_t start = (first_unit + i) * kCachedUnitBytes;
    const std::uint64_t until = std::min(start + kCachedUnitBytes, offset + length);
    found.emplace_back(
        reinterpret_cast<const std::uint8_t*>(units[i].bytes().data()) + (at - start), until - at);
    at = until;
  }
  return found;
}

}  // namespace tidepool::store
