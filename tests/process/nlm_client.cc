#include "tests/process/nlm_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <map>

#include <nfsc/libnfs-raw-nsm.h>
#include <nfsc/libnfs-raw-portmap.h>

// libnfs 4.0 never frees the service table rpc_register_service() allocates for a server
// context; the leak is libnfs's, a few bytes per connection of the test's client lock manager.
extern "C" const char* __lsan_default_suppressions() { return "leak:rpc_register_service\n"; }

namespace tidepool::test {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Connections open at once; a node calls back over one or a few.
constexpr std::size_t kMaxConnections = 256;

int bound_socket(const std::string& address, uint16_t port, const std::string& to,
                 uint16_t to_port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  local.sin_port = htons(port);
  ::inet_pton(AF_INET, address.c_str(), &local.sin_addr);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) == 0;
  if (ok && to.empty()) ok = ::listen(fd, 16) == 0;
  if (ok && !to.empty()) {
    sockaddr_in remote{};
    remote.sin_family = AF_INET;
    remote.sin_port = htons(to_port);
    ::inet_pton(AF_INET, to.c_str(), &remote.sin_addr);
    ok = ::connect(fd, reinterpret_cast<sockaddr*>(&remote), sizeof remote) == 0;
  }
  if (!ok) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// libnfs's service callbacks carry no user pointer: each reaches its ClientLockd through the
// connection it came on.
struct ClientLockd::Handlers {
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::map<rpc_context*, ClientLockd*>& owners() {
    static std::map<rpc_context*, ClientLockd*> m;
    return m;
  }
  static ClientLockd* owner(rpc_context* rpc) {
    std::lock_guard lock(mutex());
    return owners().at(rpc);
  }

  static int getport(rpc_context* rpc, rpc_msg* call) {
    uint32_t port = kPortmapPort;
    return rpc_send_reply(rpc, call, &port, reinterpret_cast<zdrproc_t>(zdr_uint32_t), sizeof port);
  }
  static int granted(rpc_context* rpc, rpc_msg* call) {
    auto* args = static_cast<NLM4_GRANTEDargs*>(call->body.cbody.args);
    ClientLockd* self = owner(rpc);
    {
      std::lock_guard lock(self->mutex_);
      self->granted_.insert(args->lock.svid);
    }
    NLM4_GRANTEDres res{};
    res.cookie = args->cookie;
    res.status = NLM4_GRANTED;
    return rpc_send_reply(rpc, call, &res, reinterpret_cast<zdrproc_t>(zdr_NLM4_GRANTEDres),
                          sizeof res);
  }
  static int notified(rpc_context* rpc, rpc_msg* call) {
    const auto* args = static_cast<NSM1_NOTIFYargs*>(call->body.cbody.args);
    ClientLockd* self = owner(rpc);
    {
      std::lock_guard lock(self->mutex_);
      self->notices_.push_back({args->mon_name, args->state, Clock::now()});
    }
    return rpc_send_reply(rpc, call, nullptr, reinterpret_cast<zdrproc_t>(zdr_void), 0);
  }

  // libnfs decodes strings into the pointers already in its argument buffer, which it does not
  // clear first: start from zeroes.
  static uint32_t decode_granted(ZDR* zdrs, NLM4_GRANTEDargs* args) {
    std::memset(args, 0, sizeof *args);
    return zdr_NLM4_GRANTEDargs(zdrs, args);
  }
  static uint32_t decode_notify(ZDR* zdrs, NSM1_NOTIFYargs* args) {
    std::memset(args, 0, sizeof *args);
    return zdr_NSM1_NOTIFYargs(zdrs, args);
  }
};

ClientLockd::ClientLockd(const std::string& address) {
  if (!address.empty()) {
    address_ = address;
    listener_ = bound_socket(address_, kPortmapPort);
  }
  for (int i = 0; address.empty() && i < 50 && listener_ < 0; ++i) {
    address_ = "127.201." + std::to_string((::getpid() + i) % 250 + 1) + "." +
               std::to_string(i % 250 + 1);
    listener_ = bound_socket(address_, kPortmapPort);
  }
  if (listener_ >= 0) thread_ = std::thread([this] { serve(); });
}

ClientLockd::~ClientLockd() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (listener_ >= 0) ::close(listener_);
}

std::optional<ClientLockd::Notice> ClientLockd::wait_notified(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    {
      std::lock_guard lock(mutex_);
      if (!notices_.empty()) return notices_.front();
    }
    std::this_thread::sleep_for(50ms);
  }
  return std::nullopt;
}

std::vector<ClientLockd::Notice> ClientLockd::notices() {
  std::lock_guard lock(mutex_);
  return notices_;
}

