#include "lockmgr/lock_cache.h"

#include <list>
#include <map>
#include <utility>
#include <vector>

namespace tidepool::lockmgr {
namespace {

// Whether a lock in `held` lets its user do what `wanted` would.
bool satisfies(Mode held, Mode wanted) { return conversion(held, wanted) != Conversion::up; }

// The weakest mode that lets its user do what either mode would (PR and CW: PW).
Mode join(Mode a, Mode b) {
  for (std::size_t m = 0; m < kModeCount; ++m) {
    const auto mode = static_cast<Mode>(m);
    if (satisfies(mode, a) && satisfies(mode, b)) return mode;
  }
  return Mode::exclusive;
}

// The strongest mode that `held` can convert down to and that is compatible with every mode
// in `wanted` (a set of bits, one per mode).
Mode weakened(Mode held, unsigned wanted) {
  for (std::size_t m = kModeCount; m-- > 0;) {
    const auto mode = static_cast<Mode>(m);
    if (!satisfies(held, mode)) continue;
    bool fits = true;
    for (std::size_t w = 0; w < kModeCount; ++w) {
      if ((wanted & (1u << w)) != 0 && !compatible(mode, static_cast<Mode>(w))) fits = false;
    }
    if (fits) return mode;
  }
  return Mode::null;
}

bool covers(Range outer, Range inner) {
  return outer.start <= inner.start && inner.end <= outer.end;
}

}  // namespace

class LockCache::Impl : public std::enable_shared_from_this<LockCache::Impl> {
 public:
  struct Acquisition {
    ResourceName resource;
    Mode mode = Mode::null;
    Range range;
    Acquired done;
  };

  Impl(cluster::EventLoop& loop, LockManager& manager, LockCacheOptions options, Revoke revoke)
      : loop_(loop), manager_(manager), options_(std::move(options)), revoke_(std::move(revoke)) {}

  void close() {
    // Releasing a request still waiting runs its completion at once: nothing is left to find.
    std::map<LockId, Entry> entries = std::move(entries_);
    entries_.clear();
    by_resource_.clear();
    idle_.clear();
    for (auto& [id, entry] : entries) {
      if (entry.hold_timer != 0) loop_.cancel(entry.hold_timer);
      (void)manager_.release(id);
    }
  }

  void acquire(Acquisition acquisition) {
    for (auto [it, end] = by_resource_.equal_range(acquisition.resource); it != end; ++it) {
      Entry& entry = entries_.at(it->second);
      if (!acquisition.range.overlaps(entry.range) &&
          !acquisition.range.overlaps(entry.target_range)) {
        continue;
      }
      if (entry.op == Op::none && entry.wanted == 0 && serves(entry, acquisition)) {
        stats_.hits++;
        const CachedLock lock = use(entry);
        return acquisition.done(lock);
      }
      if ((entry.op == Op::requesting || entry.op == Op::converting) &&
          covers(entry.target_range, acquisition.range) &&
          satisfies(entry.target, acquisition.mode)) {
        stats_.hits++;
        entry.joined.push_back(std::move(acquisition));
        return;
      }
      // Another node wants it: new users wait until it has had its turn, and ask again then.
      if (entry.wanted != 0 || entry.op == Op::giving_up) {
        entry.deferred.push_back(std::move(acquisition));
        return;
      }
    }
    for (auto [it, end] = by_resource_.equal_range(acquisition.resource); it != end; ++it) {
      Entry& entry = entries_.at(it->second);
      if (entry.op == Op::none && covers(entry.range, acquisition.range)) {
        return upgrade(entry, std::move(acquisition));
      }
    }
    request(std::move(acquisition));
  }

  void release(LockId id) {
    auto it = entries_.find(id);
    if (it == entries_.end() || it->second.users == 0) return;
    if (--it->second.users > 0) return;
    if (it->second.lost) return drop_lost(id);
    settle(id);
  }

  LockCacheStatistics statistics() const { return stats_; }
  std::size_t idle() const { return idle_.size(); }

 private:
  enum class Op { none, requesting, converting, giving_up };

