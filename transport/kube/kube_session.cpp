#include "transport/kube/kube_session_actor.hpp"

// This process's own session: its start (or takeover), its rounds (a
// session PUT and a list of its bound Leases) and the renews riding them;
// then the actor's behavior. The rule and its proof: docs/safety.md,
// "Kubernetes leases bound to a session"; the objects and fields:
// docs/design.md, "Bound leases".

namespace leasehold {

namespace session_detail {

using json = nlohmann::json;

/// leaseDurationSeconds of a bound Lease: readers that are not leasehold
/// wait this; rewritten at half of it, so N leases cost N / (D/2) writes.
int bound_seconds(session_self self) {
  auto& o = self->state.opts;
  auto d = std::chrono::duration_cast<std::chrono::seconds>(o.timings.lease_duration).count();
  double n = static_cast<double>(self->state.book.size() + 1);
  auto budget = static_cast<long long>(2.0 * n / std::max(0.001, o.refresh_per_second));
  long long s = std::max<long long>({o.min_bound_duration.count(), 4 * d + 4, budget});
  return static_cast<int>(std::min<long long>(s, 86400));
}

bool refresh_due(const lease_key& k, const bound_entry& e, time_point now) {
  // Half the written duration, less up to a fifth by the name: refreshes spread.
  auto half = std::chrono::seconds(e.duration_s) / 2;
  auto jitter = half / 5 * (fnv1a(k.name) % 1000) / 1000;
  return now >= e.written + half - jitter;
}

void start_round(session_self self, const std::string& ns);

/// This incarnation in `ns` serves no renew and binds no take any more.
void leave_incarnation(session_self self, const std::string& ns) {
  auto& s = self->state.sessions[ns];
  s.live = false;
  s.has_done = false;
  s.listed.clear();
  self->state.table->set_own(ns, "");
}

/// The session in `ns` ended: every bound renew of it fails, its book goes.
void end_session(session_self self, const std::string& ns, const std::string& why) {
  auto& s = self->state.sessions[ns];
  leave_incarnation(self, ns);
  api_error e{error_kind::session_ended, 0, "PUT",
              ns + "/" + self->state.name, "session " + ns + "/" + self->state.name + " ended: " + why, 0};
  for (auto* v : {&s.riders, &s.waiting}) {
    for (auto& r : *v)
      r.rp.deliver(lease_reply::failure(e));
    v->clear();
  }
  for (auto i = self->state.book.begin(); i != self->state.book.end();)
    i = i->first.ns == ns ? self->state.book.erase(i) : std::next(i);
}

/// No bound term left in `ns` and no bound write out: the session is
/// released, so a restart of this process takes it over at once (and
/// followers take any bound Lease a lost answer left behind).
void release_if_unused(session_self self, const std::string& ns) {
  auto& st = self->state;
  auto& s = st.sessions[ns];
  if (!s.live || s.starting || s.round_out || s.writes_out > 0 || !s.waiting.empty())
    return;
  for (auto& [k, e] : st.book)
    if (k.ns == ns && !e.released)
      return;
  auto l = released_session(*s.rec);
  leave_incarnation(self, ns);
  self->request(st.inner, timeout_of(self), update_lease_atom::value, l)
    .then([self, ns](lease_reply& r) {
      if (r.ok())
        self->state.table->saw({ns, self->state.name}, *r.value, self->clock().now());
    }, [](caf::error&) {});
}

/// Starts (or takes over) this process's session in `ns`: a new incarnation.
void start_session(session_self self, const std::string& ns,
                   std::function<void(const api_error&)> then) {
  auto& s = self->state.sessions[ns];
  auto now = self->clock().now();
  if (s.live && (s.round_out || s.renewed_at + self->state.opts.timings.retry_period > now))
    return then({});
  s.on_start.push_back(std::move(then));
  if (s.starting)
    return;
  s.starting = true;
  if (s.live) {
    // Not renewed lately (no bound lease asked): it may have been ended
    // meanwhile, and a take bound to it would be lost at its first round.
    lease l = *s.rec;
    l.spec.renew_time = wall_now();
    auto finish = [self, ns](const api_error& e, bool ended) {
      auto& s = self->state.sessions[ns];
      s.starting = false;
      auto waiting = std::move(s.on_start);
      s.on_start.clear();
      if (ended)
        end_session(self, ns, "its record was written by another or deleted");
      for (auto& f : waiting)
        if (ended)
          start_session(self, ns, f);   // a new incarnation for them
        else
          f(e);
      auto& now_s = self->state.sessions[ns];
      if (now_s.live && !now_s.round_out && !now_s.starting && !now_s.waiting.empty()) {
        now_s.riders = std::move(now_s.waiting);   // renews that waited for this renew
        now_s.waiting.clear();
        start_round(self, ns);
      }
    };
    self->request(self->state.inner, timeout_of(self), update_lease_atom::value, l)
      .then([self, ns, now, finish](lease_reply& r) {
        auto& s = self->state.sessions[ns];
        if (r.ok()) {
          s.rec = *r.value;
          s.renewed_at = now;
          self->state.table->saw({ns, self->state.name}, *r.value, self->clock().now());
        }
        finish(r.ok() ? api_error{} : r.error,
               r.kind() == error_kind::conflict || r.kind() == error_kind::not_found);
      }, [ns, finish](caf::error& e) { finish(actor_error("PUT", ns, e), false); });
    return;
  }
  auto done = [self, ns](const lease_reply& r) {
    auto& s = self->state.sessions[ns];
    s.starting = false;
    if (r.ok() || !may_have_applied(r.kind()))
      s.start_sent.reset();   // else it may stand: a later look adopts it
    if (r.ok()) {
      s.rec = *r.value;
      s.live = true;
      s.renewed_at = self->clock().now();
      s.unanswered.reset();
      self->state.table->set_own(
        ns, r.value->uid + "/" + std::to_string(r.value->spec.lease_transitions));
      self->state.table->saw({ns, self->state.name}, *r.value, self->clock().now());
    }
    auto waiting = std::move(s.on_start);
    s.on_start.clear();
    for (auto& f : waiting)
      f(r.ok() ? api_error{} : r.error);
  };
  lease_key k{ns, self->state.name};
  read_session(self, k, [self, k, done](const lease_reply& got) {
    if (!got.ok() && got.kind() != error_kind::not_found)
      return done(got);
    auto now = self->clock().now();
    auto& s = self->state.sessions[k.ns];
    if (got.ok() && s.start_sent && got.value->spec.acquire_time == s.start_sent
        && got.value->spec.holder_identity == self->state.opts.identity)
      return done(got);   // our start whose answer was lost: it stands
    s.start_sent.reset();
    // Held by another process under our identity (a twin, or our last
    // run not yet out): taken over only once still for a lease duration.
    bool ours = got.ok() && s.rec && got.value->uid == s.rec->uid
                && got.value->spec.lease_transitions == s.rec->spec.lease_transitions;
    if (got.ok() && !got.value->spec.holder_identity.empty() && !ours
        && !self->state.table->still(k, now))
      return done(lease_reply::failure(
        {error_kind::conflict, 409, "PUT", k.to_string(),
         "session " + k.to_string() + " is renewed by another process under this identity "
           "(two replicas with one identity, or its last run not yet a lease duration still)",
         0}));
    lease l = got.ok() ? *got.value : lease{};
    l.name = k.name;
    l.ns = k.ns;
    auto wall = wall_now();
    l.spec.holder_identity = self->state.opts.identity;
    l.spec.lease_duration_seconds = duration_seconds(self->state.opts.timings.lease_duration);
    l.spec.acquire_time = l.spec.renew_time = wall;
    self->state.sessions[k.ns].start_sent = wall;
    l.spec.preferred_holder.clear();
    l.spec.strategy.clear();
    if (got.ok())
      ++l.spec.lease_transitions;   // a new incarnation: bindings of the last one end
    if (!l.raw.is_object())
      l.raw = json::object();
    l.raw["metadata"]["labels"][role_label] = "session";
    auto on = [done](lease_reply& r) { done(r); };
    auto err = [done, k](caf::error& e) {
      done(lease_reply::failure(actor_error("PUT", k.to_string(), e)));
    };
    if (got.ok())
      self->request(self->state.inner, timeout_of(self), update_lease_atom::value, l).then(on, err);
    else
      self->request(self->state.inner, timeout_of(self), create_lease_atom::value, l).then(on, err);
  });
}

/// A rider served by the round that began at `started` and listed `listed`.
void serve(session_self self, rider& r, time_point started,
           const std::map<std::string, listed_entry>& listed) {
  auto i = listed.find(r.req.name);
  if (i == listed.end() || i->second.version != r.req.resource_version) {
    r.rp.deliver(lease_reply::failure(
      {error_kind::conflict, 409, "PUT", r.req.key().to_string(),
       "the Lease changed since its version " + r.req.resource_version
         + " (seen by the session's list)", 0}));
    return;
  }
  if (auto e = self->state.book.find(r.req.key()); e != self->state.book.end()) {
    e->second.version = r.req.resource_version;
    e->second.asked = r.began;
  }
  // The request is the elector's record at this very version, renewed.
  lease out = std::move(r.req);
  out.spec.renew_time = i->second.renew_time;
  out.spec.lease_duration_seconds = i->second.duration_s;
  out.renew_max_age = {};
  out.renewed_age = std::max<std::chrono::nanoseconds>(r.began - started, {});
  r.rp.deliver(lease_reply::success(std::move(out)));
}


void round_done(session_self self, const std::string& ns) {
  auto& s = self->state.sessions[ns];
  if (--s.round_pending > 0)
    return;
  s.round_out = false;
  auto riders = std::move(s.riders);
  s.riders.clear();
  if (s.round_error.kind == error_kind::none && s.live) {
    s.has_done = true;
    s.done_started = s.round_started;
    s.listed = std::move(s.round_list);
    for (auto& r : riders)
      serve(self, r, s.done_started, s.listed);
    // A write whose answer was lost is on the books at the version listed,
    // if the list shows that write (its renewTime), not a later one whose
    // answer is still on its way (sim seed 216 of the 10 x 3 world).
    // Entries written before the list and absent from it are released or
    // rewritten by another (or never written): off the books.
    for (auto& [k, e] : self->state.book)
      if (auto l = s.listed.find(k.name); k.ns == ns && e.unanswered && l != s.listed.end()
                                          && l->second.renew_time == e.unanswered) {
        e.version = l->second.version;
        e.unanswered.reset();
      }
    for (auto i = self->state.book.begin(); i != self->state.book.end();)
      i = i->first.ns == ns && i->second.written < s.done_started && !s.listed.count(i->first.name)
            ? self->state.book.erase(i)
            : std::next(i);
    reap(self, ns, self->clock().now());
  } else {
    if (s.round_error.kind == error_kind::none)
      s.round_error = {error_kind::session_ended, 0, "PUT", ns + "/" + self->state.name,
                       "the session ended during the renew", 0};
    for (auto& r : riders)
      r.rp.deliver(lease_reply::failure(s.round_error));
  }
  s.round_list.clear();
  if (!s.waiting.empty() && s.live && !s.starting) {
    s.riders = std::move(s.waiting);
    s.waiting.clear();
    start_round(self, ns);
  }
}

/// A round: the session renewed and its bound Leases listed, both sent now.
void start_round(session_self self, const std::string& ns) {
  auto& st = self->state;
  auto& s = st.sessions[ns];
  s.round_out = true;
  s.round_started = self->clock().now();
  s.round_pending = 2;
  s.round_error = {};
  lease l = *s.rec;
  l.spec.renew_time = wall_now();
  auto sent_rt = l.spec.renew_time;
  auto fail = [self, ns](api_error e) {
    auto& s = self->state.sessions[ns];
    if (s.round_error.kind == error_kind::none)
      s.round_error = std::move(e);
  };
  self->request(st.inner, timeout_of(self), update_lease_atom::value, l)
    .then(
      [self, ns, sent_rt, fail](lease_reply& r) {
        auto& s = self->state.sessions[ns];
        if (r.ok()) {
          s.rec = *r.value;
          s.unanswered.reset();
          s.renewed_at = s.round_started;
          self->state.table->saw({ns, self->state.name}, *r.value, self->clock().now());
        } else if (r.kind() == error_kind::conflict || r.kind() == error_kind::not_found) {
          if (!s.unanswered) {
            fail(r.error);
            end_session(self, ns, "its record was " + std::string(r.kind() == error_kind::not_found ? "deleted" : "written by another"));
          } else {
            // Our last renew's answer was lost: it may be what moved the version.
            auto lost = *s.unanswered;
            s.unanswered.reset();
            fail(r.error);
            self->request(self->state.inner, timeout_of(self), get_lease_atom::value,
                          lease_key{ns, self->state.name})
              .then([self, ns, lost](lease_reply& g) {
                auto& s = self->state.sessions[ns];
                if (g.ok() && s.rec && g.value->uid == s.rec->uid
                    && g.value->spec.renew_time == lost
                    && g.value->spec.holder_identity == s.rec->spec.holder_identity
                    && g.value->spec.lease_transitions == s.rec->spec.lease_transitions)
                  s.rec = *g.value;
                else if (g.ok() || g.kind() == error_kind::not_found)
                  end_session(self, ns, "its record was written by another");
              }, [](caf::error&) {});
          }
        } else {
          if (may_have_applied(r.kind()))
            s.unanswered = sent_rt;
          fail(r.error);
        }
        round_done(self, ns);
      },
      [self, ns, sent_rt, fail](caf::error& e) {
        self->state.sessions[ns].unanswered = sent_rt;
        fail(actor_error("PUT", ns + "/" + self->state.name, e));
        round_done(self, ns);
      });
  self->request(st.inner, timeout_of(self), list_leases_atom::value, ns,
                std::string(session_label) + "=" + st.name)
    .then(
      [self, ns, fail](leases_reply& r) {
        if (r.ok()) {
          auto& m = self->state.sessions[ns].round_list;
          for (auto& l : *r.value)
            m.emplace(l.name, listed_entry{std::move(l.resource_version), l.spec.renew_time,
                                           l.spec.lease_duration_seconds});
        } else {
          fail(r.error);
        }
        round_done(self, ns);
      },
      [self, ns, fail](caf::error& e) {
        fail(actor_error("GET", ns + "?labelSelector=" + session_label, e));
        round_done(self, ns);
      });
}


/// Ticks `session` every `every` without keeping it alive: a timer of the
/// session actor's own would, and a process could never end.
caf::behavior poller(caf::event_based_actor* self, caf::actor_addr session, caf::timespan every) {
  self->monitor(session);
  self->set_down_handler([self](caf::down_msg&) { self->quit(); });
  self->send(self, poll_atom::value);
  return {
    [=](poll_atom) {
      auto s = caf::actor_cast<caf::actor>(session);
      if (!s)
        return self->quit();
      self->send(s, poll_atom::value);
      self->delayed_send(self, every, poll_atom::value);
    },
  };
}

caf::behavior session_actor(session_self self, lease_transport_actor inner, session_options opts,
                            std::shared_ptr<session_table> table) {
  auto& st = self->state;
  st.inner = inner;
  st.name = session_lease_name(opts.identity);
  st.opts = std::move(opts);
  st.table = std::move(table);
  self->spawn(poller, self->address(), st.opts.timings.retry_period / 2);
  // Ends with its transport (a process killed in the simulator, or a test
  // ending it), and the poller with it.
  self->link_to(caf::actor_cast<caf::actor>(inner));
  return {
    [=](poll_atom) { poll(self); },
    [=](get_lease_atom a, lease_key& k) {
      // A namespace's first read: our own session there is read too, so a
      // last run's (or a twin's) is judged still or not by our first take.
      auto& st = self->state;
      if (st.own_read.emplace(k.ns).second)
        st.own_unread.insert(k.ns);   // the next poll reads it
      return self->delegate(st.inner, a, std::move(k));
    },
    [=](list_leases_atom a, std::string& ns, std::string& sel) {
      return self->delegate(self->state.inner, a, std::move(ns), std::move(sel));
    },
    [=](watch_lease_atom a, lease_watch_request& req) { self->send(self->state.inner, a, std::move(req)); },
    [=](create_lease_atom a, lease& l) -> caf::result<lease_reply> {
      auto& st = self->state;
      if (!st.opts.bind || l.spec.holder_identity != st.opts.identity)
        return self->delegate(st.inner, a, std::move(l));
      auto rp = self->make_response_promise();
      write_bound(self, std::move(l), true, rp);
      return caf::delegated<lease_reply>{};
    },
    [=](update_lease_atom a, lease& l) -> caf::result<lease_reply> {
      auto& st = self->state;
      auto now = self->clock().now();
      if (l.spec.holder_identity.empty()) {
        // A release: plain again; the pool sees the elector as its sender.
        // It is sent once the term's modules are down, but may fail: the
        // entry stays for the reaper until a list shows the Lease moved on.
        set_binding(l, std::nullopt);
        if (auto e = st.book.find(l.key()); e != st.book.end() && e->second.version == l.resource_version) {
          e->second.released = true;
          e->second.asked = now;
        }
        auto ns = l.ns;
        auto r = self->delegate(st.inner, a, std::move(l));
        release_if_unused(self, ns);
        return r;
      }
      auto b = binding_of(l);
      if (b && l.spec.holder_identity != st.opts.identity)
        return self->delegate(st.inner, a, std::move(l));   // another's term kept: a yield's preferredHolder
      if (b && b->session == st.name) {
        auto& s = st.sessions[l.ns];
        if (!s.live || s.rec->uid + "/" + std::to_string(s.rec->spec.lease_transitions)
                         != incarnation_key(*b))
          return lease_reply::failure({error_kind::session_ended, 0, "PUT", l.key().to_string(),
                                       "the session " + l.ns + "/" + st.name + " of lease "
                                         + l.key().to_string() + " ended", 0});
        auto e = st.book.find(l.key());
        auto rp = self->make_response_promise();
        if (e == st.book.end() || refresh_due(l.key(), e->second, now)
            || l.renew_max_age <= std::chrono::nanoseconds{0}) {
          // A refresh: the Lease written again, as a renew of a plain one.
          l.spec.lease_duration_seconds = bound_seconds(self);
          write(self, std::move(l), false, rp);
          return caf::delegated<lease_reply>{};
        }
        auto ns = l.ns;
        rider r{std::move(l), now, rp};
        if (s.has_done && keepalive_serves_renew(s.done_started, r.req.renew_max_age, now)) {
          serve(self, r, s.done_started, s.listed);
        } else if (s.round_out && keepalive_serves_renew(s.round_started, r.req.renew_max_age, now)) {
          s.riders.push_back(std::move(r));
        } else {
          s.waiting.push_back(std::move(r));
          if (!s.round_out && !s.starting) {   // one session write at a time
            s.riders = std::move(s.waiting);
            s.waiting.clear();
            start_round(self, ns);
          }
        }
        return caf::delegated<lease_reply>{};
      }
      // A new term (or a renew of a plain one): a bound record taken ends
      // its session first; ours is bound when this replica binds.
      bool bind = st.opts.bind && l.spec.holder_identity == st.opts.identity;
      if (l.session_end.empty() && !bind && !has_binding_text(l))
        return self->delegate(st.inner, a, std::move(l));
      auto rp = self->make_response_promise();
      end_then(self, l, [self, l, bind, rp](const api_error& e) mutable {
        if (e.kind != error_kind::none)
          return rp.deliver(lease_reply::failure(e));
        l.session_end.clear();
        if (bind)
          return write_bound(self, std::move(l), false, rp);
        set_binding(l, std::nullopt);
        write(self, std::move(l), false, rp);
      });
      return caf::delegated<lease_reply>{};
    },
  };
}

} // namespace session_detail

lease_backend bind_to_session(caf::actor_system& sys, lease_backend inner, session_options opts) {
  auto table = std::make_shared<session_table>(opts.timings.lease_duration);
  lease_backend b;
  b.request_path = inner.request_path;
  auto own = session_lease_name(opts.identity);
  auto d = opts.timings.lease_duration;
  auto retry = opts.timings.retry_period;
  b.evidence = [table, own, d, retry](const election_timings&, std::uint64_t) {
    return make_session_evidence(table, own, d, retry);
  };
  b.transport = caf::actor_cast<lease_transport_actor>(
    sys.spawn(session_detail::session_actor, inner.transport, std::move(opts), table));
  return b;
}

} // namespace leasehold
