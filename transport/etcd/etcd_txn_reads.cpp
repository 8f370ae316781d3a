// Reads of etcd keys through txns of ranges (etcd_txn_reads.hpp).
#include "transport/etcd/etcd_txn_reads.hpp"

#include <algorithm>
#include <charconv>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "transport/base64.hpp"
#include "transport/etcd/etcd_connection.hpp"
#include "lease/json_read.hpp"

namespace leasehold {

using json = nlohmann::json;

namespace {

/// The most revisions between a read and a create whose history a create
/// checks (16 requests); beyond it the created key is held.
constexpr std::int64_t history_revisions = 16 * etcd_txn_ops;

} // namespace

std::vector<bool> etcd_unwritten_between(const etcd_session::call_fn& call, const etcd_session& own,
                                         const std::vector<etcd_history_check>& checks) {
  std::vector<bool> out(checks.size(), false);
  std::vector<bool> present(checks.size());   // each key at the latest revision looked at
  // One count-only range per (check, revision), all checks in as few txns
  // as fit (docs/safety.md, "The etcd backend").
  std::vector<std::pair<std::size_t, std::int64_t>> ops;
  for (std::size_t i = 0; i < checks.size(); ++i) {
    auto& c = checks[i];
    present[i] = c.seen_present;
    if (c.created == c.read + 1 && !c.seen_present) {
      out[i] = true;   // the very next write of the whole store
      continue;
    }
    if (c.created <= c.read || c.created - c.read - 1 > history_revisions)
      continue;
    out[i] = true;   // until a range says otherwise
    // Revisions this transport's own txns wrote to other keys need no read.
    for (auto rev = c.read + 1; rev < c.created; ++rev)
      if (!own.wrote_other_at(rev, c.key))
        ops.emplace_back(i, rev);
  }
  for (std::size_t next = 0; next < ops.size();) {
    // The next txn: ranges of checks not yet judged written (a range that
    // found a write ends its check, as the per-key form stopped there).
    std::vector<std::size_t> batch;
    for (; next < ops.size() && batch.size() < static_cast<std::size_t>(etcd_txn_ops); ++next)
      if (out[ops[next].first])
        batch.push_back(next);
    if (batch.empty())
      break;
    json ranges = json::array();
    for (auto j : batch)
      ranges.push_back({{"request_range", {{"key", checks[ops[j].first].key},
                                           {"revision", std::to_string(ops[j].second)},
                                           {"count_only", true}}}});
    auto r = call("/v3/kv/txn", {{"success", std::move(ranges)}});
    const json* responses = nullptr;
    if (r.ok())
      if (auto i = r.value->find("responses"); i != r.value->end() && i->is_array()
                                               && i->size() == batch.size())
        responses = &*i;   // call() answers JSON objects only
    for (std::size_t n = 0; n < batch.size(); ++n) {
      auto i = ops[batch[n]].first;
      std::int64_t count = 0;   // etcd leaves a zero count out
      auto range = responses ? (*responses)[n].find("response_range") : json::const_iterator{};
      bool read = responses && range != (*responses)[n].end() && range->is_object()
                  && (!range->contains("count") || int64_field(*range, "count", count));
      if (!read || (count != 0 && !present[i]))
        out[i] = false;   // not known, or written after it was gone (or, unseen, at all)
      present[i] = count != 0;
    }
  }
  for (std::size_t i = 0; i < checks.size(); ++i)
    out[i] = out[i] && !present[i];   // gone before the create (it could not create otherwise)
  return out;
}

namespace {

/// Key `k` with range answer kvs[0] `kv` (or its error) at `range_revision`
/// (0: none, then `revision`); errors named `where()`.
template <class Where>
api_result<etcd_current_key> current_of(const lease_key& k,
                                        parse_result<std::optional<etcd_kv>> kv,
                                        std::int64_t range_revision, std::int64_t revision,
                                        Where&& where) {
  if (!kv.ok())
    return api_result<etcd_current_key>::failure(
      api_error{error_kind::malformed_body, 200, "POST", where(), kv.error});
  etcd_current_key out;
  out.kv = std::move(*kv.value);
  out.revision = range_revision > 0 ? range_revision : revision;
  if (out.kv) {
    auto rec = to_lease(k, *out.kv);
    if (!rec.ok())
      return api_result<etcd_current_key>::failure(
        api_error{error_kind::malformed_body, 200, "POST", where(), rec.error});
    out.record = std::move(rec.value);
  }
  return api_result<etcd_current_key>::success(std::move(out));
}

/// An int64 as etcd's gateway sends it next: a plain string of digits, or
/// an integer, that fits an int64 (int64_field reads both the same).
bool read_int64(od::value& v, std::int64_t& out) {
  od::json_type type;
  if (v.type().get(type))
    return false;
  if (type == od::json_type::number) {
    std::uint64_t u = 0;
    if (v.get_uint64().get(u) || u > static_cast<std::uint64_t>(INT64_MAX))
      return false;
    out = static_cast<std::int64_t>(u);
    return true;
  }
  std::string_view t;
  if (!plain_string(v, t) || t.empty() || t.size() > 19)
    return false;
  for (char ch : t)
    if (ch < '0' || ch > '9')
      return false;
  return std::from_chars(t.data(), t.data() + t.size(), out).ec == std::errc{};
}

/// A header object next: its revision (0 when it has none).
bool read_header(od::value& v, std::int64_t& revision) {
  json_members_seen seen;
  return each_member(v, [&](std::string_view k, od::value& x) {
    if (k != "revision")
      return skip(x);
    return seen.first(1) && read_int64(x, revision);
  });
}

/// A base64 string next (plain), decoded.
bool read_bytes(od::value& v, std::string& out) {
  std::string_view text;
  if (!plain_string(v, text))
    return false;
  auto bytes = decode_base64(std::string(text));
  if (!bytes)
    return false;
  out = std::move(*bytes);
  return true;
}

/// A key-value object next, as parse_kv reads a valid one.
bool read_kv(od::value& v, etcd_kv& kv) {
  json_members_seen seen;
  kv.lease_id = "0";
  bool ok = each_member(v, [&](std::string_view k, od::value& x) {
    if (k == "key")
      return seen.first(1) && read_bytes(x, kv.key);
    if (k == "value")
      return seen.first(2) && read_bytes(x, kv.value);
    if (k == "create_revision")
      return seen.first(4) && read_int64(x, kv.create_revision);
    if (k == "mod_revision")
      return seen.first(8) && read_int64(x, kv.mod_revision);
    if (k == "lease") {
      if (!seen.first(16))
        return false;
      od::json_type type;
      if (x.type().get(type))
        return false;
      if (type == od::json_type::string)
        return read_plain(x, kv.lease_id);
      std::int64_t id = 0;
      if (!read_int64(x, id))
        return false;
      kv.lease_id = std::to_string(id);
      return true;
    }
    return skip(x);
  });
  return ok && kv.create_revision > 0 && kv.mod_revision > 0;
}

/// A response_range object next.
template <class Object>
bool read_range(Object& o, etcd_ranges_read::range& r) {
  json_members_seen seen;
  return each_member(o, [&](std::string_view k, od::value& v) {
    if (k == "header")
      return seen.first(1) && read_header(v, r.revision);
    if (k != "kvs")
      return skip(v);
    return seen.first(2) && each_element(v, [&](std::size_t i, od::value& x) {
      if (i > 0)
        return skip(x);   // one key per range: kvs[0]
      r.kv.emplace();
      return read_kv(x, *r.kv);
    });
  });
}

/// Key `k` as range answer `reply` (a lone range or one of a txn) shows it;
/// `revision`: the store's revision when the answer has none of its own.
api_result<etcd_current_key> etcd_current(const lease_key& k, const json& reply,
                                          std::int64_t revision, const std::string& path) {
  return current_of(k, first_kv(reply), header_revision(reply), revision, [&] { return path; });
}

} // namespace

bool read_ranges_in_place(std::string_view body, std::size_t n, etcd_ranges_read& out) {
  out = etcd_ranges_read{};
  json_text t(body);
  od::object top;
  json_members_seen seen;
  bool ok = t.object(top) && each_member(top, [&](std::string_view k, od::value& v) {
    if (k == "header")
      return seen.first(1) && read_header(v, out.revision);
    if (k != "responses")
      return skip(v);
    out.ranges.reserve(n);
    return seen.first(2) && each_element(v, [&](std::size_t, od::value& x) {
      out.ranges.emplace_back();
      bool got = false;
      return each_member(x, [&](std::string_view op, od::value& y) {
        if (op != "response_range")
          return skip(y);
        return !std::exchange(got, true) && read_range(y, out.ranges.back());
      }) && got;
    });
  });
  return ok && (seen.bits & 2) && out.ranges.size() == n && t.at_end();
}

api_result<etcd_current_key> etcd_range_answer(const std::string& body, const lease_key& k,
                                               const std::string& path,
                                               const std::string& endpoint, bool in_place) {
  if (in_place) {
    json_text t(body);
    od::object top;
    etcd_ranges_read::range r;
    if (t.object(top) && read_range(top, r) && t.at_end())
      return current_of(k, {std::move(r.kv), {}}, r.revision, 0, [&] { return path; });
  }
  auto doc = etcd_connection::object_of(path, body, endpoint);
  if (!doc.ok())
    return api_result<etcd_current_key>::failure(doc.error);
  return etcd_current(k, *doc.value, 0, path);
}

std::vector<api_result<etcd_current_key>> etcd_range_answers(
  const std::string& body, const lease_key* ks, std::size_t n,
  const std::function<std::string(std::size_t)>& where, const std::string& endpoint,
  bool in_place) {
  const std::string path = "/v3/kv/txn";
  std::vector<api_result<etcd_current_key>> out;
  out.reserve(n);
  etcd_ranges_read read;
  if (in_place && read_ranges_in_place(body, n, read)) {
    for (std::size_t i = 0; i < n; ++i)
      out.push_back(current_of(ks[i], {std::move(read.ranges[i].kv), {}}, read.ranges[i].revision,
                               read.revision, [&] { return where(i); }));
    return out;
  }
  auto doc = etcd_connection::object_of(path, body, endpoint);
  const json* responses = nullptr;
  if (doc.ok()) {
    auto it = doc.value->find("responses");
    if (it != doc.value->end() && it->is_array() && it->size() == n)
      responses = &*it;
    else
      doc = api_result<json>::failure(
        api_error{error_kind::malformed_body, 200, "POST", path,
                  "responses: expected " + std::to_string(n) + " range answers"
                    + etcd_connection::from_endpoint(endpoint)});
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!responses) {
      auto e = doc.error;
      e.path = where(i);
      out.push_back(api_result<etcd_current_key>::failure(std::move(e)));
      continue;
    }
    auto& op = (*responses)[i];
    auto range = op.find("response_range");
    if (range == op.end() || !range->is_object())
      out.push_back(api_result<etcd_current_key>::failure(
        api_error{error_kind::malformed_body, 200, "POST", where(i), "response_range: missing"}));
    else
      out.push_back(etcd_current(ks[i], *range, header_revision(*doc.value), where(i)));
  }
  return out;
}

