// Status and Result<T>: errors as values.
//
// A Status is cheap to copy when OK (no allocation). Errors carry a code and a
// human-readable message that says what is wrong and, where possible, how to
// fix it. Result<T> holds either a T or a non-OK Status, shaped like
// std::expected. Exceptions never cross a component boundary; use these.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace lote {

enum class StatusCode : int32_t {
  kOk = 0,
  kInvalidArgument,     // the caller's input is wrong
  kNotFound,            // a named thing does not exist
  kAlreadyExists,       // a thing with that name exists
  kFailedPrecondition,  // the system is not in a state that allows it
  kResourceExhausted,   // a limit is reached
  kUnauthenticated,     // missing or unknown credentials
  kPermissionDenied,    // credentials known but not allowed / bad signature
  kDeadlineExceeded,    // timed out
  kUnavailable,         // transient: retry may help
  kCancelled,
  kDataLoss,  // corrupt or truncated data
  kUnimplemented,
  kInternal,  // a bug or an unexpected fault
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) {
    return {StatusCode::kInvalidArgument, std::move(m)};
  }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
  static Status FailedPrecondition(std::string m) {
    return {StatusCode::kFailedPrecondition, std::move(m)};
  }
  static Status ResourceExhausted(std::string m) {
    return {StatusCode::kResourceExhausted, std::move(m)};
  }
  static Status Unauthenticated(std::string m) {
    return {StatusCode::kUnauthenticated, std::move(m)};
  }
  static Status PermissionDenied(std::string m) {
    return {StatusCode::kPermissionDenied, std::move(m)};
  }
  static Status DeadlineExceeded(std::string m) {
    return {StatusCode::kDeadlineExceeded, std::move(m)};
  }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
  static Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
  static Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  const std::string& message() const;
  std::string ToString() const;  // "NotFound: job queue q1 does not exist"

  bool IsInvalidArgument() const { return code() == StatusCode::kInvalidArgument; }
  bool IsNotFound() const { return code() == StatusCode::kNotFound; }
  bool IsAlreadyExists() const { return code() == StatusCode::kAlreadyExists; }
  bool IsFailedPrecondition() const { return code() == StatusCode::kFailedPrecondition; }

  // Returns a copy whose message is "context: message".
  Status WithContext(std::string_view context) const;

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const Rep> rep_;  // null when OK; immutable so sharing is safe
};

// Result<T>: a value or an error Status (never an OK status).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(v_).ok()) v_ = Status::Internal("Result constructed from an OK Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  const Status& status() const& {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  Status status() && { return ok() ? Status() : std::get<Status>(std::move(v_)); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T value_or(T other) const& { return ok() ? value() : std::move(other); }

 private:
  std::variant<T, Status> v_;
};

namespace internal {
inline Status AsStatus(const Status& s) { return s; }
template <typename T>
Status AsStatus(const Result<T>& r) {
  return r.status();
}
}  // namespace internal

}  // namespace lote

#define LOTE_CONCAT_INNER(a, b) a##b
#define LOTE_CONCAT(a, b) LOTE_CONCAT_INNER(a, b)

// Returns the error from the enclosing function if `expr` (a Status or Result) failed.
#define RETURN_IF_ERROR(expr)                                     \
  do {                                                            \
    ::lote::Status _lote_st = ::lote::internal::AsStatus((expr)); \
    if (!_lote_st.ok()) return _lote_st;                          \
  } while (0)

// ASSIGN_OR_RETURN(auto x, MakeX()); declares/assigns x or returns the error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(LOTE_CONCAT(_lote_result_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)    \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return std::move(tmp).status(); \
  lhs = std::move(tmp).value()

// CHECK: programmer errors only. Aborts with file:line and the condition.
#define LOTE_CHECK(cond)                                                       \
  do {                                                                         \
    if (!(cond)) ::lote::internal::CheckFailed(__FILE__, __LINE__, #cond, ""); \
  } while (0)
#define LOTE_CHECK_MSG(cond, msg)                                                 \
  do {                                                                            \
    if (!(cond)) ::lote::internal::CheckFailed(__FILE__, __LINE__, #cond, (msg)); \
  } while (0)

namespace lote::internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* cond, std::string_view msg);
}  // namespace lote::internal
