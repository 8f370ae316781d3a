#include "transport/kube/kube_session_actor.hpp"

// A bound take or create, a take of a record bound to another's session
// (which ends that session first), the reaper, and the followers' poll.
// The rule and its proof: docs/safety.md, "Kubernetes leases bound to a session".

namespace leasehold::session_detail {

/// A write of `l` through the inner transport; a bound one goes on the
/// books, also when its answer is lost: a list that shows it gives its
/// version (the reaper's, should no elector ask). Only
/// a write known to have landed moves `written`: rides end at half the
/// duration since then (case 4 of the proof; sim seed 945).
void write(session_self self, lease l, bool create, caf::response_promise rp) {
  auto key = l.key();
  auto sent = self->clock().now();
  bool bound = binding_of(l).has_value();
  int dur = l.spec.lease_duration_seconds.value_or(0);
  auto rt = l.spec.renew_time;
  if (bound)
    ++self->state.sessions[key.ns].writes_out;
  auto done = [self, key, sent, bound, dur, rt, rp](lease_reply r) mutable {
    if (bound) {
      --self->state.sessions[key.ns].writes_out;
      if (r.ok()) {
        self->state.book[key] = {r.value->resource_version, sent, dur, sent, false, std::nullopt};
      } else if (may_have_applied(r.kind())) {
        // Its version stays the last known one (new: none, and every
        // renew writes) until a list shows this write's renewTime.
        auto& e = self->state.book[key];
        e.asked = sent;
        e.released = false;
        e.unanswered = rt;
      } else
        release_if_unused(self, key.ns);   // a take refused: a session started for it goes
    }
    rp.deliver(std::move(r));
  };
  auto err = [done, key, create](caf::error& e) mutable {
    done(lease_reply::failure(actor_error(create ? "POST" : "PUT", key.to_string(), e)));
  };
  auto on = [done](lease_reply& r) mutable { done(std::move(r)); };
  if (create)
    self->request(self->state.inner, timeout_of(self), create_lease_atom::value, std::move(l)).then(on, err);
  else
    self->request(self->state.inner, timeout_of(self), update_lease_atom::value, std::move(l)).then(on, err);
}

/// `l` (a take or a create by this replica) bound to our live session.
void write_bound(session_self self, lease l, bool create, caf::response_promise rp) {
  auto ns = l.ns;
  start_session(self, ns, [self, l, create, rp](const api_error& e) mutable {
    if (e.kind != error_kind::none)
      return rp.deliver(lease_reply::failure(e));
    auto& s = self->state.sessions[l.ns];
    session_binding b{self->state.name, s.rec->uid, s.rec->spec.lease_transitions, l.spec.lease_transitions};
    set_binding(l, b);
    l.spec.lease_duration_seconds = bound_seconds(self);
    write(self, std::move(l), create, std::move(rp));
  });
}

void read_session(session_self self, const lease_key& k,
                  std::function<void(const lease_reply&)> then) {
  auto sent = self->clock().now();
  self->request(self->state.inner, timeout_of(self), get_lease_atom::value, k)
    .then([self, k, sent, then](lease_reply& r) {
      if (r.ok() || r.kind() == error_kind::not_found)
        self->state.table->saw(k, r.ok() ? std::optional<lease>(*r.value) : std::nullopt,
                               self->clock().now(), sent);
      then(r);
    }, [k, then](caf::error& e) { then(lease_reply::failure(actor_error("GET", k.to_string(), e))); });
}

/// A take of a record bound by `l.session_end`: a session still in that
/// incarnation and still for a lease duration is ended first (a conditional
/// write of its released form), one judged live refuses the take.
void end_then(session_self self, const lease& l, std::function<void(const api_error&)> then) {
  auto b = parse_binding(l.session_end);
  if (!b || b->session == self->state.name)
    return then({});   // ours: the elector knows that term over (or waited out its record)
  lease_key sk{l.ns, b->session};
  auto judge = [self, sk, b = *b, then, path = l.key().to_string()]() {
    auto& st = self->state;
    auto now = self->clock().now();
    auto held = api_error{error_kind::conflict, 409, "PUT", path,
                          "its session " + sk.to_string() + " still runs", 0};
    // Only an elector's judgement (which knows when it saw the record) says
    // when the session left that incarnation; none yet: held.
    if (st.table->expires(sk, b, time_point::max(), time_point::max(), false) > now)
      return then(held);
    auto s = st.table->record(sk);
    if (!s || !in_incarnation(*s, b))
      return then({});   // released, or gone from that incarnation a lease duration ago
    // One end per session version, however many takes wait on it.
    auto key = std::make_pair(sk, s->resource_version);
    auto& waiting = st.ending[key];
    waiting.push_back(then);
    if (waiting.size() > 1)
      return;
    auto e = released_session(*s);
    auto done = [self, key](const api_error& err) {
      auto i = self->state.ending.find(key);
      if (i == self->state.ending.end())
        return;
      auto thens = std::move(i->second);
      self->state.ending.erase(i);
      for (auto& f : thens)
        f(err);
    };
    self->request(st.inner, timeout_of(self), update_lease_atom::value, e)
      .then([self, sk, done](lease_reply& r) {
        if (r.ok())
          self->state.table->saw(sk, *r.value, self->clock().now());
        done(r.ok() ? api_error{} : r.error);
      }, [done, sk](caf::error& e) { done(actor_error("PUT", sk.to_string(), e)); });
  };
  if (self->state.table->record(sk))
    return judge();
  read_session(self, sk, [judge, then](const lease_reply& r) {
    if (!r.ok() && r.kind() != error_kind::not_found)
      return then(r.error);
    judge();
  });
}

/// Bound Leases unasked for two lease durations have no elector here, nor
/// have those whose release the list still shows a retry period after it
/// was sent: the reaper releases them (docs/safety.md, "Kubernetes leases
/// bound to a session").
void reap(session_self self, const std::string& ns, time_point now) {
  auto& st = self->state;
  auto& s = st.sessions[ns];
  for (auto& [k, e] : st.book) {
    auto wait = e.released ? st.opts.timings.retry_period : 2 * st.opts.timings.lease_duration;
    if (k.ns != ns || e.asked + wait > now)
      continue;
    auto i = s.listed.find(k.name);
    if (i == s.listed.end() || i->second.version != e.version)
      continue;
    e.asked = now;   // one try per wait
    auto key = k;
    auto version = e.version;
    // Off the books once written, or once the Lease moved on from `version`;
    // an answer that may hide a write (or none) leaves it to the next try.
    auto forget = [self, key, version] {
      auto e = self->state.book.find(key);
      if (e != self->state.book.end() && e->second.version == version)
        self->state.book.erase(e);
    };
    auto settled = [forget](const lease_reply& r) {
      if (r.ok() || !may_have_applied(r.kind()))
        forget();
    };
    self->request(st.inner, timeout_of(self), get_lease_atom::value, key)
      .then([self, version, forget, settled](lease_reply& got) {
        if (!got.ok())
          return settled(got);
        if (got.value->resource_version != version)
          return forget();
        lease l = *got.value;
        l.spec.holder_identity.clear();
        l.spec.lease_duration_seconds = 1;
        l.spec.preferred_holder.clear();
        set_binding(l, std::nullopt);
        self->request(self->state.inner, timeout_of(self), update_lease_atom::value, l)
          .then([settled](lease_reply& r) { settled(r); }, [](caf::error&) {});
      }, [](caf::error&) {});
  }
}

/// Reads the sessions electors judge by, every half retry_period, and our
/// own session in each namespace once (until a read succeeds).
void poll(session_self self) {
  auto& st = self->state;
  for (auto& ns : std::exchange(st.own_unread, {}))
    read_session(self, {ns, st.name}, [self, ns](const lease_reply& r) {
      if (!r.ok() && r.kind() != error_kind::not_found)
        self->state.own_unread.insert(ns);   // the next poll tries again
    });
  for (auto& k : st.table->due(self->clock().now(), st.opts.timings.retry_period / 4))
    read_session(self, k, [self, k](const lease_reply& r) {
      if (!r.ok() && r.kind() != error_kind::not_found)
        self->state.table->read_failed(k);
    });
}

} // namespace leasehold::session_detail
