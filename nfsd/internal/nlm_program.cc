#include "nfsd/internal/nlm_program.h"

#include <openssl/evp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstring>
#include <limits>

#include "common/callback_awaitable.h"
#include "common/fail_points.h"
#include "nfsd/internal/rpc_client.h"

namespace tidepool::nfsd {

namespace asio = boost::asio;

// nlm4_lock: what a client asks to lock, echoed back in GRANTED callbacks.
struct NlmProgram::Lock {
  std::string caller_name;
  std::vector<std::uint8_t> fh;
  std::vector<std::uint8_t> oh;
  std::uint32_t svid = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;  // 0: to the end of the file
};

// The arguments of TEST, LOCK, CANCEL and UNLOCK, each using the fields it has.
struct NlmProgram::Request {
  std::vector<std::uint8_t> cookie;
  bool block = false;
  bool exclusive = false;
  Lock lock;
  bool reclaim = false;
  std::optional<std::uint32_t> state;  // the client's NSM state, which LOCK tells
};

// nlm4_shareargs, SHARE's and UNSHARE's; the lock names the file and owner only.
struct NlmProgram::ShareRequest {
  std::vector<std::uint8_t> cookie;
  Lock lock;
  std::uint32_t deny = 0;    // fsh4_mode
  std::uint32_t access = 0;  // fsh4_access
  bool reclaim = false;
};

namespace {

enum Nlm4Status : std::uint32_t {
  NLM4_GRANTED = 0,
  NLM4_DENIED = 1,
  NLM4_DENIED_NOLOCKS = 2,
  NLM4_BLOCKED = 3,
  NLM4_DENIED_GRACE_PERIOD = 4,
  NLM4_STALE_FH = 7,
  NLM4_FBIG = 8,
};

enum Procedure : std::uint32_t {
  kNull = 0,
  kTest = 1,
  kLock = 2,
  kCancel = 3,
  kUnlock = 4,
  kGranted = 5,
  kTestMsg = 6,
  kLockMsg = 7,
  kCancelMsg = 8,
  kUnlockMsg = 9,
  kGrantedMsg = 10,
  kTestRes = 11,
  kLockRes = 12,
  kCancelRes = 13,
  kUnlockRes = 14,
  kGrantedRes = 15,
  kShare = 20,
  kUnshare = 21,
  kNmLock = 22,
  kFreeAll = 23,
};

// fsh4_mode: what a share reservation denies others; fsh4_access: what it does itself.
enum ShareBits : std::uint32_t { kShareRead = 1, kShareWrite = 2 };

constexpr std::size_t kMaxNetobj = 1024;  // MAXNETOBJ_SZ
constexpr std::size_t kMaxName = 1024;    // LM_MAXSTRLEN
constexpr int kGrantedAttempts = 6;
// Callbacks (GRANTED, and the results of _MSG calls) under way at once, to one client and to
// all: a flood of calls with forged source addresses must not turn this node into a reflector.
constexpr int kMaxCallbacksPerClient = 16;
constexpr int kMaxCallbacks = 256;
constexpr std::chrono::seconds kCallbackTimeout{5};

std::vector<std::uint8_t> netobj(xdr::Decoder& in) {
  auto bytes = in.opaque(kMaxNetobj);
  return {bytes.begin(), bytes.end()};
}

NlmProgram::Lock decode_lock(xdr::Decoder& in) {
  NlmProgram::Lock lock;
  lock.caller_name = std::string(in.string(kMaxName));
  lock.fh = netobj(in);
  lock.oh = netobj(in);
  lock.svid = in.u32();
  lock.offset = in.u64();
  lock.length = in.u64();
  return lock;
}

void encode_lock(xdr::Encoder& out, const NlmProgram::Lock& lock) {
  out.string(lock.caller_name);
  out.opaque(lock.fh);
  out.opaque(lock.oh);
  out.u32(lock.svid);
  out.u64(lock.offset);
  out.u64(lock.length);
}

// The arguments of `procedure` (a synchronous one or its _MSG twin).
NlmProgram::Request decode_request(std::uint32_t procedure, xdr::Decoder& in) {
  NlmProgram::Request request;
  request.cookie = netobj(in);
  switch (procedure) {
    case kTest:
    case kTestMsg:
      request.exclusive = in.boolean();
      request.lock = decode_lock(in);
      break;
    case kLock:
    case kLockMsg:
    case kNmLock:
      request.block = in.boolean();
      request.exclusive = in.boolean();
      request.lock = decode_lock(in);
      request.reclaim = in.boolean();
      request.state = in.u32();
      break;
    case kCancel:
    case kCancelMsg:
      request.block = in.boolean();
      request.exclusive = in.boolean();
      request.lock = decode_lock(in);
      break;
    default:
      request.lock = decode_lock(in);
      break;
  }
  return request;
}

NlmProgram::ShareRequest decode_share(xdr::Decoder& in) {
  NlmProgram::ShareRequest request;
  request.cookie = netobj(in);
  request.lock.caller_name = std::string(in.string(kMaxName));
  request.lock.fh = netobj(in);
  request.lock.oh = netobj(in);
  request.deny = in.u32();
  request.access = in.u32();
  request.reclaim = in.boolean();
  return request;
}

// The bytes a lock covers; empty when they run past the largest offset.
std::optional<lockmgr::Range> range_of(const NlmProgram::Lock& lock) {
  constexpr std::uint64_t kEnd = std::numeric_limits<std::uint64_t>::max();
  const std::uint64_t end =
      lock.length == 0 || lock.length > kEnd - lock.offset ? kEnd : lock.offset + lock.length;
  if (lock.offset >= end) return std::nullopt;
  return lockmgr::Range{lock.offset, end};
}

// One owner per process of a client, the same through every node: the address the client
// calls from, its name, the process id and the owner handle, hashed. With the address in it, a
// host that learns another's name, process and handle still names an owner of its own.
lockmgr::LockOwner owner_of(const NlmProgram::Lock& lock, const asio::ip::address_v4& from) {
  EVP_MD_CTX* context = EVP_MD_CTX_new();
  const std::uint32_t svid = lock.svid;
  const std::uint32_t name_length = static_cast<std::uint32_t>(lock.caller_name.size());
  const asio::ip::address_v4::bytes_type address = from.to_bytes();
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestInit_ex(context, EVP_sha256(), nullptr);
  EVP_DigestUpdate(context, address.data(), address.size());
  EVP_DigestUpdate(context, &name_length, sizeof name_length);
  EVP_DigestUpdate(context, lock.caller_name.data(), lock.caller_name.size());
  EVP_DigestUpdate(context, &svid, sizeof svid);
  EVP_DigestUpdate(context, lock.oh.data(), lock.oh.size());
  EVP_DigestFinal_ex(context, digest, &length);
  EVP_MD_CTX_free(context);
  lockmgr::LockOwner owner;
  std::memcpy(&owner.high, digest, sizeof owner.high);
  std::memcpy(&owner.low, digest + sizeof owner.high, sizeof owner.low);
  // 96 bits of the hash and, below them, the process: TEST tells whose lock is in the way.
  owner.low = (owner.low & ~std::uint64_t{0xffffffff}) | svid;
  // The zero owner means "no owner"; a hash that lands on it still names an owner.
  if (owner.none()) owner.high = 1;
  return owner;
}

// The advisory locks' name for a client: its caller_name and the address it calls from, so that
// FREE_ALL and SM_NOTIFY, which name a client, free only what that host took.
std::string client_key(const std::string& name, const asio::ip::address_v4& from) {
  return name + "@" + from.to_string();
}

std::uint32_t svid_of(const lockmgr::LockOwner& owner) {
  return static_cast<std::uint32_t>(owner.low & 0xffffffff);
}

// Who a lock is for, in listings: "nfs client NAME (ADDRESS) WHAT".
std::string holder_of(const CallContext& context, const NlmProgram::Lock& lock,
                      const std::string& what) {
  return "nfs client " + lock.caller_name + " (" + context.client.to_string() + ") " + what;
}

lockmgr::AdvisoryLock advisory_of(const CallContext& context, const NlmProgram::Request& request,
                                  std::uint64_t file, lockmgr::Range range) {
  lockmgr::AdvisoryLock lock;
  lock.file = file;
  lock.owner = owner_of(request.lock, context.client);
  lock.client = client_key(request.lock.caller_name, context.client);
  lock.holder = holder_of(context, request.lock, "pid " + std::to_string(request.lock.svid));
  lock.range = range;
  lock.exclusive = request.exclusive;
  return lock;
}

// The client's own lock manager, where callbacks and results go.
RpcTarget callback_target(const CallContext& context) {
  return RpcTarget{context.client, NlmProgram::kProgram, NlmProgram::kVersion};
}

void encode_status(xdr::Encoder& out, const std::vector<std::uint8_t>& cookie,
                   std::uint32_t status) {
  out.opaque(cookie);
  out.u32(status);
}

// nlm4_testres: when DENIED, the holder of the lock in the way — its process (svid) and range;
// its owner handle is not kept, so it goes back empty.
void encode_test_result(xdr::Encoder& out, const NlmProgram::Request& request, std::uint32_t status,
                        const std::optional<lockmgr::AdvisoryConflict>& holder) {
  encode_status(out, request.cookie, status);
  if (status != NLM4_DENIED || !holder) return;
  constexpr std::uint64_t kEnd = std::numeric_limits<std::uint64_t>::max();
  out.boolean(holder->exclusive);
  out.u32(svid_of(holder->owner));
  out.opaque(std::span<const std::uint8_t>());
  out.u64(holder->range.start);
  out.u64(holder->range.end == kEnd ? 0 : holder->range.end - holder->range.start);
}

}  // namespace

NlmProgram::NlmProgram(Service& service, asio::any_io_executor executor)
    : service_(service), executor_(std::move(executor)) {}

void NlmProgram::set_locks(std::weak_ptr<lockmgr::AdvisoryLocks> locks) {
  bool first = false;
  {
    std::lock_guard guard(mutex_);
    first = !served_ && !locks.expired();
    served_ = served_ || first;
    locks_ = std::move(locks);
  }
  if (first && status_monitor_.serving) status_monitor_.serving();
}

void NlmProgram::start_grace_period(bool again) {
  std::lock_guard guard(mutex_);
  if (!grace_ends_ || again)
    grace_ends_ = std::chrono::steady_clock::now() + service_.config.nlm_grace_period;
}

void NlmProgram::set_status_monitor(StatusMonitor monitor) { status_monitor_ = std::move(monitor); }

bool NlmProgram::in_grace() const {
  std::lock_guard guard(mutex_);
  return !grace_ends_ || std::chrono::steady_clock::now() < *grace_ends_;
}

std::shared_ptr<lockmgr::AdvisoryLocks> NlmProgram::locks() const {
  std::lock_guard guard(mutex_);
  return locks_.lock();
}

awaitable<std::optional<AcceptStatus>> NlmProgram::call(const CallContext& context,
                                                        xdr::Decoder& in, xdr::Encoder& out) {
  const std::uint32_t procedure = context.procedure;
  switch (procedure) {
    case kNull:
      co_return AcceptStatus::success;
    case kTest:
    case kLock:
    case kCancel:
    case kUnlock:
    case kNmLock:
    case kTestMsg:
    case kLockMsg:
    case kCancelMsg:
    case kUnlockMsg: {
      Request request = decode_request(procedure, in);
      if (!in.ok()) co_return AcceptStatus::garbage_args;
      if (told_a_new_state(context, request.lock.caller_name, request.state)) {
        // The client restarted and speaks before its status monitor does: what its processes
        // held before went with them.
        co_await free_client(client_key(request.lock.caller_name, context.client));
      }
      saw_client(context, request.lock.caller_name, request.state);
      std::uint32_t status = NLM4_DENIED;
      std::optional<lockmgr::AdvisoryConflict> holder;
      switch (procedure) {
        case kTest:
        case kTestMsg:
          status = co_await test(context, request, holder);
          break;
        case kLock:
        case kLockMsg:
          status = co_await lock(context, request);
          break;
        case kNmLock:
          // Not monitored: the client takes no blocking requests.
          request.block = false;
          status = co_await lock(context, request);
          break;
        case kCancel:
        case kCancelMsg:
          status = co_await cancel(context, request);
          break;
        default:
          status = co_await unlock(context, request);
          break;
      }
      const bool asynchronous = procedure >= kTestMsg && procedure <= kUnlockMsg;
      xdr::Buffer results;
      xdr::Encoder encoder(results);
      if (procedure == kTest || procedure == kTestMsg) {
        encode_test_result(asynchronous ? encoder : out, request, status, holder);
      } else {
        encode_status(asynchronous ? encoder : out, request.cookie, status);
      }
      if (asynchronous) send_result(context, procedure - kTestMsg + kTestRes, std::move(results));
      co_return AcceptStatus::success;
    }
    case kShare:
    case kUnshare: {
      const ShareRequest request = decode_share(in);
      if (!in.ok()) co_return AcceptStatus::garbage_args;
      saw_client(context, request.lock.caller_name, std::nullopt);
      const std::uint32_t status = co_await share(context, request, procedure == kShare);
      encode_status(out, request.cookie, status);
      out.u32(0);  // sequence, unused
      co_return AcceptStatus::success;
    }
    case kFreeAll: {
      const std::string name(in.string(kMaxName));
      in.u32();  // the client's new NSM state
      if (!in.ok()) co_return AcceptStatus::garbage_args;
      const std::string key = client_key(name, context.client);
      if (!known_client(key) && known_client_name(name)) {
        if (service_.statistics.refuse(Refusal::foreign_free_all)) {
          spdlog::warn("nlm: FREE_ALL for client {} from {}, which it never called from: ignored "
                       "(and counted in tidepool_rpc_refused_total from now on)",
                       name, context.client.to_string());
        }
        co_return AcceptStatus::success;
      }
      co_await free_client(key);
      co_return AcceptStatus::success;
    }
    case kGrantedMsg:
    case kTestRes:
    case kLockRes:
    case kCancelRes:
    case kUnlockRes:
    case kGrantedRes:
      // Results of calls this server never makes asynchronously, or callbacks meant for a
      // client: acknowledged, nothing to do.
      co_return AcceptStatus::success;
    case kGranted:
    default:
      co_return AcceptStatus::proc_unavail;
  }
}

awaitable<std::optional<std::uint64_t>> NlmProgram::file_of(const CallContext& context,
                                                            const Lock& lock) {
  auto contents = service_.sealer()->unseal(lock.fh);
  if (!contents.ok()) co_return std::nullopt;
  {
    std::shared_ptr<const ExportTable> exports = service_.exports.snapshot();
    const Export* exported = exports->by_id(contents->export_id);
    if (exported == nullptr || !service_.admit(*exported, context).ok()) co_return std::nullopt;
  }
  auto attributes = co_await service_.store.getattr(contents->inode);
  if (!attributes.ok() || attributes->generation != contents->generation) co_return std::nullopt;
  co_return contents->inode;
}

awaitable<std::uint32_t> NlmProgram::advisory_lock(const CallContext& context,
                                                   const Request& request,
                                                   lockmgr::AdvisoryLock& lock) {
  const std::optional<std::uint64_t> file = co_await file_of(context, request.lock);
  if (!file) co_return NLM4_STALE_FH;
  const std::optional<lockmgr::Range> range = range_of(request.lock);
  if (!range) co_return NLM4_FBIG;
  lock = advisory_of(context, request, *file, *range);
  co_return NLM4_GRANTED;
}

awaitable<std::uint32_t> NlmProgram::test(const CallContext& context, const Request& request,
                                          std::optional<lockmgr::AdvisoryConflict>& holder) {
  auto locks = this->locks();
  if (!locks) co_return NLM4_DENIED_NOLOCKS;
  if (in_grace() || !(co_await service_.held_lease())) {
    co_return NLM4_DENIED_GRACE_PERIOD;
  }
  lockmgr::AdvisoryLock lock;
  const std::uint32_t named = co_await advisory_lock(context, request, lock);
  if (named != NLM4_GRANTED) co_return named;
  auto testing = await_callback<Result<std::optional<lockmgr::AdvisoryConflict>>>(
      [&locks, &lock](auto done) { locks->test(lock, done); });
  const Result<std::optional<lockmgr::AdvisoryConflict>> tested = co_await std::move(testing);
  if (!tested.ok()) co_return NLM4_DENIED_NOLOCKS;
  holder = *tested;
  co_return holder ? NLM4_DENIED : NLM4_GRANTED;
}

awaitable<std::uint32_t> NlmProgram::lock(const CallContext& context, const Request& request) {
  auto locks = this->locks();
  if (!locks) co_return NLM4_DENIED_NOLOCKS;
  // In the grace period only reclaims; after it, none. Without its lease the node may have
  // lost locks it coordinates: it grants none, as in a grace period.
  if (in_grace() != request.reclaim) co_return NLM4_DENIED_GRACE_PERIOD;
  const std::optional<std::uint64_t> leased_from = co_await service_.held_lease();
  if (!leased_from) co_return NLM4_DENIED_GRACE_PERIOD;
  lockmgr::AdvisoryLock lock;
  const std::uint32_t named = co_await advisory_lock(context, request, lock);
  if (named != NLM4_GRANTED) co_return named;
  auto granted_later = [this, context, request] {
    asio::co_spawn(executor_, send_granted(context, request, service_.lease_clock()),
                   asio::detached);
  };
  auto locking = await_callback<lockmgr::AdvisoryOutcome>(
      [&locks, &lock, &request, &granted_later](auto done) {
        locks->lock(lock, request.block, done, granted_later);
      });
  const lockmgr::AdvisoryOutcome outcome = co_await std::move(locking);
  const bool holds_or_waits =
      outcome == lockmgr::AdvisoryOutcome::granted || outcome == lockmgr::AdvisoryOutcome::blocked;
  if (holds_or_waits && status_monitor_.monitor) {
    status_monitor_.monitor(context.client);
  }
  switch (outcome) {
    case lockmgr::AdvisoryOutcome::granted:
      if (const auto pause = fail_points::pause_at(fail_points::kNlmGrantReply);
          pause.count() > 0) {
        spdlog::info("nlm: fail point {}: the answer to a granted LOCK waits {} ms",
                     fail_points::kNlmGrantReply, pause.count());
        asio::steady_timer before_reply(executor_, pause);
        co_await before_reply.async_wait(asio::use_awaitable);
      }
      if (!service_.lease_held_since(*leased_from)) {
        // The node may have been fenced while the lock was taken: its clients were told then
        // that their locks are gone, before this one knew it had this lock. It gives the lock
        // back, if the fence did not take it already, and grants it to nobody.
        locks->unlock(lock, [] {});
        co_return NLM4_DENIED_GRACE_PERIOD;
      }
      co_return NLM4_GRANTED;
    case lockmgr::AdvisoryOutcome::blocked:
      co_return NLM4_BLOCKED;
    case lockmgr::AdvisoryOutcome::unavailable:
      co_return NLM4_DENIED_NOLOCKS;
    case lockmgr::AdvisoryOutcome::denied:
      break;
  }
  co_return NLM4_DENIED;
}

awaitable<std::uint32_t> NlmProgram::cancel(const CallContext& context, const Request& request) {
  auto locks = this->locks();
  if (!locks) co_return NLM4_DENIED_NOLOCKS;
  lockmgr::AdvisoryLock lock;
  const std::uint32_t named = co_await advisory_lock(context, request, lock);
  if (named != NLM4_GRANTED) co_return named;
  auto cancelling = await_callback<bool>([&locks, &lock](auto done) { locks->cancel(lock, done); });
  const bool cancelled = co_await std::move(cancelling);
  co_return cancelled ? NLM4_GRANTED : NLM4_DENIED;
}

awaitable<std::uint32_t> NlmProgram::unlock(const CallContext& context, const Request& request) {
  auto locks = this->locks();
  if (!locks) co_return NLM4_DENIED_NOLOCKS;
  lockmgr::AdvisoryLock lock;
  const std::uint32_t named = co_await advisory_lock(context, request, lock);
  if (named != NLM4_GRANTED) co_return named;
  auto unlocking = await_callback<bool>(
      [&locks, &lock](auto done) { locks->unlock(lock, [done]() mutable { done(true); }); });
  co_await std::move(unlocking);
  co_return NLM4_GRANTED;
}

awaitable<std::uint32_t> NlmProgram::share(const CallContext& context, const ShareRequest& request,
                                           bool reserve) {
  auto locks = this->locks();
  if (!locks) co_return NLM4_DENIED_NOLOCKS;
  if (reserve && (in_grace() != request.reclaim ||
                  !(co_await service_.held_lease()))) {
    co_return NLM4_DENIED_GRACE_PERIOD;
  }
  const std::optional<std::uint64_t> file = co_await file_of(context, request.lock);
  if (!file) co_return NLM4_STALE_FH;
  lockmgr::ShareReservation share;
  share.file = *file;
  share.owner = owner_of(request.lock, context.client);
  share.client = client_key(request.lock.caller_name, context.client);
  share.holder = holder_of(context, request.lock, "share");
  share.read = (request.access & kShareRead) != 0;
  share.write = (request.access & kShareWrite) != 0;
  share.deny_read = (request.deny & kShareRead) != 0;
  share.deny_write = (request.deny & kShareWrite) != 0;
  if (!reserve) {
    auto unsharing = await_callback<bool>(
        [&locks, &share](auto done) { locks->unshare(share, [done]() mutable { done(true); }); });
    co_await std::move(unsharing);
    co_return NLM4_GRANTED;
  }
  auto sharing = await_callback<bool>([&locks, &share](auto done) { locks->share(share, done); });
  const bool granted = co_await std::move(sharing);
  if (granted && status_monitor_.monitor) status_monitor_.monitor(context.client);
  co_return granted ? NLM4_GRANTED : NLM4_DENIED;
}

awaitable<void> NlmProgram::free_client(std::string key) {
  {
    std::lock_guard guard(mutex_);
    seen_.erase(key);
    seen_states_.erase(key);
  }
  auto locks = this->locks();
  if (!locks) co_return;
  auto freeing = await_callback<bool>(
      [&locks, &key](auto done) { locks->free_client(key, [done]() mutable { done(true); }); });
  co_await std::move(freeing);
  spdlog::info("nlm: freed every lock of client {}", key);
}

bool NlmProgram::told_a_new_state(const CallContext& context, const std::string& name,
                                  std::optional<std::uint32_t> state) const {
  if (!state) return false;
  std::lock_guard guard(mutex_);
  auto known = seen_states_.find(client_key(name, context.client));
  return known != seen_states_.end() && known->second != *state;
}

bool NlmProgram::known_client(const std::string& key) const {
  std::lock_guard guard(mutex_);
  return seen_.contains(key);
}

bool NlmProgram::known_client_name(const std::string& name) const {
  std::lock_guard guard(mutex_);
  return std::any_of(seen_.begin(), seen_.end(),
                     [&name](const auto& seen) { return seen.second.client == name; });
}

void NlmProgram::client_rebooted(const std::string& name, const asio::ip::address_v4& address,
                                 std::uint32_t state) {
  // Whatever name the notice gives, it speaks for the host it comes from: the clients that
  // called from that address, unless they told this state already (a repeated notice).
  std::vector<std::string> keys;
  bool from_a_client = false;
  {
    std::lock_guard guard(mutex_);
    for (const auto& [key, seen] : seen_) {
      if (seen.address != address.to_string()) continue;
      from_a_client = true;
      if (seen_states_.contains(key) && seen_states_.at(key) == state) continue;
      keys.push_back(key);
    }
  }
  if (!from_a_client) {
    if (service_.statistics.refuse(Refusal::foreign_notify)) {
      spdlog::warn("nsm: SM_NOTIFY for {} from {}, where no client of this node called from: "
                   "ignored (and counted in tidepool_rpc_refused_total from now on)",
                   name, address.to_string());
    }
    return;
  }
  for (const std::string& key : keys) {
    spdlog::info("nsm: {} ({}) restarted (state {}): freeing the locks of {}", name,
                 address.to_string(), state, key);
    asio::co_spawn(executor_, free_client(key), asio::detached);
  }
}

void NlmProgram::saw_client(const CallContext& context, const std::string& name,
                            std::optional<std::uint32_t> state) {
  const auto now = std::chrono::system_clock::now();
  const std::string key = client_key(name, context.client);
  std::lock_guard guard(mutex_);
  auto [it, fresh] = seen_.try_emplace(key, NlmSession{name, {}, now, now, 0, 0, 0});
  it->second.address = context.client.to_string();
  it->second.last_seen = now;
  if (state) seen_states_[key] = *state;
  if (!fresh || seen_.size() <= kMaxSessions) return;
  auto oldest = std::min_element(seen_.begin(), seen_.end(), [](const auto& a, const auto& b) {
    return a.second.last_seen < b.second.last_seen;
  });
  seen_states_.erase(oldest->first);
  seen_.erase(oldest);
}

void NlmProgram::sessions(std::function<void(std::vector<NlmSession>)> done) const {
  std::map<std::string, NlmSession> sessions;
  {
    std::lock_guard guard(mutex_);
    sessions = seen_;
  }
  auto listed = [](std::map<std::string, NlmSession>& by_name) {
    std::vector<NlmSession> list;
    for (auto& [name, session] : by_name) list.push_back(std::move(session));
    return list;
  };
  auto locks = this->locks();
  if (!locks) return done(listed(sessions));
  locks->clients([sessions = std::move(sessions), listed,
                  done = std::move(done)](std::vector<lockmgr::AdvisoryClient> clients) mutable {
    for (const lockmgr::AdvisoryClient& client : clients) {
      // A client evicted from the table while it still holds locks is listed all the same,
      // by the name and address its key holds.
      const std::size_t at = client.client.rfind('@');
      NlmSession& session =
          sessions
              .try_emplace(client.client,
                           NlmSession{client.client.substr(0, at),
                                      at == std::string::npos ? "" : client.client.substr(at + 1),
                                      {}, {}, 0, 0, 0})
              .first->second;
      session.locks = client.locks;
      session.waiting = client.waiting;
      session.shares = client.shares;
    }
    done(listed(sessions));
  });
}

bool NlmProgram::take_callback(const asio::ip::address_v4& client) {
  {
    std::lock_guard guard(mutex_);
    int& to_client = callbacks_by_client_[client.to_uint()];
    if (to_client < kMaxCallbacksPerClient && callbacks_ < kMaxCallbacks) {
      to_client++;
      callbacks_++;
      return true;
    }
    if (to_client == 0) callbacks_by_client_.erase(client.to_uint());
  }
  if (service_.statistics.refuse(Refusal::callback_limit)) {
    spdlog::warn("nlm: too many callbacks under way to {} or to all clients: dropping this one "
                 "(and counting the next in tidepool_rpc_refused_total)",
                 client.to_string());
  }
  return false;
}

void NlmProgram::give_back_callback(const asio::ip::address_v4& client) {
  std::lock_guard guard(mutex_);
  callbacks_--;
  if (--callbacks_by_client_[client.to_uint()] == 0) callbacks_by_client_.erase(client.to_uint());
}

bool client_took_grant(std::span<const std::uint8_t> results) {
  xdr::Decoder in(results);
  netobj(in);
  const std::uint32_t status = in.u32();
  return in.ok() && status == NLM4_GRANTED;
}

awaitable<void> NlmProgram::send_granted(CallContext context, Request request,
                                         std::uint64_t granted_at) {
  // Not when the node may have been fenced since the grant (see lock()): the client waits on,
  // and asks again once told its locks are gone.
  if (!service_.lease_held_since(granted_at)) {
    spdlog::info("nlm: no GRANTED callback to {} for pid {}: this node's lease lapsed since the "
                 "grant; giving the lock back",
                 context.client.to_string(), request.lock.svid);
    co_await unlock(context, request);
    co_return;
  }
  if (!take_callback(context.client)) {
    co_await unlock(context, request);
    co_return;
  }
  xdr::Buffer arguments;
  xdr::Encoder out(arguments);
  out.opaque(request.cookie);
  out.boolean(request.exclusive);
  encode_lock(out, request.lock);
  auto calling = call_client_retrying(callback_target(context), kGranted, arguments,
                                      kCallbackTimeout, kGrantedAttempts);
  const Result<xdr::Buffer> reply = co_await std::move(calling);
  give_back_callback(context.client);
  std::string why = "it no longer wants the lock";
  if (reply.ok()) {
    if (client_took_grant(*reply)) co_return;
  } else {
    why = reply.status().message();
  }
  spdlog::warn("nlm: GRANTED callback to {} for pid {} failed ({}): giving the lock back",
               context.client.to_string(), request.lock.svid, why);
  co_await unlock(context, request);
}

void NlmProgram::send_result(const CallContext& context, std::uint32_t procedure,
                             xdr::Buffer results) {
  if (!take_callback(context.client)) return;
  // A coroutine keeps its parameters, not the lambda it was made from: nothing is captured.
  auto send = [](NlmProgram* self, RpcTarget client, std::uint32_t procedure,
                 xdr::Buffer results) -> awaitable<void> {
    auto calling = call_client(client, procedure, results, kCallbackTimeout);
    Result<xdr::Buffer> reply = co_await std::move(calling);
    self->give_back_callback(client.host);
    if (!reply.ok()) {
      spdlog::info("nlm: result {} to {} not delivered: {}", procedure, client.host.to_string(),
                   reply.status().message());
    }
  };
  asio::co_spawn(executor_, send(this, callback_target(context), procedure, std::move(results)),
                 asio::detached);
}

}  // namespace tidepool::nfsd
