#include "lockmgr/lock_manager.h"

#include <atomic>

#include "lockmgr/internal/coordinator.h"
#include "lockmgr/internal/messages.h"
#include "lockmgr/internal/requester.h"

namespace tidepool::lockmgr {

using internal::LockMessage;

class LockManager::Impl {
 public:
  Impl(cluster::EventLoop& loop, cluster::Transport& transport, const LockManagerOptions& options)
      : loop_(loop),
        transport_(transport),
        self_(options.self),
        coordinator_(
            loop, [this](cluster::NodeId to, const LockMessage& m) { send(to, m); },
            {options.remind, options.max_held_back, options.tombstone_lifetime,
             options.max_tombstones, options.callback_deadline, options.unresponsive,
             options.may_coordinate},
            statistics_),
        requester_(
            loop, [this](cluster::NodeId to, const LockMessage& m) { send(to, m); }, options.self,
            options.first_sequence, {options.retransmit, options.poll}, statistics_) {
    transport_.set_receiver(cluster::Channel::lock,
                            [this](cluster::NodeId from, std::span<const std::uint8_t> bytes) {
                              auto message = internal::decode_lock_message(bytes);
                              if (message) route(from, *message);
                            });
  }

  ~Impl() {
    transport_.set_receiver(cluster::Channel::lock, {});
    *alive_ = false;
  }

  void send(cluster::NodeId to, const LockMessage& message) {
    if (to != self_) {
      transport_.send(to, cluster::Channel::lock, internal::encode_lock_message(message));
      return;
    }
    // To itself the node skips the wire, but still later, as if it had come in: a handler
    // never runs inside another.
    loop_.post([this, alive = alive_, message] {
      if (*alive) route(self_, message);
    });
  }

  void route(cluster::NodeId from, const LockMessage& message) {
    if (internal::to_coordinator(message)) {
      coordinator_.receive(from, message);
    } else {
      requester_.receive(from, message);
    }
  }

  cluster::EventLoop& loop_;
  cluster::Transport& transport_;
  cluster::NodeId self_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  LockStatistics statistics_;
  std::atomic<std::uint64_t> fences_{0};
  internal::Coordinator coordinator_;
  internal::Requester requester_;
};

LockManager::LockManager(cluster::EventLoop& loop, cluster::Transport& transport,
                         LockManagerOptions options)
    : impl_(std::make_unique<Impl>(loop, transport, options)) {}

LockManager::~LockManager() = default;

void LockManager::set_view(cluster::Epoch epoch, const std::vector<cluster::NodeId>& up_nodes) {
  // The coordinator first: the node's own report to itself must find it in the new epoch.
  impl_->coordinator_.set_view(epoch, up_nodes);
  const std::uint64_t fenced = impl_->statistics_.fenced;
  impl_->requester_.set_view(epoch, up_nodes);
  if (impl_->statistics_.fenced != fenced) impl_->fences_++;
}

std::uint64_t LockManager::fences() const { return impl_->fences_.load(); }

LockId LockManager::lock(const LockSpec& spec, Completion done, BlockingHandler on_blocking,
                         LostHandler on_lost) {
  return impl_->requester_.lock(spec, std::move(done), std::move(on_blocking), std::move(on_lost));
}

Status LockManager::convert(LockId id, const ConvertSpec& spec, Completion done) {
  return impl_->requester_.convert(id, spec, std::move(done));
}

Status LockManager::release(LockId id, std::optional<LockValue> value,
                            std::function<void()> released) {
  return impl_->requester_.release(id, value, std::move(released));
}

Status LockManager::cancel(LockId id) { return impl_->requester_.cancel(id); }

std::vector<HeldLock> LockManager::held() const { return impl_->requester_.held(); }

std::vector<LockRecord> LockManager::coordinated() const { return impl_->coordinator_.records(); }

bool LockManager::recovering() const { return impl_->coordinator_.recovering(); }

bool LockManager::settled() const { return impl_->requester_.settled(); }

LockStatistics LockManager::statistics() const {
  LockStatistics statistics = impl_->statistics_;
  statistics.coordinated_locks = impl_->coordinator_.size();
  return statistics;
}

}  // namespace tidepool::lockmgr
