#include "leasehold/events.hpp"

#include <iterator>
#include <mutex>

#include <caf/all.hpp>

namespace leasehold {

namespace {

constexpr auto unlogged = event_severity::unlogged;
constexpr auto debug = event_severity::debug;
constexpr auto info = event_severity::info;
constexpr auto warning = event_severity::warning;
constexpr auto error = event_severity::error;

using et = event_type;

constexpr event_words table[] = {
  // type, name, variant ("": the type's own row), words, severity, said by the default sink
  {et::term_acquired, "term_acquired", "", "became leader", info, true},
  {et::term_lost, "term_lost", "", "stopped leading", warning, true},
  {et::lease_released, "lease_released", "", "lease released", info, true},
  {et::leader_changed, "leader_changed", "", "leader changed", info, true},
  {et::elector_started, "elector_started", "", "elector started", debug, false},
  {et::api_error, "api_error", "", "API request failed", warning, true},
  {et::api_recovered, "api_recovered", "", "API reachable again", info, true},
  {et::renewed, "renewed", "", "lease renewed", unlogged, false},   // metrics and the journal only
  {et::module_started, "module_started", "", "module started", info, true},
  {et::module_stopping, "module_stopping", "", "module stopping", info, false},
  {et::module_stopped, "module_stopped", "", "module stopped", info, true},
  {et::module_killed, "module_killed", "", "module killed (did not stop in time)", warning, true},
  {et::module_crashed, "module_crashed", "", "module crashed", error, true},
  {et::module_restarting, "module_restarting", "", "module restarting", info, false},
  {et::module_failed, "module_failed", "",
   "module failed: over its restart intensity, not restarted", error, true},
  {et::leadership_handed_over, "leadership_handed_over", "",
   "handing over leadership: a leader-only module is crash-looping", warning, true},
  {et::config_applied, "config_applied", "", "config applied", info, false},
  {et::config_rejected, "config_rejected", "", "config rejected", error, true},
  {et::state_changed, "state_changed", "", "runner state changed", debug, false},
  {et::module_output, "module_output", "", "module output", info, false},
  {et::module_unconfirmed, "module_unconfirmed", "",
   "leader-only module killed but still running: lease no longer renewed, not released", error,
   true},
  {et::fatal, "fatal", "", "fatal: ending the process", error, true},
  {et::watch_changed, "watch_changed", "", "lease watch down: polling until it is back", warning,
   false},
  {et::identity_conflict, "identity_conflict", "",
   "another process writes the lease under this replica's identity: stepping down", error, true},
  {et::outside_write, "outside_write", "",
   "lease gone or emptied without a release: waiting out the last holder", warning, true},
  {et::creation_hold, "creation_hold", "",
   "created the lease and holds it: the term starts one lease duration after the create", info,
   true},
  // Counted (metrics); api_error is the log's, once per change of kind.
  {et::api_request_failed, "api_request_failed", "", "API request failed", unlogged, false},
  {et::voluntary_handover, "voluntary_handover", "",
   "handed leadership over: leader-only modules down, lease released for a successor", info, true},
  {et::group_config_differs, "group_config_differs", "",
   "a member of the balance group lists other leases: it is not counted until the lists agree",
   warning, true},
  // Variants.
  // A 409 is how a normal race (two replicas writing one record) ends.
  {et::api_error, "", "lost_race", "API request failed", debug, false},
  // A 422/400: said once while the same request is refused, not as an outage.
  {et::api_error, "", "refused",
   "API refused the request as invalid: it is retried, but will fail the same way until what it "
   "sends changes",
   error, true},
  {et::watch_changed, "", "up", "lease watch open", info, false},
  {et::identity_conflict, "", "held",
   "the lease is held under this replica's identity by another live process (two replicas with "
   "one identity?): this one waits",
   warning, true},
  {et::watch_changed, "", "forbidden",
   "lease watch forbidden: the agent needs the \"list\" and \"watch\" verbs on leases "
   "(coordination.k8s.io; deploy/rbac.yaml grants them); polling meanwhile",
   warning, false},
  // The child's own words: never to be taken for the module's reports about
  // it (started, exited, killed), which have no stream.
  {et::module_output, "", "child", "child output", info, false},
  {et::module_output, "", "fence_kill", "leader-only child killed at its fence", warning, true},
};

/// The type's own rows: the first `type_count`, in the order of the enum.
constexpr std::size_t type_count = static_cast<std::size_t>(event_type::group_config_differs) + 1;

constexpr bool rows_in_type_order() {
  for (std::size_t i = 0; i < type_count; ++i)
    if (static_cast<std::size_t>(table[i].type) != i || table[i].variant[0] != '\0'
        || table[i].name[0] == '\0' || table[i].words[0] == '\0')
      return false;
  return sizeof(table) / sizeof(table[0]) >= type_count;
}
static_assert(rows_in_type_order(),
              "event_words_table: one row per event_type first, in its order, with a name and words");

/// Which variant an event is ("" for none).
const char* variant_of(const runtime_event& ev) {
  switch (ev.type) {
    case event_type::api_error:
      return is_lost_race(ev.error.kind) ? "lost_race" : is_refusal(ev.error.kind) ? "refused" : "";
    case event_type::watch_changed:
      if (ev.detail == "up")
        return "up";
      return ev.reason.find("forbidden (403)") != std::string::npos ? "forbidden" : "";
    case event_type::identity_conflict:
      return ev.detail == "held" ? "held" : "";
    case event_type::module_output:
      if (ev.reason == "stdout" || ev.reason == "stderr")
        return "child";
      return ev.reason == "fence_kill" ? "fence_kill" : "";
    default:
      return "";
  }
}

} // namespace

const char* to_string(event_type t) {
  auto i = static_cast<std::size_t>(t);
  return i < type_count ? table[i].name : "?";
}

const std::vector<event_words>& event_words_table() {
  static const std::vector<event_words> rows(std::begin(table), std::end(table));
  return rows;
}

const event_words& words_for(const runtime_event& ev) {
  auto& rows = event_words_table();
  std::string variant = variant_of(ev);
  if (!variant.empty())
    for (auto& row : rows)
      if (row.type == ev.type && variant == row.variant)
        return row;
  return rows[static_cast<std::size_t>(ev.type)];
}

event_sink fan_out(std::vector<event_sink> sinks) {
  return [sinks = std::move(sinks)](const runtime_event& ev) {
    for (auto& s : sinks)
      if (s)
        s(ev);
  };
}

event_sink default_event_sink(std::FILE* out) {
  auto mx = std::make_shared<std::mutex>();
  return [out, mx](const runtime_event& ev) {
    auto& row = words_for(ev);
    if (!row.said_by_default)
      return;   // renewals, state changes, module output: too chatty for a default
    // The table's words, then what the event is about, then why.
    std::string about;
    auto add = [&](const std::string& part) { about += (about.empty() ? "" : ", ") + part; };
    if (!ev.module.empty())
      add(ev.module);
    if (ev.type == event_type::leader_changed || ev.type == event_type::identity_conflict
        || ev.type == event_type::outside_write)
      add(ev.holder.empty() ? "no holder" : "holder " + ev.holder);
    if (ev.term >= 0)
      add("term " + std::to_string(ev.term));
    std::string why = ev.type == event_type::api_error ? ev.error.describe()
                      : ev.type == event_type::config_rejected ? ev.detail
                      : ev.type == event_type::module_output ? ev.detail
                      : ev.reason;
    auto line = std::string(row.words) + (about.empty() ? "" : " (" + about + ")")
                + (why.empty() ? "" : ": " + why);
    std::lock_guard<std::mutex> g(*mx);
    std::fprintf(out, "leasehold [%s %s] %s\n", ev.identity.c_str(), ev.lease.c_str(), line.c_str());
    std::fflush(out);
  };
}

exit_description describe_exit(const caf::error& e, caf::actor_system& sys) {
  if (!e)
    return {"exited normally", {}};
  exit_description d{{}, sys.render(e)};
  if (e.category() == caf::atom("exit")) {
    switch (static_cast<caf::exit_reason>(e.code())) {
      // An ending that was asked for has nothing more to say: no code.
      case caf::exit_reason::normal: return {"exited normally", {}};
      case caf::exit_reason::user_shutdown: return {"stopped on request", {}};
      case caf::exit_reason::kill: d.words = "killed"; break;
      case caf::exit_reason::unhandled_exception: d.words = "threw an exception"; break;
      case caf::exit_reason::unknown: d.words = "ended for an unknown reason"; break;
      default: d.words = "ended unexpectedly"; break;
    }
    return d;
  }
  // An error the actor chose (caf::make_error(code, "text")): its own text.
  auto& ctx = e.context();
  for (size_t i = 0; i < ctx.size(); ++i)
    if (ctx.match_element<std::string>(i)) {
      d.words = ctx.get_as<std::string>(i);
      return d;
    }
  d.words = "failed";
  return d;
}

} // namespace leasehold
