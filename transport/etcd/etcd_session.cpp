#include "transport/etcd/etcd_session.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "leasehold/lease.hpp"
#include "transport/base64.hpp"
#include "transport/etcd/etcd_wire.hpp"

namespace leasehold {

using json = nlohmann::json;

namespace {

/// At most this many stale keys are deleted per keepalive (the rest at the
/// next one), so one keepalive's sender is not held up for long.
constexpr std::size_t reap_per_keepalive = 64;

/// The released record, as a release writes it, for a key whose value is
/// `value`; nullopt when released already or no lease record (then deleted).
std::optional<std::string> released_value(const std::string& value) {
  auto v = json::parse(value, nullptr, false);
  if (!v.is_object())
    return std::nullopt;
  auto h = v.find("holderIdentity");
  auto d = v.find("leaseDurationSeconds");
  bool unheld = h == v.end() || (h->is_string() && h->get<std::string>().empty());
  if (unheld && (d == v.end() || (d->is_number_integer() && d->get<std::int64_t>() <= 1)))
    return std::nullopt;
  v["holderIdentity"] = "";
  v["leaseDurationSeconds"] = 1;
  v["acquireTime"] = format_micro_time(wall_now());
  v.erase("preferredHolder");
  return v.dump();
}

} // namespace

api_result<std::int64_t> etcd_keepalive(const std::string& id, const etcd_session::call_fn& call) {
  const std::string path = "/v3/lease/keepalive";
  auto r = call(path, {{"ID", id}});
  if (!r.ok())
    return api_result<std::int64_t>::failure(r.error);
  std::int64_t ttl = 0;
  auto result = r.value->find("result");
  if (result == r.value->end() || !result->is_object() || !int64_field(*result, "TTL", ttl))
    return api_result<std::int64_t>::failure(
      api_error{error_kind::malformed_body, 200, "POST", path, "result.TTL: missing", 0});
  return api_result<std::int64_t>::success(std::max<std::int64_t>(ttl, 0));
}

api_result<std::string> etcd_grant(std::int64_t ttl_seconds, const etcd_session::call_fn& call) {
  const std::string path = "/v3/lease/grant";
  auto r = call(path, {{"TTL", std::to_string(ttl_seconds)}});
  if (!r.ok())
    return api_result<std::string>::failure(r.error);
  auto id = id_field(*r.value, "ID");
  if (id.empty() || id == "0")
    return api_result<std::string>::failure(
      api_error{error_kind::malformed_body, 200, "POST", path, "ID: missing", 0});
  return api_result<std::string>::success(std::move(id));
}

api_result<etcd_session::kept_alive> etcd_session::keep_alive(const std::string& id,
                                                              const call_fn& call) {
  std::unique_lock<std::mutex> lk(mx_);
  auto& s = sending_[id];   // kept: entries are never erased
  // A keepalive in flight now was sent before this request asked: only a
  // later one serves it.
  const std::uint64_t need = s.started + 1;
  while (s.done < need) {
    if (s.in_flight) {
      answered_.wait(lk);
      continue;
    }
    s.in_flight = true;
    auto mine = ++s.started;
    auto stale = stale_keys_locked(id, clock::now());
    lk.unlock();
    auto sent = clock::now();
    auto r = etcd_keepalive(id, call);
    if (!stale.empty() && r.ok() && *r.value > 0)
      reap(id, stale, call);
    lk.lock();
    if (r.ok() && *r.value == 0)
      for (auto& k : stale)
        forget_locked(k.key);   // the lease is gone, and its keys with it
    s.in_flight = false;
    s.done = mine;
    s.last = r.ok() ? api_result<kept_alive>::success(kept_alive{*r.value, sent})
                    : api_result<kept_alive>::failure(r.error);
    if (r.ok() && *r.value > 0 && (!s.alive || s.alive->sent < sent))
      s.alive = kept_alive{*r.value, sent};
    if (r.ok() && *r.value == 0)
      s.alive.reset();   // gone: no reading of it serves a renew
    answered_.notify_all();
    return s.last;
  }
  return s.last;
}

api_result<etcd_session::kept_alive> etcd_session::renewed(const std::string& id,
                                                           std::chrono::nanoseconds max_age,
                                                           clock::time_point began,
                                                           const call_fn& call) {
  {
    std::lock_guard<std::mutex> g(mx_);
    auto& s = sending_[id];
    if (s.alive && keepalive_serves_renew(s.alive->sent, max_age, began))
      return api_result<kept_alive>::success(*s.alive);
  }
  return keep_alive(id, call);
}

api_result<std::string> etcd_session::lease_for(std::int64_t ttl_seconds, const call_fn& call) {
  ttl_seconds = std::max<std::int64_t>(1, ttl_seconds);
  auto current = [&] {
    std::lock_guard<std::mutex> g(mx_);
    auto i = lease_of_ttl_.find(ttl_seconds);
    return i == lease_of_ttl_.end() ? std::string() : i->second;
  };
  // A grant only when the lease is gone, one at a time (a worker that
  // waited for another's grant uses it).
  std::string gone;
  for (int tries = 0; tries < 2; ++tries) {
    auto id = current();
    if (!id.empty() && id != gone) {
      auto alive = keep_alive(id, call);
      if (!alive.ok())
        return api_result<std::string>::failure(alive.error);
      if (alive.value->ttl_seconds > 0)
        return api_result<std::string>::success(std::move(id));
      gone = id;   // expired or revoked: its keys went with it
    }
    std::lock_guard<std::mutex> one_grant(grant_mx_);
    if (auto now = current(); !now.empty() && now != gone)
      continue;   // granted by another worker meanwhile: keep that one alive
    auto granted = etcd_grant(ttl_seconds, call);
    if (granted.ok()) {
      std::lock_guard<std::mutex> g(mx_);
      lease_of_ttl_[ttl_seconds] = *granted.value;
    }
    return granted;   // a whole TTL from its grant
  }
  return api_result<std::string>::failure(api_error{
    error_kind::other, 0, "POST", "/v3/lease/grant", "no live session lease after two tries", 0});
}

void etcd_session::asked(const std::string& key, const std::string& id, std::int64_t ttl_seconds) {
  std::lock_guard<std::mutex> g(mx_);
  bind_locked(key, id, ttl_seconds);
  keys_[key].reaped = 0;   // a create: a new key, which the reaper never wrote
}

bool etcd_session::renewing(const std::string& key, const std::string& id,
                            std::int64_t ttl_seconds, std::int64_t read_revision) {
  std::lock_guard<std::mutex> g(mx_);
  if (auto i = keys_.find(key); i != keys_.end() && i->second.reaped > read_revision)
    return false;
  bind_locked(key, id, ttl_seconds);
  return true;
}

void etcd_session::bind_locked(const std::string& key, const std::string& id, std::int64_t ttl) {
  auto& k = keys_[key];
  if (!k.lease_id || *k.lease_id != id) {
    auto held = lease_ids_.try_emplace(id, 0).first;
    ++held->second;
    if (k.lease_id)
      drop_id_locked(*k.lease_id);
    k.lease_id = &held->first;
  }
  k.asked = clock::now();
  k.ttl_seconds = std::max<std::int64_t>(1, ttl);
}

void etcd_session::forget_locked(const std::string& key) {
  if (auto i = keys_.find(key); i != keys_.end())
    erase_locked(i);
}

void etcd_session::erase_locked(std::map<std::string, bound_key>::iterator it) {
  drop_id_locked(*it->second.lease_id);
  keys_.erase(it);
}

void etcd_session::drop_id_locked(const std::string& id) {
  auto was = lease_ids_.find(id);
  if (--was->second == 0)
    lease_ids_.erase(was);   // `id` may be this entry's key: not used after
}

std::vector<etcd_session::stale_key> etcd_session::stale_keys_locked(const std::string& id,
                                                                    clock::time_point now) {
  // From where the last look stopped, wrapping once: a key whose reaping
  // keeps failing does not starve the others.
  std::vector<stale_key> out;
  auto start = keys_.upper_bound(reap_from_);
  auto look = [&](auto from, auto to) {
    for (auto i = from; i != to && out.size() < reap_per_keepalive; ++i) {
      auto& k = i->second;
      if (*k.lease_id == id && now - k.asked > std::chrono::seconds(k.ttl_seconds)) {
        out.push_back({i->first, k.ttl_seconds});
        reap_from_ = i->first;
      }
    }
  };
  look(start, keys_.end());
  look(keys_.begin(), start);
  if (out.size() < reap_per_keepalive)
    reap_from_.clear();
  return out;
}

void etcd_session::reap(const std::string& id, const std::vector<stale_key>& keys,
                        const call_fn& call) {
  // Why: docs/safety.md, "The session reaper's released record".
  for (auto& [key, ttl] : keys) {
    auto r = call("/v3/kv/range", {{"key", key}});
    if (!r.ok())
      continue;
    auto kv = first_kv(*r.value);
    if (!kv.ok())
      continue;
    if (!*kv.value || (*kv.value)->lease_id != id) {
      std::lock_guard<std::mutex> g(mx_);
      forget_locked(key);   // gone, or taken by another lease: not ours any more
      continue;
    }
    {
      // Still stale now that the range is in: a renew that asked since
      // keeps it; one that asks from here on is refused (renewing).
      std::lock_guard<std::mutex> g(mx_);
      auto i = keys_.find(key);
      if (i == keys_.end() || *i->second.lease_id != id
          || clock::now() - i->second.asked <= std::chrono::seconds(i->second.ttl_seconds))
        continue;
      i->second.reaped = reaping;
    }
    auto released = released_value((*kv.value)->value);
    json write = released ? json{{"request_put", {{"key", key},
                                                  {"value", encode_base64(*released)},
                                                  {"lease", id}}}}
                          : json{{"request_delete_range", {{"key", key}}}};
    auto t = call("/v3/kv/txn",
                  {{"compare", json::array({{{"key", key}, {"target", "LEASE"}, {"result", "EQUAL"},
                                             {"lease", id}},
                                            {{"key", key}, {"target", "MOD"}, {"result", "EQUAL"},
                                             {"mod_revision",
                                              std::to_string((*kv.value)->mod_revision)}}})},
                   {"success", json::array({std::move(write)})}});
    std::lock_guard<std::mutex> g(mx_);
    auto i = keys_.find(key);
    if (i == keys_.end())
      continue;
    if (!t.ok()) {
      // It may have been written: renews that read before stay refused,
      // and the key is looked at again a TTL from now.
      i->second.asked = clock::now();
      continue;
    }
    if (!t.value->value("succeeded", false)) {
      i->second.reaped = 0;   // written by somebody since the range: looked at again
      continue;
    }
    auto rev = header_revision(*t.value);
    own_revisions_locked(rev, {key});
    if (!released) {
      erase_locked(i);
      continue;
    }
    // Untaken a TTL from now: deleted then (the branch above).
    i->second.reaped = rev > 0 ? rev : reaping;
    i->second.asked = clock::now();
  }
}

void etcd_session::wrote(std::int64_t revision, const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> g(mx_);
  own_revisions_locked(revision, keys);
}

void etcd_session::own_revisions_locked(std::int64_t revision, const std::vector<std::string>& keys) {
  if (revision <= 0)
    return;
  std::vector<std::size_t> hashes;
  hashes.reserve(keys.size());
  for (auto& k : keys)
    hashes.push_back(std::hash<std::string>{}(k));
  std::sort(hashes.begin(), hashes.end());
  own_revisions_[revision] = std::move(hashes);
  if (own_revisions_.size() > own_revisions_kept)
    own_revisions_.erase(own_revisions_.begin());
}

bool etcd_session::wrote_other_at(std::int64_t revision, const std::string& key) const {
  std::lock_guard<std::mutex> g(mx_);
  auto i = own_revisions_.find(revision);
  return i != own_revisions_.end()
         && !std::binary_search(i->second.begin(), i->second.end(), std::hash<std::string>{}(key));
}

} // namespace leasehold
