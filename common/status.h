// Errors as values. A Status says whether an operation succeeded and, if not, what the caller
// should do about it; Result<T> carries a value or the Status that explains its absence.
// Protocol layers map Errc to their wire codes in exactly one place each.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace tidepool {

// Codes are grouped by what the caller should do.
enum class Errc : unsigned char {
  ok = 0,
  // The request is wrong or the namespace says no: report it, do not retry.
  not_found,
  already_exists,
  not_a_directory,
  is_a_directory,
  not_empty,
  access_denied,   // permission bits say no (EACCES)
  not_permitted,   // only the owner or root may do this (EPERM)
  invalid_argument,
  name_too_long,
  file_too_large,
  too_many_links,
  cross_device,
  read_only,
  stale,           // the object named by a handle no longer exists
  bad_handle,      // the handle is malformed or forged
  bad_cookie,      // a directory cookie the server can no longer honour
  precondition_failed,  // the object changed since the caller looked (a guard did not match)
  not_supported,
  no_space,
  // Transient: the same request may succeed later.
  unavailable,
  timed_out,
  behind,  // the caller's view of the cluster is older than the callee's: again once caught up
  // This node was fenced (the group recorded it down) since the request was made: what it was
  // made under — the node's locks, its place as a shard's home — may be another's now. Its
  // client tries again from the start, under what the node holds anew.
  fenced,
  // Unexpected: a bug, a disk error or corruption. Logged; the request fails.
  io_error,
  corrupt,
  internal,
};

std::string_view errc_name(Errc code);
// The transient codes: the same request may succeed later.
inline bool is_transient(Errc code) {
  return code == Errc::unavailable || code == Errc::timed_out || code == Errc::behind ||
         code == Errc::fenced;
}

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Errc code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status success() { return {}; }

  bool ok() const { return code_ == Errc::ok; }
  Errc code() const { return code_; }
  const std::string& message() const { return message_; }
  // "not_found: no entry 'x' in directory 12"
  std::string to_string() const;

 private:
  Errc code_ = Errc::ok;
  std::string message_;
};

inline Status error(Errc code, std::string message = {}) { return {code, std::move(message)}; }

// A value or the error that explains its absence. A Result built from a Status must carry an
// error: a successful Result always has a value.
template <typename T>
class [[nodiscard]] Result {
 public:
  // Asio's co_spawn default-constructs results it hands to a failed coroutine's handler.
  Result() : status_(Errc::internal, "no result") {}
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!status_.ok());
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  Errc code() const { return status_.code(); }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace tidepool

#define TP_CONCAT_INNER(a, b) a##b
#define TP_CONCAT(a, b) TP_CONCAT_INNER(a, b)

// Return (or co_return) the error of a Status-valued expression.
#define TP_RETURN_IF_ERROR(expr)                        \
  do {                                                  \
    if (auto tp_status_ = (expr); !tp_status_.ok()) {   \
      return tp_status_;                                \
    }                                                   \
  } while (0)
#define TP_CO_RETURN_IF_ERROR(expr)                     \
  do {                                                  \
    if (auto tp_status_ = (expr); !tp_status_.ok()) {   \
      co_return tp_status_;                             \
    }                                                   \
  } while (0)

// lhs = value of a Result-valued expression, or (co_)return its error.
#define TP_ASSIGN_OR_RETURN(lhs, expr) \
  TP_ASSIGN_OR_RETURN_IMPL(TP_CONCAT(tp_result_, __LINE__), lhs, expr, return)
#define TP_CO_ASSIGN_OR_RETURN(lhs, expr) \
  TP_ASSIGN_OR_RETURN_IMPL(TP_CONCAT(tp_result_, __LINE__), lhs, expr, co_return)
#define TP_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr, ret) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) ret tmp.status();                     \
  lhs = std::move(tmp).value()
