// One behaviour for every instance of an actor class that has one instance
// per lease (the runner, the elector): docs/design.md, 'The shape'.
#pragma once

#include <cstddef>
#include <utility>

#include <caf/all.hpp>

namespace leasehold {

template <class Derived, class Base>
class with_shared_behavior : public Base {
public:
  using Base::Base;

  caf::resumable::resume_result resume(caf::execution_unit* eu, std::size_t max) override {
    struct restore {
      Derived* previous;
      ~restore() { handling_ = previous; }
    } guard{std::exchange(handling_, static_cast<Derived*>(this))};
    return Base::resume(eu, max);
  }

protected:
  /// The actor whose message this thread is handling.
  static Derived& current() { return *handling_; }

private:
  static inline thread_local Derived* handling_ = nullptr;
};

} // namespace leasehold
