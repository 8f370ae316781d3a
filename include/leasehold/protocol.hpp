// Every actor's typed interface in one place, one line per message: what a
// runner, a lease transport, a membership store and the event transport take
// and answer, and (last) the runtime's own inside messages between a runner
// and its electors. The compiler checks each handler and each send against
// these. The values the messages carry are defined in the headers named
// beside them; this header only names them. Atom texts are at most 10
// characters (CAF 0.17). All messages are local (never serialized).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "leasehold/api_result.hpp"
#include "leasehold/lease.hpp"

namespace leasehold {

struct module_config;        // modules.hpp
struct config_result;        // modules.hpp
struct runner_status;        // runner.hpp
struct yield_result;         // runner.hpp
struct lease_watch_event;    // lease_transport.hpp
struct lease_watch_request;  // lease_transport.hpp
struct candidate;            // membership.hpp
struct member_record;        // membership.hpp

using lease_reply = api_result<lease>;
using leases_reply = api_result<std::vector<lease>>;
using event_reply = api_result<bool>;   // a write whose answer is only success or why not
using members_reply = api_result<std::vector<member_record>>;
using withdraw_reply = event_reply;

// -- a runner (runner.hpp: spawn_runner) ----------------------------------------

using subscribe_atom = caf::atom_constant<caf::atom("lh_sub")>;
using unsubscribe_atom = caf::atom_constant<caf::atom("lh_unsub")>;
using compete_atom = caf::atom_constant<caf::atom("lh_compete")>;
using get_status_atom = caf::atom_constant<caf::atom("lh_status")>;
using shutdown_atom = caf::atom_constant<caf::atom("lh_shutdn")>;
using yield_atom = caf::atom_constant<caf::atom("lh_yield")>;
using candidates_atom = caf::atom_constant<caf::atom("lh_cands")>;

/// Who announces leadership changes (a runner).
using leadership_publisher = caf::typed_actor<
  caf::reacts_to<subscribe_atom, caf::actor>,     // send it leadership_changed now and at every change
  caf::reacts_to<unsubscribe_atom, caf::actor>>;  // stop that

/// A runner, as a program sees it (the meaning of each answer: runner.hpp).
using runner_actor = leadership_publisher::extend<
  caf::replies_to<module_config>::with<config_result>,  // apply a config, or reject it whole
  caf::reacts_to<compete_atom, bool>,                   // compete (true) or only follow (false)
  caf::replies_to<get_status_atom>::with<runner_status>,  // the replica's state and modules
  caf::replies_to<shutdown_atom>::with<bool>,           // stop modules, release, exit
  caf::replies_to<yield_atom, std::string>::with<yield_result>,  // hand the lease to a target
  caf::reacts_to<candidates_atom, std::vector<std::string>>>;    // who a yield may name

// -- a lease transport (lease_transport.hpp; backends: transports.hpp) ------------

using get_lease_atom = caf::atom_constant<caf::atom("lh_get")>;
using create_lease_atom = caf::atom_constant<caf::atom("lh_create")>;
using update_lease_atom = caf::atom_constant<caf::atom("lh_update")>;
using watch_lease_atom = caf::atom_constant<caf::atom("lh_watch")>;
using list_leases_atom = caf::atom_constant<caf::atom("lh_list")>;

/// Who a watch streams to (an elector's handle converts to it).
using lease_watch_subscriber = caf::typed_actor<
  caf::reacts_to<lease_watch_event>>;   // one change of the lease, or the stream up or down

/// Electors request it with a timeout; every reply is an api_result.
using lease_transport_actor = caf::typed_actor<
  caf::replies_to<get_lease_atom, lease_key>::with<lease_reply>,  // the record, or not_found
  caf::replies_to<create_lease_atom, lease>::with<lease_reply>,   // POST; already_exists if taken
  caf::replies_to<update_lease_atom, lease>::with<lease_reply>,   // PUT on resource_version; conflict if stale
  // The Leases of a namespace with a label ("k=v"), read at one point after the send.
  caf::replies_to<list_leases_atom, std::string, std::string>::with<leases_reply>,
  caf::reacts_to<watch_lease_atom, lease_watch_request>>;         // stream changes to the subscriber

// -- a membership store of balance groups (membership.hpp) ------------------------

using announce_atom = caf::atom_constant<caf::atom("lh_announ")>;
using withdraw_atom = caf::atom_constant<caf::atom("lh_withdr")>;

using membership_actor = caf::typed_actor<
  caf::replies_to<announce_atom, candidate>::with<members_reply>,    // renew ours, list the group
  caf::replies_to<withdraw_atom, candidate>::with<withdraw_reply>>;  // leave the group cleanly

// -- Kubernetes Events (transport/kube/kube_events.hpp) --------------------------

using post_event_atom = caf::atom_constant<caf::atom("lh_event")>;

using event_transport_actor = caf::typed_actor<
  caf::replies_to<post_event_atom, kube_event>::with<event_reply>>;  // POST one Event

// -- inside the runtime: a runner and its electors (actors/) ----------------------
// Programs never send these; the values are in actors/messages.hpp.

struct leadership_acquired;
struct leadership_lost;
struct lease_observed;
struct leader_observed;

using release_atom = caf::atom_constant<caf::atom("lh_release")>;
using tick_atom = caf::atom_constant<caf::atom("lh_tick")>;
using stop_timeout_atom = caf::atom_constant<caf::atom("lh_stopto")>;
using respawn_atom = caf::atom_constant<caf::atom("lh_respawn")>;
using restart_atom = caf::atom_constant<caf::atom("lh_restart")>;
using fatal_atom = caf::atom_constant<caf::atom("lh_fatal")>;
using yield_timeout_atom = caf::atom_constant<caf::atom("lh_yieldto")>;
using get_elector_atom = caf::atom_constant<caf::atom("lh_elector")>;

/// An elector (actors/elector.hpp), held by its runner.
using elector_handle = caf::typed_actor<
  caf::replies_to<release_atom, std::string>::with<bool>,  // release the term, naming a successor
  caf::reacts_to<compete_atom, bool>,                      // may it acquire
  caf::reacts_to<lease_watch_event>,                       // its watch's events
  caf::reacts_to<tick_atom, std::uint64_t>>;               // its one timer

/// A runner as its electors, timers and tests see it (actors/runner_impl.hpp).
using runner_internal_actor = runner_actor::extend<
  caf::reacts_to<leadership_acquired>,                // a term started: start leader-only modules
  caf::reacts_to<leadership_lost>,                    // the term ended: stop them, respawn
  caf::reacts_to<lease_observed>,                     // keep what the elector knew
  caf::reacts_to<leader_observed>,                    // who holds the lease now
  caf::reacts_to<fatal_atom, int>,                    // a defect: stop everything
  caf::reacts_to<stop_timeout_atom, std::uint64_t>,   // modules did not stop in time
  caf::reacts_to<restart_atom, std::string, std::uint64_t>,  // restart a module (backoff over)
  caf::reacts_to<respawn_atom, std::uint64_t>,        // start the next elector (backoff over)
  caf::reacts_to<yield_timeout_atom, std::uint64_t>,  // a yield's window ended
  caf::replies_to<get_elector_atom>::with<elector_handle>>;  // the current elector (tests)

} // namespace leasehold
