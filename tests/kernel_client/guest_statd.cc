// The kernel-client guest's portmapper and status monitor, on 127.0.0.1:111 over TCP and UDP.
//
// The Linux NFSv3 client takes locks through its in-kernel lockd, which registers with the
// local portmapper when the first mount without `nolock` starts it, and asks the local status
// monitor (rpc.statd) to monitor each server before its first lock there (SM_MON). The guest has
// neither, and Debian's rpcbind and rpc.statd bring a dynamic userland and state directories
// along; this answers just what the kernel asks: PMAP v2 and RPCBIND v3/v4 SET, UNSET, GETPORT
// and GETADDR, and STATUS v1 (SM_STAT, SM_MON, SM_UNMON, SM_UNMON_ALL, SM_NOTIFY), all on one
// port. It keeps no state across restarts: its NSM state number is always 1, "up since boot",
// which is what a guest booted for one test is. Each call is logged on stderr.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace {

constexpr std::uint16_t kPort = 111;
constexpr std::uint32_t kPortmapper = 100000;
constexpr std::uint32_t kStatus = 100024;
constexpr std::uint32_t kTcp = 6;
constexpr std::uint32_t kUdp = 17;
constexpr std::size_t kMaxRecord = 64 * 1024;
constexpr std::size_t kMaxString = 1024;
constexpr std::int32_t kNsmState = 1;

enum AcceptStat : std::uint32_t {
  kSuccess = 0,
  kProgUnavail = 1,
  kProgMismatch = 2,
  kProcUnavail = 3,
  kGarbageArgs = 4,
};

class Reader {
 public:
  Reader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  bool ok() const { return ok_; }

