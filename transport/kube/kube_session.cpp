#include "transport/kube/kube_session.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

// The rule and its proof: docs/safety.md, "Kubernetes leases bound to a
// session"; the objects and fields: docs/design.md, "Bound leases".

namespace leasehold {

namespace {

using json = nlohmann::json;
using time_point = caf::actor_clock::time_point;

wall_time wall_now_us() {
  return std::chrono::time_point_cast<std::chrono::microseconds>(wall_clock::now());
}

std::uint32_t fnv1a(const std::string& s) {
  std::uint32_t h = 2166136261u;
  for (unsigned char c : s)
    h = (h ^ c) * 16777619u;
  return h;
}

using binding = session_binding;

std::string incarnation_key(const binding& b) { return b.uid + "/" + std::to_string(b.incarnation); }
std::string text_of(const binding& b) {
  return b.session + "/" + incarnation_key(b) + "/" + std::to_string(b.term);
}

std::optional<binding> parse_binding(const std::string& text) {
  binding b;
  auto a = text.find('/');
  auto c = a == std::string::npos ? a : text.find('/', a + 1);
  auto d = c == std::string::npos ? c : text.find('/', c + 1);
  if (d == std::string::npos || a == 0)
    return std::nullopt;
  b.session = text.substr(0, a);
  b.uid = text.substr(a + 1, c - a - 1);
  try {
    b.incarnation = std::stoi(text.substr(c + 1, d - c - 1));
    b.term = std::stoi(text.substr(d + 1));
  } catch (...) {
    return std::nullopt;
  }
  return b;
}

const json* metadata_member(const lease& l, const char* member) {
  if (!l.raw.is_object())
    return nullptr;
  auto m = l.raw.find("metadata");
  if (m == l.raw.end() || !m->is_object())
    return nullptr;
  auto x = m->find(member);
  return x != m->end() && x->is_object() ? &*x : nullptr;
}

/// `l` bound by `b`, or (`b` empty) plain: the annotation and label set or removed.
void set_binding(lease& l, const std::optional<binding>& b) {
  if (!l.raw.is_object())
    l.raw = json::object();
  auto& meta = l.raw["metadata"];
  if (!meta.is_object())
    meta = json::object();
  for (const char* part : {"annotations", "labels"}) {
    auto& m = meta[part];
    if (!m.is_object())
      m = json::object();
    if (b)
      m[part[0] == 'a' ? session_annotation : session_label]
        = part[0] == 'a' ? text_of(*b) : b->session;
    else
      m.erase(part[0] == 'a' ? session_annotation : session_label);
    if (m.empty())
      meta.erase(part);
  }
}

bool released_in(const lease& s, const binding& b) {
  return s.uid == b.uid && s.spec.lease_transitions == b.incarnation && released_record(s.spec);
}

/// After an error of kind `k` the write may stand (no answer, a 5xx).
bool maybe_written(error_kind k) {
  return k == error_kind::timeout || k == error_kind::connection_refused
         || k == error_kind::disconnected || k == error_kind::server_error
         || k == error_kind::malformed_body || k == error_kind::other;
}

bool has_binding_text(const lease& l) {
  auto a = metadata_member(l, "annotations");
  return a && a->contains(session_annotation);
}

api_error actor_error(const char* verb, const std::string& path, const caf::error& e) {
  return {error_kind::timeout, 0, verb, path,
          "no answer from the transport: " + caf::to_string(e), 0};
}

} // namespace

std::optional<session_binding> binding_of(const lease& l) {
  auto a = metadata_member(l, "annotations");
  if (!a)
    return std::nullopt;
  auto v = a->find(session_annotation);
  if (v == a->end() || !v->is_string())
    return std::nullopt;
  auto b = parse_binding(v->get<std::string>());
  if (!b || b->term != l.spec.lease_transitions)
    return std::nullopt;   // stale: another writer took the Lease since (client-go keeps metadata)
  return b;
}

bool in_incarnation(const lease& s, const session_binding& b) {
  return s.uid == b.uid && s.spec.lease_transitions == b.incarnation
         && !s.spec.holder_identity.empty();
}

std::string session_lease_name(const std::string& identity) {
  std::string s;
  bool changed = false;
  for (char c : identity) {
    char low = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    bool ok = (low >= 'a' && low <= 'z') || (low >= '0' && low <= '9') || low == '-' || low == '.';
    s += ok ? low : '-';
    changed = changed || low != c || !ok;
  }
  std::string name = "lh-session-" + s;
  // A name and a label value both: at most 63 characters, alphanumeric at
  // the end; a hash keeps names apart that cutting or lowering would join.
  if (changed || name.size() > 63 || name.back() == '-' || name.back() == '.') {
    char h[10];
    std::snprintf(h, sizeof h, "-%08x", fnv1a(identity));
    name = name.substr(0, 54) + h;
  }
  return name;
}

// -- what followers know of sessions (shared by the actor and the evidence) ---------

namespace {

struct session_reading {
  bool known = false;
  std::optional<lease> record;        // nullopt: absent
  time_point seen_at{};               // when this version (or the absence) was first seen
  time_point spec_seen_at{};          // when this spec was first seen
  time_point read_at{};
  time_point read_sent{};             // the send of the request that read it
  std::map<std::string, time_point> left_at;   // incarnation -> first seen outside it
  bool asked = false;                 // an elector judged by it since the last poll
  bool reading = false;
};

class session_table {
public:
  explicit session_table(caf::timespan lease_duration) : d_(lease_duration) {}

