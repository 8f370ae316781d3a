#include "cmd/leasehold/health_server.hpp"

#include <algorithm>

#include <httplib.h>

#include "cmd/leasehold/process_metrics.hpp"
#include "leasehold/lease.hpp"
#include "lease/log_time.hpp"
#include "transport/http/listen.hpp"
#include "transport/thread_name.hpp"

namespace leasehold::agent {

namespace {

constexpr const char* json_type = "application/json";

// Threads serving requests: enough for a few probes and a scrape (httplib's
// default, at least 8, started up front); a kept-alive client holds only one.
constexpr size_t health_threads = 4;

void reply_json(httplib::Response& res, int code, const nlohmann::json& body) {
  res.status = code;
  res.set_content(body.dump() + "\n", json_type);
}

} // namespace

nlohmann::json holder_json(const std::optional<runner_status>& st, caf::timespan lease_duration) {
  auto limit_ms = std::chrono::duration_cast<std::chrono::milliseconds>(lease_duration).count();
  if (!st)
    return {{"holder", "unknown"}, {"holder_observed_at", nullptr}, {"holder_age_ms", -1},
            {"holder_unknown_reason", "the runner did not answer"}};
  nlohmann::json out;
  if (st->holder_age_ms < 0) {
    // An idle runner (no leader-only module under this lease: an agent whose
    // leader-only modules all run under leases of their own) never reads it.
    bool idle = st->state == runner_state::idle && !st->electing;
    out = {{"holder", "unknown"}, {"holder_observed_at", nullptr},
           {"holder_unknown_reason",
            idle ? "no leader-only module runs under this lease, so it is not elected; each "
                   "lease of the agent: \"leases\""
                 : "the lease has not been read yet"}};
  } else {
    auto seen = std::chrono::system_clock::now() - std::chrono::milliseconds(st->holder_age_ms);
    out = {{"holder", st->holder}, {"holder_observed_at", format_log_time(seen)}};
    if (st->holder_age_ms > limit_ms) {
      out["holder"] = "unknown";
      out["last_observed_holder"] = st->holder;
      out["holder_unknown_reason"] = "the holder was last confirmed "
                                     + std::to_string(st->holder_age_ms)
                                     + "ms ago (a new version, a read that found it, its "
                                       "session's renewal or this replica's own renew), longer "
                                       "than lease_duration ("
                                     + std::to_string(limit_ms) + "ms)";
    }
  }
  out["holder_age_ms"] = st->holder_age_ms;
  return out;
}

namespace {

/// null unless this replica is in a creation hold (runner_status::hold_ms).
nlohmann::json hold_json(const runner_status& st) {
  if (st.hold_ms < 0)
    return nullptr;
  auto starts = std::chrono::system_clock::now() + std::chrono::milliseconds(st.hold_ms);
  return {{"term", st.term}, {"term_starts_in_ms", st.hold_ms},
          {"term_starts_at", format_log_time(starts)}};
}

std::int64_t ms(caf::timespan d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

std::string until(caf::timespan d) {   // wall time d from now
  return format_log_time(std::chrono::system_clock::now()
                         + std::chrono::duration_cast<std::chrono::system_clock::duration>(d));
}

/// /debug/state's "modules" of one runner.
nlohmann::json modules_json(const runner_status& st) {
  nlohmann::json modules = nlohmann::json::array();
  for (auto& m : st.modules) {
    nlohmann::json j{{"name", m.name},
                     {"type", m.type},
                     {"leader_only", m.leader_only},
                     {"state", to_string(m.state)},
                     {"restarts", m.restarts},
                     {"restarts_in_window", m.restarts_in_window},
                     {"restart_policy", {{"max_restarts", m.max_restarts},
                                         {"within_ms", ms(m.within)}}},
                     {"backing_off_until", nullptr}};
    if (m.restart_in.count() >= 0)   // waiting for its next restart
      j["backing_off_until"] = until(m.restart_in);
    else if (m.leader_only && m.name == st.handover_module && st.handover_backoff.count() >= 0)
      j["backing_off_until"] = until(st.handover_backoff);   // until this replica competes again
    modules.push_back(std::move(j));
  }
  return modules;
}

/// What /debug/state and each of its "leases" say alike of a runner
/// ("candidates": who a yield may name; null: anyone).
nlohmann::json term_json(const runner_status& st) {
  return {{"term", st.term},
          {"creation_hold", hold_json(st)},
          {"ms_since_renew", st.ms_since_renew},
          {"terms_won", st.terms_won},
          {"terms_lost", st.terms_lost},
          {"yield", st.yielding ? nlohmann::json{{"to", st.yield_to}} : nlohmann::json(nullptr)},
          {"candidates", st.candidates ? nlohmann::json(*st.candidates) : nlohmann::json(nullptr)},
          {"modules", modules_json(st)}};
}

/// /debug/state's "leases" ("state": "unknown" alone when a runner did not answer).
nlohmann::json leases_json(const std::vector<lease_state>& leases, caf::timespan lease_duration) {
  nlohmann::json out = nlohmann::json::array();
  for (auto& l : leases) {
    nlohmann::json j{{"lease", l.lease}, {"group", l.group}};
    if (!l.status) {
      j["state"] = "unknown";
    } else {
      auto& st = *l.status;
      j.update(nlohmann::json{{"state", to_string(st.state)},
                              {"leading", st.state == runner_state::leader},
                              {"holder", st.holder},
                              {"competing", st.competing}});
      auto seen = holder_json(st, lease_duration);   // "holder" stays the runner's word
      for (auto* k : {"holder_observed_at", "holder_age_ms", "holder_unknown_reason"})
        if (seen.contains(k))
          j[k] = seen[k];
      j.update(term_json(st));
    }
    out.push_back(std::move(j));
  }
  return out;
}

/// /debug/state's "groups".
nlohmann::json groups_json(const std::vector<group_state>& groups) {
  nlohmann::json out = nlohmann::json::array();
  for (auto& g : groups) {
    nlohmann::json j{{"group", g.group}};
    if (g.status)
      j.update(nlohmann::json{{"members", g.status->members},
                              {"assigned", g.status->assigned},
                              {"competing", g.status->competing},
                              {"moves", g.status->moves},
                              {"settle_ms", g.status->settle_ms}});
    else
      j["members"] = nullptr;   // the group actor did not answer
    out.push_back(std::move(j));
  }
  return out;
}

} // namespace

nlohmann::json status_json(const runner_status& st, caf::timespan lease_duration) {
  nlohmann::json handover = nullptr;
  if (st.handover_backoff.count() >= 0)
    handover = {{"module", st.handover_module},
                {"backing_off_ms", ms(st.handover_backoff)},
                {"backing_off_until", until(st.handover_backoff)}};
  nlohmann::json out = {{"state", to_string(st.state)},
                        {"identity", st.identity},
                        {"lease", st.lease.to_string()},
                        {"electing", st.electing},
                        {"healthy", st.healthy},
                        {"handover", handover}};
  out.update(holder_json(st, lease_duration));
  out.update(term_json(st));
  return out;
}

std::pair<int, nlohmann::json> yield_reply(const std::string& remote_addr, const std::string& body,
                                           const std::vector<std::string>& lease_names,
                                           const yield_function& yield) {
  // The health port may listen on every interface (kubelet probes): only a
  // process on this host (kubectl exec, the CLI) may hand leadership over.
  if (remote_addr != "127.0.0.1" && remote_addr != "::1" && remote_addr.rfind("::ffff:127.", 0) != 0)
    return {403, {{"error", "POST /yield is accepted only from loopback (this request came from "
                              + remote_addr + "); run leasehold yield on the agent's host"}}};
  std::string to;
  std::string lease = lease_names.empty() ? "" : lease_names.front();
  if (body.find_first_not_of(" \t\r\n") != std::string::npos) {
    auto j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return {400, {{"error", "POST /yield: body: expected a JSON object such as {\"to\": \"agent-2\"}"}}};
    for (auto& [key, value] : j.items()) {
      if (key != "to" && key != "lease")
        return {400, {{"error", "POST /yield: body." + key + ": unknown field (only \"to\", \"lease\")"}}};
      if (!value.is_string())
        return {400, {{"error", "POST /yield: body." + key + ": must be a string ("
                                  + (key == "to" ? "an identity" : "a lease name") + ")"}}};
      (key == "to" ? to : lease) = value.get<std::string>();
    }
  }
  if (std::find(lease_names.begin(), lease_names.end(), lease) == lease_names.end()) {
    std::string has;
    for (auto& n : lease_names)
      has += (has.empty() ? "" : ", ") + n;
    return {404, {{"error", "POST /yield: body.lease: this agent has no lease \"" + lease
                              + "\" (its leases: " + has + ")"}}};
  }
  auto r = yield ? yield(lease, to) : std::nullopt;
  if (!r)
    return {504, {{"error", "the runner did not answer the yield in time"}}};
  nlohmann::json out{{"status", to_string(r->status)}, {"to", to}, {"lease", lease},
                     {"successor", r->successor}, {"reason", r->reason}};
  return {r->status == yield_status::handed_over ? 200 : 409, out};
}

health_server::health_server(health_sources src)
  : src_(std::move(src)), server_(std::make_unique<httplib::Server>()) {
  auto& s = *server_;
  s.new_task_queue = [] { return new httplib::ThreadPool(health_threads); };
  for (auto [path, probe] : {std::pair{"/livez", &liveness}, std::pair{"/healthz", &health},
                             std::pair{"/readyz", &readiness}})
    s.Get(path, [this, probe = probe](const httplib::Request&, httplib::Response& res) {
      auto p = every_lease(probe);
      reply_json(res, p.ok ? 200 : 503, p.body);
    });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(src_.counters->render(src_.status(), src_.leases(), src_.groups()),
                    metrics::content_type);
  });
  s.Get("/debug/state", [this](const httplib::Request&, httplib::Response& res) {
    auto st = src_.status();
    if (!st) {
      reply_json(res, 503, {{"error", "runner did not answer"}});
    } else {
      auto state = status_json(*st, src_.timings.lease_duration);
      state["leases"] = leases_json(src_.leases(), src_.timings.lease_duration);
      state["groups"] = groups_json(src_.groups());
      state["transport"] = transport_state_json();
      reply_json(res, 200, state);
    }
  });
  s.Post("/yield", [this](const httplib::Request& req, httplib::Response& res) {
    auto [code, body] = yield_reply(req.remote_addr, req.body,
                                     src_.lease_names ? src_.lease_names() : std::vector<std::string>{},
                                     src_.yield);
    reply_json(res, code, body);
  });
  // Last: whatever path a leader_endpoint module publishes at.
  s.Get(".*", [this](const httplib::Request& req, httplib::Response& res) {
    auto body = src_.leader ? src_.leader(req.path) : std::nullopt;
    if (!body) {
      reply_json(res, 404, {{"error", "not found (no leader_endpoint module serves " + req.path
                                        + ")"}});
      return;
    }
    // The module's view, with when the holder was observed (or "unknown").
    auto view = nlohmann::json::parse(*body, nullptr, false);
    auto st = src_.status();
    auto holder = holder_json(st, src_.timings.lease_duration);
    view["leader"] = holder["holder"];
    if (st) {   // the runner's word (one source with /debug/state)
      view["term"] = st->term;
      view["creation_hold"] = hold_json(*st);
    }
    auto all = src_.leases();
    view["leads"] = nlohmann::json::array();
    for (auto& l : all)
      if (l.status && l.status->state == runner_state::leader)
        view["leads"].push_back(l.lease);
    view["leases"] = leases_json(all, src_.timings.lease_duration);
    view["observed_at"] = holder["holder_observed_at"];
    view["age_ms"] = holder["holder_age_ms"];
    if (holder.contains("holder_unknown_reason")) {
      view["unknown_reason"] = holder["holder_unknown_reason"];
      view["last_observed_leader"] = holder.value("last_observed_holder", "");
    }
    reply_json(res, 200, view);
  });
}

