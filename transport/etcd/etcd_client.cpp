#include "transport/etcd/etcd_client.hpp"

#include <algorithm>
#include <set>

#include "transport/base64.hpp"
#include "transport/etcd/etcd_connection.hpp"
#include "transport/etcd/etcd_txn_reads.hpp"
#include "transport/etcd/etcd_wire.hpp"

namespace leasehold {

using json = nlohmann::json;
using current_key = etcd_current_key;

namespace {

/// `e` for the `what` (write, create) of `key` in a txn of `n` of them (`path`).
api_error named(api_error e, const std::string& path, const char* what, std::size_t n,
                const std::string& key) {
  e.path = path + " (a " + what + " of " + std::to_string(n) + " keys: " + key + ")";
  return e;
}

/// Every write of `which` (keys of `ls`, named by `key_of`) failed with `e`.
template <class KeyOf>
void fail_each(const std::vector<lease>& ls, const std::vector<std::size_t>& which,
               const api_error& e, const std::string& path, KeyOf&& key_of,
               std::vector<std::optional<api_result<lease>>>& out) {
  for (auto i : which)
    out[i] = api_result<lease>::failure(named(e, path, "write", which.size(), key_of(ls[i].key())));
}

/// Txn compares of key `key` (base64): its create_revision, its
/// mod_revision is `rev`.
json same_create(const std::string& key, const std::string& rev) {
  return {{"key", key}, {"target", "CREATE"}, {"result", "EQUAL"}, {"create_revision", rev}};
}
json same_mod(const std::string& key, const std::string& rev) {
  return {{"key", key}, {"target", "MOD"}, {"result", "EQUAL"}, {"mod_revision", rev}};
}

} // namespace

struct etcd_client::impl {
  etcd_connection conn;
  const etcd_config& cfg;
  std::shared_ptr<ttl_cache> readings;
  std::shared_ptr<etcd_session> session;
  etcd_session::call_fn caller;
  etcd_text_call text_caller;

  impl(etcd_config c, std::shared_ptr<ttl_cache> r, std::shared_ptr<etcd_session> s)
    : conn(std::move(c)), cfg(conn.config()),
      readings(r ? std::move(r) : std::make_shared<ttl_cache>()),
      session(s ? std::move(s) : std::make_shared<etcd_session>()),
      caller([this](const std::string& path, const json& body) { return call(path, body); }),
      text_caller([this](const std::string& path, const std::string& text) {
        auto r = conn.call_text(path, text);
        if (!r.ok())
          return api_result<etcd_text_answer>::failure(r.error);
        return api_result<etcd_text_answer>::success(
          etcd_text_answer{std::move(*r.value), conn.current_endpoint()});
      }) {}

  api_result<json> call(const std::string& path, const json& body) { return conn.call(path, body); }

  // -- the lease mapping -------------------------------------------------------

  std::string key_of(const lease_key& k) const { return etcd_scope{cfg.prefix, k.ns}.key(k.name); }
  auto key_fn() const {
    return [this](const lease_key& k) { return key_of(k); };
  }

  static std::string value_of(const lease_spec& s) {
    json v = {{"holderIdentity", s.holder_identity}};
    if (s.lease_duration_seconds)
      v["leaseDurationSeconds"] = *s.lease_duration_seconds;
    if (s.acquire_time)
      v["acquireTime"] = format_micro_time(*s.acquire_time);
    if (!s.preferred_holder.empty())   // a handover's successor (docs/operations.md)
      v["preferredHolder"] = s.preferred_holder;
    if (!s.strategy.empty())
      v["strategy"] = s.strategy;
    return v.dump();
  }

  /// A txn's put of `spec`'s record on key `key` (base64), bound to etcd lease `id`.
  static json put_op(const std::string& key, const lease_spec& spec, const std::string& id) {
    return {{"request_put",
             {{"key", key}, {"value", encode_base64(value_of(spec))}, {"lease", id}}}};
  }

