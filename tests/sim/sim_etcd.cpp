#include "sim_etcd.hpp"

#include <algorithm>

#include "transport/etcd/etcd_session.hpp"
#include "transport/etcd/etcd_wire.hpp"

namespace leasehold {

sim_etcd::sim_etcd(std::function<time_point()> now, std::string prefix)
  : now_(std::move(now)), prefix_(std::move(prefix)) {
}

std::int64_t sim_etcd::revision() const {
  std::lock_guard<std::mutex> g(mx_);
  return revision_;
}

std::string sim_etcd::path_of(const std::string& verb, const lease_key& k) const {
  if (verb == "GET")
    return "/v3/kv/range " + key_of(k);
  if (verb == "POST")
    return "/v3/kv/txn " + key_of(k);
  if (verb == "PUT")
    return "/v3/lease/keepalive " + key_of(k);
  if (verb == "WATCH")
    return "/v3/watch " + key_of(k);
  return verb + " " + key_of(k);
}

api_error sim_etcd::error(error_kind kind, int status, const std::string& path,
                          std::string reason) const {
  return api_error{kind, status, "POST", path, std::move(reason)};
}

api_error sim_etcd::held_error(const std::string& path, const kv& v, error_kind kind) const {
  return error(kind, 409, path,
               "key held by \"" + v.value.holder_identity + "\" in term "
                 + std::to_string(v.create_revision));
}

lease sim_etcd::to_lease(const lease_key& k, const kv& v) const {
  lease l;
  l.ns = k.ns;
  l.name = k.name;
  l.resource_version = std::to_string(v.mod_revision);
  l.spec = v.value;
  l.spec.lease_transitions = static_cast<int>(v.create_revision);
  l.etcd_lease_id = std::to_string(v.lease_id);
  return l;
}

etcd_ttl_status sim_etcd::ttl_status(const std::string& client,
                                                const std::string& lease_id) const {
  std::lock_guard<std::mutex> g(mx_);
  auto c = readings_.find(client);
  if (c == readings_.end())
    return {};
  return c->second.status(lease_id, now_());
}

std::function<void()> sim_etcd::ttl_read_begins(const std::string& client,
                                                const std::string& lease_id) {
  std::lock_guard<std::mutex> g(mx_);
  auto t = now_();
  readings_[client].begin(lease_id, t);
  return [this, client, lease_id, t] {   // the token holds the store (sim_backend)
    std::lock_guard<std::mutex> g(mx_);
    readings_[client].end(lease_id, t);
  };
}

void sim_etcd::delete_locked(const lease_key& k, bool& changed) {
  if (keys_.erase(k) == 0)
    return;
  ++revision_;
  record_change(change{k, static_cast<std::uint64_t>(revision_), std::nullopt});
  changed = true;
}

void sim_etcd::revoke_locked(std::int64_t id, bool& changed) {
  if (leases_.erase(id) == 0)
    return;
  std::vector<lease_key> gone;
  for (auto& [k, v] : keys_)
    if (v.lease_id == id)
      gone.push_back(k);
  for (auto& k : gone)
    delete_locked(k, changed);
}

bool sim_etcd::expire_locked(bool& changed) {
  auto t = now_();
  std::vector<std::int64_t> due;
  for (auto& [id, g] : leases_)
    if (g.expires <= t)
      due.push_back(id);
  for (auto id : due)
    revoke_locked(id, changed);
  return !due.empty();
}

void sim_etcd::asked_locked(const lease_key& k, std::int64_t lease_id, std::int64_t ttl_seconds) {
  asked_[k] = ask{lease_id, now_(), std::max<std::int64_t>(1, ttl_seconds)};
}

void sim_etcd::keepalive_locked(std::int64_t lease_id, bool& changed) {
  auto g = leases_.find(lease_id);
  if (g == leases_.end())
    return;
  g->second.kept_at = now_();
  g->second.expires = g->second.kept_at + std::chrono::seconds(g->second.ttl_seconds);
  // The transport's reaper (etcd_session), which runs with its keepalives
  // (so never for a dead client): a key of this lease unasked for a TTL,
  // still on it, gets the released record (no holder, 1 s, no successor;
  // its acquireTime kept: nobody reads it on a released record); one
  // released already (untaken for a TTL) is deleted.
  std::vector<std::pair<lease_key, std::int64_t>> stale;
  for (auto i = asked_.begin(); i != asked_.end();) {
    if (i->second.lease_id == lease_id
        && i->second.at + std::chrono::seconds(i->second.ttl_seconds) < now_()) {
      if (auto k = keys_.find(i->first); k != keys_.end() && k->second.lease_id == lease_id)
        stale.emplace_back(i->first, i->second.ttl_seconds);
      i = asked_.erase(i);
    } else {
      ++i;
    }
  }
  for (auto& [k, ttl] : stale) {
    auto& v = keys_[k].value;
    if (v.holder_identity.empty() && v.lease_duration_seconds.value_or(1) <= 1) {
      delete_locked(k, changed);
      continue;
    }
    v.holder_identity.clear();
    v.lease_duration_seconds = 1;
    v.preferred_holder.clear();
    keys_[k].mod_revision = ++revision_;
    reaped_[k] = revision_;
    record_change(change{k, static_cast<std::uint64_t>(revision_), to_lease(k, keys_[k])});
    asked_[k] = ask{lease_id, now_(), ttl};   // untaken a TTL from now: deleted then
    changed = true;
  }
}

caf::timespan sim_etcd::renewed_locked(std::int64_t lease_id, caf::timespan max_age, bool& changed) {
  auto g = leases_.find(lease_id);
  if (g == leases_.end())
    return caf::timespan{0};
  if (keepalive_serves_renew(g->second.kept_at, max_age, now_()))
    return now_() - g->second.kept_at;
  keepalive_locked(lease_id, changed);
  return caf::timespan{0};
}

std::vector<lease_key> sim_etcd::keys_sharing_lease(const lease_key& k) const {
  std::lock_guard<std::mutex> g(mx_);
  std::vector<lease_key> out;
  auto i = keys_.find(k);
  if (i == keys_.end())
    return out;
  for (auto& [other, v] : keys_)
    if (v.lease_id == i->second.lease_id)
      out.push_back(other);
  return out;
}

bool sim_etcd::expire_due() {
  bool changed = false;
  {
    std::lock_guard<std::mutex> g(mx_);
    expire_locked(changed);
  }
  if (changed)
    poke_watchers();
  return changed;
}

std::optional<sim_etcd::time_point> sim_etcd::next_expiry() const {
  std::lock_guard<std::mutex> g(mx_);
  std::optional<time_point> out;
  for (auto& [id, l] : leases_)
    if (!out || l.expires < *out)
      out = l.expires;
  return out;
}

void sim_etcd::leader_change() {
  std::lock_guard<std::mutex> g(mx_);
  auto t = now_();
  for (auto& [id, l] : leases_)
    l.expires = std::max(l.expires, t + std::chrono::seconds(l.ttl_seconds));
}

std::optional<lease> sim_etcd::peek(const lease_key& k) const {
  std::lock_guard<std::mutex> g(mx_);
  auto i = keys_.find(k);
  if (i == keys_.end())
    return std::nullopt;
  auto l = leases_.find(i->second.lease_id);
  if (l == leases_.end() || l->second.expires <= now_())
    return std::nullopt;   // due for expiry: gone by the store's clock
  return to_lease(k, i->second);
}

lease_reply sim_etcd::get(const std::string& client, const lease_key& k) {
  bool changed = false;
  lease_reply out;
  {
    std::lock_guard<std::mutex> g(mx_);
    expire_locked(changed);
    auto i = keys_.find(k);
    if (i == keys_.end()) {
      log(client, "GET", k, error_kind::not_found, {});
      auto e = error(error_kind::not_found, 404, "/v3/kv/range " + key_of(k), "no key " + key_of(k));
      e.store_revision = revision_;
      out = lease_reply::failure(std::move(e));
    } else {
      log(client, "GET", k, error_kind::none, i->second.value.holder_identity);
      auto rec = to_lease(k, i->second);
      rec.read_revision = revision_;
      // /v3/lease/timetolive: the remaining TTL in whole seconds, truncated,
      // or the client's reading of the same etcd lease while it serves.
      auto& readings = readings_[client];
      auto id = std::to_string(i->second.lease_id);
      auto now = now_();
      if (auto r = readings.find(id, now)) {
        rec.ttl_seconds = r->ttl_seconds;
        rec.ttl_age = now - r->sent;
      } else if (auto l = leases_.find(i->second.lease_id); l != leases_.end()) {
        rec.ttl_seconds = std::chrono::duration_cast<std::chrono::seconds>(l->second.expires - now).count();
        readings.note(id, now, *rec.ttl_seconds);
      }
      out = lease_reply::success(std::move(rec));
    }
  }
  if (changed)
    poke_watchers();
  return out;
}

lease_reply sim_etcd::create_locked(const std::string& client, const lease& l, bool& changed,
                                    const char* verb) {
  auto k = l.key();
  // The client's session lease of TTL = leaseDurationSeconds (at least 1 s;
  // twice it for a record without a holder: etcd_key_ttl), kept alive (a
  // keepalive), or granted anew when it is gone, as the transport keeps it.
  auto ttl = etcd_key_ttl(l.spec);
  auto& id = sessions_[{client, ttl}];
  if (leases_.count(id) == 0) {
    id = next_lease_++;
    leases_[id] = grant{ttl};
  }
  keepalive_locked(id, changed);
  // /v3/kv/txn: create_revision == 0, then put with the lease.
  auto i = keys_.find(k);
  if (i != keys_.end()) {
    log(client, verb, k, error_kind::already_exists, l.spec.holder_identity);
    return lease_reply::failure(held_error("/v3/kv/txn", i->second, error_kind::already_exists));
  }
  kv v;
  v.value.holder_identity = l.spec.holder_identity;
  v.value.lease_duration_seconds = l.spec.lease_duration_seconds;
  v.value.acquire_time = l.spec.acquire_time;
  v.value.preferred_holder = l.spec.preferred_holder;
  v.value.strategy = l.spec.strategy;
  // The transport's history check (a watch of the key from the read that
  // found it absent): no write of this key since then.
  bool unwritten = l.absent_at_revision > 0
                   && changes_since(k, static_cast<std::uint64_t>(l.absent_at_revision)).empty();
  // Judged ran out: from the read that last found the key present, its
  // history is one delete and nothing else (etcd_unwritten_between).
  if (l.seen_at_revision > 0) {
    auto since = changes_since(k, static_cast<std::uint64_t>(l.seen_at_revision));
    unwritten = since.size() == 1 && !since.front().record;
  }
  v.create_revision = v.mod_revision = ++revision_;
  v.lease_id = id;
  keys_[k] = v;
  reaped_.erase(k);
  asked_locked(k, id, ttl);
  auto rec = to_lease(k, v);
  record_change(change{k, static_cast<std::uint64_t>(revision_), rec});
  rec.unwritten_since_read = unwritten;   // the create's answer only
  changed = true;
  log(client, verb, k, error_kind::none, l.spec.holder_identity);
  return lease_reply::success(std::move(rec));
}

lease_reply sim_etcd::create(const std::string& client, lease l) {
  bool changed = false;
  lease_reply out;
  {
    std::lock_guard<std::mutex> g(mx_);
    expire_locked(changed);
    out = create_locked(client, l, changed, "POST");
  }
  if (changed)
    poke_watchers();
  return out;
}

std::function<lease_reply()> sim_etcd::update_begin(const std::string& client, const lease& l) {
  std::int64_t read = 0;
  {
    std::lock_guard<std::mutex> g(mx_);
    auto i = keys_.find(l.key());
    if (l.spec.holder_identity.empty() || i == keys_.end()
        || i->second.value.holder_identity != l.spec.holder_identity
        || i->second.create_revision != l.spec.lease_transitions)
      return {};   // not a renew of what is there: one step
    read = i->second.mod_revision;
  }
  return [this, client, l, read]() -> lease_reply {
    {
      std::lock_guard<std::mutex> g(mx_);
      auto r = reaped_.find(l.key());
      auto k = keys_.find(l.key());
      if (r != reaped_.end() && r->second > read && k != keys_.end()) {
        log(client, "PUT", l.key(), error_kind::conflict, l.spec.holder_identity);
        return lease_reply::failure(held_error("/v3/kv/txn", k->second, error_kind::conflict));
      }
    }
    return update(client, l);
  };
}

lease_reply sim_etcd::update(const std::string& client, lease l) {
  bool changed = false;
  lease_reply out;
  {
    std::lock_guard<std::mutex> g(mx_);
    expire_locked(changed);
    auto k = l.key();
    auto& holder = l.spec.holder_identity;
    auto i = keys_.find(k);
    if (i == keys_.end()) {
      log(client, "PUT", k, error_kind::not_found, holder);
      out = lease_reply::failure(
        error(error_kind::not_found, 404, "/v3/kv/range " + key_of(k),
              "no key " + key_of(k) + " (its etcd lease expired or was revoked)"));
    } else {
      auto cur = i->second;
      auto rec = to_lease(k, cur);
      bool same_term = rec.spec.lease_transitions == l.spec.lease_transitions;
      if (holder.empty()) {   // release: the released record on the key (same lease)
        if (!same_term) {
          log(client, "PUT", k, error_kind::conflict, holder);
          out = lease_reply::failure(held_error("/v3/lease/revoke", cur, error_kind::conflict));
        } else {
          // A keepalive first (as the transport sends): the released record
          // lives a whole TTL, so a polling follower reads it before it goes.
          asked_locked(k, cur.lease_id, etcd_key_ttl(cur.value));
          renewed_locked(cur.lease_id, l.renew_max_age, changed);
          auto& marked = i->second;
          marked.value.holder_identity.clear();
          marked.value.lease_duration_seconds = l.spec.lease_duration_seconds;
          marked.value.acquire_time = l.spec.acquire_time;
          marked.value.preferred_holder = l.spec.preferred_holder;
          marked.value.strategy = l.spec.strategy;
          marked.mod_revision = ++revision_;
          rec = to_lease(k, marked);
          record_change(change{k, static_cast<std::uint64_t>(revision_), rec});
          changed = true;
          log(client, "PUT", k, error_kind::none, holder);
          out = lease_reply::success(std::move(rec));
        }
      } else if (!cur.value.holder_identity.empty() && cur.value.holder_identity != holder) {
        log(client, "PUT", k, error_kind::conflict, holder);
        out = lease_reply::failure(held_error("/v3/kv/txn", cur, error_kind::conflict));
      } else if (same_term && cur.value.holder_identity.empty()) {   // released (the reaper)
        log(client, "PUT", k, error_kind::conflict, holder);
        out = lease_reply::failure(held_error("/v3/kv/txn", cur, error_kind::conflict));
      } else if (same_term) {   // renew: keepalive (its lease is live: expired ones are gone)
        asked_locked(k, cur.lease_id, etcd_key_ttl(cur.value));
        rec.renewed_age = renewed_locked(cur.lease_id, l.renew_max_age, changed);
        log(client, "PUT", k, error_kind::none, holder);
        out = lease_reply::success(std::move(rec));
      } else if (l.resource_version != rec.resource_version) {
        log(client, "PUT", k, error_kind::conflict, holder);
        out = lease_reply::failure(held_error("/v3/kv/txn", cur, error_kind::conflict));
      } else {
        // A new term on a released key or one naming the same holder: delete
        // the unchanged key (its lease, a session lease, lives on), create
        // the key anew (a new create_revision: a new term).
        delete_locked(k, changed);
        out = create_locked(client, l, changed, "PUT");
        if (!out.ok() && out.kind() == error_kind::already_exists)
          out.error.kind = error_kind::conflict;
      }
    }
  }
  if (changed)
    poke_watchers();
  return out;
}

void sim_etcd::outside_delete(const lease_key& k) {
  bool changed = false;
  {
    std::lock_guard<std::mutex> g(mx_);
    delete_locked(k, changed);   // the key's etcd lease lives on
  }
  if (changed)
    poke_watchers();
}

void sim_etcd::outside_revoke(const lease_key& k) {
  bool changed = false;
  {
    std::lock_guard<std::mutex> g(mx_);
    if (auto i = keys_.find(k); i != keys_.end())
      revoke_locked(i->second.lease_id, changed);
  }
  if (changed)
    poke_watchers();
}

void sim_etcd::outside_prefer(const lease_key& k, const std::string& to) {
  bool changed = false;
  {
    std::lock_guard<std::mutex> g(mx_);
    expire_locked(changed);
    if (auto i = keys_.find(k); i != keys_.end()) {
      // A put with ignore_lease, compared on the version just read: the key
      // keeps its etcd lease and create_revision (its term).
      i->second.value.preferred_holder = to;
      i->second.value.strategy = to.empty() ? std::string() : handover_strategy;
      i->second.mod_revision = ++revision_;
      record_change(change{k, static_cast<std::uint64_t>(revision_), to_lease(k, i->second)});
      changed = true;
      log("yield", "PUT", k, error_kind::none, i->second.value.holder_identity);
    }
  }
  if (changed)
    poke_watchers();
}

} // namespace leasehold
