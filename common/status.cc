#include "common/status.h"

namespace tidepool {

std::string_view errc_name(Errc code) {
  switch (code) {
    case Errc::ok: return "ok";
    case Errc::not_found: return "not_found";
    case Errc::already_exists: return "already_exists";
    case Errc::not_a_directory: return "not_a_directory";
    case Errc::is_a_directory: return "is_a_directory";
    case Errc::not_empty: return "not_empty";
    case Errc::access_denied: return "access_denied";
    case Errc::not_permitted: return "not_permitted";
    case Errc::invalid_argument: return "invalid_argument";
    case Errc::name_too_long: return "name_too_long";
    case Errc::file_too_large: return "file_too_large";
    case Errc::too_many_links: return "too_many_links";
    case Errc::cross_device: return "cross_device";
    case Errc::read_only: return "read_only";
    case Errc::stale: return "stale";
    case Errc::bad_handle: return "bad_handle";
    case Errc::bad_cookie: return "bad_cookie";
    case Errc::precondition_failed: return "precondition_failed";
    case Errc::not_supported: return "not_supported";
    case Errc::no_space: return "no_space";
    case Errc::unavailable: return "unavailable";
    case Errc::behind: return "behind";
    case Errc::fenced: return "fenced";
    case Errc::timed_out: return "timed_out";
    case Errc::io_error: return "io_error";
    case Errc::corrupt: return "corrupt";
    case Errc::internal: return "internal";
  }
  return "unknown";
}

std::string Status::to_string() const {
  std::string text(errc_name(code_));
  if (!message_.empty()) {
    text += ": ";
    text += message_;
  }
  return text;
}

}  // namespace tidepool
