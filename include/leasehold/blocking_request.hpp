// One blocking request from outside the actors (the embedding API's helpers,
// the agent's main thread): a scoped actor asks `who` and waits at most
// `timeout` for its one reply. Never call it from an actor's handler.
#pragma once

#include <optional>
#include <utility>

#include <caf/all.hpp>

namespace leasehold {

/// The reply of type T, or nullopt when `who` answered with an error or not
/// within `timeout`.
template <class T, class Handle, class... Ts>
std::optional<T> blocking_request(caf::actor_system& sys, const Handle& who, caf::timespan timeout,
                                  Ts&&... xs) {
  std::optional<T> out;
  caf::scoped_actor self{sys};
  self->request(who, timeout, std::forward<Ts>(xs)...)
    .receive([&](T& r) { out = std::move(r); }, [](caf::error&) {});
  return out;
}

} // namespace leasehold
