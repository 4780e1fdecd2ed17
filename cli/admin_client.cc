#include "cli/admin_client.h"

#include <cstdio>

namespace tidepool::cli {
namespace {

// The code says what kind of failure it was; the message is all a user sees.
Errc errc_of_http_status(unsigned status) {
  switch (status) {
    case 400:
      return Errc::invalid_argument;
    case 401:
      return Errc::access_denied;
    case 404:
      return Errc::not_found;
    case 405:
      return Errc::not_supported;
    case 409:
      return Errc::already_exists;
    case 413:
      return Errc::file_too_large;
    case 503:
      return Errc::unavailable;
    case 504:
      return Errc::timed_out;
    default:
      return Errc::internal;
  }
}

}  // namespace

Result<Json> call_api(Transport& transport, Method method, const std::string& target,
                      const std::optional<Json>& body) {
  const std::string request_body =
      body ? body->dump(-1, ' ', false, Json::error_handler_t::replace) : std::string();
  TP_ASSIGN_OR_RETURN(HttpReply reply, transport.send(method, target, request_body));
  Json json =
      reply.body.empty() ? Json() : Json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
  if (reply.status < 200 || reply.status > 299) {
    std::string message =
        reply.reason.empty() ? "HTTP " + std::to_string(reply.status) : reply.reason;
    if (json.is_object()) {
      if (auto found = json.find("error"); found != json.end() && found->is_string()) {
        message = found->get<std::string>();
      }
    }
    return error(errc_of_http_status(reply.status), std::move(message));
  }
  if (json.is_discarded()) {
    return error(Errc::corrupt, "the cluster's reply to " + target + " is not JSON");
  }
  return json;
}

std::string path_segment(std::string_view text) {
  std::string segment;
  for (unsigned char c : text) {
    bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_' || c == '.' || c == '~';
    if (unreserved) {
      segment += static_cast<char>(c);
    } else {
      char escaped[4];
      std::snprintf(escaped, sizeof escaped, "%%%02X", c);
      segment += escaped;
    }
  }
  return segment;
}

}  // namespace tidepool::cli
