#include "lockmgr/advisory_locks.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

namespace tidepool::lockmgr {
namespace {

Mode mode_of(bool exclusive) { return exclusive ? Mode::exclusive : Mode::protected_read; }

// A share reservation is two locks on the file's share resource: one on the read aspect, one on
// the write aspect. On each, access is CW and denial PR (two accesses or two denials are
// compatible, an access and a denial are not), both are PW, neither is no lock at all.
constexpr Range kReadAspect{0, 1};
constexpr Range kWriteAspect{1, 2};
std::optional<Mode> aspect_mode(bool access, bool deny) {
  if (access && deny) return Mode::protected_write;
  if (access) return Mode::concurrent_write;
  if (deny) return Mode::protected_read;
  return std::nullopt;
}

// A try refused as cancelled: this node left the group view while it was on its way.
bool fenced(const LockResult& result) { return result.refused == Refusal::cancelled; }

Status out_of_the_view() {
  return error(Errc::unavailable, "this node is out of the cluster's view for now");
}

// What stood in the way of a probe for `lock`: the lock the coordinator named or, when it named
// none, one of an unknown owner over the range asked about that conflicts with any mode.
AdvisoryConflict conflict_of(const AdvisoryLock& lock, const LockResult& refused) {
  if (!refused.in_the_way) return AdvisoryConflict{{}, lock.range, true};
  return AdvisoryConflict{refused.in_the_way->owner, refused.in_the_way->range,
                          refused.in_the_way->mode == Mode::exclusive};
}

// The parts of `range` outside `cut`: none, one or two.
std::vector<Range> outside(Range range, Range cut) {
  std::vector<Range> pieces;
  if (range.start < cut.start) pieces.push_back({range.start, std::min(range.end, cut.start)});
  if (cut.end < range.end) pieces.push_back({std::max(range.start, cut.end), range.end});
  return pieces;
}

class AdvisoryLocksImpl final : public AdvisoryLocks,
                                public std::enable_shared_from_this<AdvisoryLocksImpl> {
 public:
  AdvisoryLocksImpl(cluster::EventLoop& loop, LockManager& manager, std::function<void()> lost)
      : loop_(loop), manager_(manager), lost_(std::move(lost)) {}

  void lock(const AdvisoryLock& lock, bool wait, std::function<void(AdvisoryOutcome)> done,
            std::function<void()> granted_later) override {
    on_loop([lock, wait, done = std::move(done),
             later = std::move(granted_later)](AdvisoryLocksImpl& self) mutable {
      self.take(lock, wait, std::move(done), std::move(later));
    });
  }

  void test(const AdvisoryLock& lock,
            std::function<void(Result<std::optional<AdvisoryConflict>>)> done) override {
    on_loop([lock, done = std::move(done)](AdvisoryLocksImpl& self) mutable {
      auto weak = self.weak_from_this();
      const auto id = std::make_shared<LockId>();
      *id = self.manager_.lock(self.spec_of(lock, lock.range, lock.exclusive, true),
                               [weak, id, lock, done = std::move(done)](const LockResult& result) {
                                 auto alive = weak.lock();
                                 if (!alive) return;
                                 if (fenced(result)) return done(out_of_the_view());
                                 if (!result.granted()) {
                                   return done(std::optional(conflict_of(lock, result)));
                                 }
                                 // The probe is answered once it is gone, so that it never
                                 // stands in the way of a request the caller makes next.
                                 auto no_conflict = [done] {
                                   done(std::optional<AdvisoryConflict>());
                                 };
                                 if (!alive->manager_.release(*id, std::nullopt, no_conflict)
                                          .ok()) {
                                   no_conflict();
                                 }
                               });
    });
  }

  void unlock(const AdvisoryLock& lock, std::function<void()> done) override {
    on_loop([lock, done = std::move(done)](AdvisoryLocksImpl& self) mutable {
      const Key key{lock.file, lock.owner};
      self.cut(key, lock.range, std::move(done));
      self.forget_if_empty(self.owners_.find(key));
    });
  }

  void cancel(const AdvisoryLock& lock, std::function<void(bool)> done) override {
    on_loop([lock, done = std::move(done)](AdvisoryLocksImpl& self) {
      auto owned = self.owners_.find(Key{lock.file, lock.owner});
      if (owned == self.owners_.end()) return done(false);
      auto& waiters = owned->second.waiters;
      auto waiter = std::find_if(waiters.begin(), waiters.end(), [&](const Waiter& w) {
        return w.range == lock.range && w.exclusive == lock.exclusive;
      });
      if (waiter == waiters.end()) return done(false);
      const LockId id = waiter->id;
      waiters.erase(waiter);
      (void)self.manager_.release(id);
      self.forget_if_empty(owned);
      done(true);
    });
  }

  void share(const ShareReservation& share, std::function<void(bool)> done) override {
    on_loop([share, done = std::move(done)](AdvisoryLocksImpl& self) mutable {
      self.reserve(share, std::move(done));
    });
  }

  void unshare(const ShareReservation& share, std::function<void()> done) override {
    on_loop([share, done = std::move(done)](AdvisoryLocksImpl& self) {
      auto owned = self.owners_.find(Key{share.file, share.owner});
      if (owned != self.owners_.end()) {
        for (const LockId& id : owned->second.shares) (void)self.manager_.release(id);
        owned->second.shares.clear();
        self.forget_if_empty(owned);
      }
      done();
    });
  }

  void clients(std::function<void(std::vector<AdvisoryClient>)> done) override {
    on_loop([done = std::move(done)](AdvisoryLocksImpl& self) {
      std::map<std::string, AdvisoryClient> by_name;
      for (const auto& [key, owned] : self.owners_) {
        AdvisoryClient& client = by_name[owned.client];
        client.client = owned.client;
        client.locks += owned.held.size();
        client.waiting += owned.waiters.size();
        client.shares += owned.shares.empty() ? 0 : 1;
      }
      std::vector<AdvisoryClient> clients;
      for (auto& [name, client] : by_name) clients.push_back(std::move(client));
      done(std::move(clients));
    });
  }

  void close() override {
    std::lock_guard guard(closing_);
    closed_ = true;
  }

  void free_client(const std::string& client, std::function<void()> done) override {
    on_loop([client, done = std::move(done)](AdvisoryLocksImpl& self) {
      // Out of the table first: releasing a waiting request runs its completion.
      std::vector<Owned> freed;
      for (auto it = self.owners_.begin(); it != self.owners_.end();) {
        if (it->second.client == client) {
          freed.push_back(std::move(it->second));
          it = self.owners_.erase(it);
        } else {
          ++it;
        }
      }
      for (const Owned& owned : freed) {
        for (const Held& held : owned.held) (void)self.manager_.release(held.id);
        for (const Waiter& waiter : owned.waiters) (void)self.manager_.release(waiter.id);
        for (const LockId& share : owned.shares) (void)self.manager_.release(share);
      }
      done();
    });
  }

 private:
  struct Key {
    std::uint64_t file = 0;
    LockOwner owner;
    auto operator<=>(const Key&) const = default;
  };
  struct Held {
    LockId id;
    Range range;
    bool exclusive = false;
  };
  struct Waiter {
    LockId id;
    Range range;
    bool exclusive = false;
    std::function<void()> granted_later;
  };
  struct Owned {
    std::string client;
    std::string holder;
    std::vector<Held> held;  // disjoint
    std::vector<Waiter> waiters;
    std::vector<LockId> shares;  // the reservation's locks: none, one or two aspects
  };
  using Owners = std::map<Key, Owned>;

  template <typename Work>
  void on_loop(Work work) {
    std::lock_guard guard(closing_);
    if (closed_) return;
    loop_.post([weak = weak_from_this(), work = std::move(work)]() mutable {
      auto self = weak.lock();
      if (self && !self->closed_) work(*self);
    });
  }

  LockSpec spec_of(const AdvisoryLock& lock, Range range, bool exclusive, bool try_only) const {
    LockSpec spec;
    spec.resource = {ResourceKind::advisory, lock.file};
    spec.mode = mode_of(exclusive);
    spec.range = range;
    spec.try_only = try_only;
    spec.owner = lock.owner;
    spec.holder = lock.holder;
    return spec;
  }

  // Whether the owner holds `range` in exactly that mode already.
  static bool covered(const Owned& owned, Range range, bool exclusive) {
    std::vector<Range> same;
    for (const Held& held : owned.held) {
      if (held.exclusive == exclusive && held.range.overlaps(range)) same.push_back(held.range);
    }
    std::sort(same.begin(), same.end());
    std::uint64_t reached = range.start;
    for (const Range& r : same) {
      if (r.start > reached) return false;
      reached = std::max(reached, r.end);
      if (reached >= range.end) return true;
    }
    return false;
  }

  void take(const AdvisoryLock& lock, bool wait, std::function<void(AdvisoryOutcome)> done,
            std::function<void()> granted_later) {
    const Key key{lock.file, lock.owner};
    Owned& owned = owners_[key];
    owned.client = lock.client;
    owned.holder = lock.holder;
    for (Waiter& waiter : owned.waiters) {
      if (waiter.range == lock.range && waiter.exclusive == lock.exclusive) {
        waiter.granted_later = std::move(granted_later);
        return done(AdvisoryOutcome::blocked);
      }
    }
    if (covered(owned, lock.range, lock.exclusive)) return done(AdvisoryOutcome::granted);
    // A try first: a blocked request must be answered at once, and the lock manager only
    // tells when a request ends.
    const auto id = std::make_shared<LockId>();
    *id = manager_.lock(
        spec_of(lock, lock.range, lock.exclusive, true),
        [weak = weak_from_this(), id, key, lock, wait, done = std::move(done),
         later = std::move(granted_later)](const LockResult& result) mutable {
          auto self = weak.lock();
          if (!self) return;
          if (result.granted()) {
            self->adopt(key, Held{*id, lock.range, lock.exclusive});
            return done(AdvisoryOutcome::granted);
          }
          if (fenced(result)) {
            self->forget_if_empty(self->owners_.find(key));
            return done(AdvisoryOutcome::unavailable);
          }
          if (!wait) {
            self->forget_if_empty(self->owners_.find(key));
            return done(AdvisoryOutcome::denied);
          }
          self->queue(key, lock, std::move(later));
          done(AdvisoryOutcome::blocked);
        },
        {}, lost_for(key));
  }

  void queue(const Key& key, const AdvisoryLock& lock, std::function<void()> granted_later) {
    const auto id = std::make_shared<LockId>();
    *id = manager_.lock(
        spec_of(lock, lock.range, lock.exclusive, false),
        [weak = weak_from_this(), id, key](const LockResult& result) {
          if (auto self = weak.lock()) self->waited(key, *id, result);
        },
        {}, lost_for(key));
    owners_[key].waiters.push_back(
        Waiter{*id, lock.range, lock.exclusive, std::move(granted_later)});
  }

  void waited(const Key& key, LockId id, const LockResult& result) {
    auto owned = owners_.find(key);
    std::optional<Waiter> waited;
    if (owned != owners_.end()) {
      auto& waiters = owned->second.waiters;
      auto waiter = std::find_if(waiters.begin(), waiters.end(),
                                 [id](const Waiter& w) { return w.id == id; });
      if (waiter != waiters.end()) {
        waited = std::move(*waiter);
        waiters.erase(waiter);
      }
    }
    if (!waited) {
      // Cancelled or freed while the grant was on its way.
      if (result.granted()) (void)manager_.release(id);
      return;
    }
    if (!result.granted()) return forget_if_empty(owned);
    adopt(key, Held{id, waited->range, waited->exclusive});
    if (waited->granted_later) waited->granted_later();
  }

  // A new lock of the owner: what it held on the range gives way to it.
  void adopt(const Key& key, const Held& fresh) {
    cut(key, fresh.range);
    owners_[key].held.push_back(fresh);
  }

  // Takes `range` out of the owner's locks: each lock cut into is replaced by its pieces outside
  // the range, and released once they are granted. Keeps the owner's entry, even empty. `released`
  // runs once no coordinator has any of the old locks, so that a conflicting request is no longer
  // held back by them.
  void cut(const Key& key, Range range, std::function<void()> released = {}) {
    // One count for each old lock, and one for the cut itself, given back when it has begun them
    // all.
    auto outstanding_releases = std::make_shared<std::size_t>(1);
    auto one_released = [outstanding_releases, released = std::move(released)] {
      if (--*outstanding_releases == 0 && released) released();
    };
    auto release = [this, one_released](LockId id) {
      if (!manager_.release(id, std::nullopt, one_released).ok()) one_released();
    };
    auto owned = owners_.find(key);
    if (owned == owners_.end()) return one_released();
    std::vector<Held> kept;
    std::vector<Held> retired;
    for (const Held& held : owned->second.held) {
      (held.range.overlaps(range) ? retired : kept).push_back(held);
    }
    owned->second.held = std::move(kept);
    AdvisoryLock piece_of;
    piece_of.file = key.file;
    piece_of.owner = key.owner;
    piece_of.holder = owned->second.holder;
    for (const Held& old : retired) {
      ++*outstanding_releases;
      const std::vector<Range> pieces = outside(old.range, range);
      if (pieces.empty()) {
        release(old.id);
        continue;
      }
      const auto outstanding_pieces = std::make_shared<std::size_t>(pieces.size());
      for (const Range& piece : pieces) {
        const LockId id = manager_.lock(
            spec_of(piece_of, piece, old.exclusive, false),
            [weak = weak_from_this(), outstanding_pieces, old, release,
             key](const LockResult& result) {
              auto self = weak.lock();
              if (!self) return;
              // Refused only when this node left the view: every lock of the owner is gone.
              if (!result.granted()) self->forget_lock(key, result.lock.id);
              if (--*outstanding_pieces == 0) release(old.id);
            },
            {}, lost_for(key));
        owned->second.held.push_back(Held{id, piece, old.exclusive});
      }
    }
    one_released();
  }

  // Tries for the reservation's aspects; once every answer is in, adopts them all in place of
  // the owner's old reservation, or gives back those granted.
  void reserve(const ShareReservation& share, std::function<void(bool)> done) {
    struct Attempt {
      std::vector<LockId> granted;
      std::size_t outstanding = 0;
      bool refused = false;
      std::function<void(bool)> done;
    };
    auto attempt = std::make_shared<Attempt>();
    attempt->done = std::move(done);
    const Key key{share.file, share.owner};
    std::vector<std::pair<Range, Mode>> aspects;
    if (auto mode = aspect_mode(share.read, share.deny_read))
      aspects.emplace_back(kReadAspect, *mode);
    if (auto mode = aspect_mode(share.write, share.deny_write)) {
      aspects.emplace_back(kWriteAspect, *mode);
    }
    auto settle = [weak = weak_from_this(), attempt, key, share] {
      auto self = weak.lock();
      if (!self || attempt->outstanding != 0) return;
      if (attempt->refused) {
        for (const LockId& id : attempt->granted) (void)self->manager_.release(id);
        self->forget_if_empty(self->owners_.find(key));
        return attempt->done(false);
      }
      Owned& owned = self->owners_[key];
      owned.client = share.client;
      owned.holder = share.holder;
      for (const LockId& id : owned.shares) (void)self->manager_.release(id);
      owned.shares = attempt->granted;
      self->forget_if_empty(self->owners_.find(key));
      attempt->done(true);
    };
    attempt->outstanding = aspects.size();
    if (aspects.empty()) return settle();
    for (const auto& [range, mode] : aspects) {
      LockSpec spec;
      spec.resource = {ResourceKind::share, share.file};
      spec.mode = mode;
      spec.range = range;
      spec.try_only = true;
      spec.owner = share.owner;
      spec.holder = share.holder;
      manager_.lock(
          spec,
          [attempt, settle](const LockResult& result) {
            if (result.granted()) {
              attempt->granted.push_back(result.lock.id);
            } else {
              attempt->refused = true;
            }
            attempt->outstanding--;
            settle();
          },
          {}, lost_for(key));
    }
  }

  // What the lock manager calls when a lock of the owner is lost: this node left the group view,
  // which fenced it, and the client no longer holds what the lock held.
  LockManager::LostHandler lost_for(const Key& key) {
    return [weak = weak_from_this(), key](LockId id) {
      if (auto self = weak.lock()) self->forget_lock(key, id);
    };
  }

  void forget_lock(const Key& key, LockId id) {
    // The lock manager reports every lost lock of a view at once: one report for them all.
    if (lost_ && !loss_reported_) {
      loss_reported_ = true;
      loop_.post([weak = weak_from_this()] {
        auto self = weak.lock();
        if (!self || self->closed_) return;
        self->loss_reported_ = false;
        self->lost_();
      });
    }
    auto owned = owners_.find(key);
    if (owned == owners_.end()) return;
    std::erase_if(owned->second.held, [id](const Held& held) { return held.id == id; });
    std::erase(owned->second.shares, id);
    forget_if_empty(owned);
  }

  void forget_if_empty(Owners::iterator owned) {
    if (owned != owners_.end() && owned->second.held.empty() && owned->second.waiters.empty() &&
        owned->second.shares.empty()) {
      owners_.erase(owned);
    }
  }

  cluster::EventLoop& loop_;
  LockManager& manager_;
  Owners owners_;
  // Set by close(), before the loop goes: from then on nothing is posted to it, so a caller that
  // still holds this object (an NLM call under way) never reaches a destroyed loop.
  std::mutex closing_;
  std::atomic<bool> closed_{false};
  std::function<void()> lost_;
  bool loss_reported_ = false;  // a report is posted and has not run yet
};

}  // namespace

std::shared_ptr<AdvisoryLocks> AdvisoryLocks::make(cluster::EventLoop& loop, LockManager& manager,
                                                   std::function<void()> lost) {
  return std::make_shared<AdvisoryLocksImpl>(loop, manager, std::move(lost));
}

}  // namespace tidepool::lockmgr