  struct Entry {
    LockId id;
    ResourceName resource;
    Mode mode = Mode::null;  // as granted; NL until the first grant
    Range range{0, 0};       // as granted
    Op op = Op::none;
    Mode target = Mode::null;  // what the request or conversion in flight asks for
    Range target_range{0, 0};
    std::size_t users = 0;
    std::vector<Acquisition> joined;    // wait for the request or conversion in flight
    std::vector<Acquisition> deferred;  // wait for another node's turn with the lock to end
    unsigned wanted = 0;                // modes other nodes asked for, one bit each
    std::uint64_t granted_ms = 0;       // the last grant or conversion
    cluster::EventLoop::TimerId hold_timer = 0;
    bool idle = false;
    std::list<LockId>::iterator idle_at;  // in idle_, while idle
    bool lost = false;                    // gone with the view; dropped once unused
  };

  static bool serves(const Entry& entry, const Acquisition& acquisition) {
    return covers(entry.range, acquisition.range) && satisfies(entry.mode, acquisition.mode);
  }

  CachedLock use(Entry& entry) {
    set_idle(entry, false);
    entry.users++;
    return CachedLock{entry.id, entry.mode, entry.range};
  }

  void set_idle(Entry& entry, bool idle) {
    if (entry.idle == idle) return;
    entry.idle = idle;
    if (idle) {
      entry.idle_at = idle_.insert(idle_.end(), entry.id);
    } else {
      idle_.erase(entry.idle_at);
    }
  }

  void request(Acquisition acquisition) {
    stats_.misses++;
    LockSpec spec;
    spec.resource = acquisition.resource;
    spec.mode = acquisition.mode;
    spec.range = acquisition.range;
    spec.expandable = true;
    spec.holder = options_.holder;
    Entry entry;
    entry.resource = acquisition.resource;
    entry.op = Op::requesting;
    entry.target = acquisition.mode;
    entry.target_range = acquisition.range;
    entry.joined.push_back(std::move(acquisition));
    // The lock manager answers a request later, never from inside lock().
    const auto id = std::make_shared<LockId>();
    *id = manager_.lock(
        spec,
        [weak = weak_from_this(), id](const LockResult& result) {
          if (auto self = weak.lock()) self->answered(*id, result);
        },
        [weak = weak_from_this()](LockId holder, Mode wanted, Range) {
          if (auto self = weak.lock()) self->wanted(holder, wanted);
        },
        [weak = weak_from_this()](LockId lost) {
          if (auto self = weak.lock()) self->lost(lost);
        });
    entry.id = *id;
    by_resource_.emplace(entry.resource, *id);
    entries_.emplace(*id, std::move(entry));
  }

  void upgrade(Entry& entry, Acquisition acquisition) {
    stats_.upgrades++;
    set_idle(entry, false);
    const Mode mode = join(entry.mode, acquisition.mode);
    entry.joined.push_back(std::move(acquisition));
    convert(entry, mode);
  }

  // Converts the lock, up or down; `answered` follows.
  void convert(Entry& entry, Mode mode) {
    entry.op = Op::converting;
    entry.target = mode;
    entry.target_range = entry.range;
    // Down, the lock protects only `mode` from the moment it asks.
    if (conversion(entry.mode, mode) == Conversion::down) entry.mode = mode;
    ConvertSpec spec;
    spec.mode = mode;
    const LockId id = entry.id;
    const Status converting =
        manager_.convert(id, spec, [weak = weak_from_this(), id](const LockResult& result) {
          if (auto self = weak.lock()) self->answered(id, result);
        });
    if (!converting.ok()) finished(id, converting);
  }

  // The end of a request or conversion.
  void answered(LockId id, const LockResult& result) {
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    Entry& entry = it->second;
    if (entry.op != Op::requesting && entry.op != Op::converting) return;
    if (!result.granted()) {
      // A refused conversion leaves the lock in the mode it still has.
      if (entry.op == Op::converting) entry.mode = result.lock.mode;
      return finished(id, error(Errc::unavailable,
                                result.refused == Refusal::deadlock
                                    ? "a conversion was refused to break a deadlock; try again"
                                    : "the lock manager refused the lock"));
    }
    entry.mode = result.lock.mode;
    entry.range = result.lock.range;
    entry.granted_ms = loop_.now_ms();
    finished(id, {});
  }

