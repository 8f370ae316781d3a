// Reads of etcd keys through txns of ranges (etcd_txn_reads.hpp).
#include "transport/etcd_txn_reads.hpp"

#include <algorithm>
#include <vector>

#include <nlohmann/json.hpp>

#include "transport/common/base64.hpp"

namespace leasehold {

using json = nlohmann::json;

namespace {

/// The most revisions between a read and a create whose history a create
/// checks (16 requests); beyond it the created key is held.
constexpr std::int64_t history_revisions = 16 * etcd_txn_ops;

} // namespace

bool etcd_unwritten_between(const etcd_session::call_fn& call, const etcd_session& own,
                            const std::string& key, std::int64_t read, std::int64_t created) {
  if (created == read + 1)
    return true;   // the very next write of the whole store
  if (created <= read || created - read - 1 > history_revisions)
    return false;
  // Revisions this transport's own txns wrote, to other keys only, need no
  // read (etcd_session::wrote): a killed process's 1,000 keys are 1,000
  // creates of the follower's own in a row, and each create asked for every
  // one before it (up to 8 txns of 128 ranges each: the workers' time
  // during the takeover, issue 19).
  std::vector<std::int64_t> unknown;
  for (auto rev = read + 1; rev < created; ++rev)
    if (!own.wrote_other_at(rev, key))
      unknown.push_back(rev);
  for (std::size_t from = 0; from < unknown.size(); from += etcd_txn_ops) {
    auto until = std::min(unknown.size(), from + static_cast<std::size_t>(etcd_txn_ops));
    json ranges = json::array();
    for (auto i = from; i < until; ++i)
      ranges.push_back({{"request_range", {{"key", key}, {"revision", std::to_string(unknown[i])},
                                           {"count_only", true}}}});
    auto r = call("/v3/kv/txn", {{"success", std::move(ranges)}});
    if (!r.ok())
      return false;
    auto responses = r.value->find("responses");   // call() answers JSON objects only
    if (responses == r.value->end() || !responses->is_array() || responses->size() != until - from)
      return false;
    for (auto& op : *responses) {
      auto range = op.find("response_range");
      if (range == op.end() || !range->is_object())
        return false;
      std::int64_t count = 0;   // etcd leaves a zero count out
      if (range->contains("count") && (!int64_field(*range, "count", count) || count != 0))
        return false;
    }
  }
  return true;
}


api_result<etcd_current_key> etcd_current(const lease_key& k, const json& reply,
                                          std::int64_t revision, const std::string& path) {
  auto kv = first_kv(reply);
  if (!kv.ok())
    return api_result<etcd_current_key>::failure(
      api_error{error_kind::malformed_body, 200, "POST", path, kv.error});
  etcd_current_key out;
  out.kv = *kv.value;
  out.revision = header_revision(reply);
  if (out.revision <= 0)
    out.revision = revision;
  if (out.kv) {
    auto rec = to_lease(k, *out.kv);
    if (!rec.ok())
      return api_result<etcd_current_key>::failure(
        api_error{error_kind::malformed_body, 200, "POST", path, rec.error});
    out.record = std::move(rec.value);
  }
  return api_result<etcd_current_key>::success(std::move(out));
}


std::vector<api_result<etcd_current_key>> etcd_ranges(
  const etcd_session::call_fn& call, const std::vector<lease_key>& ks,
  const std::function<std::string(const lease_key&)>& key_of) {
  const std::string path = "/v3/kv/txn";
  std::vector<api_result<etcd_current_key>> out;
  out.reserve(ks.size());
  for (std::size_t from = 0; from < ks.size(); from += etcd_txn_ops) {
    auto until = std::min(ks.size(), from + static_cast<std::size_t>(etcd_txn_ops));
    auto n = until - from;
    json ops = json::array();
    for (auto i = from; i < until; ++i)
      ops.push_back({{"request_range", {{"key", encode_base64(key_of(ks[i]))}}}});
    auto r = call(path, {{"success", std::move(ops)}});
    const json* responses = nullptr;
    if (r.ok()) {
      auto it = r.value->find("responses");   // call() answers JSON objects only
      if (it != r.value->end() && it->is_array() && it->size() == n)
        responses = &*it;
      else
        r = api_result<json>::failure(api_error{
          error_kind::malformed_body, 200, "POST", path,
          "responses: expected " + std::to_string(n) + " range answers"});
    }
    for (auto i = from; i < until; ++i) {
      auto where = path + " (range " + std::to_string(i - from + 1) + " of " + std::to_string(n)
                   + ": " + key_of(ks[i]) + ")";
      if (!responses) {
        auto e = r.error;
        e.path = where;
        out.push_back(api_result<etcd_current_key>::failure(std::move(e)));
        continue;
      }
      auto& op = (*responses)[i - from];
      auto range = op.find("response_range");
      if (range == op.end() || !range->is_object())
        out.push_back(api_result<etcd_current_key>::failure(
          api_error{error_kind::malformed_body, 200, "POST", where, "response_range: missing"}));
      else
        out.push_back(etcd_current(ks[i], *range, header_revision(*r.value), where));
    }
  }
  return out;
}

} // namespace leasehold
