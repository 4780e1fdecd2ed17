#include "tests/process/netns.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "tests/process/tide_cluster.h"

namespace tidepool::test {
namespace {

constexpr const char* kNamespaces = "/run/netns";
constexpr const char* kPrefix = "tidepool-";
// A hardware address no interface has: frames sent to it go nowhere.
constexpr const char* kNowhere = "02:00:5e:00:de:ad";

// Deletes the namespaces of test processes that are gone.
void delete_abandoned_namespaces() {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(kNamespaces, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kPrefix, 0) != 0) continue;
    const std::string rest = name.substr(std::char_traits<char>::length(kPrefix));
    const std::size_t digits = rest.find_first_not_of("0123456789");
    if (digits == 0 || digits == std::string::npos || rest[digits] != '-') continue;
    const pid_t pid = static_cast<pid_t>(std::atol(rest.c_str()));
    if (pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    run("ip", {"netns", "delete", name}, std::chrono::seconds(10));
  }
}

}  // namespace

TestNetwork::TestNetwork(std::size_t nodes)
    : nodes_(nodes), prefix_(kPrefix + std::to_string(::getpid()) + "-") {
  delete_abandoned_namespaces();
  const std::string hub = hub_namespace();
  if (!ip("netns add " + hub) || !ip("-n " + hub + " link set lo up") ||
      !ip("-n " + hub + " link add br0 type bridge") ||
      !ip("-n " + hub + " addr add 198.18.0.254/24 dev br0") ||
      !ip("-n " + hub + " link set br0 up")) {
    return;
  }
  for (std::size_t k = 1; k <= nodes_; ++k) {
    const std::string node = node_namespace(k);
    const std::string veth = "n" + std::to_string(k);
    if (!ip("netns add " + node) || !ip("-n " + node + " link set lo up") ||
        !ip("-n " + hub + " link add " + veth + " type veth peer name eth0 netns " + node) ||
        !ip("-n " + hub + " link set " + veth + " master br0 up") ||
        !ip("-n " + node + " addr add " + node_address(k) + "/24 dev eth0") ||
        !ip("-n " + node + " addr add " + client_address(k) + "/24 dev eth0") ||
        !ip("-n " + node + " link set eth0 up")) {
      return;
    }
  }
}

TestNetwork::~TestNetwork() {
  for (std::size_t k = 1; k <= nodes_; ++k) {
    run("ip", {"netns", "delete", node_namespace(k)}, std::chrono::seconds(10));
  }
  run("ip", {"netns", "delete", hub_namespace()}, std::chrono::seconds(10));
}

bool TestNetwork::ip(const std::string& arguments) {
  // Through the shell, which splits the words: every argument here is the test's own.
  const Ran ran = run("sh", {"-c", "ip " + arguments}, std::chrono::seconds(10));
  if (ran.exit_code == 0) return true;
  if (error_.empty()) error_ = "ip " + arguments + ": " + ran.output;
  return false;
}

bool TestNetwork::isolate(std::size_t k) {
  if (!ip("-n " + hub_namespace() + " link set n" + std::to_string(k) + " nomaster")) return false;
  isolated_.insert(k);
  return true;
}

bool TestNetwork::drop(std::size_t from, std::size_t to) {
  if (!ip("-n " + node_namespace(from) + " neigh replace " + node_address(to) + " lladdr " +
          kNowhere + " dev eth0 nud permanent")) {
    return false;
  }
  dropped_.insert({from, to});
  return true;
}

bool TestNetwork::heal() {
  // A cut that did not heal stays listed, for the next heal() to try again.
  std::erase_if(isolated_, [this](std::size_t k) {
    return ip("-n " + hub_namespace() + " link set n" + std::to_string(k) + " master br0");
  });
  std::erase_if(dropped_, [this](const std::pair<std::size_t, std::size_t>& cut) {
    return ip("-n " + node_namespace(cut.first) + " neigh del " + node_address(cut.second) +
              " dev eth0");
  });
  return isolated_.empty() && dropped_.empty();
}

std::string TestNetwork::describe() const {
  std::string out;
  for (std::size_t k : isolated_) {
    out += (out.empty() ? "" : "; ") + ("isolated " + std::to_string(k));
  }
  for (const auto& [from, to] : dropped_) {
    out += (out.empty() ? "" : "; ") + std::to_string(from) + "->" + std::to_string(to) +
           " dropped";
  }
  return out.empty() ? "no cut" : out;
}

InsideNamespace::InsideNamespace(const std::string& name) {
  original_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  const int target =
      ::open((std::string(kNamespaces) + "/" + name).c_str(), O_RDONLY | O_CLOEXEC);
  entered_ = original_ >= 0 && target >= 0 && ::setns(target, CLONE_NEWNET) == 0;
  if (target >= 0) ::close(target);
}

InsideNamespace::~InsideNamespace() {
  if (entered_) ::setns(original_, CLONE_NEWNET);
  if (original_ >= 0) ::close(original_);
}

}  // namespace tidepool::test
