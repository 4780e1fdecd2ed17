// The locks of a namespace whose operations all run in one process (store/namespace.h): keys
// granted all at once, waiters served in turn as keys come free.
#include <algorithm>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <functional>
#include <list>
#include <mutex>
#include <set>

#include "store/namespace.h"

namespace tidepool::store {
namespace {

namespace asio = boost::asio;

class ProcessLocks final : public NamespaceLocks,
                           public std::enable_shared_from_this<ProcessLocks> {
 public:
  awaitable<Result<std::shared_ptr<void>>> lock(std::vector<InodeId> keys) override {
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    auto self = shared_from_this();
    auto granted = asio::async_initiate<const asio::use_awaitable_t<>&, void()>(
        [this, &keys](auto handler) {
          auto waiting = std::make_shared<decltype(handler)>(std::move(handler));
          auto grant = [waiting] {
            auto executor = asio::get_associated_executor(*waiting);
            asio::post(executor, std::move(*waiting));
          };
          std::unique_lock lock(mutex_);
          if (all_free(keys)) {
            held_.insert(keys.begin(), keys.end());
            lock.unlock();
            grant();
            return;
          }
          waiting_.push_back({keys, std::move(grant)});
        },
        asio::use_awaitable);
    co_await std::move(granted);
    co_return std::shared_ptr<void>(nullptr, [self, keys](void*) { self->unlock(keys); });
  }

 private:
  struct Waiter {
    std::vector<InodeId> keys;
    std::function<void()> grant;
  };

  bool all_free(const std::vector<InodeId>& keys) const {
    return std::none_of(keys.begin(), keys.end(), [this](InodeId k) { return held_.contains(k); });
  }

  void unlock(const std::vector<InodeId>& keys) {
    std::vector<std::function<void()>> grants;
    {
      std::unique_lock lock(mutex_);
      for (InodeId key : keys) held_.erase(key);
      for (auto waiter = waiting_.begin(); waiter != waiting_.end();) {
        if (!all_free(waiter->keys)) {
          ++waiter;
          continue;
        }
        held_.insert(waiter->keys.begin(), waiter->keys.end());
        grants.push_back(std::move(waiter->grant));
        waiter = waiting_.erase(waiter);
      }
    }
    for (auto& grant : grants) grant();
  }

  std::mutex mutex_;
  std::set<InodeId> held_;
  std::list<Waiter> waiting_;
};

}  // namespace

std::shared_ptr<NamespaceLocks> make_process_locks() { return std::make_shared<ProcessLocks>(); }

}  // namespace tidepool::store