std::vector<api_result<etcd_current_key>> etcd_ranges(
  const etcd_text_call& call, const std::vector<lease_key>& ks,
  const std::function<std::string(const lease_key&)>& key_of) {
  const std::string path = "/v3/kv/txn";
  std::vector<api_result<etcd_current_key>> out;
  out.reserve(ks.size());
  std::string text;
  for (std::size_t from = 0; from < ks.size(); from += etcd_txn_ops) {
    auto until = std::min(ks.size(), from + static_cast<std::size_t>(etcd_txn_ops));
    auto n = until - from;
    // {"success":[{"request_range":{"key":"<base64>"}},...]}: base64 needs
    // no escaping.
    text.assign(R"({"success":[)");
    for (auto i = from; i < until; ++i) {
      text += i == from ? R"({"request_range":{"key":")" : R"(,{"request_range":{"key":")";
      text += encode_base64(key_of(ks[i]));
      text += R"("}})";
    }
    text += "]}";
    auto where = [&](std::size_t i) {
      return path + " (range " + std::to_string(i + 1) + " of " + std::to_string(n) + ": "
             + key_of(ks[from + i]) + ")";
    };
    auto r = call(path, text);
    if (!r.ok()) {
      for (std::size_t i = 0; i < n; ++i) {
        auto e = r.error;
        e.path = where(i);
        out.push_back(api_result<etcd_current_key>::failure(std::move(e)));
      }
      continue;
    }
    for (auto& a : etcd_range_answers(r.value->body, &ks[from], n, where, r.value->endpoint))
      out.push_back(std::move(a));
  }
  return out;
}

} // namespace leasehold