  api_result<current_key> range(const lease_key& k) {
    const std::string path = "/v3/kv/range";
    auto r = conn.call_text(path, R"({"key":")" + encode_base64(key_of(k)) + R"("})");
    if (!r.ok())
      return api_result<current_key>::failure(r.error);
    return etcd_range_answer(*r.value, k, path, conn.current_endpoint());
  }

  /// Keys `ks` read at once (etcd_ranges).
  std::vector<api_result<current_key>> ranges(const std::vector<lease_key>& ks) {
    return etcd_ranges(text_caller, ks, key_fn());
  }

  api_error not_found(const lease_key& k, std::string why) {
    return api_error{error_kind::not_found, 404, "POST", "/v3/kv/range " + key_of(k),
        std::move(why)};
  }

  api_error conflict(const std::string& path, const lease& cur, error_kind kind) {
    return api_error{kind, 409, "POST", path,
        "key held by \"" + cur.spec.holder_identity + "\" in term "
          + std::to_string(cur.spec.lease_transitions)};
  }

  /// A read of `k` that began at `began` and found `cur` (range or ranges).
  api_result<lease> got(const lease_key& k, api_result<current_key> cur,
                        std::chrono::steady_clock::time_point began) {
    if (!cur.ok())
      return api_result<lease>::failure(cur.error);
    if (!cur.value->record) {
      auto e = not_found(k, "no key " + key_of(k));
      e.store_revision = cur.value->revision;
      return api_result<lease>::failure(std::move(e));
    }
    auto rec = *cur.value->record;
    rec.read_revision = cur.value->revision;
    // The remaining TTL of the key's etcd lease: a follower judges from it
    // whether the key could have expired when it vanishes (docs/safety.md,
    // "Writes from outside the protocol"). A key without a lease (written
    // by hand) has none; a failed read leaves it unknown (judged as "could
    // not have expired"). One reading per etcd lease serves every key
    // bound to it while it is young enough (etcd_ttl_readings.hpp), with
    // its age.
    auto& id = cur.value->kv->lease_id;
    if (!id.empty() && id != "0") {
      if (auto r = readings->find(id, began)) {
        rec.ttl_seconds = r->ttl_seconds;
        rec.ttl_age = std::max<std::chrono::nanoseconds>(began - r->sent, {});
        return api_result<lease>::success(std::move(rec));
      }
      auto sent = std::chrono::steady_clock::now();
      auto t = call("/v3/lease/timetolive", {{"ID", id}});
      std::int64_t ttl = 0;
      if (t.ok() && int64_field(*t.value, "TTL", ttl)) {
        rec.ttl_seconds = ttl;
        readings->note(id, sent, ttl);
      }
    }
    return api_result<lease>::success(std::move(rec));
  }

  api_result<lease> create_lease(const lease& l) {
    // The transport's session lease of this TTL (etcd_key_ttl), kept alive
    // by a keepalive sent after this create began: the key has a whole TTL
    // from here (etcd_session.hpp).
    int ttl = etcd_key_ttl(l.spec);
    auto s = session->lease_for(ttl, caller);
    if (!s.ok())
      return api_result<lease>::failure(s.error);
    const std::string& id = *s.value;
    const std::string path = "/v3/kv/txn";
    auto key = encode_base64(key_of(l.key()));
    // Asked before the put: a key put on a txn whose answer is lost is
    // deleted a TTL later unless its elector takes it up (no revoke: the
    // lease holds other keys).
    session->asked(key, id, ttl);
    json txn = {{"compare", json::array({same_create(key, "0")})},
                {"success", json::array({put_op(key, l.spec, id)})},
                {"failure", json::array({{{"request_range", {{"key", key}}}}})}};
    auto t = call(path, txn);
    if (!t.ok())
      return api_result<lease>::failure(t.error);
    if (t.value->value("succeeded", false)) {
      session->wrote(header_revision(*t.value), {key});
      return created({l}, {key}, id, header_revision(*t.value), path).front();
    }
    auto cur = range(l.key());
    if (cur.ok() && cur.value->record)
      return api_result<lease>::failure(conflict(path, *cur.value->record,
                                                 error_kind::already_exists));
    return api_result<lease>::failure(
      api_error{error_kind::already_exists, 409, "POST", path, "key exists"});
  }

