// Fields most actors never set, kept behind one pointer (to save
// bytes per lease): allocated when first set, read as empty while never set.
#pragma once

#include <memory>

namespace leasehold {

template <class T>
class rarely_set {
public:
  /// The fields, allocated now if never set before: for writing.
  T& set() {
    if (!p_)
      p_ = std::make_unique<T>();
    return *p_;
  }
  /// The fields for reading (default ones while never set): allocates nothing.
  const T& seen() const {
    static const T none;
    return p_ ? *p_ : none;
  }
  /// Set before: writes that only change what exists need no allocation.
  explicit operator bool() const { return static_cast<bool>(p_); }
  T* operator->() const { return p_.get(); }

private:
  std::unique_ptr<T> p_;
};

} // namespace leasehold
