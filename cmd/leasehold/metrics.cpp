#include "cmd/leasehold/metrics.hpp"

#include <chrono>
#include <iomanip>
#include <sstream>

#include "cmd/leasehold/process_metrics.hpp"

namespace leasehold::agent {

namespace {

void header(std::ostringstream& out, const char* name, const char* type, const char* help) {
  out << "# HELP " << name << ' ' << help << '\n' << "# TYPE " << name << ' ' << type << '\n';
}

double seconds(caf::timespan d) { return std::chrono::duration<double>(d).count(); }

std::string number(double v) {
  std::ostringstream s;
  s.precision(9);
  s << v;
  return s.str();
}

/// Escapes a label value (backslash, double quote, newline).
std::string escape_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

} // namespace

event_sink metrics::sink() {
  return [this](const runtime_event& e) { record(e); };
}

void metrics::record(const runtime_event& e) {
  std::lock_guard<std::mutex> guard(mtx_);
  switch (e.type) {
    case event_type::term_acquired:
    case event_type::term_lost:
      ++transitions_;
      break;
    case event_type::renewed: {
      double secs = e.value / 1000.0;
      ++renew_count_;
      renew_sum_ += secs;
      for (size_t i = 0; i < buckets.size(); ++i)
        if (secs <= buckets[i]) {
          ++renew_buckets_[i];
          break;
        }
      break;
    }
    case event_type::api_request_failed:
      // Every failed request; a lost race (another replica wrote first) is
      // an answer, not an error.
      ++(is_lost_race(e.error.kind) ? lost_races_ : api_errors_)[to_string(e.error.kind)];
      break;
    case event_type::voluntary_handover:
      ++voluntary_handovers_;
      ++lease_handovers_[e.lease.substr(e.lease.find('/') + 1)];   // "ns/name": the name
      break;
    case event_type::module_output:
      if (e.reason == "fence_kill")
        ++fence_kills_;
      break;
    default:
      break;
  }
}

void metrics::set_build_info(std::string version, std::string backend) {
  std::lock_guard<std::mutex> guard(mtx_);
  version_ = std::move(version);
  backend_ = std::move(backend);
}

void metrics::set_timings(const election_timings& t) {
  std::lock_guard<std::mutex> guard(mtx_);
  timings_ = t;
}

std::string metrics::render(const std::optional<runner_status>& st,
                            const std::vector<lease_state>& leases,
                            const std::vector<group_state>& groups) const {
  std::lock_guard<std::mutex> guard(mtx_);
  std::ostringstream out;
  header(out, "leasehold_build_info", "gauge", "Always 1; the labels say which build runs.");
  out << "leasehold_build_info{version=\"" << escape_label(version_) << "\",backend=\""
      << escape_label(backend_) << "\",caf_version=\"" << CAF_MAJOR_VERSION << '.'
      << CAF_MINOR_VERSION << '.' << CAF_PATCH_VERSION << "\"} 1\n";
  // The timings, so that an alert compares with them rather than with a
  // copy (deploy/monitoring/leasehold-alerts.yaml).
  header(out, "leasehold_lease_duration_seconds", "gauge",
         "The lease_duration this agent runs with.");
  out << "leasehold_lease_duration_seconds " << number(seconds(timings_.lease_duration)) << '\n';
  header(out, "leasehold_renew_deadline_seconds", "gauge",
         "The renew_deadline this agent runs with: a leader that cannot renew for this long stops "
         "its leader-only work.");
  out << "leasehold_renew_deadline_seconds " << number(seconds(timings_.renew_deadline)) << '\n';
  header(out, "leasehold_is_leader", "gauge",
         "1 when this replica holds the agent's own lease, else 0 (every lease: "
         "leasehold_lease_leader).");
  out << "leasehold_is_leader " << (st && st->state == runner_state::leader ? 1 : 0) << '\n';

  if (st) {
    header(out, "leasehold_term", "gauge",
           "The term this replica knows: its own while leading or in a creation hold, else the "
           "holder's as last seen; -1 none.");
    out << "leasehold_term " << st->term << '\n';
    header(out, "leasehold_creation_hold", "gauge",
           "1 while this replica holds a lease it created and its term has not started yet.");
    out << "leasehold_creation_hold " << (st->hold_ms >= 0 ? 1 : 0) << '\n';
  }

  header(out, "leasehold_leadership_transitions_total", "counter",
         "Times this replica acquired or lost leadership.");
  out << "leasehold_leadership_transitions_total " << transitions_ << '\n';

  header(out, "leasehold_voluntary_handovers_total", "counter",
         "Times this replica handed leadership over on request (a yield, or a preferredHolder "
         "naming another replica): leader-only modules down, lease released.");
  out << "leasehold_voluntary_handovers_total " << voluntary_handovers_ << '\n';

  header(out, "leasehold_renew_latency_seconds", "histogram",
         "Latency of successful lease renewals.");
  std::uint64_t cumulative = 0;
  for (size_t i = 0; i < buckets.size(); ++i) {
    cumulative += renew_buckets_[i];
    out << "leasehold_renew_latency_seconds_bucket{le=\"" << number(buckets[i]) << "\"} "
        << cumulative << '\n';
  }
  out << "leasehold_renew_latency_seconds_bucket{le=\"+Inf\"} " << renew_count_ << '\n';
  out << "leasehold_renew_latency_seconds_sum " << number(renew_sum_) << '\n';
  out << "leasehold_renew_latency_seconds_count " << renew_count_ << '\n';

  // Every kind from the start, 0 before its first request: increase() and
  // rate() miss the first failure of a series that appears with it.
  auto per_kind = [&](const char* name, const std::map<std::string, std::uint64_t>& counts,
                      bool lost_races) {
    for (int i = 1; i <= static_cast<int>(error_kind::other); ++i) {
      auto kind = static_cast<error_kind>(i);
      if (is_lost_race(kind) != lost_races)
        continue;
      auto n = counts.find(to_string(kind));
      out << name << "{kind=\"" << to_string(kind) << "\"} " << (n == counts.end() ? 0 : n->second)
          << '\n';
    }
  };
  header(out, "leasehold_api_errors_total", "counter",
         "Failed lease API requests by kind, every one (lost races are apart).");
  per_kind("leasehold_api_errors_total", api_errors_, false);
  header(out, "leasehold_api_lost_races_total", "counter",
         "Writes another replica won first (conflict, already_exists): answers, not errors.");
  per_kind("leasehold_api_lost_races_total", lost_races_, true);
  if (st) {
    // One source with /readyz: the runner's api_unreachable_ms.
    double failing = st->api_unreachable_ms < 0 ? 0 : st->api_unreachable_ms / 1000.0;
    double since = 0;
    if (st->api_unreachable_ms >= 0)
      since = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                .count()
              - failing;
    header(out, "leasehold_api_unreachable_since_timestamp_seconds", "gauge",
           "Since when (Unix time) every lease API request has failed; 0 while it answers.");
    std::ostringstream unix_time;   // to the millisecond (number() keeps 9 digits)
    unix_time << std::fixed << std::setprecision(3) << since;
    out << "leasehold_api_unreachable_since_timestamp_seconds "
        << (since == 0 ? "0" : unix_time.str()) << '\n';
    header(out, "leasehold_api_unreachable_seconds", "gauge",
           "How long every lease API request has failed, in seconds; 0 while it answers.");
    out << "leasehold_api_unreachable_seconds " << number(failing) << '\n';
  }

  header(out, "leasehold_fence_kills_total", "counter",
         "Leader-only child process groups the fence keeper killed at the fence's deadline.");
  out << "leasehold_fence_kills_total " << fence_kills_ << '\n';

  // Every lease's modules (the agent's lease alone without `leases`).
  std::vector<const module_status*> modules;
  if (leases.empty() && st)
    for (auto& m : st->modules)
      modules.push_back(&m);
  for (auto& l : leases)
    if (l.status)
      for (auto& m : l.status->modules)
        modules.push_back(&m);
  header(out, "leasehold_module_restarts_total", "counter", "Restarts of each module.");
  for (auto* m : modules)
    out << "leasehold_module_restarts_total{module=\"" << escape_label(m->name) << "\"} "
        << m->restarts << '\n';

  header(out, "leasehold_module_running", "gauge", "1 when the module is running, else 0.");
  for (auto* m : modules)
    out << "leasehold_module_running{module=\"" << escape_label(m->name) << "\"} "
        << (m->state == module_state::running ? 1 : 0) << '\n';

  auto labels = [](const lease_state& l) {   // without the closing brace
    return "{lease=\"" + escape_label(l.lease) + "\",group=\"" + escape_label(l.group) + '"';
  };
  header(out, "leasehold_lease_leader", "gauge",
         "Per lease of this agent (its own and each module's): 1 when this replica leads it.");
  for (auto& l : leases)
    out << "leasehold_lease_leader" << labels(l) << "} "
        << (l.status && l.status->state == runner_state::leader ? 1 : 0) << '\n';
  header(out, "leasehold_lease_term", "gauge",
         "Per lease: the term this replica knows (as leasehold_term); -1 none.");
  for (auto& l : leases)
    if (l.status)
      out << "leasehold_lease_term" << labels(l) << "} " << l.status->term << '\n';
  header(out, "leasehold_lease_creation_hold", "gauge",
         "Per lease: 1 while this replica holds it after creating it, its term not started yet.");
  for (auto& l : leases)
    if (l.status)
      out << "leasehold_lease_creation_hold" << labels(l) << "} "
          << (l.status->hold_ms >= 0 ? 1 : 0) << '\n';
  // The module series again, labelled by the lease each module runs under.
  auto per_module = [&](const char* name, const char* type, const char* help, auto value) {
    header(out, name, type, help);
    for (auto& l : leases)
      if (l.status)
        for (auto& m : l.status->modules)
          out << name << labels(l) << ",module=\"" << escape_label(m.name) << "\"} " << value(m)
              << '\n';
  };
  per_module("leasehold_lease_module_restarts_total", "counter",
             "Per lease: restarts of each module that runs under it.",
             [](const module_status& m) { return m.restarts; });
  per_module("leasehold_lease_module_running", "gauge",
             "Per lease: 1 when the module that runs under it is running, else 0.",
             [](const module_status& m) { return m.state == module_state::running ? 1 : 0; });
  header(out, "leasehold_lease_voluntary_handovers_total", "counter",
         "Per lease: times this replica handed it over on request (a yield, a preferredHolder, "
         "or its balance group moving it).");
  for (auto& l : leases) {
    auto n = lease_handovers_.find(l.lease);
    out << "leasehold_lease_voluntary_handovers_total" << labels(l) << "} "
        << (n == lease_handovers_.end() ? 0 : n->second) << '\n';
  }
  struct group_series {
    const char* name;
    const char* type;
    const char* help;
    std::size_t (*value)(const balance_status&);
  };
  static const group_series per_group[] = {
    {"leasehold_balance_members", "gauge", "Per balance group: the settled members this replica counts.",
     [](const balance_status& b) { return b.members.size(); }},
    {"leasehold_balance_assigned", "gauge",
     "Per balance group: the leases the assignment gives this replica.",
     [](const balance_status& b) { return b.assigned.size(); }},
    {"leasehold_balance_moves_total", "counter",
     "Per balance group: leases this replica led and was told to hand over.",
     [](const balance_status& b) { return static_cast<std::size_t>(b.moves); }},
  };
  for (auto& series : per_group) {
    header(out, series.name, series.type, series.help);
    for (auto& g : groups)
      if (g.status)
        out << series.name << "{group=\"" << escape_label(g.group) << "\"} "
            << series.value(*g.status) << '\n';
  }
  if (auto p = sample_process())
    out << render_process_metrics(*p);
  return out.str();
}

} // namespace leasehold::agent
