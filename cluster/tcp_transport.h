// The Transport between processes: TCP on the nodes' backend addresses, with mutual TLS under
// the cluster CA unless switched off (benchmarks). Each node opens one connection to each peer
// it sends to and accepts the peers' connections to it; a message is a length-prefixed frame
// on that connection, so messages to one peer keep their order — except that Raft and lock
// messages overtake RPCs still queued (a peer slow to take unit data must not make the sender
// look silent to the leader, or hold up locks). Connections are made on first
// use and again after failures with exponential backoff; messages queued for a peer that cannot
// be reached wait, up to a bound, and then the oldest are dropped (the transport is
// best-effort; the protocols on top retry).
//
// A peer that sends a malformed hello, a frame over the bound, or (with TLS) no certificate
// from the cluster CA is disconnected; the node carries on. With TLS a peer is also who its
// certificate says it is: the certificate must name the node id its hello claims (or, dialled,
// the node dialled), and pass the PeerCertificates the group view gives. The receiver answers
// a hello it understood with whether it takes the connection, so that a node whose certificate
// was revoked — a node removed from the cluster — learns it (TcpTransportOptions::revoked).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "cluster/event_loop.h"
#include "cluster/tls.h"
#include "cluster/transport.h"
#include "common/status.h"

namespace tidepool::cluster {

// The version a node's hello names; a connection naming another is refused.
// 2: backend RPC messages carry their (kind, id, epoch, method or status) after the body.
// 3: the receiver answers the hello (taken, or refused and why).
inline constexpr std::uint32_t kTcpProtocolVersion = 3;

struct TcpTransportOptions {
  NodeId self = 0;
  std::string listen_address;      // "127.0.0.3:7100"; port 0 picks a free one
  std::optional<TlsFiles> tls;     // none: plaintext
  std::size_t max_message_bytes = 64 << 20;
  std::size_t max_queued_bytes = 256 << 20;  // per peer, while it cannot be reached
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds first_backoff{20};
  std::chrono::milliseconds max_backoff{2000};
  // Called on the loop when a peer (`by`, whose own certificate was checked) refused this node
  // because its certificate was revoked: the cluster removed this node. It may be called again
  // for each refusal that follows.
  std::function<void(NodeId by, const std::string& why)> revoked;
};

// Which certificates peers may present, from the group view. A revoked certificate is refused;
// a member is taken only with the certificate the view records for it. A node the view does
// not hold yet — one being added, whose join comes before its registration — is taken with any
// certificate from the CA that names it and is not revoked.
struct PeerCertificates {
  // Each member's certificate fingerprint (cluster::certificate_fingerprint).
  std::map<NodeId, std::string> issued;
  std::set<std::string> revoked;
  bool operator==(const PeerCertificates&) const = default;
};

class TcpTransport final : public Transport {
 public:
  struct Stats {
    std::uint64_t messages_sent = 0;
    std::uint64_t messages_received = 0;
    std::uint64_t messages_dropped = 0;      // queue over its bound, or over the size bound
    // Bad hello, bad frame, failed TLS handshake, a certificate not the peer's or revoked.
    std::uint64_t connections_refused = 0;
    std::uint64_t bytes_sent = 0;            // messages with their headers, as written
    std::uint64_t bytes_received = 0;
  };

  // Listens on options.listen_address and runs its connections on `executor` (any thread
  // count); messages are delivered on `loop`. Fails if the address is taken or TLS files are
  // missing or invalid.
  static Result<std::unique_ptr<TcpTransport>> start(boost::asio::any_io_executor executor,
                                                     EventLoop& loop,
                                                     TcpTransportOptions options);
  // Closes every connection; no receiver runs after it returns.
  ~TcpTransport() override;
  // The same, the transport left in place: it listens, sends and delivers no more.
  void stop();

  void set_address(NodeId node, const std::string& address) override;
  void send(NodeId to, Channel channel, xdr::Buffer message) override;
  void set_receiver(Channel channel, Receiver receiver) override;

  // From now on; a connection whose peer's certificate they no longer admit is closed at once.
  void set_peer_certificates(PeerCertificates certificates);

  // The address actually listened on.
  std::string local_address() const;
  Stats stats() const;

  class Impl;

 private:
  explicit TcpTransport(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

// Parses "host:port" (IPv4 or a name that resolves to it is not supported: addresses are
// literal) into its parts.
Result<std::pair<std::string, std::uint16_t>> split_host_port(const std::string& address);

}  // namespace tidepool::cluster
