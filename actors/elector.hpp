// The elector: one actor per term, leasehold's one decision path
// (docs/design.md, 'The shape'; why it is safe: docs/safety.md). Its other
// files: elector.cpp (one attempt and its replies), elector_follow.cpp (watch,
// memory, timers), elector_release.cpp (the rules' bodies, how a term ends).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "leasehold/events.hpp"
#include "actors/rarely_set.hpp"
#include "actors/runner.hpp"
#include "actors/shared_behavior.hpp"
#include "leasehold/api_result.hpp"
#include "leasehold/lease.hpp"
#include "leasehold/lease_transport.hpp"
#include "leasehold/timings.hpp"

namespace leasehold {

// The states and their legal transitions: docs/design.md, 'The elector's states'.
enum class elector_state { following, holding, leading, closing, releasing, ended };
const char* to_string(elector_state s);

/// Any other transition is a defect (the elector reports it as fatal).
bool legal_transition(elector_state from, elector_state to);

/// The record a replica writes when it acquires the lease: a new term, whose
/// number is larger than both the record's and every term seen before.
lease_spec acquired_spec(const lease_spec& old, const std::string& identity,
                         caf::timespan lease_duration, wall_time now, std::int64_t max_term_seen);

/// The record a leader writes on renew: same holder, acquireTime and term.
lease_spec renewed_spec(const lease_spec& held, caf::timespan lease_duration, wall_time now);

/// The same term: holder, acquireTime and leaseTransitions all equal.
bool same_term(const lease_spec& a, const lease_spec& b);

/// The record written on release: holder empty, duration 1 s (the API
/// rejects 0), transitions kept.
lease_spec released_spec(const lease_spec& held, wall_time now);

/// lease::renew_max_age: at most half a retry period and a quarter of what
/// the renew deadline leaves over it, so the term still outlives the next
/// renew and its retry (why: docs/safety.md, 'The etcd backend').
caf::timespan renew_ride_limit(const election_timings& t);

/// <0, 0, >0 as resourceVersion `rv` is older than, equal to or newer than
/// `known`; nullopt when they cannot be ordered (not decimal numbers).
std::optional<int> compare_versions(const std::string& rv, const std::string& known);

struct elector_options {
  std::string identity;
  lease_key lease;
  election_timings timings;
  /// Typed, so every report the elector sends is checked when compiled.
  runner_internal_actor runner;
  event_emitter emit;   // the runner's: stamps this replica's and lease's events, shared
  std::uint64_t seed = 1;
  lease_memory memory;  // what earlier electors of this replica saw
  /// The resourceVersion of the last record they saw: the watch starts
  /// there, as its predecessor's would have ("": all it knows).
  std::string seen_version;
  /// Each accepted write stores the fence's validity (actor clock ns) here,
  /// so a renew costs the runner no message. Null: not kept.
  std::shared_ptr<std::atomic<std::int64_t>> renewed_until;
  /// Follow the lease through the transport's watch; while it is down the
  /// elector polls every retry_period.
  bool watch = true;
  /// The transport and how the store names requests (lease_backend::path_of):
  /// shared with the runner and every elector it starts.
  std::shared_ptr<const lease_backend> backend;
  /// What the store can say about this lease beyond its record
  /// (lease_evidence.hpp): the runner's, kept across its electors.
  std::shared_ptr<lease_evidence> evidence;
  /// false: follow the lease but never acquire it (`compete_atom, bool`);
  /// a term already held is the runner's to end.
  bool compete = true;
  /// Acquire nothing before this (a replica that yielded stays out; handover.hpp).
  caf::actor_clock::time_point compete_after{};
  /// Called on a defect: an illegal state transition (the runner passes
  /// its own on_fatal). Empty: default_fatal_handler.
  std::function<void(const std::string& reason)> on_fatal;
};

/// Not linked, not monitored: the caller monitors it. `release_atom,
/// target` -> bool releases the term it acquired, if still ours, then exits.
elector_handle spawn_elector(caf::local_actor* parent, elector_options opts);

using time_point = caf::actor_clock::time_point;

class elector_actor : public with_shared_behavior<elector_actor, elector_handle::base> {
public:
  elector_actor(caf::actor_config& cfg, elector_options opts);

  const char* name() const override { return "leasehold.elector"; }

