// A Linux guest under qemu's TCG emulation, for tests that want the Linux
// kernel's own NFS client against a real tided (tests/kernel_client/).
//
// The guest boots the host's Debian kernel (linux-image-amd64) with an
// initramfs of busybox-static, the NFS and virtio modules and a test's /init
// script (make_initramfs.sh), on qemu's user networking with `restrict=on`:
// it reaches nothing on the host but the forwards it is given, each a guest
// TCP port on one guest address relayed to a host address and port
// (tp_guestfwd_relay, one process per connection). It runs a portmapper and
// status monitor of its own (tp_guest_statd), which the kernel's lockd needs
// to take NLM locks. Its serial console is the
// result: run_guest() collects it, bounded by a deadline; the test may type
// on it too (GuestSpec::on_line).
//
// KVM is not used: this machine's /dev/kvm hangs Debian's kernel at boot
// (see /work/shared/NOTES-machine.md), and TCG works everywhere.
//
// Not thread-safe; run one guest per thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

// The tests that boot a guest are built with where its scripts are, where
// the build keeps its initramfs and console, and the relay (CMakeLists.txt).
#ifndef TP_GUEST_SOURCE_DIR
#error "TP_GUEST_SOURCE_DIR must name tests/kernel_client"
#endif
#ifndef TP_GUEST_CACHE_DIR
#error "TP_GUEST_CACHE_DIR must name a directory of the build tree"
#endif
#ifndef TP_GUESTFWD_RELAY
#error "TP_GUESTFWD_RELAY must name the tp_guestfwd_relay binary"
#endif
#ifndef TP_GUEST_TOOLS
#error "TP_GUEST_TOOLS must name the guest's tools (tp_guest_statd, tp_guest_lock), ':' between"
#endif

namespace tidepool::test {

// A kernel image and the version its modules are under in /lib/modules.
struct GuestKernel {
  std::string image;
  std::string version;
};

// The kernel to boot: $TIDEPOOL_GUEST_KERNEL (a /boot/vmlinuz-VERSION path)
// if set, else the newest readable /boot/vmlinuz-* whose modules are
// installed. nullopt, with *why (naming the package to install), if none.
std::optional<GuestKernel> find_guest_kernel(std::string* why);

// "" if qemu-system-x86_64 can run here; else why not.
std::string qemu_problem();

enum class InitramfsResult {
  kReady,
  kMissing,  // something it needs is not installed: skip
  kFailed,   // a bug: fail
};

// Makes (or reuses, if its inputs did not change) `out` from `init_script`
// for `kernel`, with make_initramfs.sh from `script_dir`. *output gets the
// script's messages.
InitramfsResult make_guest_initramfs(const std::string& script_dir, const std::string& out,
                                     const GuestKernel& kernel, const std::string& init_script,
                                     std::string* output);

struct GuestSpec;

// Everything the guest needs before it boots: qemu, a kernel, and an initramfs
// of guest_init.sh made (or reused) in TP_GUEST_CACHE_DIR, set in spec->kernel
// and spec->initramfs. kMissing: something is not installed, *why names the
// package (a skip); kFailed: *why says what went wrong.
InitramfsResult prepare_guest(GuestSpec* spec, std::string* why);

// One forwarded port: the guest's connections to forward_address:guest_port
// become connections to host_address:host_port.
struct GuestForward {
  uint16_t guest_port = 0;
  std::string host_address;
  uint16_t host_port = 0;
};

// The forwards that let the guest mount a node's export asking its portmapper
// on port 111, which answers with the node's NFS and MOUNT ports: the guest
// sees those same port numbers.
std::vector<GuestForward> nfs_forwards(const std::string& address, uint16_t portmap_port,
                                       uint16_t mount_port, uint16_t nfs_port);

struct GuestSpec {
  GuestKernel kernel;
  std::string initramfs;
  // After "console=ttyS0 panic=-1 ..."; a test's parameters for its /init.
  std::vector<std::string> kernel_args;
  std::string forward_address = "10.0.2.100";
  std::vector<GuestForward> forwards;
  std::string relay_path;  // tp_guestfwd_relay
  int cpus = 2;
  int memory_mib = 512;
  // The whole run, boot to power-off; the guest is killed (SIGKILL) then.
  std::chrono::seconds deadline{300};
  // The console is written here as it arrives ("" for nowhere).
  std::string console_log;
  // Called with each console line as it arrives; what it returns is typed on
  // the guest's console (its serial input), "" for nothing.
  std::function<std::string(const std::string& line)> on_line;
};

struct GuestRun {
  std::vector<std::string> lines;  // the serial console, without "\r\n"
  bool started = false;            // qemu was started
  bool timed_out = false;          // killed at the deadline
  std::string exit_description;    // how qemu exited: "exit 0", "signal 9"
  std::string error;               // why qemu could not be started
  std::chrono::duration<double> wall{};
};

// Boots the guest and waits until it powers off (qemu exits) or the
// deadline passes.
GuestRun run_guest(const GuestSpec& spec);

// The last `n` lines of the console, one per line.
std::string console_tail(const GuestRun& run, size_t n = 40);

}  // namespace tidepool::test