  std::uint32_t u32() {
    if (size_ - at_ < 4) {
      ok_ = false;
      return 0;
    }
    std::uint32_t value = 0;
    for (int i = 0; i < 4; ++i) value = (value << 8) | data_[at_++];
    return value;
  }
  std::string opaque(std::size_t max) {
    const std::uint32_t length = u32();
    const std::size_t padded = (static_cast<std::size_t>(length) + 3) & ~std::size_t{3};
    if (!ok_ || length > max || size_ - at_ < padded) {
      ok_ = false;
      return {};
    }
    std::string value(reinterpret_cast<const char*>(data_ + at_), length);
    at_ += padded;
    return value;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
  bool ok_ = true;
};

class Writer {
 public:
  void u32(std::uint32_t value) {
    for (int shift = 24; shift >= 0; shift -= 8)
      bytes.push_back(static_cast<std::uint8_t>(value >> shift));
  }
  void string(const std::string& value) {
    u32(static_cast<std::uint32_t>(value.size()));
    bytes.insert(bytes.end(), value.begin(), value.end());
    while (bytes.size() % 4 != 0) bytes.push_back(0);
  }
  std::vector<std::uint8_t> bytes;
};

// What is registered: program, version and protocol to a port.
std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>, std::uint16_t> g_ports;

std::uint32_t protocol_of(const std::string& netid) {
  if (netid == "tcp" || netid == "tcp6") return kTcp;
  if (netid == "udp" || netid == "udp6") return kUdp;
  return 0;
}

// RFC 1833's universal address of 127.0.0.1:port.
std::string universal_address(std::uint16_t port) {
  return "127.0.0.1." + std::to_string(port >> 8) + "." + std::to_string(port & 0xff);
}

std::optional<std::uint16_t> port_of_universal_address(const std::string& address) {
  const std::size_t low = address.rfind('.');
  if (low == std::string::npos || low == 0) return std::nullopt;
  const std::size_t high = address.rfind('.', low - 1);
  if (high == std::string::npos) return std::nullopt;
  const int hi = std::atoi(address.c_str() + high + 1);
  const int lo = std::atoi(address.c_str() + low + 1);
  if (hi < 0 || hi > 255 || lo < 0 || lo > 255) return std::nullopt;
  return static_cast<std::uint16_t>(hi << 8 | lo);
}

// The results of one procedure, or why there are none.
struct Answer {
  AcceptStat stat = kSuccess;
  Writer results;
};

Answer portmapper_v2(std::uint32_t procedure, Reader& args) {
  Answer answer;
  switch (procedure) {
    case 0:
      return answer;
    case 1:    // SET
    case 2:    // UNSET
    case 3: {  // GETPORT
      const std::uint32_t program = args.u32();
      const std::uint32_t version = args.u32();
      const std::uint32_t protocol = args.u32();
      const std::uint32_t port = args.u32();
      if (!args.ok()) return Answer{kGarbageArgs, {}};
      const auto key = std::make_tuple(program, version, protocol);
      std::fprintf(stderr, "tp-statd: PMAP %s %u/%u/%u %u\n",
                   procedure == 1   ? "SET"
                   : procedure == 2 ? "UNSET"
                                    : "GETPORT",
                   program, version, protocol, port);
      if (procedure == 1) {
        g_ports[key] = static_cast<std::uint16_t>(port);
        answer.results.u32(1);
      } else if (procedure == 2) {
        for (std::uint32_t each : {kTcp, kUdp})
          g_ports.erase(std::make_tuple(program, version, each));
        answer.results.u32(1);
      } else {
        const auto found = g_ports.find(key);
        answer.results.u32(found == g_ports.end() ? 0 : found->second);
      }
      return answer;
    }
    case 4:  // DUMP: the list, each entry preceded by TRUE, ended by FALSE
      for (const auto& [key, port] : g_ports) {
        answer.results.u32(1);
        answer.results.u32(std::get<0>(key));
        answer.results.u32(std::get<1>(key));
        answer.results.u32(std::get<2>(key));
        answer.results.u32(port);
      }
      answer.results.u32(0);
      return answer;
    default:
      return Answer{kProcUnavail, {}};
  }
}

Answer rpcbind_v3_v4(std::uint32_t procedure, Reader& args) {
  Answer answer;
  if (procedure == 0) return answer;
  // SET, UNSET, GETADDR, and v4's GETVERSADDR take an rpcb.
  if (procedure != 1 && procedure != 2 && procedure != 3 && procedure != 9) {
    return Answer{kProcUnavail, {}};
  }
  const std::uint32_t program = args.u32();
  const std::uint32_t version = args.u32();
  const std::string netid = args.opaque(kMaxString);
  const std::string address = args.opaque(kMaxString);
  args.opaque(kMaxString);  // owner
  if (!args.ok()) return Answer{kGarbageArgs, {}};
  std::fprintf(stderr, "tp-statd: RPCB %u %u/%u/%s %s\n", procedure, program, version,
               netid.c_str(), address.c_str());
  const std::uint32_t protocol = protocol_of(netid);
  if (procedure == 1) {
    const std::optional<std::uint16_t> port = port_of_universal_address(address);
    const bool taken = protocol != 0 && port.has_value();
    if (taken) g_ports[std::make_tuple(program, version, protocol)] = *port;
    answer.results.u32(taken ? 1 : 0);
  } else if (procedure == 2) {
    for (std::uint32_t each : {kTcp, kUdp}) {
      if (protocol == 0 || protocol == each) g_ports.erase(std::make_tuple(program, version, each));
    }
    answer.results.u32(1);
  } else {
    const auto found = g_ports.find(std::make_tuple(program, version, protocol));
    answer.results.string(found == g_ports.end() ? "" : universal_address(found->second));
  }
  return answer;
}

Answer status_v1(std::uint32_t procedure, Reader& args) {
  Answer answer;
  switch (procedure) {
    case 0:
      return answer;
    case 1:    // SM_STAT(sm_name)
    case 2: {  // SM_MON(mon_id, priv)
      const std::string name = args.opaque(kMaxString);
      if (procedure == 2) {
        args.opaque(kMaxString);                 // my_id.my_name
        for (int i = 0; i < 3; ++i) args.u32();  // my_prog, my_vers, my_proc
        for (int i = 0; i < 4; ++i) args.u32();  // priv, 16 bytes
      }
      if (!args.ok()) return Answer{kGarbageArgs, {}};
      std::fprintf(stderr, "tp-statd: %s %s\n", procedure == 1 ? "SM_STAT" : "SM_MON",
                   name.c_str());
      answer.results.u32(0);  // stat_succ
      answer.results.u32(static_cast<std::uint32_t>(kNsmState));
      return answer;
    }
    case 3:  // SM_UNMON(mon_id)
    case 4:  // SM_UNMON_ALL(my_id)
    case 6:  // SM_NOTIFY(stat_chge)
      std::fprintf(stderr, "tp-statd: SM procedure %u\n", procedure);
      if (procedure != 6) answer.results.u32(static_cast<std::uint32_t>(kNsmState));
      return answer;
    case 5:  // SM_SIMU_CRASH
      return answer;
    default:
      return Answer{kProcUnavail, {}};
  }
}

// The reply to one call, or nothing for a message that is not a call.
std::optional<std::vector<std::uint8_t>> reply_to(const std::uint8_t* data, std::size_t size) {
  Reader call(data, size);
  const std::uint32_t xid = call.u32();
  const std::uint32_t type = call.u32();
  const std::uint32_t rpc_version = call.u32();
  const std::uint32_t program = call.u32();
  const std::uint32_t version = call.u32();
  const std::uint32_t procedure = call.u32();
  call.u32();  // credential flavor
  call.opaque(400);
  call.u32();  // verifier flavor
  call.opaque(400);
  if (!call.ok() || type != 0) return std::nullopt;
  Writer reply;
  reply.u32(xid);
  reply.u32(1);  // REPLY
  if (rpc_version != 2) {
    reply.u32(1);  // MSG_DENIED
    reply.u32(0);  // RPC_MISMATCH
    reply.u32(2);
    reply.u32(2);
    return reply.bytes;
  }
  reply.u32(0);  // MSG_ACCEPTED
  reply.u32(0);  // AUTH_NONE verifier
  reply.u32(0);
  Answer answer;
  std::uint32_t low = 0;
  std::uint32_t high = 0;
  if (program == kPortmapper && version == 2) {
    answer = portmapper_v2(procedure, call);
  } else if (program == kPortmapper && (version == 3 || version == 4)) {
    answer = rpcbind_v3_v4(procedure, call);
  } else if (program == kPortmapper) {
    answer.stat = kProgMismatch, low = 2, high = 4;
  } else if (program == kStatus && version == 1) {
    answer = status_v1(procedure, call);
  } else if (program == kStatus) {
    answer.stat = kProgMismatch, low = 1, high = 1;
  } else {
    answer.stat = kProgUnavail;
  }
  reply.u32(answer.stat);
  if (answer.stat == kProgMismatch) {
    reply.u32(low);
    reply.u32(high);
  }
  if (answer.stat == kSuccess) {
    reply.bytes.insert(reply.bytes.end(), answer.results.bytes.begin(), answer.results.bytes.end());
  }
  return reply.bytes;
}

bool write_all(int fd, const std::uint8_t* data, std::size_t size) {
  while (size > 0) {
    const ssize_t sent = ::write(fd, data, size);
    if (sent <= 0) return false;
    data += sent;
    size -= static_cast<std::size_t>(sent);
  }
  return true;
}

// A TCP client's bytes until its records are whole (RFC 5531 record marking).
struct Connection {
  int fd;
  std::vector<std::uint8_t> in;
  std::vector<std::uint8_t> record;
};

// Answers every whole record; false when the connection is to be closed.
bool serve_records(Connection& c) {
  while (c.in.size() >= 4) {
    const std::uint32_t mark =
        static_cast<std::uint32_t>(c.in[0]) << 24 | c.in[1] << 16 | c.in[2] << 8 | c.in[3];
    const std::size_t length = mark & 0x7fffffff;
    if (length > kMaxRecord || c.record.size() + length > kMaxRecord) return false;
    if (c.in.size() < 4 + length) return true;
    c.record.insert(c.record.end(), c.in.begin() + 4, c.in.begin() + 4 + static_cast<long>(length));
    c.in.erase(c.in.begin(), c.in.begin() + 4 + static_cast<long>(length));
    if ((mark & 0x80000000u) == 0) continue;
    const std::optional<std::vector<std::uint8_t>> reply =
        reply_to(c.record.data(), c.record.size());
    c.record.clear();
    if (!reply) continue;
    const std::uint32_t out_mark = 0x80000000u | static_cast<std::uint32_t>(reply->size());
    const std::uint8_t head[4] = {
        static_cast<std::uint8_t>(out_mark >> 24), static_cast<std::uint8_t>(out_mark >> 16),
        static_cast<std::uint8_t>(out_mark >> 8), static_cast<std::uint8_t>(out_mark)};
    if (!write_all(c.fd, head, 4) || !write_all(c.fd, reply->data(), reply->size())) return false;
  }
  return true;
}

int bound_socket(int type) {
  const int fd = ::socket(AF_INET, type, 0);
  if (fd < 0) return -1;
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(kPort);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      (type == SOCK_STREAM && ::listen(fd, 16) != 0)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

int main() {
  const int listener = bound_socket(SOCK_STREAM);
  const int datagrams = bound_socket(SOCK_DGRAM);
  if (listener < 0 || datagrams < 0) {
    std::perror("tp-statd: cannot bind 127.0.0.1:111");
    return 1;
  }
  for (std::uint32_t version = 2; version <= 4; ++version) {
    for (std::uint32_t protocol : {kTcp, kUdp}) g_ports[{kPortmapper, version, protocol}] = kPort;
  }
  for (std::uint32_t protocol : {kTcp, kUdp}) g_ports[{kStatus, 1, protocol}] = kPort;
  std::fprintf(stderr, "tp-statd: serving PMAP, RPCBIND and STATUS on 127.0.0.1:%u\n", kPort);

  std::vector<Connection> connections;
  std::vector<std::uint8_t> buffer(kMaxRecord);
  for (;;) {
    std::vector<pollfd> watched{{listener, POLLIN, 0}, {datagrams, POLLIN, 0}};
    for (const Connection& c : connections) watched.push_back({c.fd, POLLIN, 0});
    if (::poll(watched.data(), watched.size(), -1) < 0) continue;
    if (watched[0].revents & POLLIN) {
      const int fd = ::accept(listener, nullptr, nullptr);
      if (fd >= 0) connections.push_back({fd, {}, {}});
    }
    if (watched[1].revents & POLLIN) {
      sockaddr_in from{};
      socklen_t from_size = sizeof from;
      const ssize_t got = ::recvfrom(datagrams, buffer.data(), buffer.size(), 0,
                                     reinterpret_cast<sockaddr*>(&from), &from_size);
      if (got > 0) {
        if (auto reply = reply_to(buffer.data(), static_cast<std::size_t>(got))) {
          ::sendto(datagrams, reply->data(), reply->size(), 0, reinterpret_cast<sockaddr*>(&from),
                   from_size);
        }
      }
    }
    for (std::size_t i = 2; i < watched.size(); ++i) {
      if (watched[i].revents == 0) continue;
      Connection& c = connections[i - 2];
      const ssize_t got = ::read(c.fd, buffer.data(), buffer.size());
      bool keep = got > 0;
      if (keep) {
        c.in.insert(c.in.end(), buffer.begin(), buffer.begin() + got);
        keep = serve_records(c);
      }
      if (!keep) {
        ::close(c.fd);
        c.fd = -1;
      }
    }
    std::erase_if(connections, [](const Connection& c) { return c.fd < 0; });
  }
}