  /// A reading of session `k` at `now`, by a request sent at `sent`
  /// (default: now); an answer older than the last reading's is dropped.
  void saw(const lease_key& k, std::optional<lease> rec, time_point now,
           std::optional<time_point> sent = std::nullopt) {
    std::lock_guard<std::mutex> g(mx_);
    auto& r = m_[k];
    auto at = sent.value_or(now);
    if (r.known && at < r.read_sent)
      return;
    r.read_sent = at;
    bool changed = !r.known || r.record.has_value() != rec.has_value()
                   || (rec && r.record->resource_version != rec->resource_version);
    if (changed)
      r.seen_at = now;
    if (!r.known || r.record.has_value() != rec.has_value() || (rec && r.record->spec != rec->spec))
      r.spec_seen_at = now;
    r.known = true;
    r.record = std::move(rec);
    r.read_at = now;
    r.reading = false;
    for (auto i = r.left_at.begin(); i != r.left_at.end();)
      i = i->second + 20 * d_ < now ? r.left_at.erase(i) : std::next(i);
  }

  /// When a record bound by `b`, first seen at `since`, expires with its
  /// session (`unknown` when no reading tells); `ask`: note the interest
  /// (the actor polls the sessions electors ask about). Only a reading sent
  /// after `since` can tell that the session left that incarnation: an
  /// older one may predate the incarnation itself (sim seed 558).
  time_point expires(const lease_key& k, const binding& b, time_point unknown, time_point since,
                     bool ask = true) {
    std::lock_guard<std::mutex> g(mx_);
    auto& r = m_[k];
    r.asked = r.asked || ask;
    if (!r.known)
      return unknown;
    if (r.record && in_incarnation(*r.record, b))
      return r.seen_at + d_;
    if (r.record && released_in(*r.record, b))
      return time_point{};
    auto it = r.left_at.find(incarnation_key(b));
    if (it == r.left_at.end()) {
      if (r.read_sent < since)
        return unknown;
      it = r.left_at.emplace(incarnation_key(b), std::max(r.seen_at, since)).first;
    }
    return it->second + d_;
  }

  /// Whether `k`'s spec has been seen unchanged for a lease duration (a
  /// holder renews its spec; an operator's label is no renew).
  bool still(const lease_key& k, time_point now) {
    std::lock_guard<std::mutex> g(mx_);
    auto i = m_.find(k);
    return i != m_.end() && i->second.known && i->second.spec_seen_at + d_ <= now;
  }

  /// The session's record as last read (nullopt: absent or unknown).
  std::optional<lease> record(const lease_key& k) {
    std::lock_guard<std::mutex> g(mx_);
    auto i = m_.find(k);
    return i == m_.end() ? std::nullopt : i->second.record;
  }

  /// The sessions to read now: asked about, none in flight, the last read
  /// older than `every`.
  std::vector<lease_key> due(time_point now, caf::timespan every) {
    std::lock_guard<std::mutex> g(mx_);
    std::vector<lease_key> out;
    for (auto& [k, r] : m_)
      if (r.asked && !r.reading && (!r.known || r.read_at + every <= now)) {
        r.reading = true;
        r.asked = false;
        out.push_back(k);
      }
    return out;
  }
  void read_failed(const lease_key& k) {
    std::lock_guard<std::mutex> g(mx_);
    m_[k].reading = false;
    m_[k].asked = true;
  }

  /// This process's live incarnation in `ns` ("" none).
  void set_own(const std::string& ns, std::string inc) {
    std::lock_guard<std::mutex> g(mx_);
    own_[ns] = std::move(inc);
  }
  bool own_live(const std::string& ns, const std::string& inc) {
    std::lock_guard<std::mutex> g(mx_);
    auto i = own_.find(ns);
    return i != own_.end() && i->second == inc;
  }

private:
  caf::timespan d_;
  std::mutex mx_;
  std::map<lease_key, session_reading> m_;
  std::map<std::string, std::string> own_;
};

/// A follower's evidence on Kubernetes: a bound record is held until its
/// session has been still (or gone from that incarnation) a lease duration.
class session_evidence final : public lease_evidence {
public:
  session_evidence(std::shared_ptr<session_table> t, std::string own, caf::timespan d,
                   caf::timespan retry)
    : t_(std::move(t)), own_(std::move(own)), d_(d), retry_(retry) {}