bool ClientLockd::wait_granted(uint32_t svid, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    {
      std::lock_guard lock(mutex_);
      if (granted_.contains(svid)) return true;
    }
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

void ClientLockd::serve() {
  static service_proc portmap[] = {{PMAP2_GETPORT, Handlers::getport,
                                    reinterpret_cast<zdrproc_t>(zdr_pmap2_mapping),
                                    sizeof(pmap2_mapping)}};
  static service_proc nlm[] = {{NLM4_GRANT, Handlers::granted,
                                reinterpret_cast<zdrproc_t>(Handlers::decode_granted),
                                sizeof(NLM4_GRANTEDargs)}};
  static service_proc nsm[] = {{NSM1_NOTIFY, Handlers::notified,
                                reinterpret_cast<zdrproc_t>(Handlers::decode_notify),
                                sizeof(NSM1_NOTIFYargs)}};
  std::vector<rpc_context*> connections;
  const auto close = [](rpc_context* rpc) {
    std::lock_guard lock(Handlers::mutex());
    Handlers::owners().erase(rpc);
    rpc_destroy_context(rpc);
  };
  // Bounded even if the destructor never runs: longer than the longest partition campaign.
  const auto deadline = Clock::now() + 4h;
  while (!stop_ && Clock::now() < deadline) {
    std::vector<pollfd> fds{{listener_, POLLIN, 0}};
    for (rpc_context* rpc : connections) {
      fds.push_back({rpc_get_fd(rpc), static_cast<short>(rpc_which_events(rpc)), 0});
    }
    if (::poll(fds.data(), fds.size(), 100) < 0) break;
    std::vector<rpc_context*> open;
    for (std::size_t i = 1; i < fds.size(); ++i) {
      rpc_context* rpc = connections[i - 1];
      const bool served = fds[i].revents == 0 || rpc_service(rpc, fds[i].revents) == 0;
      // The node closed it (or it broke): gone, so that a long campaign's callbacks do not
      // pile up connections.
      if (served && (fds[i].revents & (POLLHUP | POLLERR)) == 0) {
        open.push_back(rpc);
      } else {
        close(rpc);
      }
    }
    connections = std::move(open);
    if ((fds[0].revents & POLLIN) && connections.size() < kMaxConnections) {
      int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      rpc_context* rpc = rpc_init_server_context(fd);
      {
        std::lock_guard lock(Handlers::mutex());
        Handlers::owners()[rpc] = this;
      }
      rpc_register_service(rpc, PMAP_PROGRAM, PMAP_V2, portmap, 1);
      rpc_register_service(rpc, NLM_PROGRAM, NLM_V4, nlm, 1);
      rpc_register_service(rpc, NSM_PROGRAM, NSM_V1, nsm, 1);
      connections.push_back(rpc);
    }
  }
  for (rpc_context* rpc : connections) close(rpc);
}

NlmClient::NlmClient(const Endpoint& node, std::string caller, const std::string& source)
    : caller_(std::move(caller)) {
  connected_ = connection_.connect(node.address, node.nfs_port, NLM_PROGRAM, NLM_V4, {});
  if (!connected_ || source.empty()) return;
  // libnfs cannot choose its source address: put a socket that did in place of its own.
  int fd = bound_socket(source, 0, node.address, node.nfs_port);
  connected_ = fd >= 0 && ::dup2(fd, rpc_get_fd(connection_.get())) >= 0;
  if (fd >= 0) ::close(fd);
}

uint32_t NlmClient::lock(const FileHandle& fh, uint32_t svid, bool exclusive, bool block,
                         bool reclaim, int state) {
  NLM4_LOCKargs args{};
  args.block = block;
  args.exclusive = exclusive;
  args.lock = lock_of(fh, svid);
  args.reclaim = reclaim;
  args.state = state;
  return call("LOCK", [&](rpc_cb cb, void* priv) {
    return rpc_nlm4_lock_async(connection_.get(), cb, &args, priv);
  });
}

uint32_t NlmClient::test(const FileHandle& fh, uint32_t svid, bool exclusive,
                         nlm4_holder* holder) {
  NLM4_TESTargs args{};
  args.exclusive = exclusive;
  args.lock = lock_of(fh, svid);
  uint32_t status = kNlmNoReply;
  const bool answered = connection_.call(
      "TEST",
      [&](rpc_cb cb, void* priv) {
        return rpc_nlm4_test_async(connection_.get(), cb, &args, priv);
      },
      [&](void* data) {
        const auto* res = static_cast<NLM4_TESTres*>(data);
        status = res->reply.status;
        if (status == NLM4_DENIED && holder != nullptr) {
          *holder = res->reply.nlm4_testreply_u.lock.holder;
          holder->oh = {};  // points into the reply, gone after this call
        }
      });
  EXPECT_TRUE(answered || !report_no_reply_) << "TEST: " << connection_.error();
  return status;
}

uint32_t NlmClient::cancel(const FileHandle& fh, uint32_t svid, bool exclusive) {
  NLM4_CANCargs args{};
  args.block = true;
  args.exclusive = exclusive;
  args.lock = lock_of(fh, svid);
  return call("CANCEL", [&](rpc_cb cb, void* priv) {
    return rpc_nlm4_cancel_async(connection_.get(), cb, &args, priv);
  });
}

uint32_t NlmClient::unlock(const FileHandle& fh, uint32_t svid) {
  NLM4_UNLOCKargs args{};
  args.lock = lock_of(fh, svid);
  return call("UNLOCK", [&](rpc_cb cb, void* priv) {
    return rpc_nlm4_unlock_async(connection_.get(), cb, &args, priv);
  });
}

nlm4_lock NlmClient::lock_of(const FileHandle& fh, uint32_t svid) {
  owner_ = std::to_string(svid) + "@" + caller_;
  nlm4_lock lock{};
  lock.caller_name = const_cast<char*>(caller_.c_str());
  lock.fh.data.data_len = static_cast<u_int>(fh.size());
  lock.fh.data.data_val = const_cast<char*>(fh.data());
  lock.oh = const_cast<char*>(owner_.c_str());
  lock.svid = svid;
  return lock;
}

uint32_t NlmClient::call(std::string_view what, const std::function<int(rpc_cb, void*)>& issue) {
  uint32_t status = kNlmNoReply;
  const bool answered = connection_.call(what, issue, [&status](void* data) {
    // NLM4_LOCKres and NLM4_UNLOCKres begin with the cookie and the status.
    status = static_cast<NLM4_LOCKres*>(data)->status;
  });
  EXPECT_TRUE(answered || !report_no_reply_) << what << ": " << connection_.error();
  return status;
}

}  // namespace tidepool::test
