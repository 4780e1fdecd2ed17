#include "daemon/admin/routes.h"

#include <charconv>

namespace tidepool::daemon::admin {
namespace {

// A segment with its %XX escapes undone; a malformed escape stays as it is.
std::string percent_decoded(std::string_view segment) {
  std::string decoded;
  for (std::size_t i = 0; i < segment.size(); ++i) {
    unsigned value = 0;
    if (segment[i] == '%' && i + 2 < segment.size() &&
        std::from_chars(segment.data() + i + 1, segment.data() + i + 3, value, 16).ptr ==
            segment.data() + i + 3) {
      decoded += static_cast<char>(value);
      i += 2;
    } else {
      decoded += segment[i];
    }
  }
  return decoded;
}

std::map<std::string, std::string, std::less<>> query_of(std::string_view target) {
  std::map<std::string, std::string, std::less<>> query;
  const std::size_t mark = target.find('?');
  if (mark == std::string_view::npos) return query;
  std::string_view rest = target.substr(mark + 1);
  while (!rest.empty()) {
    const std::size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    const std::size_t equals = pair.find('=');
    query[percent_decoded(pair.substr(0, equals))] =
        equals == std::string_view::npos ? "" : percent_decoded(pair.substr(equals + 1));
    if (amp == std::string_view::npos) break;
    rest.remove_prefix(amp + 1);
  }
  return query;
}

bool is_parameter(std::string_view segment) {
  return segment.size() > 2 && segment.front() == '{' && segment.back() == '}';
}

// Whether `path` has the shape of `pattern`; if so, what its parameters matched goes into
// `request`.
bool matches(std::string_view pattern, const std::vector<std::string>& path, Request& request) {
  const std::vector<std::string> parts = path_segments(pattern, false);
  std::map<std::string, std::string, std::less<>> params;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    // Every segment before it matched, so the path has at least `i`.
    if (is_parameter(part) && part.ends_with("...}")) {
      request.params = std::move(params);
      request.rest.assign(path.begin() + static_cast<std::ptrdiff_t>(i), path.end());
      return true;
    }
    if (i >= path.size()) return false;
    if (is_parameter(part)) {
      params[part.substr(1, part.size() - 2)] = path[i];
    } else if (part != path[i]) {
      return false;
    }
  }
  if (parts.size() != path.size()) return false;
  request.params = std::move(params);
  request.rest.clear();
  return true;
}

}  // namespace

const std::string& Request::param(std::string_view name) const {
  static const std::string kNone;
  const auto it = params.find(name);
  return it == params.end() ? kNone : it->second;
}

std::optional<std::string> Request::query_value(std::string_view name) const {
  const auto it = query.find(name);
  if (it == query.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> path_segments(std::string_view path, bool decode) {
  std::vector<std::string> parts;
  while (!path.empty()) {
    const std::size_t slash = path.find('/');
    const std::string_view segment = path.substr(0, slash);
    if (!segment.empty()) parts.push_back(decode ? percent_decoded(segment) : std::string(segment));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return parts;
}

RouteMatch match_route(std::span<const Route> table, HttpRequest http) {
  RouteMatch found;
  Request& request = found.request;
  request.path =
      path_segments(std::string_view(http.target).substr(0, http.target.find('?')), true);
  request.query = query_of(http.target);
  request.method = std::move(http.method);
  request.target = std::move(http.target);
  request.body = std::move(http.body);
  for (const Route& route : table) {
    if (!matches(route.pattern, request.path, request)) continue;
    if (route.method == request.method) {
      found.route = &route;
      return found;
    }
    found.path_served = true;
  }
  request.params.clear();
  request.rest.clear();
  return found;
}

}  // namespace tidepool::daemon::admin