  time_point expires_at(const lease& rec, time_point observed_at, time_point by_clock) override {
    auto b = binding_of(rec);
    if (!b)
      return by_clock;
    auto own_by_record = observed_at + d_;   // the record's own change is waited out too
    if (b->session == own_ && t_->own_live(rec.ns, incarnation_key(*b)))
      return own_by_record;   // our live session: no elector of ours renews it (else it held it)
    auto s = t_->expires({rec.ns, b->session}, *b, observed_at + std::max(d_, retry_), observed_at);
    return std::max(own_by_record, s);
  }

  void before_take(const lease& old, lease& take) override {
    if (auto b = binding_of(old))
      take.session_end = text_of(*b);
  }

private:
  std::shared_ptr<session_table> t_;
  std::string own_;
  caf::timespan d_, retry_;
};

// -- the session actor -------------------------------------------------------------

using poll_atom = caf::atom_constant<caf::atom("lh_spoll")>;

/// A bound renew waiting for a round.
struct rider {
  lease req;
  time_point began;
  caf::response_promise rp;
};

/// A bound Lease this process holds: what the refresh, the reaper and F need.
struct bound_entry {
  std::string version;
  time_point written{};      // the send of our last write of it
  int duration_s = 0;        // the leaseDurationSeconds written then
  time_point asked{};        // the last renew that asked (or reaper's try)
  /// Its elector sent a release of this version: its term is over. Kept
  /// until the list shows it gone, as that release may fail.
  bool released = false;
};

/// What a round's list showed of one bound Lease: the fields a renew
/// changes, so its answer is the record as stored (a whole Lease each
/// would be a second copy of every bound Lease's metadata).
struct listed_entry {
  std::string version;
  std::optional<wall_time> renew_time;
  std::optional<int> duration_s;
};

/// This process's session in one namespace.
struct own_session {
  std::optional<lease> rec;   // as last written (its version)
  bool live = false;
  time_point renewed_at{};    // the send of its last renew that succeeded
  int writes_out = 0;         // bound takes and refreshes not answered yet
  std::optional<wall_time> start_sent;   // the acquireTime of a start not answered (or in flight)
  bool starting = false;
  std::vector<std::function<void(const api_error&)>> on_start;   // takes waiting for it
  std::optional<wall_time> unanswered;   // a renew's renewTime whose answer was lost
  bool round_out = false;
  time_point round_started{};
  int round_pending = 0;
  api_error round_error;
  std::map<std::string, listed_entry> round_list;
  std::vector<rider> riders, waiting;
  bool has_done = false;      // a round succeeded in this incarnation
  time_point done_started{};
  std::map<std::string, listed_entry> listed;   // that round's bound Leases by name
};

struct session_state {
  lease_transport_actor inner;
  session_options opts;
  std::shared_ptr<session_table> table;
  std::string name;   // our session Lease's name
  std::map<std::string, own_session> sessions;   // by namespace
  std::map<lease_key, bound_entry> book;
  /// Takes waiting on the end of a session at a version (one write for all).
  std::map<std::pair<lease_key, std::string>, std::vector<std::function<void(const api_error&)>>>
    ending;
  std::set<std::string> own_read;     // namespaces whose own session is read at a poll
  std::set<std::string> own_unread;   // of them, those still to read
};

using session_self = caf::stateful_actor<session_state>*;

caf::timespan timeout_of(session_self self) {
  return self->state.opts.timings.effective_request_timeout();
}

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

/// The session in `ns` ended: every bound renew of it fails, its book goes.
void end_session(session_self self, const std::string& ns, const std::string& why) {
  auto& s = self->state.sessions[ns];
  s.live = false;
  s.has_done = false;
  s.listed.clear();
  self->state.table->set_own(ns, "");
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
  lease l = *s.rec;
  l.spec.holder_identity.clear();
  l.spec.lease_duration_seconds = 1;
  l.spec.renew_time = wall_now_us();
  s.live = false;
  s.has_done = false;
  s.listed.clear();
  st.table->set_own(ns, "");
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
    l.spec.renew_time = wall_now_us();
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
    if (r.ok() || !maybe_written(r.kind()))
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
  self->request(self->state.inner, timeout_of(self), get_lease_atom::value, k)
    .then(
      [self, k, done](lease_reply& got) {
        if (!got.ok() && got.kind() != error_kind::not_found)
          return done(got);
        auto now = self->clock().now();
        self->state.table->saw(k, got.ok() ? std::optional<lease>(*got.value) : std::nullopt, now);
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
        auto wall = wall_now_us();
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
      },
      [done, k](caf::error& e) { done(lease_reply::failure(actor_error("GET", k.to_string(), e))); });
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
    // Off the books once written, or once the Lease moved on from `version`.
    auto forget = [self, key, version](const lease_reply& r) {
      auto e = self->state.book.find(key);
      if (e != self->state.book.end() && e->second.version == version
          && (r.ok() || !maybe_written(r.kind())))
        self->state.book.erase(e);
    };
    self->request(st.inner, timeout_of(self), get_lease_atom::value, key)
      .then([self, key, version, forget](lease_reply& got) {
        if (!got.ok() || got.value->resource_version != version)
          return forget(got.ok() ? lease_reply::failure({error_kind::conflict, 409, "PUT", key.to_string(), "changed", 0}) : got);
        lease l = *got.value;
        l.spec.holder_identity.clear();
        l.spec.lease_duration_seconds = 1;
        l.spec.preferred_holder.clear();
        set_binding(l, std::nullopt);
        self->request(self->state.inner, timeout_of(self), update_lease_atom::value, l)
          .then([forget](lease_reply& r) { forget(r); }, [](caf::error&) {});
      }, [](caf::error&) {});
  }
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
    // Entries written before the list and absent from it are released or
    // rewritten by another: off the books.
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
  l.spec.renew_time = wall_now_us();
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
          if (maybe_written(r.kind()))
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

/// A write of `l` through the inner transport; a bound one goes on the books.
void write(session_self self, lease l, bool create, caf::response_promise rp) {
  auto key = l.key();
  auto sent = self->clock().now();
  bool bound = binding_of(l).has_value();
  int dur = l.spec.lease_duration_seconds.value_or(0);
  if (bound)
    ++self->state.sessions[key.ns].writes_out;
  auto on = [self, key, sent, bound, dur, rp](lease_reply& r) mutable {
    if (bound) {
      --self->state.sessions[key.ns].writes_out;
      if (r.ok())
        self->state.book[key] = {r.value->resource_version, sent, dur, sent};
      else
        release_if_unused(self, key.ns);   // a take refused: a session started for it goes
    }
    rp.deliver(std::move(r));
  };
  auto err = [self, rp, key, create, bound](caf::error& e) mutable {
    if (bound) {
      --self->state.sessions[key.ns].writes_out;
      release_if_unused(self, key.ns);
    }
    rp.deliver(lease_reply::failure(actor_error(create ? "POST" : "PUT", key.to_string(), e)));
  };
  if (create)
    self->request(self->state.inner, caf::infinite, create_lease_atom::value, std::move(l)).then(on, err);
  else
    self->request(self->state.inner, caf::infinite, update_lease_atom::value, std::move(l)).then(on, err);
}

/// `l` (a take or a create by this replica) bound to our live session.
void write_bound(session_self self, lease l, bool create, caf::response_promise rp) {
  auto ns = l.ns;
  start_session(self, ns, [self, l, create, rp](const api_error& e) mutable {
    if (e.kind != error_kind::none)
      return rp.deliver(lease_reply::failure(e));
    auto& s = self->state.sessions[l.ns];
    binding b{self->state.name, s.rec->uid, s.rec->spec.lease_transitions, l.spec.lease_transitions};
    set_binding(l, b);
    l.spec.lease_duration_seconds = bound_seconds(self);
    write(self, std::move(l), create, std::move(rp));
  });
}

/// Reads session `k` into the followers' table, then `then(answer)`.
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
    lease e = *s;
    e.spec.holder_identity.clear();
    e.spec.lease_duration_seconds = 1;
    e.spec.renew_time = wall_now_us();
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

} // namespace

lease_backend bind_to_session(caf::actor_system& sys, lease_backend inner, session_options opts) {
  auto table = std::make_shared<session_table>(opts.timings.lease_duration);
  lease_backend b;
  b.request_path = inner.request_path;
  auto own = session_lease_name(opts.identity);
  auto d = opts.timings.lease_duration;
  auto retry = opts.timings.retry_period;
  b.evidence = [table, own, d, retry](const election_timings&, std::uint64_t) {
    return std::make_shared<session_evidence>(table, own, d, retry);
  };
  b.transport = caf::actor_cast<lease_transport_actor>(
    sys.spawn(session_actor, inner.transport, std::move(opts), table));
  return b;
}

} // namespace leasehold
