// tp_guestfwd_relay ADDRESS PORT
//
// One guest TCP connection, relayed to ADDRESS:PORT on the host. qemu's user
// networking runs this once per connection the guest opens to a `guestfwd`
// address (`guestfwd=tcp:10.0.2.100:2049-cmd:tp_guestfwd_relay 127.1.2.3
// 2049`), with the guest's end of the connection as stdin and stdout (and
// stderr: so this program never writes diagnostics; it just exits).
//
// A guestfwd to a chardev (`-tcp:ADDR:PORT`) would open one host connection
// when qemu starts and pour every guest connection into it; the kernel's NFS
// client opens one to the portmapper, one to MOUNT and one to NFS, so each
// needs a connection of its own.
//
// Half-closes are passed on (EOF on one side shuts down writing on the other);
// the program exits when both directions are done or either side fails.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace {

constexpr int kConnectTimeoutMs = 5000;

int connect_to(const char* address, const char* port_text) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(std::atoi(port_text)));
  if (::inet_pton(AF_INET, address, &sa.sin_addr) != 1) return -1;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    if (errno != EINPROGRESS) return -1;
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, kConnectTimeoutMs) != 1) return -1;
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) return -1;
  }
  int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// Writes all of buf; false if the peer is gone.
bool write_all(int fd, const char* buf, ssize_t len) {
  while (len > 0) {
    ssize_t n = ::write(fd, buf, static_cast<size_t>(len));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buf += n;
    len -= n;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  ::signal(SIGPIPE, SIG_IGN);
  int host = connect_to(argv[1], argv[2]);
  if (host < 0) return 1;

  // Direction 0: guest (fd 0) -> host; direction 1: host -> guest (fd 1).
  const int from[2] = {0, host};
  const int to[2] = {host, 1};
  bool open[2] = {true, true};
  static char buf[1 << 16];
  while (open[0] || open[1]) {
    pollfd p[2];
    int n = 0;
    int dir_of[2];
    for (int d = 0; d < 2; ++d) {
      if (!open[d]) continue;
      p[n] = {from[d], POLLIN, 0};
      dir_of[n++] = d;
    }
    if (::poll(p, static_cast<nfds_t>(n), -1) < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    for (int i = 0; i < n; ++i) {
      if (p[i].revents == 0) continue;
      int d = dir_of[i];
      ssize_t got = ::read(from[d], buf, sizeof buf);
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got < 0) return 1;
      if (got == 0) {
        open[d] = false;
        ::shutdown(to[d], SHUT_WR);
        continue;
      }
      if (!write_all(to[d], buf, got)) return 1;
    }
  }
  return 0;
}
