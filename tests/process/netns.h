// Network namespaces a test makes for itself, for the partition tests: a hub namespace with a
// bridge, and a namespace for each node joined to the bridge by a veth pair. Node k answers on
// 198.18.0.k; its clients call from 198.18.0.(100+k) in the same namespace, so that a cut between
// node k and the rest of the cluster leaves its clients talking to it, as the clients of a node
// cut off from its peers would. 198.18.0.0/15 is set aside for testing network devices (RFC
// 2544): nothing outside the test's namespaces answers there. The test's own thread joins the
// hub (InsideNamespace) to reach every node through the bridge, as an administrator would.
//
// Every cut is silent, as a failed switch or cable is: packets are dropped, senders see no error.
// - isolate(k): node k's veth leaves the bridge; k reaches nobody, nobody reaches k.
// - drop(from, to): packets of node `from` to node `to` go to a hardware address nobody has (a
//   permanent neighbour entry in `from`'s namespace): one way only, so that drop(a, b) and
//   drop(b, a) together cut a pair and one alone is an asymmetric cut.
// - heal(): every cut undone.
//
// The namespaces (named tidepool-PID-...) are deleted by the destructor; those a killed test
// left behind are deleted by the next one.
//
// Not thread-safe: make the cuts from one thread.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <utility>

namespace tidepool::test {

class TestNetwork {
 public:
  explicit TestNetwork(std::size_t nodes);
  ~TestNetwork();
  TestNetwork(const TestNetwork&) = delete;
  TestNetwork& operator=(const TestNetwork&) = delete;

  // "" once every namespace and link is made; else what failed (not root, no `ip`, ...).
  const std::string& error() const { return error_; }

  std::string hub_namespace() const { return prefix_ + "hub"; }
  std::string node_namespace(std::size_t k) const { return prefix_ + "n" + std::to_string(k); }
  static std::string node_address(std::size_t k) { return "198.18.0." + std::to_string(k); }
  static std::string client_address(std::size_t k) {
    return "198.18.0." + std::to_string(100 + k);
  }
  // Clients of every node, for an export's client list.
  static constexpr const char* kClients = "198.18.0.0/24";

  // False (with error()) if `ip` failed.
  bool isolate(std::size_t k);
  bool drop(std::size_t from, std::size_t to);
  bool heal();
  // The cuts in place, as "isolated 2; 1->3 dropped", for a schedule's log.
  std::string describe() const;

 private:
  bool ip(const std::string& arguments);

  std::size_t nodes_;
  std::string prefix_;
  std::string error_;
  std::set<std::size_t> isolated_;
  std::set<std::pair<std::size_t, std::size_t>> dropped_;
};

// Moves the calling thread into the named network namespace, and back when destroyed. Sockets
// the thread opens meanwhile stay in that namespace, whichever thread uses them later.
class InsideNamespace {
 public:
  explicit InsideNamespace(const std::string& name);
  ~InsideNamespace();
  InsideNamespace(const InsideNamespace&) = delete;
  InsideNamespace& operator=(const InsideNamespace&) = delete;

  bool ok() const { return entered_; }

 private:
  int original_ = -1;
  bool entered_ = false;
};

}  // namespace tidepool::test
