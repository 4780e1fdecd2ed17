#include "lockmgr/advisory_locks.h"

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

namespace tidepool::lockmgr {
namespace {

Mode mode_of(bool exclusive) { return exclusive ? Mode::exclusive : Mode::protected_read; }

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
  AdvisoryLocksImpl(cluster::EventLoop& loop, LockManager& manager)
      : loop_(loop), manager_(manager) {}

  void lock(const AdvisoryLock& lock, bool wait, std::function<void(AdvisoryOutcome)> done,
            std::function<void()> granted_later) override {
    on_loop([lock, wait, done = std::move(done),
             later = std::move(granted_later)](AdvisoryLocksImpl& self) mutable {
      self.take(lock, wait, std::move(done), std::move(later));
    });
  }

  void test(const AdvisoryLock& lock, std::function<void(bool)> done) override {
    on_loop([lock, done = std::move(done)](AdvisoryLocksImpl& self) mutable {
      auto weak = self.weak_from_this();
      const auto id = std::make_shared<LockId>();
      *id = self.manager_.lock(self.spec_of(lock, lock.range, lock.exclusive, true),
                               [weak, id, done = std::move(done)](const LockResult& result) {
                                 auto alive = weak.lock();
                                 if (!alive) return;
                                 if (result.granted()) (void)alive->manager_.release(*id);
                                 done(!result.granted());
                               });
    });
  }

  void unlock(const AdvisoryLock& lock, std::function<void()> done) override {
    on_loop([lock, done = std::move(done)](AdvisoryLocksImpl& self) {
      self.cut(Key{lock.file, lock.owner}, lock.range);
      done();
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

  void close() override { closed_ = true; }

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
  };
  using Owners = std::map<Key, Owned>;

  template <typename Work>
  void on_loop(Work work) {
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
    *id = manager_.lock(spec_of(lock, lock.range, lock.exclusive, true),
                        [weak = weak_from_this(), id, key, lock, wait, done = std::move(done),
                         later = std::move(granted_later)](const LockResult& result) mutable {
                          auto self = weak.lock();
                          if (!self) return;
                          if (result.granted()) {
                            self->adopt(key, Held{*id, lock.range, lock.exclusive});
                            return done(AdvisoryOutcome::granted);
                          }
                          if (!wait) {
                            self->forget_if_empty(self->owners_.find(key));
                            return done(AdvisoryOutcome::denied);
                          }
                          self->queue(key, lock, std::move(later));
                          done(AdvisoryOutcome::blocked);
                        });
  }

  void queue(const Key& key, const AdvisoryLock& lock, std::function<void()> granted_later) {
    const auto id = std::make_shared<LockId>();
    *id = manager_.lock(spec_of(lock, lock.range, lock.exclusive, false),
                        [weak = weak_from_this(), id, key](const LockResult& result) {
                          if (auto self = weak.lock()) self->waited(key, *id, result);
                        });
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
  // the range, and released once they are granted.
  void cut(const Key& key, Range range) {
    auto owned = owners_.find(key);
    if (owned == owners_.end()) return;
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
      const std::vector<Range> pieces = outside(old.range, range);
      if (pieces.empty()) {
        (void)manager_.release(old.id);
        continue;
      }
      const auto outstanding = std::make_shared<std::size_t>(pieces.size());
      for (const Range& piece : pieces) {
        const LockId id =
            manager_.lock(spec_of(piece_of, piece, old.exclusive, false),
                          [weak = weak_from_this(), outstanding, old](const LockResult&) {
                            auto self = weak.lock();
                            if (self && --*outstanding == 0) {
                              (void)self->manager_.release(old.id);
                            }
                          });
        owned->second.held.push_back(Held{id, piece, old.exclusive});
      }
    }
    forget_if_empty(owned);
  }

  void forget_if_empty(Owners::iterator owned) {
    if (owned != owners_.end() && owned->second.held.empty() && owned->second.waiters.empty()) {
      owners_.erase(owned);
    }
  }

  cluster::EventLoop& loop_;
  LockManager& manager_;
  Owners owners_;
  bool closed_ = false;
};

}  // namespace

std::shared_ptr<AdvisoryLocks> AdvisoryLocks::make(cluster::EventLoop& loop, LockManager& manager) {
  return std::make_shared<AdvisoryLocksImpl>(loop, manager);
}

}  // namespace tidepool::lockmgr
