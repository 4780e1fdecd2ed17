// The NLM personality: NFS clients' byte-range locks on files, with POSIX semantics per owner,
// kept as the owner's locks on the file's advisory resource in the lock manager — so a client
// locking through one node conflicts with a client locking through any other.
//
// POSIX semantics: after a lock, the owner holds exactly the new mode on its range, whatever it
// held there before (a shared lock over an exclusive one downgrades it); an unlock of part of a
// lock leaves the rest locked. The owner's lock manager locks stay disjoint: a lock or an unlock
// that cuts into an older one replaces it by the pieces outside the new range (granted at once:
// they ask for no more than the owner already holds), then releases it.
//
// Thread-safe: every member may be called from any thread; the work runs on the lock manager's
// loop, and so do the callbacks.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cluster/event_loop.h"
#include "common/status.h"
#include "lockmgr/lock.h"
#include "lockmgr/lock_manager.h"

namespace tidepool::lockmgr {

struct AdvisoryLock {
  std::uint64_t file = 0;  // the inode
  LockOwner owner;         // the client's process
  std::string client;      // the client's name, as free_client() names it
  std::string holder;      // who it is for, in listings
  Range range = kWholeResource;
  bool exclusive = false;
};

// A share reservation (NLM SHARE, as DOS and Windows clients open files): what the opener will
// do with the file, and what it denies everybody else. One per file and owner; a new one
// replaces the last.
struct ShareReservation {
  std::uint64_t file = 0;
  LockOwner owner;
  std::string client;
  std::string holder;
  bool read = false;  // access
  bool write = false;
  bool deny_read = false;
  bool deny_write = false;
};

// One client's share of the advisory locks taken through this node.
struct AdvisoryClient {
  std::string client;
  std::size_t locks = 0;    // granted ranges
  std::size_t waiting = 0;  // blocked requests
  std::size_t shares = 0;   // share reservations
};

// Another owner's lock that TEST found in the way.
struct AdvisoryConflict {
  LockOwner owner;
  Range range;
  bool exclusive = false;
};

enum class AdvisoryOutcome {
  granted,
  denied,   // another owner holds a conflicting lock, and the caller would not wait
  blocked,  // queued: `granted_later` runs once it is granted
  // This node left the group view (it was fenced): nothing is granted through it for now.
  unavailable,
};

class AdvisoryLocks {
 public:
  // `manager` lives on `loop` and outlives this object. `lost` runs on the loop after locks or
  // reservations held through this node were lost — the node left the group view (it was
  // fenced) and the clients no longer hold what they held — once for all that one view took
  // (losses of views applied together may be reported once).
  static std::shared_ptr<AdvisoryLocks> make(cluster::EventLoop& loop, LockManager& manager,
                                             std::function<void()> lost = {});
  virtual ~AdvisoryLocks() = default;

  // Takes `lock`. Without `wait`: granted or denied. With it: granted, or blocked and then
  // `granted_later` once it is granted — unless the request is cancelled, or the client freed,
  // first. A request like one already blocked (same owner, range and mode) is that request.
  virtual void lock(const AdvisoryLock& lock, bool wait, std::function<void(AdvisoryOutcome)> done,
                    std::function<void()> granted_later) = 0;
  // Another owner's lock that conflicts with `lock`, if one does; unavailable when this node left
  // the group view meanwhile. Asking leaves nothing behind by the time `done` runs: the next
  // request of any owner finds the locks as they were.
  virtual void test(const AdvisoryLock& lock,
                    std::function<void(Result<std::optional<AdvisoryConflict>>)> done) = 0;
  // Gives up the owner's locks on the range (the mode does not matter); `done` runs once their
  // coordinators let them go, so a conflicting request is granted or about to be.
  virtual void unlock(const AdvisoryLock& lock, std::function<void()> done) = 0;
  // Withdraws the owner's blocked request for that range and mode; whether there was one.
  virtual void cancel(const AdvisoryLock& lock, std::function<void(bool cancelled)> done) = 0;
  // Takes `share` unless another owner's reservation conflicts with it (its access is denied by
  // the other's, or it denies what the other accesses): whether it was granted. Never waits.
  virtual void share(const ShareReservation& share, std::function<void(bool granted)> done) = 0;
  // Gives up the owner's reservation on the file, if it has one.
  virtual void unshare(const ShareReservation& share, std::function<void()> done) = 0;
  // Gives up every lock, reservation and blocked request of `client` (a client that rebooted, or
  // asked).
  virtual void free_client(const std::string& client, std::function<void()> done) = 0;
  // Every client with locks or blocked requests through this node, by name.
  virtual void clients(std::function<void(std::vector<AdvisoryClient>)> done) = 0;
  // Called on the loop before the lock manager and the loop go: work still to come is dropped,
  // and its callbacks never run; calls made afterwards, from any thread, do nothing.
  virtual void close() = 0;
};

}  // namespace tidepool::lockmgr
