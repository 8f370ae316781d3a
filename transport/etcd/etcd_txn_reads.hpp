// Reads of etcd keys through txns of ranges: many keys at once (the pool's
// batches), and one key's history between a read and this replica's create.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "leasehold/lease.hpp"
#include "transport/etcd/etcd_session.hpp"
#include "transport/etcd/etcd_wire.hpp"

namespace leasehold {

/// etcd's default limit of operations in one txn (--max-txn-ops).
constexpr std::int64_t etcd_txn_ops = 128;

/// One create's question to etcd_unwritten_between.
struct etcd_history_check {
  std::string key;   // base64
  std::int64_t read = 0;
  std::int64_t created = 0;
  bool seen_present = false;
};

/// For each check, whether key `key`'s history holds no write after `read`
/// and before `created` (false: not known, the caller holds). Why and how:
/// docs/safety.md, "The etcd backend" (the store's history).
std::vector<bool> etcd_unwritten_between(const etcd_session::call_fn& call, const etcd_session& own,
                                         const std::vector<etcd_history_check>& checks);

/// One key as a range read it.
struct etcd_current_key {
  std::optional<etcd_kv> kv;       // none: no such key
  std::optional<lease> record;     // its lease record
  std::int64_t revision = 0;       // the store's revision the range was read at
};

/// A txn answer of ranges as read in place (revision 0: none).
struct etcd_ranges_read {
  struct range {
    std::optional<etcd_kv> kv;
    std::int64_t revision = 0;
  };
  std::int64_t revision = 0;
  std::vector<range> ranges;
};

/// Txn answer `body` of `n` ranges read in place, without a document
/// (nlohmann's was ~15 % of a 10,000-key holder's CPU). False when the
/// answer is not plain: the document path then answers it.
bool read_ranges_in_place(std::string_view body, std::size_t n, etcd_ranges_read& out);

/// Keys `ks[0..n)` as `body` (a 2xx txn answer of their ranges) shows them,
/// each judged as etcd_range_answer judges a lone range; `in_place` false:
/// always the document, the reference the tests hold the cursor to.
std::vector<api_result<etcd_current_key>> etcd_range_answers(
  const std::string& body, const lease_key* ks, std::size_t n,
  const std::function<std::string(std::size_t)>& where, const std::string& endpoint = "",
  bool in_place = true);

/// Key `k` as `body` (a 2xx answer of a lone /v3/kv/range) shows it, read
/// in place when the answer is plain.
api_result<etcd_current_key> etcd_range_answer(const std::string& body, const lease_key& k,
                                               const std::string& path,
                                               const std::string& endpoint = "",
                                               bool in_place = true);

/// A gateway call's answer: its body unparsed and the endpoint that gave it.
struct etcd_text_answer {
  std::string body;
  std::string endpoint;
};

/// One gateway call, its body serialized and its answer's body unparsed.
using etcd_text_call =
  std::function<api_result<etcd_text_answer>(const std::string& path, const std::string& text)>;

/// Keys `ks` read at once, one txn of ranges per etcd_txn_ops keys; a
/// failed txn fails each of its keys.
std::vector<api_result<etcd_current_key>> etcd_ranges(
  const etcd_text_call& call, const std::vector<lease_key>& ks,
  const std::function<std::string(const lease_key&)>& key_of);

} // namespace leasehold
