#include "daemon/admin/replies.h"

#include <chrono>

#include "daemon/admin_api.h"

namespace tidepool::daemon::admin {

HttpResponse reply(unsigned status, const nlohmann::json& body) {
  return HttpResponse{status, body.dump()};
}

HttpResponse failure(const Status& status) {
  return error_response(http_status_of(status.code()), status.message());
}

HttpResponse no_content() { return HttpResponse{204, ""}; }

Result<nlohmann::json> parse_body(const std::string& body) {
  nlohmann::json parsed = nlohmann::json::parse(body, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return error(Errc::invalid_argument, "the request body must be a JSON object");
  }
  return parsed;
}

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace tidepool::daemon::admin
