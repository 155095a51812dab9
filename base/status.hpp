// Errors as values for the model runtime (loaders, tokenizers, runtime).
//
// No exception crosses a library boundary in conveyor: a function that can
// fail returns Expected<T>, which holds either a T or an Error. Error messages
// name the thing that failed ("model.gguf: tensor 'blk.0.attn_q.weight' has
// unknown type 99"), so a caller can print them as they are.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace conveyor {

enum class Errc {
  invalid_argument,  // the caller passed something out of range
  io_error,          // a file could not be opened or read
  bad_format,        // a file's contents are corrupt, truncated or absurd
  unsupported,       // well-formed, but a feature conveyor does not implement
  resource_exhausted,  // a bounded queue or pool is full; try again later
  internal,          // something failed inside (an engine fault), not the caller's doing
};

struct Error {
  Errc code = Errc::invalid_argument;
  std::string message;
};

inline Error make_error(Errc code, std::string message) {
  return Error{code, std::move(message)};
}

// Holds a T or an Error. Check with `if (!x)` before calling value().
template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}  // NOLINT: implicit on purpose
  Expected(Error error) : v_(std::move(error)) {}  // NOLINT

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }

  T& value() & { assert(has_value()); return std::get<0>(v_); }
  const T& value() const& { assert(has_value()); return std::get<0>(v_); }
  T&& value() && { assert(has_value()); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { assert(!has_value()); return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Status: success, or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT
  static Status ok() { return Status(); }
  bool is_ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { assert(!ok_); return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

}  // namespace conveyor