  behavior_type make_behavior() override;

private:
  // -- state (elector.cpp) -------------------------------------------------------
  /// false on an illegal transition (reported as fatal): the caller stops.
  bool set_state(elector_state to);
  /// A term is ours (leading, or releasing it): what the replies act on.
  bool has_term() const {
    return state_ == elector_state::leading || state_ == elector_state::releasing;
  }
  bool release_asked() const {
    return state_ == elector_state::closing || state_ == elector_state::releasing;
  }
  /// The term it wrote is somebody else's now (holding -> following).
  void drop_hold();
  /// What this elector last wrote for its term; nullptr: none (or dropped).
  const lease_spec* held() const { return wrote_term_ ? &*mem_.own_term : nullptr; }
  /// The one timer, at the earlier of the tick and (leading) the renew
  /// deadline: a pending CAF timer is ~300 bytes per lease.
  void wake();
  /// The tick is due: the request out timed out, or an attempt.
  void on_tick();
  void on_tick_message(std::uint64_t seq);   // a timer fired (tick_atom)
  void set_competing(bool on);               // compete_atom
  caf::typed_response_promise<bool> on_release(std::string& target);   // release_atom

  // -- one attempt and its replies (elector.cpp) -----------------------------------
  void attempt();
  void renew(const lease& rec, bool fallback);
  void get_then_decide();
  void decide(const lease& rec);
  void absent(time_point seen_by, std::int64_t store_revision = 0);
  /// `acquire`: a new term (step 4); its answer lost, hold_unanswered().
  void put(lease l, bool fallback, bool acquire = false);
  /// R2b. An acquisition (its acquireTime `acquired_at`) whose answer was
  /// lost may stand in the store.
  void hold_unanswered(wall_time acquired_at, const api_error& err);
  /// `rec` shows what that acquisition wrote: held as written (true).
  bool adopt_unanswered(const lease& rec);
  bool holds_unanswered() const { return unanswered_at_ != wall_time{}; }
  /// `age` (lease::renewed_age): the renew rode a shared write sent that
  /// long before `started`; the term counts from then.
  void succeeded(const lease& rec, time_point started, std::chrono::nanoseconds age = {});
  bool in_created_hold(time_point sent) const;
  std::optional<time_point> created_hold_ends() const;
  void schedule_renew(time_point sent, time_point now);
  void schedule_tick(caf::timespan delay);
  void failed(const api_error& err);
  void done_attempt(std::optional<caf::timespan> next = std::nullopt);
  api_error late_reply(caf::timespan took) const;
  api_error request_error(const char* verb, std::string path, const caf::error& e);

  /// One request to the transport; errors arrive as a failed lease_reply.
  /// Its deadline is kept by the tick (arm_tick), not a CAF request timeout,
  /// which would set and cancel a timer on CAF's clock thread per request.
  template <class Atom, class Arg, class F>
  void call(time_point sent, const char* verb, Atom atom, Arg arg, F on_reply) {
    auto seq = ++call_seq_;
    call_out_ = true;
    call_deadline_ = sent + timeout();
    call_verb_ = verb;
    call_reply_ = std::move(on_reply);
    if (!(tick_pending_ && tick_at_ <= call_deadline_))
      arm_tick(call_deadline_, /*attempt*/ false);
    request(opt_.backend->transport, caf::infinite, atom, std::move(arg))
      .then([=](lease_reply& r) { end_call(seq, r); },
            [=](caf::error& e) {   // the path is built only here, not per request
              auto r = lease_reply::failure(
                request_error(verb, opt_.backend->path_of(verb, opt_.lease), e));
              end_call(seq, r);
            });
  }
  /// The reply to call number `seq` (dropped unless it is the one out).
  void end_call(std::uint64_t seq, lease_reply& r);
  /// The request out passed its deadline: answered `timeout` here.
  void time_out_call();
  /// The next tick at `t`: an attempt, or only the request's deadline.
  void arm_tick(time_point t, bool attempt);
  /// An earlier tick already set is kept and recomputed when it fires, so
  /// a renewal seen sets no timer.
  void wake_at_expiry();

  caf::timespan timeout() const { return opt_.timings.effective_request_timeout(); }

