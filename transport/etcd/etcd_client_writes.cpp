// Batches of writes that are no renews (etcd_client::write_leases): a
// process's releases at shutdown and a follower's takeover of them, a few
// txns per 128 keys instead of three or four requests per key (a
// SIGTERM of 10,000 leases).
#include "transport/etcd/etcd_client.hpp"

namespace leasehold {

using json = nlohmann::json;
using current_key = etcd_current_key;

namespace {

/// `e` for the write of `key` in a txn of `n` writes (`path`).
api_error named(api_error e, const std::string& path, std::size_t n, const std::string& key) {
  e.path = path + " (a write of " + std::to_string(n) + " keys: " + key + ")";
  return e;
}

/// Every write of `which` (keys of `ls`, named by `key_of`) failed with `e`.
template <class KeyOf>
void fail_each(const std::vector<lease>& ls, const std::vector<std::size_t>& which,
               const api_error& e, const std::string& path, KeyOf&& key_of,
               std::vector<std::optional<api_result<lease>>>& out) {
  for (auto i : which)
    out[i] = api_result<lease>::failure(named(e, path, which.size(), key_of(ls[i].key())));
}

} // namespace

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
  // As a release alone: the key asked about, its etcd lease kept alive by a
  // keepalive sent after the batch began (one per etcd lease: a whole TTL
  // for every released record), then the released record put on the key
  // with its lease if its create_revision is unchanged.
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
      return fail_each(ls, which, k.error, k.error.path, key_fn(), out);
    if (k.value->ttl_seconds <= 0)
      return alone();   // the lease is gone (its keys with it): each judged on its own
  }
  json compares = json::array(), puts = json::array();
  std::vector<std::string> written;
  for (auto i : which) {
    auto& kv = *cur[i].value->kv;
    auto key = encode_base64(key_of(ls[i].key()));
    compares.push_back({{"key", key}, {"target", "CREATE"}, {"result", "EQUAL"},
                        {"create_revision", std::to_string(kv.create_revision)}});
    puts.push_back({{"request_put", {{"key", key}, {"value", encode_base64(value_of(ls[i].spec))},
                                     {"lease", kv.lease_id}}}});
    written.push_back(key);
  }
  auto t = call(path, {{"compare", std::move(compares)}, {"success", std::move(puts)}});
  if (!t.ok())
    return fail_each(ls, which, t.error, path, key_fn(), out);
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
                                      std::chrono::steady_clock::time_point began, answers& out) {
  if (which.size() < 2) {
    for (auto i : which)
      out[i] = updated(ls[i], cur[i], began);
    return;
  }
  // As a new term alone: the old key deleted if nobody wrote it since
  // (each compared on its own mod_revision), then created anew (a new
  // create_revision: a new term), the creates as one batch of creates.
  const std::string path = "/v3/kv/txn";
  json compares = json::array(), deletes = json::array();
  std::vector<std::string> written;
  for (auto i : which) {
    auto key = encode_base64(key_of(ls[i].key()));
    compares.push_back({{"key", key}, {"target", "MOD"}, {"result", "EQUAL"},
                        {"mod_revision", cur[i].value->record->resource_version}});
    deletes.push_back({{"request_delete_range", {{"key", key}}}});
    written.push_back(key);
  }
  auto d = call(path, {{"compare", std::move(compares)}, {"success", std::move(deletes)}});
  if (!d.ok())
    return fail_each(ls, which, d.error, path, key_fn(), out);
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

} // namespace leasehold
