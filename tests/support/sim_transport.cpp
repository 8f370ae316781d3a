#include "tests/support/sim_transport.hpp"

#include <algorithm>
#include <set>

#include "transport/kube/kube_client.hpp"

namespace leasehold {

// -- sim_store: what every simulated store shares ------------------------------

void sim_store::set_fault(sim_fault f, const std::string& client, int error_status) {
  {
    std::lock_guard<std::mutex> g(net_mx_);
    if (f == sim_fault::none)
      faults_.erase(client);
    else
      faults_[client] = {f, error_status};
  }
  poke_watchers();
}

void sim_store::clear_faults() {
  {
    std::lock_guard<std::mutex> g(net_mx_);
    faults_.clear();
    latency_ = caf::timespan{0};
  }
  poke_watchers();
}

void sim_store::set_latency(caf::timespan d) {
  std::lock_guard<std::mutex> g(net_mx_);
  latency_ = d;
}

caf::timespan sim_store::latency() const {
  std::lock_guard<std::mutex> g(net_mx_);
  return latency_;
}

void sim_store::set_latency_jitter(caf::timespan max, std::uint64_t seed) {
  std::lock_guard<std::mutex> g(net_mx_);
  jitter_ = max;
  rng_.seed(seed);
}

caf::timespan sim_store::draw_latency() {
  std::lock_guard<std::mutex> g(net_mx_);
  if (jitter_.count() <= 0)
    return latency_;
  std::uniform_int_distribution<caf::timespan::rep> u(0, jitter_.count());
  return latency_ + caf::timespan{u(rng_)};
}

sim_fault sim_store::fault_for(const std::string& client, int& error_status) const {
  std::lock_guard<std::mutex> g(net_mx_);
  for (auto& key : {client, std::string{}}) {
    auto i = faults_.find(key);
    if (i != faults_.end()) {
      error_status = i->second.second;
      return i->second.first;
    }
  }
  return sim_fault::none;
}

std::uint64_t sim_store::add_watcher(std::function<void()> poke) {
  std::lock_guard<std::mutex> g(net_mx_);
  auto id = next_watcher_++;
  watchers_.emplace(id, std::move(poke));
  return id;
}

void sim_store::remove_watcher(std::uint64_t id) {
  std::lock_guard<std::mutex> g(net_mx_);
  watchers_.erase(id);
}

void sim_store::poke_watchers() {
  std::vector<std::function<void()>> pokes;
  {
    std::lock_guard<std::mutex> g(net_mx_);
    for (auto& [id, f] : watchers_)
      pokes.push_back(f);
  }
  for (auto& f : pokes)
    f();
}

std::vector<sim_request> sim_store::requests() const {
  std::lock_guard<std::mutex> g(net_mx_);
  return requests_;
}

std::vector<sim_request> sim_store::requests_since(std::size_t from) const {
  std::lock_guard<std::mutex> g(net_mx_);
  if (from >= requests_.size())
    return {};
  return {requests_.begin() + static_cast<std::ptrdiff_t>(from), requests_.end()};
}

std::size_t sim_store::request_count() const {
  std::lock_guard<std::mutex> g(net_mx_);
  return requests_.size();
}

std::size_t sim_store::count(const std::string& verb, const std::string& client) const {
  std::lock_guard<std::mutex> g(net_mx_);
  std::size_t n = 0;
  for (auto& r : requests_)
    if (r.verb == verb && (client.empty() || r.client == client))
      ++n;
  return n;
}

void sim_store::log(const std::string& client, const std::string& verb, const lease_key& k,
                    error_kind r, const std::string& holder) {
  std::lock_guard<std::mutex> g(net_mx_);
  requests_.push_back(sim_request{client, verb, k.to_string(), r, holder});
}

lease_reply sim_store::failure(const std::string& client, const std::string& verb,
                               const lease_key& k, sim_fault f, int status) {
  auto path = path_of(verb, k);
  api_error e;
  if (f == sim_fault::down)
    e = api_error{error_kind::connection_refused, 0, verb, path, "connection refused"};
  else if (f == sim_fault::refuse_writes)
    e = api_error{error_kind::invalid, status, verb, path, "simulated refusal: the object is invalid"};
  else if (status == 429)
    e = api_error{error_kind::throttled, 429, verb, path, "too many requests"};
  else
    e = api_error{error_kind::server_error, status, verb, path, "simulated server error"};
  log(client, verb, k, e.kind, {});
  return lease_reply::failure(e);
}

std::vector<sim_store::change> sim_store::changes_since(const lease_key& k,
                                                       std::uint64_t rv) const {
  std::lock_guard<std::mutex> g(net_mx_);
  std::vector<change> out;
  // Versions only grow, so the log is sorted by rv.
  auto first = std::upper_bound(changes_.begin(), changes_.end(), rv,
                                [](std::uint64_t v, const change& c) { return v < c.rv; });
  for (auto i = first; i != changes_.end(); ++i)
    if (k.name.empty() ? i->key.ns == k.ns : i->key == k)
      out.push_back(*i);
  return out;
}

std::uint64_t sim_store::last_version() const {
  std::lock_guard<std::mutex> g(net_mx_);
  return changes_.empty() ? 0 : changes_.back().rv;
}

void sim_store::record_change(change c) {
  std::lock_guard<std::mutex> g(net_mx_);
  changes_.push_back(std::move(c));
}

// -- sim_api: the Kubernetes Lease API ------------------------------------------

void sim_api::note_change(const lease_key& k, std::optional<lease> rec) {
  auto rv = rec ? std::stoull(rec->resource_version) : next_rv_++;
  record_change(change{k, rv, std::move(rec)});
}

std::string sim_api::path_of(const std::string& verb, const lease_key& k) const {
  return verb == "WATCH" ? leases_path(k.ns) : lease_path(k);
}

void sim_api::wipe() {
  {
    std::lock_guard<std::mutex> g(mx_);
    for (auto& [k, l] : store_)
      note_change(k, std::nullopt);
    store_.clear();
  }
  poke_watchers();
}

void sim_api::outside_delete(const lease_key& k) {
  {
    std::lock_guard<std::mutex> g(mx_);
    if (store_.erase(k) == 0)
      return;
    note_change(k, std::nullopt);
  }
  poke_watchers();
}

void sim_api::outside_revoke(const lease_key& k) {
  {
    std::lock_guard<std::mutex> g(mx_);
    auto i = store_.find(k);
    if (i == store_.end() || i->second.spec.holder_identity.empty())
      return;
    i->second.spec.holder_identity.clear();
    i->second.resource_version = std::to_string(next_rv_++);
    note_change(k, i->second);
  }
  poke_watchers();
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

lease_reply sim_api::get(const std::string& client, const lease_key& k) {
  std::lock_guard<std::mutex> g(mx_);
  auto i = store_.find(k);
  if (i == store_.end()) {
    log(client, "GET", k, error_kind::not_found, {});
    return lease_reply::failure(api_error{error_kind::not_found, 404, "GET", lease_path(k),
                                          "leases.coordination.k8s.io \"" + k.name
                                            + "\" not found"});
  }
  log(client, "GET", k, error_kind::none, i->second.spec.holder_identity);
  return lease_reply::success(i->second);
}

leases_reply sim_api::list(const std::string& client, const std::string& ns,
                           const std::string& selector) {
  std::lock_guard<std::mutex> g(mx_);
  auto eq = selector.find('=');
  auto key = selector.substr(0, eq);
  auto value = eq == std::string::npos ? std::string{} : selector.substr(eq + 1);
  std::vector<lease> out;
  for (auto& [k, l] : store_) {
    if (k.ns != ns || !l.raw.is_object())
      continue;
    auto labels = l.raw.value("metadata", nlohmann::json::object()).value("labels", nlohmann::json::object());
    if (labels.is_object() && labels.value(key, std::string{"\x01"}) == value)
      out.push_back(l);
  }
  log(client, "LIST", {ns, selector}, error_kind::none, std::to_string(out.size()));
  return leases_reply::success(std::move(out));
}

namespace {

/// What the API server's validation rejects (422), as leasehold-apiserver
/// and Kubernetes do: a negative leaseTransitions.
std::optional<std::string> invalid_spec(const lease_spec& s) {
  if (s.lease_transitions < 0)
    return "spec.leaseTransitions: Invalid value: " + std::to_string(s.lease_transitions)
           + ": must be greater than or equal to 0";
  return std::nullopt;
}

} // namespace

lease_reply sim_api::store_create(const std::string& client, lease l) {
  std::lock_guard<std::mutex> g(mx_);
  auto k = l.key();
  if (auto why = invalid_spec(l.spec)) {
    log(client, "POST", k, error_kind::invalid, l.spec.holder_identity);
    return lease_reply::failure(api_error{error_kind::invalid, 422, "POST", leases_path(k.ns), *why});
  }
  if (store_.count(k) != 0) {
    log(client, "POST", k, error_kind::already_exists, l.spec.holder_identity);
    return lease_reply::failure(
      api_error{error_kind::already_exists, 409, "POST", leases_path(k.ns), "already exists"});
  }
  l.resource_version = std::to_string(next_rv_++);
  l.uid = "sim-" + std::to_string(next_uid_++);
  store_[k] = l;
  note_change(k, l);
  log(client, "POST", k, error_kind::none, l.spec.holder_identity);
  return lease_reply::success(std::move(l));
}

lease_reply sim_api::store_update(const std::string& client, lease l) {
  std::lock_guard<std::mutex> g(mx_);
  auto k = l.key();
  auto i = store_.find(k);
  if (i == store_.end()) {
    log(client, "PUT", k, error_kind::not_found, l.spec.holder_identity);
    return lease_reply::failure(api_error{error_kind::not_found, 404, "PUT", lease_path(k),
        "not found"});
  }
  if (auto why = invalid_spec(l.spec)) {
    log(client, "PUT", k, error_kind::invalid, l.spec.holder_identity);
    return lease_reply::failure(api_error{error_kind::invalid, 422, "PUT", lease_path(k), *why});
  }
  if (l.resource_version.empty()) {
    log(client, "PUT", k, error_kind::invalid, l.spec.holder_identity);
    return lease_reply::failure(api_error{error_kind::invalid, 422, "PUT", lease_path(k),
        "metadata.resourceVersion: must be specified"});
  }
  if (l.resource_version != i->second.resource_version) {
    log(client, "PUT", k, error_kind::conflict, l.spec.holder_identity);
    return lease_reply::failure(api_error{error_kind::conflict, 409, "PUT", lease_path(k),
        "the object has been modified"});
  }
  l.resource_version = std::to_string(next_rv_++);
  l.uid = i->second.uid;
  i->second = l;
  note_change(k, l);
  log(client, "PUT", k, error_kind::none, l.spec.holder_identity);
  return lease_reply::success(std::move(l));
}

lease_reply sim_api::create(const std::string& client, lease l) {
  auto r = store_create(client, std::move(l));
  if (r.ok())
    poke_watchers();
  return r;
}

lease_reply sim_api::update(const std::string& client, lease l) {
  auto r = store_update(client, std::move(l));
  if (r.ok())
    poke_watchers();
  return r;
}

namespace {

using deliver_atom = caf::atom_constant<caf::atom("lh_deliver")>;
using arrive_atom = caf::atom_constant<caf::atom("lh_arrive")>;
using watch_poke_atom = caf::atom_constant<caf::atom("lh_wpoke")>;
using watch_idle_atom = caf::atom_constant<caf::atom("lh_widle")>;
using stream_fault_atom = caf::atom_constant<caf::atom("lh_wfault")>;

using time_point = caf::actor_clock::time_point;

/// One watch stream, as the simulated transport keeps it: a subscriber's
/// own (scope: its lease) or a namespace's shared one (scope: the
/// namespace, name empty).
struct sim_watch {
  lease_key scope;
  caf::timespan idle_timeout{0};
  std::map<std::string, std::vector<lease_watch_subscriber>> subscribers;   // by lease name
  std::uint64_t rv = 0;           // the last change delivered
  bool up = false;                // a stream is open (the subscribers were told)
  bool said = false;              // up or down was told at least once
  bool idle_check = false;        // a hung stream's idle timer runs
  time_point last_delivery{};
  std::set<std::string> present;  // names whose last event said the object exists
  // Its own faults (sim_stream_fault).
  time_point cut_until{};
  bool gone = false;              // starts again from the current state once open
  caf::timespan delay{0};
  time_point delay_until{};
};

struct sim_transport_state {
  std::shared_ptr<sim_store> api;
  std::string client;
  sim_watch_sharing sharing = sim_watch_sharing::per_subscriber;
  std::vector<caf::response_promise> hanging;   // never answered (kept, not dropped)
  std::map<std::uint64_t, std::pair<caf::response_promise, caf::message>> delayed;
  /// Requests on their way to the store: what they do there, then the reply leg.
  std::map<std::uint64_t, std::pair<std::function<caf::message()>, caf::timespan>> arriving;
  /// Of those, a call the store runs in two steps (sim_store::update_begin):
  /// its first step, whose rest arrives one more latency leg later.
  std::map<std::uint64_t, std::function<std::function<caf::message()>()>> beginning;
  std::uint64_t next_id = 0;
  std::map<caf::actor_addr, sim_watch> watches;   // per subscriber
  std::map<std::string, sim_watch> shared;        // per namespace
  std::uint64_t watcher_id = 0;                 // registration with the api (0: none)
  static inline const char* name = "leasehold.sim_transport";
};

// Untyped inside (it also takes its own deliver_atom for latency), exposed as
// a lease_transport_actor.
using sim_self = caf::stateful_actor<sim_transport_state>*;

/// Answers a request after the simulated latency, or never (hang). The
/// latency has two legs, each half a draw: the request reaches the store
/// (and a write lands) only after the first, so a write in flight can be
/// overtaken by a later one from elsewhere; the answer travels the second.
template <class Reply>
caf::result<Reply> answer(sim_self self, const std::string& verb, const lease_key& k,
                          std::function<Reply()> compute,
                          std::function<std::function<Reply()>()> begin = {}) {
  auto& st = self->state;
  int status = 503;
  auto f = st.api->fault_for(st.client, status);
  if ((f == sim_fault::refuse_writes || f == sim_fault::lose_answers) && verb == "GET")
    f = sim_fault::none;
  if (f == sim_fault::lose_answers) {
    auto rest = begin ? begin() : std::function<Reply()>{};
    rest ? rest() : compute();
  }
  if (f == sim_fault::hang || f == sim_fault::lose_answers) {
    st.hanging.push_back(self->make_response_promise());
    return caf::delegated<Reply>{};
  }
  if (f != sim_fault::none) {
    auto err = st.api->failure(st.client, verb, k, f, status).error;
    compute = [err] { return Reply::failure(err); };
    begin = {};
  }
  auto there = st.api->draw_latency() / 2;
  auto back = st.api->draw_latency() / 2;
  if (there.count() <= 0 && back.count() <= 0)
    return compute();
  auto id = ++st.next_id;
  st.delayed.emplace(id, std::make_pair(self->make_response_promise(), caf::message{}));
  st.arriving.emplace(id, std::make_pair([compute] { return caf::make_message(compute()); }, back));
  if (begin)
    st.beginning.emplace(id, [begin]() -> std::function<caf::message()> {
      auto rest = begin();
      if (!rest)
        return {};
      return [rest] { return caf::make_message(rest()); };
    });
  self->delayed_send(self, there, arrive_atom::value, id);
  return caf::delegated<Reply>{};
}

/// Sends `ev` to the subscribers of lease `name` (empty: a change of the
/// stream's health, to every subscriber) after the simulated latency, never
/// before an earlier event of the same stream (a stream keeps its order).
void deliver_watch(sim_self self, sim_watch& w, lease_watch_event ev, const std::string& name = {}) {
  auto now = self->clock().now();
  auto extra = now < w.delay_until ? w.delay : caf::timespan{0};
  auto at = std::max(now + self->state.api->draw_latency() + extra, w.last_delivery);
  w.last_delivery = at;
  using kind = lease_watch_event::kind;
  if (name.empty()) {
    w.said = true;
    for (auto& [n, subs] : w.subscribers)
      for (auto& s : subs)
        self->delayed_send(s, at - now, ev);
    return;
  }
  if (ev.what == kind::record)
    w.present.insert(name);
  else if (ev.what == kind::deleted)
    w.present.erase(name);
  auto i = w.subscribers.find(name);
  if (i != w.subscribers.end())
    for (auto& s : i->second)
      self->delayed_send(s, at - now, ev);
}

/// The stream starts again from the current state: each subscribed lease's
/// record, and, where the store's re-list says so, the delete of one it
/// last reported present.
void relist(sim_self self, sim_watch& w) {
  auto& api = *self->state.api;
  w.rv = api.last_version();
  for (auto& [name, subs] : w.subscribers) {
    if (auto rec = api.peek({w.scope.ns, name}))
      deliver_watch(self, w, {lease_watch_event::kind::record, std::move(rec), {}}, name);
    else if (api.relist_tells_deleted() && w.present.count(name) != 0)
      deliver_watch(self, w, {lease_watch_event::kind::deleted, std::nullopt, {}}, name);
  }
}

/// Brings one watch up to date with the store and the faults: a refused or
/// failing API (or a cut stream) closes the stream (`down`); a hanging one
/// just stops delivering, and is declared down after the idle timeout; once
/// the API answers again the stream reopens (`up`) and resumes after its
/// last delivered version (from the current state after a 410).
void sync_watch(sim_self self, sim_watch& w, const caf::actor_addr& own) {
  auto& st = self->state;
  int status = 503;
  auto f = st.api->fault_for(st.client, status);
  using kind = lease_watch_event::kind;
  bool cut = self->clock().now() < w.cut_until;
  if (cut || f == sim_fault::down || f == sim_fault::error) {
    if (w.up || !w.said) {
      w.up = false;
      deliver_watch(self, w, {kind::down, std::nullopt,
                              "watch " + st.api->path_of("WATCH", w.scope) + ": "
                                + (cut                      ? std::string("stream cut")
                                   : f == sim_fault::down ? std::string("connection refused")
                                                          : "HTTP " + std::to_string(status))});
    }
    return;
  }
  if (f == sim_fault::hang) {
    if (w.up && !w.idle_check && w.idle_timeout.count() > 0) {
      w.idle_check = true;
      self->delayed_send(self, w.idle_timeout, watch_idle_atom::value, own, w.scope.ns);
    }
    return;
  }
  if (!w.up) {
    w.up = true;
    deliver_watch(self, w, {kind::up, std::nullopt, {}});
  }
  if (w.gone) {
    w.gone = false;
    relist(self, w);
    return;
  }
  for (auto& c : st.api->changes_since(w.scope, w.rv)) {
    w.rv = c.rv;
    if (w.subscribers.count(c.key.name) != 0)
      deliver_watch(self, w, {c.record ? kind::record : kind::deleted, c.record, {}}, c.key.name);
  }
}

/// Every stream of the transport, in a fixed order: the subscribers' own,
/// then the shared ones.
template <class F>
void each_stream(sim_self self, F f) {
  for (auto& [addr, w] : self->state.watches)
    f(w, addr);
  for (auto& [ns, w] : self->state.shared)
    f(w, caf::actor_addr{});
}

void start_watch(sim_self self, lease_watch_request req) {
  auto& st = self->state;
  if (!req.subscriber)
    return;
  if (st.watcher_id == 0) {
    auto me = caf::actor_cast<caf::actor>(self);
    st.watcher_id = st.api->add_watcher([me] { caf::anon_send(me, watch_poke_atom::value); });
    auto api = st.api;
    auto id = st.watcher_id;
    self->attach_functor([api, id] { api->remove_watcher(id); });
  }
  if (st.sharing == sim_watch_sharing::per_namespace) {
    self->monitor(req.subscriber);
    auto i = st.shared.find(req.lease.ns);
    if (i != st.shared.end()) {
      // An open stream: the subscriber gets its health at once, then what
      // changes from now on.
      auto& w = i->second;
      w.subscribers[req.lease.name].push_back(req.subscriber);
      if (w.said)
        caf::anon_send(req.subscriber, lease_watch_event{w.up ? lease_watch_event::kind::up
                                                               : lease_watch_event::kind::down,
                                                          std::nullopt, w.up ? "" : "the stream is down"});
      return;
    }
    auto& w = st.shared[req.lease.ns];
    w.scope = {req.lease.ns, ""};
    w.idle_timeout = req.idle_timeout;
    w.subscribers[req.lease.name].push_back(req.subscriber);
    w.gone = true;   // a new stream starts from the current state
    sync_watch(self, w, {});
    return;
  }
  sim_watch w;
  w.scope = req.lease;
  w.idle_timeout = req.idle_timeout;
  w.said = true;   // a resumed stream says nothing until its health changes
  w.subscribers[req.lease.name].push_back(req.subscriber);
  // A version this store never handed out (or none): start from the
  // current state, as a re-list would.
  std::uint64_t rv = 0;
  try {
    rv = req.resource_version.empty() ? 0 : std::stoull(req.resource_version);
  } catch (...) {
    rv = 0;
  }
  if (rv == 0) {
    auto cur = st.api->peek(req.lease);
    w.up = true;
    deliver_watch(self, w, {lease_watch_event::kind::up, std::nullopt, {}});
    if (cur) {
      w.rv = std::stoull(cur->resource_version);
      deliver_watch(self, w, {lease_watch_event::kind::record, cur, {}}, req.lease.name);
    } else {
      auto all = st.api->changes_since(req.lease, 0);
      w.rv = all.empty() ? 0 : all.back().rv;
      deliver_watch(self, w, {lease_watch_event::kind::deleted, std::nullopt, {}}, req.lease.name);
    }
  } else {
    w.rv = rv;
  }
  self->monitor(req.subscriber);
  auto addr = req.subscriber.address();
  auto& slot = st.watches[addr] = std::move(w);
  sync_watch(self, slot, addr);
}

/// A subscriber is gone: its own stream ends; a shared stream ends with its
/// last subscriber.
void end_watch(sim_self self, const caf::actor_addr& who) {
  auto& st = self->state;
  st.watches.erase(who);
  for (auto it = st.shared.begin(); it != st.shared.end();) {
    auto& subs = it->second.subscribers;
    for (auto s = subs.begin(); s != subs.end();) {
      auto& v = s->second;
      v.erase(std::remove_if(v.begin(), v.end(), [&](const lease_watch_subscriber& a) { return a.address() == who; }),
              v.end());
      s = v.empty() ? subs.erase(s) : std::next(s);
    }
    it = subs.empty() ? st.shared.erase(it) : std::next(it);
  }
}

void stream_fault(sim_self self, sim_stream_fault f, caf::timespan d, int param) {
  auto now = self->clock().now();
  if (f == sim_stream_fault::cut)
    self->delayed_send(self, d, watch_poke_atom::value);   // it reopens then
  each_stream(self, [&](sim_watch& w, const caf::actor_addr& own) {
    switch (f) {
      case sim_stream_fault::none:
        w.cut_until = {};
        w.delay_until = {};
        break;
      case sim_stream_fault::cut:
        w.cut_until = std::max(w.cut_until, now + d);
        break;
      case sim_stream_fault::gone:
        w.gone = true;
        break;
      case sim_stream_fault::stale_replay:
        w.rv = w.rv > static_cast<std::uint64_t>(param) ? w.rv - static_cast<std::uint64_t>(param) : 0;
        break;
      case sim_stream_fault::delay:
        w.delay = std::chrono::milliseconds(param);
        w.delay_until = now + d;
        break;
    }
    sync_watch(self, w, own);
  });
}

} // namespace

const char* to_string(sim_stream_fault f) {
  switch (f) {
    case sim_stream_fault::none: return "none";
    case sim_stream_fault::cut: return "cut";
    case sim_stream_fault::gone: return "gone";
    case sim_stream_fault::stale_replay: return "stale_replay";
    case sim_stream_fault::delay: return "delay";
  }
  return "?";
}

void inject_stream_fault(const lease_transport_actor& transport, sim_stream_fault f,
                         caf::timespan d, int param) {
  caf::anon_send(caf::actor_cast<caf::actor>(transport), stream_fault_atom::value,
                 static_cast<int>(f), d, param);
}

lease_transport_actor spawn_sim_transport(caf::actor_system& sys, std::shared_ptr<sim_store> api,
                                          std::string client, sim_watch_sharing sharing) {
  auto fn = [](sim_self self, std::shared_ptr<sim_store> a, std::string c,
               sim_watch_sharing sh) -> caf::behavior {
    self->state.api = std::move(a);
    self->state.client = std::move(c);
    self->state.sharing = sh;
    self->set_down_handler([=](caf::down_msg& m) { end_watch(self, m.source); });
    return {
      [=](get_lease_atom, const lease_key& k) {
        auto api = self->state.api;
        auto client = self->state.client;
        return answer<lease_reply>(self, "GET", k, [=] { return api->get(client, k); });
      },
      [=](create_lease_atom, lease& l) {
        auto api = self->state.api;
        auto client = self->state.client;
        return answer<lease_reply>(self, "POST", l.key(), [=] { return api->create(client, l); });
      },
      [=](update_lease_atom, lease& l) {
        auto api = self->state.api;
        auto client = self->state.client;
        return answer<lease_reply>(self, "PUT", l.key(), [=] { return api->update(client, l); },
                                   [=] { return api->update_begin(client, l); });
      },
      [=](list_leases_atom, const std::string& ns, const std::string& selector) {
        auto api = self->state.api;
        auto client = self->state.client;
        return answer<leases_reply>(self, "GET", {ns, ""},
                                    [=] { return api->list(client, ns, selector); });
      },
      [=](arrive_atom, std::uint64_t id) {
        auto i = self->state.arriving.find(id);
        if (i == self->state.arriving.end())
          return;
        // A two-step call: its first step now, its rest a leg later (other
        // requests, and their store steps, may land in between).
        if (auto b = self->state.beginning.find(id); b != self->state.beginning.end()) {
          auto rest = b->second();
          self->state.beginning.erase(b);
          if (rest) {
            // Half the reply leg goes between the steps: the call takes no
            // longer than a one-step one.
            auto mid = i->second.second / 2;
            i->second.first = std::move(rest);
            i->second.second -= mid;
            self->delayed_send(self, mid, arrive_atom::value, id);
            return;
          }
        }
        auto reply = i->second.first();
        auto back = i->second.second;
        self->state.arriving.erase(i);
        auto d = self->state.delayed.find(id);
        if (d == self->state.delayed.end())
          return;
        d->second.second = std::move(reply);
        if (back.count() > 0) {
          self->delayed_send(self, back, deliver_atom::value, id);
        } else {
          d->second.first.deliver(d->second.second);
          self->state.delayed.erase(d);
        }
      },
      [=](watch_lease_atom, lease_watch_request& req) { start_watch(self, std::move(req)); },
      [=](watch_poke_atom) {
        each_stream(self, [&](sim_watch& w, const caf::actor_addr& own) { sync_watch(self, w, own); });
      },
      [=](stream_fault_atom, int f, caf::timespan d, int param) {
        stream_fault(self, static_cast<sim_stream_fault>(f), d, param);
      },
      [=](watch_idle_atom, const caf::actor_addr& own, const std::string& ns) {
        auto& st = self->state;
        sim_watch* w = nullptr;
        if (own) {
          auto i = st.watches.find(own);
          w = i == st.watches.end() ? nullptr : &i->second;
        } else {
          auto i = st.shared.find(ns);
          w = i == st.shared.end() ? nullptr : &i->second;
        }
        if (w == nullptr)
          return;
        w->idle_check = false;
        int status = 503;
        if (w->up && st.api->fault_for(st.client, status) == sim_fault::hang) {
          w->up = false;
          deliver_watch(self, *w, {lease_watch_event::kind::down, std::nullopt,
                                   "watch " + st.api->path_of("WATCH", w->scope) + ": nothing received for "
                                     + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                        w->idle_timeout).count())
                                     + "ms"});
        }
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
  return caf::actor_cast<lease_transport_actor>(
    sys.spawn(fn, std::move(api), std::move(client), sharing));
}

lease_backend sim_backend(const lease_transport_actor& transport,
                          const std::shared_ptr<sim_store>& store, const std::string& client) {
  lease_backend b;
  b.transport = transport;
  b.request_path = [store](const std::string& verb, const lease_key& k) {
    return store->path_of(verb, k);
  };
  if (store->server_expiry()) {   // etcd's evidence, on the store's shared readings
    auto shared = std::make_shared<etcd_shared_readings>();
    shared->status_of = [store, client](const std::string& id) {
      return store->ttl_status(client, id);
    };
    shared->read_begins = [store, client](const std::string& id) {
      auto end = store->ttl_read_begins(client, id);
      return std::shared_ptr<void>(nullptr, [store, end](void*) {
        if (end)
          end();
      });
    };
    b.evidence = [shared](const election_timings& t, std::uint64_t seed) {
      return make_etcd_evidence(t, seed, shared);
    };
  }
  return b;
}

} // namespace leasehold
