#include "cmd/leasehold/event_poster.hpp"

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "leasehold/blocking_request.hpp"
#include "leasehold/lease.hpp"
#include "lease/log_time.hpp"

namespace leasehold::agent {

namespace {

using flush_atom = caf::atom_constant<caf::atom("lh_flush")>;
using post_next_atom = caf::atom_constant<caf::atom("lh_postnx")>;

struct pending_event {
  kube_event event;
  int attempts = 0;
};

struct poster_state {
  std::deque<pending_event> queue;
  bool busy = false;           // a request or a retry delay is pending
  std::vector<caf::response_promise> flush_waiters;
  static inline const char* name = "leasehold.event_poster";
};

using poster_actor = caf::stateful_actor<poster_state>;

/// The Lease's uid as the events that carry it said last: the events that
/// do not (a term's end, a handover) are about the same object.
class known_uid {
public:
  std::string update(const std::string& seen) {
    std::lock_guard<std::mutex> g(mx_);
    if (!seen.empty())
      uid_ = seen;
    return uid_;
  }

private:
  std::mutex mx_;
  std::string uid_;
};

bool retryable(error_kind k) {
  switch (k) {
    case error_kind::invalid:
    case error_kind::unauthorized:
    case error_kind::forbidden:
    case error_kind::already_exists:
    case error_kind::malformed_body:
      return false;
    default:
      return true;
  }
}

void deliver_flush_if_idle(poster_actor* self) {
  auto& st = self->state;
  if (st.busy || !st.queue.empty())
    return;
  for (auto& rp : st.flush_waiters)
    rp.deliver(true);
  st.flush_waiters.clear();
}

void post_next(poster_actor* self, event_transport_actor transport,
               const event_poster_options& opts) {
  auto& st = self->state;
  if (st.busy || st.queue.empty()) {
    deliver_flush_if_idle(self);
    return;
  }
  st.busy = true;
  auto item = std::move(st.queue.front());
  st.queue.pop_front();
  ++item.attempts;
  auto kube = item.event;
  auto finished = [self, transport, opts, item](bool retry) mutable {
    auto& s = self->state;
    if (retry && item.attempts < opts.max_attempts && s.queue.size() < opts.capacity) {
      s.queue.push_front(std::move(item));
      self->delayed_send(self, opts.retry_delay, post_next_atom::value);
      return;   // still busy until the delay fires
    }
    s.busy = false;
    post_next(self, transport, opts);
  };
  self->request(transport, opts.request_timeout, post_event_atom::value, std::move(kube))
    .then([finished](const event_reply& r) mutable { finished(!r.ok() && retryable(r.kind())); },
          [finished](const caf::error&) mutable { finished(true); });
}

caf::behavior event_poster(poster_actor* self, event_transport_actor transport,
                           event_poster_options opts) {
  self->link_to(transport);
  return {
    [=](kube_event& e) {
      auto& st = self->state;
      for (auto& q : st.queue)
        if (q.event.message == e.message && q.event.reason == e.reason)
          return;   // aggregated with the queued duplicate
      if (st.queue.size() >= opts.capacity)
        st.queue.pop_front();
      st.queue.push_back({std::move(e), 0});
      post_next(self, transport, opts);
    },
    [=](post_next_atom) {
      self->state.busy = false;
      post_next(self, transport, opts);
    },
    [=](flush_atom) -> caf::result<bool> {
      auto rp = self->make_response_promise();
      self->state.flush_waiters.push_back(rp);
      deliver_flush_if_idle(self);
      return rp;
    },
  };
}

} // namespace

caf::actor spawn_event_poster(caf::actor_system& sys, event_transport_actor transport,
                              event_poster_options opts) {
  return sys.spawn(event_poster, std::move(transport), opts);
}

event_sink event_poster_sink(caf::actor poster, lease_key lease) {
  // "stopped leading" once per term: a term ends with term_lost, or with
  // lease_released on shutdown.
  auto leading = std::make_shared<std::atomic<bool>>(false);
  auto uid = std::make_shared<known_uid>();
  return [poster, lease, leading, uid](const runtime_event& e) {
    std::string what;
    if (e.type == event_type::term_acquired) {
      leading->store(true);
      what = " became leader";
    } else if ((e.type == event_type::term_lost || e.type == event_type::lease_released)
               && leading->exchange(false)) {
      what = " stopped leading";
    } else if (e.type == event_type::creation_hold) {
      // kubectl shows this replica as HOLDER from now on: say why it does no work yet.
      auto starts = e.wall + std::chrono::milliseconds(static_cast<std::int64_t>(e.value));
      what = " created the lease and holds it: its term " + std::to_string(e.term)
             + " starts at " + format_log_time(starts) + " (creation hold, one lease duration)";
    } else if (e.type == event_type::voluntary_handover) {
      what = " handed leadership over" + (e.holder.empty() ? std::string() : " to " + e.holder)
             + " (" + e.reason + "): leader-only modules down, lease released";
    } else {
      return;
    }
    kube_event k;
    k.involved = lease;
    k.involved_uid = uid->update(e.lease_uid);
    k.message = e.identity + what;
    k.reporting_instance = e.identity;
    k.time = std::chrono::time_point_cast<std::chrono::microseconds>(e.wall);
    caf::anon_send(poster, std::move(k));
  };
}

bool flush_events(caf::actor_system& sys, const caf::actor& poster, caf::timespan bound) {
  return blocking_request<bool>(sys, poster, bound, flush_atom::value).has_value();   // any answer: flushed
}

} // namespace leasehold::agent
