// The locks of a namespace whose operations all run in one process (store/namespace.h): keys
// granted all at once; waiters served in turn as keys come free, none before an earlier waiter
// for one of its keys.
#include <algorithm>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <set>

#include "store/namespace.h"

namespace tidepool::store {
namespace {

namespace asio = boost::asio;

class ProcessLocks final : public NamespaceLocks,
                           public std::enable_shared_from_this<ProcessLocks> {
 public:
  awaitable<Result<std::shared_ptr<void>>> lock(std::vector<InodeId> keys, LockMode mode) override {
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    auto self = shared_from_this();
    auto granted = asio::async_initiate<const asio::use_awaitable_t<>&, void()>(
        [this, &keys, mode](auto handler) {
          auto waiting = std::make_shared<decltype(handler)>(std::move(handler));
          auto grant = [waiting] {
            auto executor = asio::get_associated_executor(*waiting);
            asio::post(executor, std::move(*waiting));
          };
          std::unique_lock lock(mutex_);
          if (!waited_for(keys) && grantable(keys, mode)) {
            take(keys, mode);
            lock.unlock();
            grant();
            return;
          }
          waiting_.push_back({keys, mode, std::move(grant)});
        },
        asio::use_awaitable);
    co_await std::move(granted);
    co_return std::shared_ptr<void>(nullptr,
                                    [self, keys, mode](void*) { self->unlock(keys, mode); });
  }

 private:
  struct Waiter {
    std::vector<InodeId> keys;
    LockMode mode;
    std::function<void()> grant;
  };
  struct Holders {
    std::size_t shared = 0;
    bool exclusive = false;
  };

  bool grantable(const std::vector<InodeId>& keys, LockMode mode) const {
    return std::all_of(keys.begin(), keys.end(), [&](InodeId key) {
      auto held = held_.find(key);
      if (held == held_.end()) return true;
      return mode == LockMode::shared && !held->second.exclusive;
    });
  }

  bool waited_for(const std::vector<InodeId>& keys) const {
    for (const Waiter& waiter : waiting_) {
      for (InodeId key : waiter.keys) {
        if (std::binary_search(keys.begin(), keys.end(), key)) return true;
      }
    }
    return false;
  }

  void take(const std::vector<InodeId>& keys, LockMode mode) {
    for (InodeId key : keys) {
      Holders& holders = held_[key];
      if (mode == LockMode::shared) {
        ++holders.shared;
      } else {
        holders.exclusive = true;
      }
    }
  }

  void unlock(const std::vector<InodeId>& keys, LockMode mode) {
    std::vector<std::function<void()>> grants;
    {
      std::unique_lock lock(mutex_);
      for (InodeId key : keys) {
        auto held = held_.find(key);
        if (mode == LockMode::shared) {
          --held->second.shared;
        } else {
          held->second.exclusive = false;
        }
        if (held->second.shared == 0 && !held->second.exclusive) held_.erase(held);
      }
      // The keys of the waiters passed over so far: a later waiter for one of them waits on.
      std::set<InodeId> passed_over;
      for (auto waiter = waiting_.begin(); waiter != waiting_.end();) {
        const bool behind = std::any_of(waiter->keys.begin(), waiter->keys.end(),
                                        [&](InodeId key) { return passed_over.contains(key); });
        if (behind || !grantable(waiter->keys, waiter->mode)) {
          passed_over.insert(waiter->keys.begin(), waiter->keys.end());
          ++waiter;
          continue;
        }
        take(waiter->keys, waiter->mode);
        grants.push_back(std::move(waiter->grant));
        waiter = waiting_.erase(waiter);
      }
    }
    for (auto& grant : grants) grant();
  }

  std::mutex mutex_;
  std::map<InodeId, Holders> held_;
  std::list<Waiter> waiting_;
};

}  // namespace

std::shared_ptr<NamespaceLocks> make_process_locks() { return std::make_shared<ProcessLocks>(); }

}  // namespace tidepool::store