  /// The creates `ls` (keys `keys`, base64) that a txn (`path`) put on etcd
  /// lease `id` at revision `rev`: their records, each with whether the
  /// key's history since l.absent_at_revision (or l.seen_at_revision)
  /// shows no other write, asked of etcd for all of them at once.
  std::vector<api_result<lease>> created(const std::vector<lease>& ls,
                                         const std::vector<std::string>& keys,
                                         const std::string& id, std::int64_t rev,
                                         const std::string& path) {
    std::vector<api_result<lease>> out;
    std::vector<etcd_history_check> checks;
    std::vector<std::size_t> asked;   // the index in out of each check
    for (std::size_t i = 0; i < ls.size(); ++i) {
      auto& l = ls[i];
      if (rev <= 0) {
        out.push_back(api_result<lease>::failure(
          api_error{error_kind::malformed_body, 200, "POST", path, "header.revision: missing"}));
        continue;
      }
      etcd_kv kv{key_of(l.key()), rev, rev, id, value_of(l.spec)};
      auto rec = to_lease(l.key(), kv);
      if (!rec.ok()) {
        out.push_back(api_result<lease>::failure(
          api_error{error_kind::malformed_body, 200, "POST", path, rec.error}));
        continue;
      }
      if (auto from = l.seen_at_revision > 0 ? l.seen_at_revision : l.absent_at_revision; from > 0) {
        checks.push_back({keys[i], from, rev, l.seen_at_revision > 0});
        asked.push_back(i);
      }
      out.push_back(api_result<lease>::success(std::move(*rec.value)));
    }
    auto unwritten = etcd_unwritten_between(caller, *session, checks);
    for (std::size_t j = 0; j < asked.size(); ++j)
      out[asked[j]].value->unwritten_since_read = unwritten[j];
    return out;
  }

  /// Creates of `ls` at once (the pool's backlog): ONE txn whose compares
  /// ask every key to be absent and whose puts bind them all to the
  /// session lease of their TTL, kept alive by a keepalive sent after the
  /// batch began. etcd applies a txn whole or not at all, so each key is
  /// created exactly as by create_lease (the same compare, lease and
  /// keepalive), all at one revision. Keys not all absent: each created
  /// alone (create_lease, with its own answer); keys of different TTLs or
  /// one key twice: alone too. A failed txn fails each create, naming its key.
  std::vector<api_result<lease>> create_all(const std::vector<lease>& ls) {
    std::vector<api_result<lease>> out;
    const std::string path = "/v3/kv/txn";
    int ttl = etcd_key_ttl(ls.front().spec);
    std::set<std::string> keys;
    bool together = ls.size() <= static_cast<std::size_t>(etcd_txn_ops);
    for (auto& l : ls)
      together = together && etcd_key_ttl(l.spec) == ttl && keys.insert(key_of(l.key())).second;
    auto alone = [&] {
      for (auto& l : ls)
        out.push_back(create_lease(l));
      return out;
    };
    auto fail_each = [&](const api_error& e) {
      for (auto& l : ls)
        out.push_back(
          api_result<lease>::failure(named(e, path, "create", ls.size(), key_of(l.key()))));
      return out;
    };
    if (!together)
      return alone();
    auto s = session->lease_for(ttl, caller);
    if (!s.ok())
      return fail_each(s.error);
    const std::string& id = *s.value;
    json compares = json::array(), puts = json::array();
    for (auto& l : ls) {
      auto key = encode_base64(key_of(l.key()));
      session->asked(key, id, ttl);   // before the put, as create_lease
      compares.push_back(same_create(key, "0"));
      puts.push_back(put_op(key, l.spec, id));
    }
    auto t = call(path, {{"compare", std::move(compares)}, {"success", std::move(puts)}});
    if (!t.ok())
      return fail_each(t.error);
    if (!t.value->value("succeeded", false))
      return alone();
    auto rev = header_revision(*t.value);
    std::vector<std::string> written;   // one revision, every key of the batch
    for (auto& l : ls)
      written.push_back(encode_base64(key_of(l.key())));
    session->wrote(rev, written);
    return created(ls, written, id, rev, path);
  }

