// The etcd client's batches of writes that are no renews (etcd_client.hpp).
#include "transport/etcd/etcd_client.hpp"

#include <set>

namespace leasehold {

using json = nlohmann::json;
using current_key = etcd_current_key;

std::vector<api_result<lease>> etcd_client::impl::write_all(const std::vector<lease>& ls) {
  auto began = std::chrono::steady_clock::now();
  std::vector<lease_key> ks;
  for (auto& l : ls)
    ks.push_back(l.key());
  auto cur = ranges(ks);
  answers out(ls.size());
  std::vector<std::size_t> releases, takes;
  std::set<std::string> keys;   // a key twice: the later alone
  for (std::size_t i = 0; i < ls.size(); ++i) {
    auto& l = ls[i];
    bool once = keys.insert(key_of(l.key())).second;
    const lease* rec = cur[i].ok() && cur[i].value->record ? &*cur[i].value->record : nullptr;
    bool same_term = rec && rec->spec.lease_transitions == l.spec.lease_transitions;
    if (once && rec && l.spec.holder_identity.empty() && same_term)
      releases.push_back(i);
    else if (once && rec && !l.spec.holder_identity.empty() && !same_term
             && (rec->spec.holder_identity.empty()
                 || rec->spec.holder_identity == l.spec.holder_identity)
             && l.resource_version == rec->resource_version)
      takes.push_back(i);
    else
      out[i] = updated(l, cur[i], began);   // judged (and refused) as alone
  }
  release_together(ls, cur, releases, began, out);
  take_together(ls, cur, takes, began, out);
  std::vector<api_result<lease>> replies;
  for (auto& o : out)
    replies.push_back(std::move(*o));
  return replies;
}

void etcd_client::impl::release_together(const std::vector<lease>& ls,
                                         const std::vector<api_result<current_key>>& cur,
                                         const std::vector<std::size_t>& which,
                                         std::chrono::steady_clock::time_point began,
                                         answers& out) {
  auto alone = [&] {
    for (auto i : which)
      out[i] = updated(ls[i], cur[i], began);
  };
  if (which.size() < 2)
    return alone();
  // As a release alone, with one keepalive per etcd lease for the batch.
  std::set<std::string> ids;
  for (auto i : which) {
    auto& kv = *cur[i].value->kv;
    // Refused only after the reaper's own released record: writing the
    // released record again is what the release wants anyway.
    session->renewing(encode_base64(key_of(ls[i].key())), kv.lease_id,
                      etcd_key_ttl(cur[i].value->record->spec), kv.mod_revision);
    ids.insert(kv.lease_id);
  }
  const std::string path = "/v3/kv/txn";
  for (auto& id : ids) {
    auto k = session->keep_alive(id, caller);
    if (!k.ok())   // as alone: the release fails with the keepalive's error
      return fail_each(ls, which, k.error, k.error.path, out);
    if (k.value->ttl_seconds <= 0)
      return alone();   // the lease is gone (its keys with it): each judged on its own
  }
  json compares = json::array(), puts = json::array();
  std::vector<std::string> written;
  for (auto i : which) {
    auto& kv = *cur[i].value->kv;
    auto key = encode_base64(key_of(ls[i].key()));
    compares.push_back(same_create(key, std::to_string(kv.create_revision)));
    puts.push_back(put_op(key, ls[i].spec, kv.lease_id));
    written.push_back(key);
  }
  auto t = call(path, {{"compare", std::move(compares)}, {"success", std::move(puts)}});
  if (!t.ok())
    return fail_each(ls, which, t.error, path, out);
  if (!t.value->value("succeeded", false))
    return alone();   // one key taken or written meanwhile: each as alone
  auto rev = header_revision(*t.value);
  session->wrote(rev, written);
  for (auto i : which)
    out[i] = released_answer(*cur[i].value->record, ls[i], rev);
}

void etcd_client::impl::take_together(const std::vector<lease>& ls,
                                      const std::vector<api_result<current_key>>& cur,
                                      const std::vector<std::size_t>& which,
                                      std::chrono::steady_clock::time_point began,
                                      answers& out) {
  if (which.size() < 2) {
    for (auto i : which)
      out[i] = updated(ls[i], cur[i], began);
    return;
  }
  // As a new term alone, the deletes in one txn, the creates as one batch.
  const std::string path = "/v3/kv/txn";
  json compares = json::array(), deletes = json::array();
  std::vector<std::string> written;
  for (auto i : which) {
    auto key = encode_base64(key_of(ls[i].key()));
    compares.push_back(same_mod(key, cur[i].value->record->resource_version));
    deletes.push_back({{"request_delete_range", {{"key", key}}}});
    written.push_back(key);
  }
  auto d = call(path, {{"compare", std::move(compares)}, {"success", std::move(deletes)}});
  if (!d.ok())
    return fail_each(ls, which, d.error, path, out);
  if (!d.value->value("succeeded", false)) {
    for (auto i : which)   // one key written meanwhile: each as alone
      out[i] = updated(ls[i], cur[i], began);
    return;
  }
  session->wrote(header_revision(*d.value), written);
  std::vector<lease> creates;
  for (auto i : which)
    creates.push_back(ls[i]);
  auto created = create_all(creates);
  for (std::size_t j = 0; j < which.size(); ++j) {
    if (!created[j].ok() && created[j].kind() == error_kind::already_exists)
      created[j].error.kind = error_kind::conflict;   // as a new term alone
    out[which[j]] = std::move(created[j]);
  }
}

api_result<lease> etcd_client::impl::updated(const lease& l, api_result<current_key> cur,
                                             std::chrono::steady_clock::time_point began) {
  if (!cur.ok())
    return api_result<lease>::failure(cur.error);
  if (!cur.value->record)
    return api_result<lease>::failure(
      not_found(l.key(), "no key " + key_of(l.key()) + " (its etcd lease expired or was revoked)"));
  auto& rec = *cur.value->record;
  auto& kv = *cur.value->kv;
  bool same_term = rec.spec.lease_transitions == l.spec.lease_transitions;
  if (l.spec.holder_identity.empty()) {   // release
    if (!same_term)
      return api_result<lease>::failure(conflict("/v3/kv/txn", rec, error_kind::conflict));
    // The released record, no revoke, after a keepalive that gives it a
    // whole TTL: a key gone within a poll of its release would be waited
    // out as vanished (sim seed 963, etcd, 50 x 3).
    auto key = encode_base64(key_of(l.key()));
    auto alive = keep_key_alive(key, l, kv, rec, began);
    if (!alive.ok())
      return api_result<lease>::failure(alive.error);
    const std::string path = "/v3/kv/txn";
    json txn = {{"compare", json::array({same_create(key, std::to_string(kv.create_revision))})},
                {"success", json::array({put_op(key, l.spec, kv.lease_id)})}};
    auto m = call(path, txn);
    if (!m.ok())
      return api_result<lease>::failure(m.error);
    if (!m.value->value("succeeded", false))
      return api_result<lease>::failure(conflict(path, rec, error_kind::conflict));
    auto rev = header_revision(*m.value);
    session->wrote(rev, {key});
    return released_answer(rec, l, rev);
  }
  if (!rec.spec.holder_identity.empty() && rec.spec.holder_identity != l.spec.holder_identity)
    return api_result<lease>::failure(conflict("/v3/kv/txn", rec, error_kind::conflict));
  if (same_term && rec.spec.holder_identity.empty())   // released (its holder, the reaper)
    return api_result<lease>::failure(conflict("/v3/kv/txn", rec, error_kind::conflict));
  if (same_term) {
    // A renew counts from the keepalive that served it: docs/safety.md,
    // "One etcd lease per process".
    auto r = keep_key_alive(encode_base64(key_of(l.key())), l, kv, rec, began);
    if (!r.ok())
      return api_result<lease>::failure(r.error);
    if (r.value->ttl_seconds <= 0)
      return api_result<lease>::failure(
        not_found(l.key(), "etcd lease " + kv.lease_id + " expired"));
    lease out = rec;
    out.renewed_age = std::max<std::chrono::nanoseconds>(began - r.value->sent, {});
    return api_result<lease>::success(std::move(out));
  }
  // A new term: delete the old key if nobody wrote it since, then create it
  // anew (a new create_revision).
  if (l.resource_version != rec.resource_version)
    return api_result<lease>::failure(conflict("/v3/kv/txn", rec, error_kind::conflict));
  const std::string path = "/v3/kv/txn";
  auto key = encode_base64(key_of(l.key()));
  json txn = {{"compare", json::array({same_mod(key, rec.resource_version)})},
              {"success", json::array({{{"request_delete_range", {{"key", key}}}}})}};
  auto d = call(path, txn);
  if (!d.ok())
    return api_result<lease>::failure(d.error);
  if (!d.value->value("succeeded", false))
    return api_result<lease>::failure(conflict(path, rec, error_kind::conflict));
  if (auto rev = header_revision(*d.value); rev > 0)
    session->wrote(rev, {key});
  // No revoke: the old key's lease may be another process's session lease.
  auto created = create_lease(l);
  if (!created.ok() && created.kind() == error_kind::already_exists)
    created.error.kind = error_kind::conflict;
  return created;
}

} // namespace leasehold
