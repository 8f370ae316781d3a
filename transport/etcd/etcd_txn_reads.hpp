// Reads of etcd keys through txns of range operations: many keys at once
// (the transport pool's batches of reads and renews), and the history of
// one key between a read that found it absent and this replica's create of
// it (docs/safety.md: a term that came and went unseen in between is held
// for).
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

/// For each check (the creates of one batch), whether etcd's history of
/// key `key` (base64) holds no write after revision `read` (a read that
/// found it absent) and before `created` (this replica's own create of it);
/// one answer per check, in order. A key written in between existed at the
/// revision of that write: one count-only range of the key at every
/// revision in between finds it, packed into as few txns (up to etcd's 128
/// operations each) as fit. More than 2,048 revisions in between, a
/// compacted revision or a failed request: false (not known; the caller
/// holds). Revisions that `own` (the transport's session) wrote to other
/// keys need no read (etcd_session::wrote_other_at). `seen_present`: the
/// read found the key present instead (a follower's last read before it
/// judged the key ran out); its history must then be present, gone once,
/// then absent up to the create, which a term that came and went in
/// between breaks.
std::vector<bool> etcd_unwritten_between(const etcd_session::call_fn& call, const etcd_session& own,
                                         const std::vector<etcd_history_check>& checks);

/// One key as a range read it.
struct etcd_current_key {
  std::optional<etcd_kv> kv;       // none: no such key
  std::optional<lease> record;     // its lease record
  std::int64_t revision = 0;       // the store's revision the range was read at
};

/// A txn answer of ranges as read in place: its header.revision (0: none)
/// and each range's kvs[0] (none: no such key) and header.revision.
struct etcd_ranges_read {
  struct range {
    std::optional<etcd_kv> kv;
    std::int64_t revision = 0;
  };
  std::int64_t revision = 0;
  std::vector<range> ranges;
};

/// Txn answer `body` of `n` ranges read in place (lease/json_read.hpp), without a
/// document: what a batch of renews reads (nlohmann's document
/// of the answer was ~15 % of a 10,000-key holder's CPU). False when the
/// answer is not plain: not ASCII, not n range answers, a member read
/// twice, an escape or another type where etcd sends a plain string, an
/// int64 out of range, a key-value whose revisions are not positive or
/// whose key or value is not base64. The document path answers those, its
/// answer (value or error) standing.
bool read_ranges_in_place(std::string_view body, std::size_t n, etcd_ranges_read& out);

/// Keys `ks[0..n)` as `body` (a 2xx answer to one txn of their ranges, in
/// order, from `endpoint`) shows them, each judged as etcd_range_answer
/// judges a lone range, its errors named `where(i)`, and the endpoint when
/// the body is no answer of n ranges: read in place when
/// read_ranges_in_place can, else through nlohmann's document (always, when
/// `in_place` is false: the reference the tests hold the cursor to).
std::vector<api_result<etcd_current_key>> etcd_range_answers(
  const std::string& body, const lease_key* ks, std::size_t n,
  const std::function<std::string(std::size_t)>& where, const std::string& endpoint = "",
  bool in_place = true);

/// Key `k` as `body` (a 2xx answer of a lone /v3/kv/range of it: `path`,
/// named in errors, from `endpoint`, named when the body is no JSON object)
/// shows it: read in place when the answer is plain (as a range of
/// read_ranges_in_place), else through nlohmann's document (always, when
/// `in_place` is false).
api_result<etcd_current_key> etcd_range_answer(const std::string& body, const lease_key& k,
                                               const std::string& path,
                                               const std::string& endpoint = "",
                                               bool in_place = true);

/// A gateway call's answer: its body unparsed and the endpoint that gave it.
struct etcd_text_answer {
  std::string body;
  std::string endpoint;
};

/// One gateway call with its body serialized and its answer's body
/// unparsed (etcd_connection::call_text).
using etcd_text_call =
  std::function<api_result<etcd_text_answer>(const std::string& path, const std::string& text)>;

/// Keys `ks` read at once: one txn of ranges (no compares) per
/// etcd_txn_ops keys, its answer read by etcd_range_answers. A txn that
/// failed (an error, a timeout, an answer without one range answer per
/// key) fails each of its keys, named by `key_of`.
std::vector<api_result<etcd_current_key>> etcd_ranges(
  const etcd_text_call& call, const std::vector<lease_key>& ks,
  const std::function<std::string(const lease_key&)>& key_of);

} // namespace leasehold
