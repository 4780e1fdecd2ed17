// A fuzzer's side of a socket to a server in its own process on 127.0.0.1, with plain blocking
// calls bounded in time. libFuzzer's timer signal interrupts system calls: each is made again.
#pragma once

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>

namespace tidepool::fuzz {

// Beyond any input's time: a server that has not answered by then hangs.
inline constexpr int kLoopbackBoundMs = 5000;

[[noreturn]] inline void hang(const char* what) {
  std::fprintf(stderr, "fuzzer: %s within %d ms\n", what, kLoopbackBoundMs);
  std::abort();
}

class Deadline {
 public:
  Deadline()
      : at_(std::chrono::steady_clock::now() + std::chrono::milliseconds(kLoopbackBoundMs)) {}
  // Waits for `events` on `fd`; what came, or hang(what) once the deadline passed.
  short wait(int fd, short events, const char* what) const {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          at_ - std::chrono::steady_clock::now());
      if (left.count() <= 0) hang(what);
      pollfd watched{fd, events, 0};
      const int ready = ::poll(&watched, 1, static_cast<int>(left.count()));
      if (ready > 0) return watched.revents;
      if (ready < 0 && errno != EINTR) hang(what);
    }
  }

 private:
  std::chrono::steady_clock::time_point at_;
};

// A socket of `type` (SOCK_STREAM, SOCK_DGRAM) connected to 127.0.0.1:port.
inline int connect_loopback(int type, std::uint16_t port) {
  const int fd = ::socket(AF_INET, type, 0);
  if (fd < 0) hang("no socket");
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0) return fd;
  // Interrupted, the connection goes on being made: it is made once the socket is writable.
  if (errno == EINTR) {
    Deadline().wait(fd, POLLOUT, "no connection to the server");
    int failed = 0;
    socklen_t length = sizeof failed;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &failed, &length) == 0 && failed == 0) return fd;
  }
  std::perror("fuzzer: connect");
  std::abort();
}

// Writes `bytes` to a connection, ends its sending side and reads (and drops) what the server
// sends until it closes the connection, which it must do within the bound. Reads while writing:
// replies need not wait for the rest of the stream.
inline void stream_until_closed(int fd, std::span<const std::uint8_t> bytes) {
  const Deadline deadline;
  std::size_t sent = 0;
  bool ended = false;
  std::uint8_t dropped[65536];
  for (;;) {
    if (sent == bytes.size() && !ended) {
      ::shutdown(fd, SHUT_WR);
      ended = true;
    }
    const short ready = deadline.wait(fd, static_cast<short>(POLLIN | (ended ? 0 : POLLOUT)),
                                      "the server did not close a connection after its end");
    if ((ready & POLLOUT) != 0) {
      const ssize_t n =
          ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno != EINTR && errno != EAGAIN) break;  // closed on what it read
      if (n > 0) sent += static_cast<std::size_t>(n);
    }
    if ((ready & (POLLIN | POLLHUP | POLLERR)) != 0) {
      const ssize_t n = ::recv(fd, dropped, sizeof dropped, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) break;
    }
  }
  ::close(fd);
}

}  // namespace tidepool::fuzz