  /// A write of `key` (base64) that keeps its term: the key is in use
  /// (etcd_session::asked) and its etcd lease kept alive by a keepalive sent
  /// at most `l.renew_max_age` before `began`, or now (etcd_session::renewed).
  api_result<etcd_session::kept_alive> keep_key_alive(const std::string& key, const lease& l,
                                                      const etcd_kv& kv, const lease& rec,
                                                      std::chrono::steady_clock::time_point began) {
    // The reaper wrote the key after our range (or may be writing it): what
    // we read is not what the key holds, so the renew must not win.
    if (!session->renewing(key, kv.lease_id, etcd_key_ttl(rec.spec), kv.mod_revision))
      return api_result<etcd_session::kept_alive>::failure(
        conflict("/v3/kv/txn", rec, error_kind::conflict));
    return session->renewed(kv.lease_id, l.renew_max_age, began, caller);
  }

  /// What a release of `l` that put the released record on `rec`'s key at
  /// revision `rev` answers.
  static api_result<lease> released_answer(const lease& rec, const lease& l, std::int64_t rev) {
    lease out = rec;
    out.spec = l.spec;
    out.spec.lease_transitions = rec.spec.lease_transitions;
    if (rev > 0)
      out.resource_version = std::to_string(rev);
    return api_result<lease>::success(std::move(out));
  }

  // Batches of writes that are no renews (etcd_client::write_leases): a
  // process's releases at shutdown and a follower's takeover of them, a few
  // txns per 128 keys instead of three or four requests per key (a
  // SIGTERM of 10,000 leases).
  using answers = std::vector<std::optional<api_result<lease>>>;

