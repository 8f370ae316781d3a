// The blocking etcd v3 client (JSON gateway): get / create / update mapped
// onto keys, etcd leases and txns, over an etcd_connection.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "leasehold/api_result.hpp"
#include "leasehold/lease.hpp"
#include "leasehold/transports.hpp"
#include "transport/base64.hpp"
#include "transport/etcd/etcd_connection.hpp"
#include "transport/etcd/etcd_session.hpp"
#include "transport/etcd/etcd_ttl_readings.hpp"
#include "transport/etcd/etcd_txn_reads.hpp"
#include "transport/etcd/etcd_wire.hpp"

namespace leasehold {

/// Blocking etcd client: use it from a detached actor or a thread only.
/// Its calls fail over between endpoints as etcd_connection's do.
class etcd_client {
public:
  /// The TTL readings of a transport's etcd leases, shared by its clients.
  using ttl_cache = ttl_readings<std::chrono::steady_clock::time_point>;

  /// `readings`, `session`: the TTL readings and the session lease shared
  /// with the transport's other clients (null: this client's own).
  explicit etcd_client(etcd_config cfg, std::shared_ptr<ttl_cache> readings = nullptr,
                       std::shared_ptr<etcd_session> session = nullptr);
  ~etcd_client();
  etcd_client(const etcd_client&) = delete;
  etcd_client& operator=(const etcd_client&) = delete;

  api_result<lease> get_lease(const lease_key& k);
  api_result<lease> create_lease(const lease& l);
  api_result<lease> update_lease(const lease& l);
  /// Puts `l`'s record on its key if still at l.resource_version, keeping
  /// its etcd lease and term (`etcdctl put --ignore-lease`): a yield's write.
  api_result<lease> put_record(const lease& l);
  /// Batches, one reply per request, in order; each key judged as alone.
  /// How each batch is sent and why: docs/safety.md, "One etcd lease per process".
  std::vector<api_result<lease>> get_leases(const std::vector<lease_key>& ks);
  std::vector<api_result<lease>> renew_leases(const std::vector<lease>& ls);
  std::vector<api_result<lease>> create_leases(const std::vector<lease>& ls);
  std::vector<api_result<lease>> write_leases(const std::vector<lease>& ls);

  /// Every lease record of namespace `ns` and the store revision it was
  /// read at, in pages of one snapshot; a revision compacted meanwhile fails.
  api_result<etcd_scope_state> read_scope(const std::string& ns, std::size_t page = 1000);
  /// Whether a quiet watch of `ns` missed anything since `revision`
  /// (docs/design.md, "Watch streams per backend"); etcd counts before it
  /// filters, so no value is read however many keys there are.
  api_result<etcd_scope_changes> changed_since(const std::string& ns, std::int64_t revision);
  /// A watch on the current endpoint; a failure another endpoint may not
  /// share (not a quiet stream's idle timeout) moves to the next one.
  api_error stream(const std::string& path, const nlohmann::json& body,
                   std::chrono::milliseconds idle_timeout, const std::function<void()>& on_open,
                   const std::function<bool(const char*, std::size_t)>& on_data);
  /// A stream that opened then reported an error of `kind`: as for a failed
  /// call (authenticate again, or the next endpoint).
  void stream_failed(error_kind kind);
  /// Aborts a blocking stream() from another thread.
  void stop();
  const etcd_config& config() const;

  /// The keys of namespace `ns`: <prefix>/<ns>/<name>.
  etcd_scope scope(const std::string& ns) const;
  /// The endpoint the next call goes to.
  const std::string& current_endpoint() const;
  /// One gateway call, failing over and authenticating like every call;
  /// other uses of the store (balance membership) go through it.
  api_result<nlohmann::json> post(const std::string& path, const nlohmann::json& body);

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};


/// The client's state and its requests (etcd_client.cpp; the writes that
/// are no renews: etcd_client_writes.cpp).
struct etcd_client::impl {
  using json = nlohmann::json;
  using current_key = etcd_current_key;

  /// `e` for the `what` (write, create) of `key` in a txn of `n` of them (`path`).
  static api_error named(api_error e, const std::string& path, const char* what, std::size_t n,
                         const std::string& key) {
    e.path = path + " (a " + what + " of " + std::to_string(n) + " keys: " + key + ")";
    return e;
  }

  /// Every write of `which` (keys of `ls`) failed with `e`.
  void fail_each(const std::vector<lease>& ls, const std::vector<std::size_t>& which,
                 const api_error& e, const std::string& path,
                 std::vector<std::optional<api_result<lease>>>& out) const {
    for (auto i : which)
      out[i] = api_result<lease>::failure(named(e, path, "write", which.size(), key_of(ls[i].key())));
  }

  /// Txn compares of key `key` (base64): its create_revision, its
  /// mod_revision is `rev`.
  static json same_create(const std::string& key, const std::string& rev) {
    return {{"key", key}, {"target", "CREATE"}, {"result", "EQUAL"}, {"create_revision", rev}};
  }
  static json same_mod(const std::string& key, const std::string& rev) {
    return {{"key", key}, {"target", "MOD"}, {"result", "EQUAL"}, {"mod_revision", rev}};
  }

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
    return etcd_ranges(text_caller, ks, [this](const lease_key& k) { return key_of(k); });
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
    // The key's etcd lease TTL, shared per lease with its age; why:
    // docs/safety.md, "Writes from outside the protocol".
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
    // Kept alive after this create began: the key has a whole TTL from here.
    int ttl = etcd_key_ttl(l.spec);
    auto s = session->lease_for(ttl, caller);
    if (!s.ok())
      return api_result<lease>::failure(s.error);
    const std::string& id = *s.value;
    const std::string path = "/v3/kv/txn";
    auto key = encode_base64(key_of(l.key()));
    // Asked before the put: a key whose answer is lost is reaped a TTL later.
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

  /// The records of creates `ls` a txn put at `rev`, each with its history
  /// check, asked of etcd for all of them at once.
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

  /// Creates of `ls` in ONE all-or-nothing txn, each as create_lease would;
  /// keys not all absent, of different TTLs or repeated: each alone.
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

  /// A write of `key` (base64) that keeps its term: asked, and its etcd
  /// lease kept alive (etcd_session::renewed).
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

  // Batches of writes that are no renews: a few txns per 128 keys instead of
  // three or four requests per key (a SIGTERM of 10,000 leases).
  using answers = std::vector<std::optional<api_result<lease>>>;

  std::vector<api_result<lease>> write_all(const std::vector<lease>& ls);

  void release_together(const std::vector<lease>& ls,
                        const std::vector<api_result<current_key>>& cur,
                        const std::vector<std::size_t>& which,
                        std::chrono::steady_clock::time_point began, answers& out);

  void take_together(const std::vector<lease>& ls, const std::vector<api_result<current_key>>& cur,
                     const std::vector<std::size_t>& which,
                     std::chrono::steady_clock::time_point began, answers& out);

  /// An update of `l` that began at `began` and found its key as `cur`.
  api_result<lease> updated(const lease& l, api_result<current_key> cur,
                            std::chrono::steady_clock::time_point began);
};

} // namespace leasehold
