// What a runner says about itself and the lease (runner_status), computed
// from what its electors reported and its own clock: one source for every
// view (docs/operations.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "leasehold/events.hpp"
#include "leasehold/runner.hpp"

namespace leasehold {

/// The runner's transitions (docs/design.md, 'The runner's states').
bool legal_transition(runner_state from, runner_state to);

/// lease_duration - renew_deadline - module_stop_timeout: the room the
/// safety budget leaves between a killed module and another leader.
caf::timespan safety_room(const election_timings& t);
/// How long after a leader-only module's kill its down message may take
/// before renewing stops (the term ends): min(room / 4, 100 ms).
caf::timespan unconfirmed_kill_grace(const election_timings& t);
/// When a kill still unconfirmed ends the process: others may take the lease
/// from (last renew sent) + lease_duration on (the renew sent renew_deadline
/// before the fence's end, `valid_until_ns`); half the safety room before that.
caf::actor_clock::time_point fatal_deadline(const election_timings& t, std::int64_t valid_until_ns);

/// What a runner keeps of its electors' lease_memory: what the next elector
/// needs (docs/safety.md, "What a replica knows survives its electors") and
/// its views need, no more (the whole memory was ~0.8 KB per lease).
struct lease_recall {
  /// What same_term compares of a term this replica wrote (its holder is us).
  struct term_id {
    std::optional<wall_time> acquire_time;
    int lease_transitions = 0;
  };
  std::int64_t max_term = -1;
  std::optional<term_id> own_term;
  std::optional<caf::actor_clock::time_point> created_at;
  std::string api_error_words;
  bool api_error_outstanding = false;
  bool api_answered = false;
  bool seen = false;                          // some elector saw a record
  bool own_term_current = false;              // that record is own_term (record_is_own_term)
  caf::actor_clock::time_point observed_at{}; // its observed_at (the newest report wins)
  caf::actor_clock::time_point holder_seen_at{};   // its max(observed_at, confirmed_at)
  std::string version;                        // its resourceVersion (elector_options::seen_version)
  std::string uid;                            // its metadata.uid ("" on etcd): what Events name
  std::string preferred_successor;            // of that record (preferred_successor)
};

/// Keeps what an elector saw of the lease (`m`) in `kept`: the newest
/// observation of the record wins, the API's health is the latest report's;
/// the highest term seen and the own term are never forgotten. True when an
/// API failure began with `m`.
bool merge_memory(lease_recall& kept, const lease_memory& m, const std::string& identity);

/// The memory a new elector starts with: the highest term seen, the own
/// term, the create time and the API's health; no record (it reads one,
/// and judges its expiry from then: never earlier than the last elector).
lease_memory seed_of(const lease_recall& r, const std::string& identity);

/// The last record in `m` names `identity` in exactly the own term.
bool record_is_own_term(const lease_memory& m, const std::string& identity);

/// This replica created the Lease and holds it without a term yet: its term
/// `term` starts with its first renew sent `left` from now (0: the next
/// renew), one lease duration after the create (docs/safety.md).
struct creation_hold_info {
  std::int64_t term = -1;
  caf::timespan left{0};
};

/// "creation hold: term N starts in Mms" (a leadership_changed's reason).
std::string hold_words(const creation_hold_info& h);
/// The creation_hold event of `h` (term, value: ms until the term starts, reason).
void describe_hold(runtime_event& ev, const creation_hold_info& h);

/// The hold `m` shows for `identity`: it created the lease (created_at),
/// wrote the term (own_term) and the last record seen is still that term.
std::optional<creation_hold_info> creation_hold(const lease_memory& m, const std::string& identity,
                                                caf::timespan lease_duration,
                                                caf::actor_clock::time_point now);
/// The same, from what the runner keeps.
std::optional<creation_hold_info> creation_hold(const lease_recall& r, caf::timespan lease_duration,
                                                caf::actor_clock::time_point now);

struct lease_view_input {
  const lease_recall& memory;
  std::string identity;
  caf::timespan lease_duration{0};
  bool leading = false;                       // the runner is leader
  bool elector_alive = false;                 // an elector renews what it holds
  caf::actor_clock::time_point now{};
  caf::actor_clock::time_point last_renew{};  // the leader's last successful renew
  /// When an elector last reported, with no error outstanding, a lease it
  /// holds in a creation hold (a hold's renews change no key on etcd).
  caf::actor_clock::time_point hold_confirmed_at{};
  caf::actor_clock::time_point api_failing_since{};
  /// The store's word that the holder renewed without changing its record
  /// (lease_evidence::holder_renewed_at).
  caf::actor_clock::time_point holder_renewed_at{};
};

/// Fills holder_age_ms, api_unreachable_ms, api_error, api_answered and, in
/// a creation hold, holder, term and hold_ms.
void describe_lease(runner_status& st, const lease_view_input& in);

} // namespace leasehold
