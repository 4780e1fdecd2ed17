// What every admin API handler answers with, and how it reads what it is sent.
#pragma once

#include <charconv>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "daemon/http.h"

namespace tidepool::daemon::admin {

HttpResponse reply(unsigned status, const nlohmann::json& body);
// The error response for `status`, with the HTTP status http_status_of() maps its code to.
HttpResponse failure(const Status& status);
HttpResponse no_content();

// invalid_argument unless `body` is a JSON object.
Result<nlohmann::json> parse_body(const std::string& body);

// A decimal id that is the whole of `text`.
template <typename Id = std::uint32_t>
std::optional<Id> parse_id(std::string_view text) {
  Id id = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return id;
}

std::int64_t unix_now();

}  // namespace tidepool::daemon::admin
