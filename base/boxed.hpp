// Boxed<T>: an optional T kept out of line. Empty, it costs a pointer; copies
// copy the T (a value, unlike a shared pointer). For the fields few instances
// of a type carry, where the type itself is copied or moved in bulk.
#pragma once

#include <memory>
#include <utility>

namespace conveyor {

template <class T>
class Boxed {
 public:
  Boxed() = default;
  Boxed(const Boxed& other) : p_(other.p_ ? std::make_unique<T>(*other.p_) : nullptr) {}
  Boxed(Boxed&&) noexcept = default;
  Boxed& operator=(const Boxed& other) {
    if (this != &other) p_ = other.p_ ? std::make_unique<T>(*other.p_) : nullptr;
    return *this;
  }
  Boxed& operator=(Boxed&&) noexcept = default;

  explicit operator bool() const { return p_ != nullptr; }
  T* get() { return p_.get(); }
  const T* get() const { return p_.get(); }
  // The T, default-constructed first when there was none.
  T& get_or_make() {
    if (!p_) p_ = std::make_unique<T>();
    return *p_;
  }
  void reset() { p_.reset(); }

 private:
  std::unique_ptr<T> p_;
};

}  // namespace conveyor