  std::vector<api_result<lease>> write_all(const std::vector<lease>& ls) {
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

  void release_together(const std::vector<lease>& ls,
                        const std::vector<api_result<current_key>>& cur,
                        const std::vector<std::size_t>& which,
                        std::chrono::steady_clock::time_point began, answers& out) {
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
      compares.push_back(same_create(key, std::to_string(kv.create_revision)));
      puts.push_back(put_op(key, ls[i].spec, kv.lease_id));
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

  void take_together(const std::vector<lease>& ls, const std::vector<api_result<current_key>>& cur,
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
      compares.push_back(same_mod(key, cur[i].value->record->resource_version));
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

  /// An update of `l` that began at `began` and found its key as `cur`
  /// (range or ranges): a renew rides a keepalive (etcd_session::renewed),
  /// anything else writes as it must.
  api_result<lease> updated(const lease& l, api_result<current_key> cur,
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
      // The released record on the key (same lease, if the term is still
      // this one), and no revoke: followers tell the holder's own release
      // from a delete or revoke by somebody else by it, a polling follower
      // too (it may never see a key that is gone in between). A follower
      // takes it (delete if unchanged + create); untaken, it goes with the
      // etcd lease's TTL. A keepalive first gives it a whole TTL: a key that
      // went within a poll of its release would be seen only as a vanished
      // key, which a follower must wait out (sim seed 963, etcd, 50 x 3).
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
      // A renew: the key is still there in this term (the range above), and
      // its etcd lease (the transport's session lease) was kept alive by a
      // keepalive sent at most renew_max_age before this renew began, or
      // now; the reply says how long before (renewed_age), so the
      // elector counts the term's validity from that send, never later
      // (etcd_session.hpp, docs/safety.md).
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
    // A new term on a released record (its revoke did not follow) or on a
    // record naming this holder (the elector re-takes its own ended term):
    // delete the old key if nobody wrote it since, then create it anew (a
    // new create_revision, so a new term).
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
};


etcd_client::etcd_client(etcd_config cfg, std::shared_ptr<ttl_cache> readings,
                         std::shared_ptr<etcd_session> session)
  : impl_(std::make_unique<impl>(std::move(cfg), std::move(readings), std::move(session))) {}

etcd_client::~etcd_client() = default;

template <class T = lease, class F>
api_result<T> guarded(const char* what, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return api_result<T>::failure(
      api_error{error_kind::other, 0, "POST", what, std::string("internal error: ") + e.what()});
  }
}

api_error etcd_client::stream(const std::string& path, const nlohmann::json& body,
                              std::chrono::milliseconds idle_timeout,
                              const std::function<void()>& on_open,
                              const std::function<bool(const char*, std::size_t)>& on_data) {
  try {
    return impl_->conn.stream(path, body, idle_timeout, on_open, on_data);
  } catch (const std::exception& e) {
    return api_error{error_kind::other, 0, "POST", path, std::string("internal error: ") + e.what()};
  }
}

void etcd_client::stream_failed(error_kind kind) {
  impl_->conn.stream_failed(kind);
}

void etcd_client::stop() {
  impl_->conn.stop();
}

const etcd_config& etcd_client::config() const {
  return impl_->cfg;
}

api_result<json> etcd_client::post(const std::string& path, const json& body) {
  return guarded<json>(path.c_str(), [&] { return impl_->call(path, body); });
}

api_result<lease> etcd_client::get_lease(const lease_key& k) {
  return guarded("/v3/kv/range", [&] {
    auto began = std::chrono::steady_clock::now();
    return impl_->got(k, impl_->range(k), began);
  });
}

api_result<lease> etcd_client::create_lease(const lease& l) {
  return guarded("/v3/kv/txn", [&] { return impl_->create_lease(l); });
}

api_result<lease> etcd_client::update_lease(const lease& l) {
  return guarded("/v3/kv/txn", [&] {
    auto began = std::chrono::steady_clock::now();
    return impl_->updated(l, impl_->range(l.key()), began);
  });
}

api_result<lease> etcd_client::put_record(const lease& l) {
  const std::string path = "/v3/kv/txn";
  return guarded(path.c_str(), [&] {
    auto key = encode_base64(impl_->key_of(l.key()));
    json put = {{"key", key}, {"value", encode_base64(impl::value_of(l.spec))}, {"ignore_lease", true}};
    auto t = impl_->call(path, {{"compare", json::array({same_mod(key, l.resource_version)})},
                                {"success", json::array({{{"request_put", std::move(put)}}})}});
    if (!t.ok())
      return api_result<lease>::failure(t.error);
    if (!t.value->value("succeeded", false))
      return api_result<lease>::failure(api_error{error_kind::conflict, 409, "POST", path,
          "key " + impl_->key_of(l.key()) + " changed since revision " + l.resource_version});
    auto out = l;
    out.resource_version = std::to_string(header_revision(*t.value));
    return api_result<lease>::success(std::move(out));
  });
}

namespace {

/// A batch's replies (`each()`); an exception answers every request with it.
template <class Each>
std::vector<api_result<lease>> batch_of(std::size_t n, Each&& each) {
  try {
    return each();
  } catch (const std::exception& e) {
    return std::vector<api_result<lease>>(
      n, api_result<lease>::failure(api_error{error_kind::other, 0, "POST", "/v3/kv/txn",
                                              std::string("internal error: ") + e.what()}));
  }
}

} // namespace

std::vector<api_result<lease>> etcd_client::get_leases(const std::vector<lease_key>& ks) {
  return batch_of(ks.size(), [&] {
    auto began = std::chrono::steady_clock::now();
    auto cur = impl_->ranges(ks);
    std::vector<api_result<lease>> out;
    out.reserve(ks.size());
    for (std::size_t i = 0; i < ks.size(); ++i)
      out.push_back(impl_->got(ks[i], std::move(cur[i]), began));
    return out;
  });
}

std::vector<api_result<lease>> etcd_client::write_leases(const std::vector<lease>& ls) {
  return batch_of(ls.size(), [&] { return impl_->write_all(ls); });
}

std::vector<api_result<lease>> etcd_client::create_leases(const std::vector<lease>& ls) {
  return batch_of(ls.size(), [&] { return impl_->create_all(ls); });
}

std::vector<api_result<lease>> etcd_client::renew_leases(const std::vector<lease>& ls) {
  return batch_of(ls.size(), [&] {
    // One `began` for the batch, taken before its ranges: every renew in
    // it was asked before (the pool batches only queued requests), so each
    // counts from a keepalive sent no later than its key was read, exactly
    // as a renew alone (docs/safety.md, "One etcd lease per process").
    auto began = std::chrono::steady_clock::now();
    std::vector<lease_key> ks;
    ks.reserve(ls.size());
    for (auto& l : ls)
      ks.push_back(l.key());
    auto cur = impl_->ranges(ks);
    std::vector<api_result<lease>> out;
    out.reserve(ls.size());
    for (std::size_t i = 0; i < ls.size(); ++i)
      out.push_back(impl_->updated(ls[i], std::move(cur[i]), began));
    return out;
  });
}

etcd_scope etcd_client::scope(const std::string& ns) const {
  return {impl_->cfg.prefix, ns};
}

const std::string& etcd_client::current_endpoint() const {
  return impl_->conn.current_endpoint();
}

// Every lease record of a namespace at one revision, page after page (the
// watch's list).
api_result<etcd_scope_state> etcd_client::read_scope(const std::string& ns, std::size_t page) {
  const std::string path = "/v3/kv/range";
  return guarded<etcd_scope_state>(path.c_str(), [&] {
    auto scope = this->scope(ns);
    etcd_scope_state all;
    std::string from = scope.dir();
    // Page after page at the first page's revision: one consistent snapshot
    // of the namespace, however many keys it holds. Each page moves `from`
    // forward, so the pages are at most (keys / page) + 1.
    for (std::size_t pages = 1;; ++pages) {
      json body = {{"key", encode_base64(from)},
                   {"range_end", encode_base64(scope.range_end())},
                   {"limit", std::to_string(std::max<std::size_t>(page, 1))}};
      if (all.revision > 0)
        body["revision"] = std::to_string(all.revision);
      auto r = post(path, body);
      if (!r.ok())
        return api_result<etcd_scope_state>::failure(r.error);
      auto st = parse_scope_range(*r.value, scope, from);
      if (!st.ok())
        return api_result<etcd_scope_state>::failure(
          api_error{error_kind::malformed_body, 200, "POST",
                    path + " (page " + std::to_string(pages) + ")", st.error});
      if (all.revision == 0)
        all.revision = st.value->revision;
      all.records.merge(st.value->records);
      if (st.value->next_key.empty())
        return api_result<etcd_scope_state>::success(std::move(all));
      from = std::move(st.value->next_key);
    }
  });
}

api_result<etcd_scope_changes> etcd_client::changed_since(const std::string& ns,
                                                          std::int64_t revision) {
  const std::string path = "/v3/kv/range";
  auto scope = this->scope(ns);
  auto r = post(path, {{"key", encode_base64(scope.dir())},
                       {"range_end", encode_base64(scope.range_end())},
                       {"keys_only", true},
                       {"limit", "1"},
                       {"min_mod_revision", std::to_string(revision)}});
  if (!r.ok())
    return api_result<etcd_scope_changes>::failure(r.error);
  etcd_scope_changes c;
  auto kvs = r.value->find("kvs");
  c.written = kvs != r.value->end() && kvs->is_array() && !kvs->empty();
  if (r.value->contains("count") && !int64_field(*r.value, "count", c.count))
    return api_result<etcd_scope_changes>::failure(
      api_error{error_kind::malformed_body, 200, "POST", path + " (quiet watch check)",
                "count: not an integer", 0});
  return api_result<etcd_scope_changes>::success(c);
}

} // namespace leasehold
