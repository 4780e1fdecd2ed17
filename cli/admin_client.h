// The admin API as `tide` sees it: JSON requests to the first node that answers, and replies
// whose non-2xx statuses come back as errors carrying the server's one-line explanation.
#pragma once

#include <boost/beast/http/verb.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/credentials.h"
#include "cli/json.h"
#include "common/status.h"

namespace tidepool::cli {

using Method = boost::beast::http::verb;

struct ConnectionSettings {
  std::vector<AdminAddress> addresses;  // tried in this order; not empty
  std::string token;                    // empty: no Authorization header
  // PEM of the CA every node's certificate must chain to. Without it nothing is verified: that
  // is trust on first use, for `cluster create`, which is how the CA becomes known.
  std::optional<std::string> ca_certificate;
  // Not empty: only a node presenting the certificate with this fingerprint
  // (cluster::certificate_fingerprint) is sent the request — the one that proved it knows the
  // setup secret, in `cluster create`.
  std::string pinned_fingerprint;
  std::chrono::milliseconds timeout{30'000};  // for the whole request, connecting included
};

struct HttpReply {
  unsigned status = 0;
  std::string reason;
  std::string body;
  std::string server_fingerprint;  // of the certificate the node presented
};

// Sends one request to the cluster. Implementations: HTTPS (cli/https_transport.h) and the
// tests' fakes.
class Transport {
 public:
  virtual ~Transport() = default;
  // Any reply, whatever its status, is a value; errors are failures to get one: unavailable
  // when no address accepted a connection, others (TLS, timeouts) naming the address.
  virtual Result<HttpReply> send(Method method, const std::string& target,
                                 const std::string& body) = 0;
};

// One call of the admin API: `body` (when given) is sent as JSON and a 2xx reply's body is
// parsed (null when empty). A non-2xx reply becomes an error whose message is the body's
// "error" field, or the HTTP reason when the body does not have one.
Result<Json> call_api(Transport& transport, Method method, const std::string& target,
                      const std::optional<Json>& body = std::nullopt);

// `text` made safe as one segment of a URL path (percent-encoded).
std::string path_segment(std::string_view text);

}  // namespace tidepool::cli