  // A request or conversion ended (`outcome` not ok: it failed, and those who joined it learn
  // why). Those who joined it use the lock, whoever else wants it by now; those deferred ask
  // again once nobody else wants the lock; then the lock idles, or goes if another node wants
  // it.
  void finished(LockId id, const Status& outcome) {
    Entry& entry = entries_.at(id);
    const bool holds = outcome.ok() || entry.op == Op::converting;
    entry.op = Op::none;
    std::vector<std::pair<Acquired, Result<CachedLock>>> answers;
    std::vector<Acquisition> again;
    for (Acquisition& acquisition : entry.joined) {
      if (holds && serves(entry, acquisition)) {
        answers.emplace_back(std::move(acquisition.done), use(entry));
      } else if (!outcome.ok()) {
        answers.emplace_back(std::move(acquisition.done), outcome);
      } else {
        again.push_back(std::move(acquisition));
      }
    }
    entry.joined.clear();
    if (!holds || entry.wanted == 0) {
      for (Acquisition& acquisition : entry.deferred) again.push_back(std::move(acquisition));
      entry.deferred.clear();
    }
    if (holds) {
      settle(id);
    } else {
      forget(id);
    }
    for (auto& [done, result] : answers) done(std::move(result));
    for (Acquisition& acquisition : again) acquire(std::move(acquisition));
  }

  // The lock's users are done, or its operation ended: it goes if another node wants it, else
  // it idles, and the idle locks stay within their bound.
  void settle(LockId id) {
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    Entry& entry = it->second;
    if (entry.users > 0 || entry.op != Op::none) return;
    if (entry.wanted != 0) return give_up_when_due(id);
    set_idle(entry, true);
    while (idle_.size() > options_.max_idle) {
      const LockId oldest = idle_.front();
      stats_.evictions++;
      give_up(oldest, Mode::null);
    }
  }

  // A blocking callback: another node wants the lock in `mode`.
  void wanted(LockId id, Mode mode) {
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    it->second.wanted |= 1u << static_cast<unsigned>(mode);
    give_up_when_due(id);
  }

  void give_up_when_due(LockId id) {
    Entry& entry = entries_.at(id);
    if (entry.users > 0 || entry.op != Op::none || entry.hold_timer != 0) return;
    const std::uint64_t due =
        entry.granted_ms + static_cast<std::uint64_t>(options_.min_hold.count());
    const std::uint64_t now = loop_.now_ms();
    if (now < due) {
      entry.hold_timer =
          loop_.schedule(std::chrono::milliseconds(due - now), [weak = weak_from_this(), id] {
            auto self = weak.lock();
            if (!self) return;
            auto it = self->entries_.find(id);
            if (it == self->entries_.end()) return;
            it->second.hold_timer = 0;
            self->give_up_when_due(id);
          });
      return;
    }
    const Mode kept = weakened(entry.mode, entry.wanted);
    if (kept == entry.mode) {
      // Nothing it holds is in the way any more.
      entry.wanted = 0;
      std::vector<Acquisition> deferred = std::move(entry.deferred);
      entry.deferred.clear();
      settle(id);
      for (Acquisition& acquisition : deferred) acquire(std::move(acquisition));
      return;
    }
    stats_.revocations++;
    give_up(id, kept);
  }

  // Weakens the unused lock to `kept`, or gives it up at Mode::null, once its user dropped
  // what the lock protected.
  void give_up(LockId id, Mode kept) {
    Entry& entry = entries_.at(id);
    set_idle(entry, false);
    entry.op = Op::giving_up;
    const ResourceName resource = entry.resource;
    const Range range = entry.range;
    revoke_(resource, range, kept, [weak = weak_from_this(), id, kept] {
      if (auto self = weak.lock()) self->dropped(id, kept);
    });
  }

