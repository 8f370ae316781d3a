// The elector's rules as pure functions: the records it writes (acquire,
// renew, release), what counts as one term, the order of two versions, and
// the legality of its state transitions (the diagram in actors/elector.hpp).
// No actor, no clock: each is tested on its own (tests/scripted/elector_test.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <caf/all.hpp>

#include "leasehold/api_result.hpp"
#include "leasehold/lease.hpp"
#include "leasehold/timings.hpp"

namespace leasehold {

/// The elector's state (diagram and meaning of each in actors/elector.hpp).
enum class elector_state { following, holding, leading, closing, releasing, ended };
const char* to_string(elector_state s);

/// The transitions of the diagram in actors/elector.hpp; any other is a
/// defect (the elector reports it as fatal).
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

/// How old a write the store shares between leases (etcd: a keepalive of
/// a session lease) a renew may ride on (lease::renew_max_age), the renew
/// then counting from that write's send: at most half a retry period and a quarter of what the renew
/// deadline leaves over it, so the term still outlives the next renew and
/// its retry nearly as before (1 s with the defaults; none when the deadline
/// leaves nothing).
caf::timespan renew_ride_limit(const election_timings& t);

/// After an error of kind `k` a write may still stand in the store: no
/// answer came (a timeout, a dropped connection), a gateway's 5xx may follow
/// the store's commit, a 2xx body could not be read. A refusal (409, 404,
/// 4xx, 429) wrote nothing.
bool may_have_applied(error_kind k);

/// <0, 0, >0 as resourceVersion `rv` is older than, equal to or newer than
/// `known`; nullopt when they cannot be ordered (not decimal numbers).
std::optional<int> compare_versions(const std::string& rv, const std::string& known);

} // namespace leasehold
