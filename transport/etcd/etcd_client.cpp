#include "transport/etcd/etcd_client.hpp"


namespace leasehold {

using json = nlohmann::json;
using current_key = etcd_current_key;



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
    auto t = impl_->call(path, {{"compare", json::array({impl::same_mod(key, l.resource_version)})},
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
    // One `began` for the batch, before its ranges: docs/safety.md, "One
    // etcd lease per process".
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

api_result<etcd_scope_state> etcd_client::read_scope(const std::string& ns, std::size_t page) {
  const std::string path = "/v3/kv/range";
  return guarded<etcd_scope_state>(path.c_str(), [&] {
    auto scope = this->scope(ns);
    etcd_scope_state all;
    std::string from = scope.dir();
    // Every page at the first page's revision: one snapshot. Each page
    // moves `from` forward, so the pages are at most (keys / page) + 1.
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
