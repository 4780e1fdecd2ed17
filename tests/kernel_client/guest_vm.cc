#include "tests/kernel_client/guest_vm.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>  // strverscmp
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <utility>

namespace tidepool::test {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kQemu = "qemu-system-x86_64";

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// Forks and execs argv (searching PATH), stdout and stderr into a pipe whose
// read end is returned in *out_fd; stdin from a pipe whose write end is
// returned in *in_fd, or from /dev/null when in_fd is null. The child dies
// with this process. -1 if it could not fork.
pid_t spawn(const std::vector<std::string>& args, int* out_fd, int* in_fd, std::string* error) {
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    *error = std::string("pipe: ") + std::strerror(errno);
    return -1;
  }
  int in[2] = {-1, -1};
  if (in_fd != nullptr ? ::pipe2(in, O_CLOEXEC) != 0
                       : (in[0] = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
    *error = std::string("stdin: ") + std::strerror(errno);
    ::close(out[0]);
    ::close(out[1]);
    return -1;
  }
  auto close_all = [&] {
    for (int fd : {out[0], out[1], in[0], in[1]}) {
      if (fd >= 0) ::close(fd);
    }
  };
  pid_t parent = ::getpid();
  pid_t child = ::fork();
  if (child < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    close_all();
    return -1;
  }
  if (child == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  *out_fd = std::exchange(out[0], -1);
  if (in_fd != nullptr) *in_fd = std::exchange(in[1], -1);
  close_all();
  return child;
}

// Runs argv to completion; its exit status (-1 if it could not start), its
// output in *output.
int run_capture(const std::vector<std::string>& args, std::string* output) {
  int fd = -1;
  pid_t pid = spawn(args, &fd, nullptr, output);
  if (pid < 0) return -1;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    output->append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool is_file(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

// qemu's option syntax: a comma inside a value is written twice.
std::string qemu_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    out += c;
    if (c == ',') out += ',';
  }
  return out;
}

}  // namespace

std::optional<GuestKernel> find_guest_kernel(std::string* why) {
  std::vector<std::string> images;
  if (const char* env = std::getenv("TIDEPOOL_GUEST_KERNEL")) {
    images.push_back(env);
  } else {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/boot", ec)) {
      std::string name = entry.path().filename().string();
      if (name.rfind("vmlinuz-", 0) == 0) images.push_back(entry.path().string());
    }
    // Newest first.
    std::sort(images.begin(), images.end(), [](const std::string& a, const std::string& b) {
      return ::strverscmp(a.c_str(), b.c_str()) > 0;
    });
  }
  if (images.empty()) {
    *why = "no /boot/vmlinuz-* (install linux-image-amd64)";
    return std::nullopt;
  }
  std::vector<std::string> problems;
  for (const std::string& image : images) {
    std::string name = std::filesystem::path(image).filename().string();
    std::string version = name.rfind("vmlinuz-", 0) == 0 ? name.substr(8) : "";
    std::string modules = "/lib/modules/" + version + "/modules.dep";
    if (!is_file(image) || ::access(image.c_str(), R_OK) != 0) {
      problems.push_back(image + " is not a readable file");
    } else if (version.empty() || !is_file(modules)) {
      problems.push_back("no " + modules + " for " + image);
    } else {
      return GuestKernel{image, version};
    }
  }
  *why = "no kernel to boot (install linux-image-amd64):";
  for (const std::string& p : problems) *why += " " + p + ";";
  return std::nullopt;
}

std::string qemu_problem() {
  std::string output;
  int rc = run_capture({kQemu, "--version"}, &output);
  if (rc == 0) return "";
  if (rc == 127) return std::string(kQemu) + " not found (install qemu-system-x86)";
  return std::string(kQemu) + " --version failed (status " + std::to_string(rc) + "): " + output;
}

InitramfsResult make_guest_initramfs(const std::string& script_dir, const std::string& out,
                                     const GuestKernel& kernel, const std::string& init_script,
                                     std::string* output) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(out).parent_path(), ec);
  std::vector<std::string> command{"/bin/sh", script_dir + "/make_initramfs.sh", out,
                                   kernel.version, init_script};
  for (std::string_view tools = TP_GUEST_TOOLS; !tools.empty();) {
    const std::size_t end = std::min(tools.find(':'), tools.size());
    command.emplace_back(tools.substr(0, end));
    tools.remove_prefix(std::min(end + 1, tools.size()));
  }
  int rc = run_capture(command, output);
  if (rc == 0) return InitramfsResult::kReady;
  if (rc == 3) return InitramfsResult::kMissing;
  *output = "make_initramfs.sh exited with status " + std::to_string(rc) + ": " + *output;
  return InitramfsResult::kFailed;
}

