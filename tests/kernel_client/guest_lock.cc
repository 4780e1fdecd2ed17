// tp-lock fcntl|flock FILE: the kernel-client guest's lock holder. Takes an exclusive lock on
// all of FILE without waiting — a write lock with fcntl(F_SETLK), or flock(LOCK_EX | LOCK_NB),
// which the Linux NFS client also sends as an NLM lock of the whole file — prints "held", and
// keeps it until SIGTERM (exit 0; closing the file releases it). Exit 1, saying why, when the
// lock is refused. Busybox has no fcntl locker, and its flock runs a command that inherits the
// lock, so that killing flock alone would leave the lock held.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>

int main(int argc, char** argv) {
  const std::string_view kind = argc == 3 ? argv[1] : "";
  if (kind != "fcntl" && kind != "flock") {
    std::fprintf(stderr, "usage: tp-lock fcntl|flock FILE\n");
    return 2;
  }
  sigset_t terminate;
  sigemptyset(&terminate);
  sigaddset(&terminate, SIGTERM);
  sigprocmask(SIG_BLOCK, &terminate, nullptr);
  const int fd = ::open(argv[2], O_RDWR);
  if (fd < 0) {
    std::fprintf(stderr, "tp-lock: open %s: %s\n", argv[2], std::strerror(errno));
    return 1;
  }
  int rc = 0;
  if (kind == "fcntl") {
    struct flock whole {};
    whole.l_type = F_WRLCK;
    whole.l_whence = SEEK_SET;
    rc = ::fcntl(fd, F_SETLK, &whole);
  } else {
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  }
  if (rc != 0) {
    std::fprintf(stderr, "tp-lock: %s lock of %s refused: %s\n", argv[1], argv[2],
                 std::strerror(errno));
    return 1;
  }
  std::printf("held\n");
  std::fflush(stdout);
  int signal = 0;
  sigwait(&terminate, &signal);
  ::close(fd);
  return 0;
}