  // -- what it knows of the lease and the API (elector_follow.cpp) -------------------
  void on_watch(lease_watch_event& ev);
  void on_watched(const lease& rec);
  void act_now();
  void observe(const lease& rec, bool report = true);
  void report_memory() { send(opt_.runner, lease_observed{mem_}); }
  /// Nothing the runner uses changed, so no report (CPU per lease); the
  /// memory catches up when the term ends.
  bool own_renewal(const lease& rec) const;
  /// why: docs/safety.md, 'Followers that watch'.
  bool streamed_later(const lease& answer) const;
  /// Held by another (or a former process under our name), unexpired.
  bool held_by_other(const lease& rec) const;
  bool expired(const lease& rec) const { return expires_at(rec) <= clock().now(); }
  time_point expires_at(const lease& rec) const;
  bool waits_on_watch() const;
  caf::timespan next_delay();
  std::optional<time_point> hold_back(const lease* rec) const;
  /// What the elector knows, for the store's evidence (lease_evidence).
  lease_evidence::view view() const;
  bool answered_without_read();
  void create_unheld();
  void note_error(const api_error& err);
  void answered();

  // -- how a term ends (elector_release.cpp) ----------------------------------------
  void lose_rewritten(const lease& rec);
  void lose(std::string reason);
  void remember_write(const lease_spec& s);
  bool written_here(const lease_spec& s) const;
  void identity_conflict(const lease& rec);
  bool holds_own_term() const;
  void release_step(int tries);
  void reread_then_release(int tries);
  bool may_retry_release(int tries) const;
  void finish_release(bool released);
  void answer_release(bool released);

  elector_options opt_;
  std::minstd_rand rng_;                  // jitter draws: 8 bytes (a mt19937_64 is 2.5 KB per lease)
  lease_evidence& evidence_ = *opt_.evidence;
  // The stream told of the record's delete then ({}: no delete unread): a
  // read begun since comes before anything the evidence could answer.
  time_point delete_streamed_{};
  std::shared_ptr<void> read_mark_;   // this read marked in flight for other followers (answered_without_read)
  event_emitter emit;
  lease_memory& mem_ = opt_.memory;     // the options' own copy (no second 670-byte copy per lease)
  elector_state state_ = elector_state::following;
  /// held() is mem_.own_term: one copy, not two.
  bool wrote_term_ = false;
  time_point attempt_started_{};
  time_point release_deadline_{};
  time_point valid_until_{};             // the term ends here unless renewed (leading)
  wall_time unanswered_at_{};             // R2b: the acquireTime of an unanswered acquisition held ({}: none)
  std::int64_t term_ = -1;
  fencing_token fence_;
  // The request bookkeeping, orthogonal to the state:
  bool in_flight_ = false;                // an attempt's (or the release's) request is out
  bool recheck_ = false;                  // a change was streamed during an attempt
  std::uint64_t wake_seq_ = 0;            // only the latest timer (wake()) counts
  time_point wake_at_{};                  // when it fires
  bool wake_pending_ = false;             // it has not fired yet
  time_point tick_at_{};                  // when the latest tick is due
  bool tick_pending_ = false;             // the latest tick is not done yet
  bool tick_attempts_ = false;            // it is an attempt (else only a request's deadline)
  bool tick_rechecks_ = false;            // kept though a later wake was asked: recompute it
  // The request out (call): its number, deadline and reply handler.
  std::uint64_t call_seq_ = 0;
  bool call_out_ = false;
  time_point call_deadline_{};
  const char* call_verb_ = "";
  std::function<void(lease_reply&)> call_reply_;
  // The watch, orthogonal to the state:
  bool watch_up_ = false;                 // the transport streams the lease's changes
  bool watch_said_ = false;               // its first up or down was reported
  bool identity_held_said_ = false;       // another process renews under our name: said
  time_point watch_up_since_{};           // when it last came up (no gap since, while up)
  /// renewTimes of our last 8 writes, a ring (a vector was 128 B per lease).
  std::array<wall_time, 8> sent_renew_times_{};
  std::uint64_t renew_times_next_ = 0;
  /// What most electors never set (actors/rarely_set.hpp).
  struct rare_state {
    std::optional<caf::typed_response_promise<bool>> release_rp;
    std::string release_target;          // the release names it as preferredHolder
    api_error last_error;
  };
  rarely_set<rare_state> rare_;
};

} // namespace leasehold
