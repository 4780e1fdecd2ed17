// The JSON type of the CLI. Objects keep the order of their keys, so that `--format json` prints
// what the server sent as it sent it and views list fields in the server's order.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace tidepool::cli {

using Json = nlohmann::ordered_json;

// object[key], or null when `object` is not an object or has no such key: replies are read
// without trusting their shape, and a lookup never throws.
inline const Json& field(const Json& object, std::string_view key) {
  static const Json null;
  if (!object.is_object()) return null;
  auto found = object.find(key);
  return found == object.end() ? null : *found;
}

// `value` when it is an array, else an empty one: a reply's lists are iterated without trusting
// their shape either.
inline const Json& as_list(const Json& value) {
  static const Json empty = Json::array();
  return value.is_array() ? value : empty;
}

// `value` when it is an object, else an empty one.
inline const Json& as_object(const Json& value) {
  static const Json empty = Json::object();
  return value.is_object() ? value : empty;
}

// `json` pretty-printed with two-space indents; invalid UTF-8 in a string is replaced, not
// thrown about.
inline std::string pretty(const Json& json) {
  return json.dump(2, ' ', false, Json::error_handler_t::replace);
}

}  // namespace tidepool::cli