probe_result health_server::every_lease(
  probe_result (*probe)(const std::optional<runner_status>&, const election_timings&)) const {
  auto all = src_.leases();
  if (all.size() <= 1)   // the agent's lease alone: its runner's word, as always
    return probe(src_.status(), src_.timings);
  // Many leases: the first that fails decides (its reason prefixed with a
  // module's lease), and "leases" says each lease's own answer.
  std::optional<probe_result> first_failed;
  nlohmann::json each = nlohmann::json::array();
  for (std::size_t i = 0; i < all.size(); ++i) {
    auto r = probe(all[i].status, src_.timings);
    nlohmann::json j{{"lease", all[i].lease}, {"group", all[i].group},
                     {"status", r.body.value("status", r.ok ? "ok" : "unhealthy")}};
    if (!r.ok) {
      j["reason"] = r.body.value("reason", "");
      if (i > 0)   // a module's lease: say which
        r.body["reason"] = "lease " + all[i].lease + ": " + r.body.value("reason", "");
      if (!first_failed)
        first_failed = r;
    }
    each.push_back(std::move(j));
  }
  auto out = first_failed ? *first_failed : probe(all.front().status, src_.timings);
  out.body["leases"] = std::move(each);
  return out;
}

health_server::~health_server() {
  stop();
}

int health_server::bind(const std::string& addr) {
  auto colon = addr.rfind(':');
  if (colon == std::string::npos) {
    error_ = "health address " + addr + ": expected host:port";
    return -1;
  }
  auto host = addr.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  int port = std::atoi(addr.substr(colon + 1).c_str());
  return bind_exclusive(*server_, host, port, "health_addr (--health-addr)", error_);
}

void health_server::serve() {
  thread_ = std::thread([this] {
    name_this_thread("lh.health");   // its request threads inherit the name
    server_->listen_after_bind();
  });
}

void health_server::stop() {
  if (server_)
    server_->stop();
  if (thread_.joinable())
    thread_.join();
}

} // namespace leasehold::agent
