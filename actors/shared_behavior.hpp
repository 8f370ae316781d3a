// One behaviour for every instance of an actor class that has one instance
// per lease (the runner, the elector).
//
// A CAF behaviour is allocated per actor: its handlers are lambdas that
// capture `this`. With 10,000 leases that is 10,000 copies of the same
// table (the runner's 17 handlers: ~0.7 KiB each). Here the handlers
// capture nothing; the class builds its behaviour once (a function-local
// static) and each handler reaches its actor through current(), which
// resume() sets for the thread while that actor handles its messages.
// CAF calls a behaviour's handlers only from the actor's resume(), on the
// scheduler's threads and on the test coordinator (also when it resumes an
// actor inline, inside another's handler: resume() restores the outer one).
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
