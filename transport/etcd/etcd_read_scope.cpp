// etcd_client::read_scope: every lease record of a namespace at one
// revision, page after page (the watch's list; etcd_client.hpp).
#include "transport/etcd/etcd_client.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "transport/base64.hpp"
#include "transport/etcd/etcd_wire.hpp"

namespace leasehold {

using json = nlohmann::json;

api_result<etcd_scope_state> etcd_client::read_scope(const std::string& ns, std::size_t page) {
  try {
    const std::string path = "/v3/kv/range";
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
      auto st = parse_scope_range(*r.value, scope);
      if (st.ok() && !st.value->next_key.empty() && st.value->next_key <= from)
        st.error = "more: the next page would not move past key " + from;
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
  } catch (const std::exception& e) {
    return api_result<etcd_scope_state>::failure(api_error{
      error_kind::other, 0, "POST", "/v3/kv/range", std::string("internal error: ") + e.what()});
  }
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