InitramfsResult prepare_guest(GuestSpec* spec, std::string* why) {
  if (std::string problem = qemu_problem(); !problem.empty()) {
    *why = problem;
    return InitramfsResult::kMissing;
  }
  std::optional<GuestKernel> found = find_guest_kernel(why);
  if (!found) return InitramfsResult::kMissing;
  spec->kernel = *found;
  spec->initramfs = std::string(TP_GUEST_CACHE_DIR) + "/initramfs-" + found->version + ".cpio";
  return make_guest_initramfs(TP_GUEST_SOURCE_DIR, spec->initramfs, spec->kernel,
                              std::string(TP_GUEST_SOURCE_DIR) + "/guest_init.sh", why);
}

std::vector<GuestForward> nfs_forwards(const std::string& address, uint16_t portmap_port,
                                       uint16_t mount_port, uint16_t nfs_port) {
  return {
      {111, address, portmap_port},
      {mount_port, address, mount_port},
      {nfs_port, address, nfs_port},
  };
}

GuestRun run_guest(const GuestSpec& spec) {
  GuestRun run;
  // What is typed on the console of a qemu that just exited fails as EPIPE, not as a signal.
  ::signal(SIGPIPE, SIG_IGN);
  if (spec.relay_path.find_first_of(" \t'\"\\") != std::string::npos) {
    run.error = "the relay's path must not contain blanks or quotes: " + spec.relay_path;
    return run;
  }
  std::string append = "console=ttyS0 panic=-1 loglevel=5";
  for (const std::string& a : spec.kernel_args) append += " " + a;
  std::string netdev = "user,id=n0,restrict=on";
  for (const GuestForward& f : spec.forwards) {
    netdev += ",guestfwd=tcp:" + spec.forward_address + ":" + std::to_string(f.guest_port) +
              "-cmd:" + qemu_escape(spec.relay_path) + " " + f.host_address + " " +
              std::to_string(f.host_port);
  }
  // clang-format off
  std::vector<std::string> args = {
      kQemu,
      "-accel", "tcg,thread=multi",
      "-smp", std::to_string(spec.cpus),
      "-m", std::to_string(spec.memory_mib),
      "-nodefaults", "-nographic", "-serial", "stdio", "-no-reboot",
      "-kernel", spec.kernel.image,
      "-initrd", spec.initramfs,
      "-append", append,
      "-netdev", netdev,
      // No option ROM: the guest boots from -kernel, not from the network.
      "-device", "virtio-net-pci,netdev=n0,romfile=",
  };
  // clang-format on

  std::ofstream log;
  if (!spec.console_log.empty()) log.open(spec.console_log, std::ios::trunc);
  auto start = Clock::now();
  auto deadline = start + spec.deadline;
  int fd = -1;
  int console_in = -1;
  pid_t pid = spawn(args, &fd, &console_in, &run.error);
  if (pid < 0) return run;
  run.started = true;
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);

  std::string partial;
  auto take = [&](const char* data, size_t len) {
    if (log.is_open()) log.write(data, static_cast<std::streamsize>(len)).flush();
    partial.append(data, len);
    size_t nl;
    while ((nl = partial.find('\n')) != std::string::npos) {
      std::string line = partial.substr(0, nl);
      partial.erase(0, nl + 1);
      line.erase(std::remove(line.begin(), line.end(), '\r'), line.end());
      const std::string typed = spec.on_line ? spec.on_line(line) : std::string();
      run.lines.push_back(std::move(line));
      // Blocking: the guest reads its console while it waits for this.
      for (std::size_t sent = 0; sent < typed.size();) {
        const ssize_t n = ::write(console_in, typed.data() + sent, typed.size() - sent);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        sent += static_cast<std::size_t>(n);
      }
    }
  };
  // Reads what is there; false at end of file.
  auto drain = [&]() {
    char buf[8192];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) {
        take(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      return n < 0;  // EAGAIN: more may come
    }
  };

  int status = 0;
  bool exited = false;
  bool open = true;
  while (!exited) {
    auto now = Clock::now();
    if (now >= deadline) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      run.timed_out = true;
      exited = true;
      break;
    }
    if (open) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
      pollfd p{fd, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 200)));
      open = drain();
    } else {
      ::usleep(20000);
    }
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) exited = true;
  }
  drain();
  ::close(fd);
  ::close(console_in);
  if (!partial.empty()) take("\n", 1);
  run.exit_description = describe_status(status);
  if (run.timed_out) run.exit_description = "killed at the deadline";
  run.wall = Clock::now() - start;
  return run;
}

std::string console_tail(const GuestRun& run, size_t n) {
  std::string out;
  size_t from = run.lines.size() > n ? run.lines.size() - n : 0;
  for (size_t i = from; i < run.lines.size(); ++i) out += "  | " + run.lines[i] + "\n";
  return out;
}

}  // namespace tidepool::test
