#include "transport/sim_transport.hpp"

#include "transport/kube_client.hpp"

namespace leasehold {

namespace {

api_error make_error(error_kind k, int status, const std::string& verb, const std::string& path,
                     std::string reason) {
  api_error e;
  e.kind = k;
  e.http_status = status;
  e.verb = verb;
  e.path = path;
  e.reason = std::move(reason);
  return e;
}

} // namespace

void sim_api::set_fault(sim_fault f, const std::string& client, int error_status) {
  std::lock_guard<std::mutex> g(mx_);
  if (f == sim_fault::none)
    faults_.erase(client);
  else
    faults_[client] = {f, error_status};
}

void sim_api::clear_faults() {
  std::lock_guard<std::mutex> g(mx_);
  faults_.clear();
  latency_ = caf::timespan{0};
}

void sim_api::set_latency_jitter(caf::timespan max, std::uint64_t seed) {
  std::lock_guard<std::mutex> g(mx_);
  jitter_ = max;
  rng_.seed(seed);
}

caf::timespan sim_api::draw_latency() {
  std::lock_guard<std::mutex> g(mx_);
  if (jitter_.count() <= 0)
    return latency_;
  std::uniform_int_distribution<caf::timespan::rep> u(0, jitter_.count());
  return latency_ + caf::timespan{u(rng_)};
}

void sim_api::wipe() {
  std::lock_guard<std::mutex> g(mx_);
  store_.clear();
}

void sim_api::create_released(const lease_key& k) {
  lease l;
  l.name = k.name;
  l.ns = k.ns;
  l.spec.lease_duration_seconds = 1;
  create("operator", std::move(l));
}

std::optional<lease> sim_api::peek(const lease_key& k) const {
  std::lock_guard<std::mutex> g(mx_);
  auto i = store_.find(k);
  if (i == store_.end())
    return std::nullopt;
  return i->second;
}

std::vector<sim_request> sim_api::requests() const {
  std::lock_guard<std::mutex> g(mx_);
  return requests_;
}

std::vector<kube_event> sim_api::events() const {
  std::lock_guard<std::mutex> g(mx_);
  return events_;
}

std::size_t sim_api::count(const std::string& verb, const std::string& client) const {
  std::lock_guard<std::mutex> g(mx_);
  std::size_t n = 0;
  for (auto& r : requests_)
    if (r.verb == verb && (client.empty() || r.client == client))
      ++n;
  return n;
}

sim_fault sim_api::fault_for(const std::string& client, int& error_status) const {
  std::lock_guard<std::mutex> g(mx_);
  for (auto& key : {client, std::string{}}) {
    auto i = faults_.find(key);
    if (i != faults_.end()) {
      error_status = i->second.second;
      return i->second.first;
    }
  }
  return sim_fault::none;
}

void sim_api::log(const std::string& client, const std::string& verb, const lease_key& k,
                  error_kind r, const std::string& holder) {
  requests_.push_back(sim_request{client, verb, k.to_string(), r, holder});
}

lease_reply sim_api::failure(const std::string& client, const std::string& verb,
                             const lease_key& k, sim_fault f, int status) {
  std::lock_guard<std::mutex> g(mx_);
  auto path = lease_path(k);
  api_error e;
  if (f == sim_fault::down)
    e = make_error(error_kind::connection_refused, 0, verb, path, "connection refused");
  else if (status == 429)
    e = make_error(error_kind::throttled, 429, verb, path, "too many requests");
  else
    e = make_error(error_kind::server_error, status, verb, path, "simulated server error");
  log(client, verb, k, e.kind, {});
  return lease_reply::failure(e);
}

lease_reply sim_api::get(const std::string& client, const lease_key& k) {
  std::lock_guard<std::mutex> g(mx_);
  auto i = store_.find(k);
  if (i == store_.end()) {
    log(client, "GET", k, error_kind::not_found, {});
    return lease_reply::failure(make_error(error_kind::not_found, 404, "GET", lease_path(k),
                                           "leases.coordination.k8s.io \"" + k.name
                                             + "\" not found"));
  }
  log(client, "GET", k, error_kind::none, i->second.spec.holder_identity);
  return lease_reply::success(i->second);
}

lease_reply sim_api::create(const std::string& client, lease l) {
  std::lock_guard<std::mutex> g(mx_);
  auto k = l.key();
  if (store_.count(k) != 0) {
    log(client, "POST", k, error_kind::already_exists, l.spec.holder_identity);
    return lease_reply::failure(make_error(error_kind::already_exists, 409, "POST",
                                           leases_path(k.ns), "already exists"));
  }
  l.resource_version = std::to_string(next_rv_++);
  l.uid = "sim-" + std::to_string(next_uid_++);
  store_[k] = l;
  log(client, "POST", k, error_kind::none, l.spec.holder_identity);
  return lease_reply::success(std::move(l));
}

lease_reply sim_api::update(const std::string& client, lease l) {
  std::lock_guard<std::mutex> g(mx_);
  auto k = l.key();
  auto i = store_.find(k);
  if (i == store_.end()) {
    log(client, "PUT", k, error_kind::not_found, l.spec.holder_identity);
    return lease_reply::failure(make_error(error_kind::not_found, 404, "PUT", lease_path(k),
                                           "not found"));
  }
  if (l.resource_version.empty()) {
    log(client, "PUT", k, error_kind::invalid, l.spec.holder_identity);
    return lease_reply::failure(make_error(error_kind::invalid, 422, "PUT", lease_path(k),
                                           "metadata.resourceVersion: must be specified"));
  }
  if (l.resource_version != i->second.resource_version) {
    log(client, "PUT", k, error_kind::conflict, l.spec.holder_identity);
    return lease_reply::failure(make_error(error_kind::conflict, 409, "PUT", lease_path(k),
                                           "the object has been modified"));
  }
  l.resource_version = std::to_string(next_rv_++);
  l.uid = i->second.uid;
  i->second = l;
  log(client, "PUT", k, error_kind::none, l.spec.holder_identity);
  return lease_reply::success(std::move(l));
}

event_reply sim_api::post_event(const std::string& client, kube_event e) {
  std::lock_guard<std::mutex> g(mx_);
  log(client, "EVENT", e.involved, error_kind::none, {});
  events_.push_back(std::move(e));
  return event_reply::success(true);
}

namespace {

using deliver_atom = caf::atom_constant<caf::atom("lh_deliver")>;

struct sim_transport_state {
  std::shared_ptr<sim_api> api;
  std::string client;
  std::vector<caf::response_promise> hanging;   // never answered (kept, not dropped)
  std::map<std::uint64_t, std::pair<caf::response_promise, caf::message>> delayed;
  std::uint64_t next_id = 0;
  static inline const char* name = "leasehold.sim_transport";
};

// Untyped inside (it also takes its own deliver_atom for latency), exposed as
// a lease_transport_actor.
using sim_self = caf::stateful_actor<sim_transport_state>*;

/// Answers `compute()` now, after the simulated latency, or never (hang).
template <class Reply, class Compute>
caf::result<Reply> answer(sim_self self, const std::string& verb, const lease_key& k,
                          Compute compute) {
  auto& st = self->state;
  int status = 503;
  auto f = st.api->fault_for(st.client, status);
  if (f == sim_fault::hang) {
    st.hanging.push_back(self->make_response_promise());
    return caf::delegated<Reply>{};
  }
  Reply r;
  if (f != sim_fault::none)
    r = Reply::failure(st.api->failure(st.client, verb, k, f, status).error);
  else
    r = compute();
  auto latency = st.api->draw_latency();
  if (latency.count() <= 0)
    return r;
  auto id = ++st.next_id;
  st.delayed.emplace(id, std::make_pair(self->make_response_promise(), caf::make_message(r)));
  self->delayed_send(self, latency, deliver_atom::value, id);
  return caf::delegated<Reply>{};
}

} // namespace

lease_transport_actor spawn_sim_transport(caf::actor_system& sys, std::shared_ptr<sim_api> api,
                                          std::string client) {
  auto fn = [](sim_self self, std::shared_ptr<sim_api> a, std::string c) -> caf::behavior {
    self->state.api = std::move(a);
    self->state.client = std::move(c);
    return {
      [=](get_lease_atom, const lease_key& k) {
        return answer<lease_reply>(self, "GET", k,
                                   [&] { return self->state.api->get(self->state.client, k); });
      },
      [=](create_lease_atom, lease& l) {
        auto k = l.key();
        return answer<lease_reply>(self, "POST", k, [&] {
          return self->state.api->create(self->state.client, std::move(l));
        });
      },
      [=](update_lease_atom, lease& l) {
        auto k = l.key();
        return answer<lease_reply>(self, "PUT", k, [&] {
          return self->state.api->update(self->state.client, std::move(l));
        });
      },
      [=](post_event_atom, kube_event& e) {
        auto k = e.involved;
        return answer<event_reply>(self, "EVENT", k, [&] {
          return self->state.api->post_event(self->state.client, std::move(e));
        });
      },
      [=](deliver_atom, std::uint64_t id) {
        auto i = self->state.delayed.find(id);
        if (i == self->state.delayed.end())
          return;
        i->second.first.deliver(i->second.second);
        self->state.delayed.erase(i);
      },
    };
  };
  return caf::actor_cast<lease_transport_actor>(sys.spawn(fn, std::move(api), std::move(client)));
}

} // namespace leasehold