  void dropped(LockId id, Mode kept) {
    auto it = entries_.find(id);
    // A lock lost meanwhile is dropped on its own (lost()).
    if (it == entries_.end() || it->second.lost) return;
    Entry& entry = it->second;
    // Modes wanted while the lock was being given up that `kept` still conflicts with.
    unsigned still_wanted = 0;
    for (std::size_t w = 0; w < kModeCount; ++w) {
      const unsigned bit = 1u << w;
      if ((entry.wanted & bit) != 0 && !compatible(kept, static_cast<Mode>(w))) still_wanted |= bit;
    }
    entry.wanted = still_wanted;
    if (kept != Mode::null) return convert(entry, kept);
    std::vector<Acquisition> deferred = std::move(entry.deferred);
    (void)manager_.release(id);
    forget(id);
    for (Acquisition& acquisition : deferred) acquire(std::move(acquisition));
  }

  // This node left the group view, which fenced it: the lock is gone. Its user drops what the
  // lock protected at once, and those who joined its request or conversion learn why. Calls
  // still using it go on, and may put back what it protected (a read under way fills the
  // cache): once the last of them is done, its user drops that too, and only then do those
  // deferred, and those who come meanwhile, ask anew.
  void lost(LockId id) {
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    stats_.lost++;
    Entry& entry = it->second;
    std::vector<Acquisition> joined = std::move(entry.joined);
    entry.joined.clear();
    if (entry.hold_timer != 0) loop_.cancel(entry.hold_timer);
    entry.hold_timer = 0;
    set_idle(entry, false);
    entry.lost = true;
    entry.op = Op::giving_up;
    entry.mode = Mode::null;
    if (entry.users == 0) {
      drop_lost(id);
    } else {
      revoke_(entry.resource, entry.range, Mode::null, [] {});
    }
    for (Acquisition& acquisition : joined) {
      acquisition.done(
          error(Errc::unavailable, "the lock was lost: this node left the group view"));
    }
  }

  void drop_lost(LockId id) {
    const ResourceName resource = entries_.at(id).resource;
    const Range range = entries_.at(id).range;
    revoke_(resource, range, Mode::null, [weak = weak_from_this(), id] {
      auto self = weak.lock();
      if (!self) return;
      auto it = self->entries_.find(id);
      if (it == self->entries_.end()) return;
      std::vector<Acquisition> deferred = std::move(it->second.deferred);
      self->forget(id);
      for (Acquisition& acquisition : deferred) self->acquire(std::move(acquisition));
    });
  }

  void forget(LockId id) {
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    Entry& entry = it->second;
    if (entry.hold_timer != 0) loop_.cancel(entry.hold_timer);
    if (entry.idle) idle_.erase(entry.idle_at);
    for (auto [r, end] = by_resource_.equal_range(entry.resource); r != end; ++r) {
      if (r->second == id) {
        by_resource_.erase(r);
        break;
      }
    }
    entries_.erase(it);
  }

  cluster::EventLoop& loop_;
  LockManager& manager_;
  const LockCacheOptions options_;
  const Revoke revoke_;
  std::map<LockId, Entry> entries_;
  std::multimap<ResourceName, LockId> by_resource_;
  std::list<LockId> idle_;  // least recently used first
  LockCacheStatistics stats_;
};

LockCache::LockCache(cluster::EventLoop& loop, LockManager& manager, LockCacheOptions options,
                     Revoke revoke)
    : impl_(std::make_shared<Impl>(loop, manager, std::move(options), std::move(revoke))) {}

LockCache::~LockCache() { impl_->close(); }

void LockCache::acquire(const ResourceName& resource, Mode mode, Range range, Acquired done) {
  impl_->acquire(Impl::Acquisition{resource, mode, range, std::move(done)});
}

void LockCache::release(LockId id) { impl_->release(id); }

LockCacheStatistics LockCache::statistics() const { return impl_->statistics(); }

std::size_t LockCache::idle() const { return impl_->idle(); }

}  // namespace tidepool::lockmgr
