#include "cmd/leasehold/json_log.hpp"

#include "cmd/leasehold/clock.hpp"

namespace leasehold::agent {

namespace {

using ojson = nlohmann::ordered_json;

constexpr size_t max_remembered_lines = 4096;

/// Events that start a new state: repeats are allowed again after them.
bool is_state_change(event_type t) {
  switch (t) {
    case event_type::term_acquired:
    case event_type::term_lost:
    case event_type::lease_released:
    case event_type::leader_changed:
    case event_type::state_changed:
    case event_type::api_recovered:
    case event_type::config_applied:
      return true;
    default:
      return false;
  }
}

struct log_record {
  log_level level;
  std::string msg;
  ojson fields = ojson::object();
};

/// How a runtime event reads in the log; nullopt for events that are not
/// logged (renewals are metrics only).
std::optional<log_record> describe(const runtime_event& e) {
  log_record r{log_level::info, "", ojson::object()};
  auto with_term = [&] {
    if (e.term >= 0)
      r.fields["term"] = e.term;
  };
  auto with_module = [&] {
    r.fields["module"] = e.module;
    r.fields["leader_only"] = e.leader_only;
  };
  auto with_reason = [&] {
    if (!e.reason.empty())
      r.fields["reason"] = e.reason;
  };
  switch (e.type) {
    case event_type::renewed:
      return std::nullopt;
    case event_type::term_acquired:
      r.msg = "became leader";
      with_term();
      break;
    case event_type::term_lost:
      r.level = log_level::warn;
      r.msg = "stopped leading";
      with_term();
      with_reason();
      break;
    case event_type::lease_released:
      r.msg = "lease released";
      with_term();
      break;
    case event_type::leader_changed:
      r.msg = "leader changed";
      r.fields["holder"] = e.holder;
      with_term();
      break;
    case event_type::elector_started:
      r.level = log_level::debug;
      r.msg = "elector started";
      r.fields["attempt"] = e.value;
      break;
    case event_type::api_error:
      r.level = log_level::warn;
      r.msg = "API request failed";
      r.fields["error_kind"] = to_string(e.error.kind);
      r.fields["error"] = e.error.describe();
      break;
    case event_type::api_recovered:
      r.msg = "API reachable again";
      break;
    case event_type::module_started:
      r.msg = "module started";
      with_module();
      with_term();
      break;
    case event_type::module_stopping:
      r.msg = "module stopping";
      with_module();
      with_reason();
      break;
    case event_type::module_stopped:
      r.msg = "module stopped";
      with_module();
      with_reason();
      break;
    case event_type::module_killed:
      r.level = log_level::warn;
      r.msg = "module killed (did not stop in time)";
      with_module();
      break;
    case event_type::module_unconfirmed:
      r.level = log_level::error;
      r.msg = "leader-only module killed but still running: lease no longer renewed, not released";
      with_module();
      with_reason();
      break;
    case event_type::fatal:
      r.level = log_level::error;
      r.msg = "fatal: ending the process";
      with_reason();
      break;
    case event_type::watch_changed:
      r.level = e.detail == "up" ? log_level::info : log_level::warn;
      r.msg = e.detail == "up" ? "lease watch open" : "lease watch down: polling until it is back";
      with_reason();
      break;
    case event_type::identity_conflict:
      r.level = log_level::error;
      r.msg = "another process writes the lease under this replica's identity: stepping down";
      r.fields["holder"] = e.holder;
      with_term();
      break;
    case event_type::module_crashed:
      r.level = log_level::error;
      r.msg = "module crashed";
      with_module();
      with_reason();
      break;
    case event_type::module_restarting:
      r.msg = "module restarting";
      with_module();
      r.fields["delay_ms"] = e.value;
      break;
    case event_type::module_failed:
      r.level = log_level::error;
      r.msg = "module failed: too many restarts";
      with_module();
      with_reason();
      break;
    case event_type::config_applied:
      r.msg = "config applied";
      break;
    case event_type::config_rejected:
      r.level = log_level::error;
      r.msg = "config rejected";
      r.fields["errors"] = e.detail;
      break;
    case event_type::state_changed:
      r.level = log_level::debug;
      r.msg = "runner state changed";
      r.fields["state"] = e.detail;
      break;
    case event_type::module_output:
      r.msg = "module output";
      r.fields["module"] = e.module;
      r.fields["line"] = e.detail;
      if (e.reason == "fence_kill") {
        r.level = log_level::warn;
        r.msg = "leader-only child killed at its fence";
        r.fields["reason"] = e.reason;
      }
      break;
  }
  return r;
}

} // namespace

const char* to_string(log_level l) {
  switch (l) {
    case log_level::debug: return "debug";
    case log_level::info: return "info";
    case log_level::warn: return "warn";
    case log_level::error: return "error";
  }
  return "info";
}

std::optional<log_level> parse_log_level(const std::string& s) {
  for (auto l : {log_level::debug, log_level::info, log_level::warn, log_level::error})
    if (s == to_string(l))
      return l;
  return std::nullopt;
}

json_logger::json_logger(log_level min, std::string identity, std::string lease, std::FILE* out)
  : min_(min), identity_(std::move(identity)), lease_(std::move(lease)), out_(out) {}

void json_logger::set_level(log_level min) {
  std::lock_guard<std::mutex> guard(mtx_);
  min_ = min;
}

void json_logger::log(log_level level, const std::string& msg, const ojson& fields) {
  write(level, msg, fields, false);
}

event_sink json_logger::sink() {
  return [this](const runtime_event& e) { on_event(e); };
}

void json_logger::on_event(const runtime_event& e) {
  if (is_state_change(e.type)) {
    std::lock_guard<std::mutex> guard(mtx_);
    seen_.clear();
  }
  if (auto r = describe(e))
    // Module output is content, not status: identical lines are kept.
    write(r->level, r->msg, r->fields, e.type != event_type::module_output);
}

void json_logger::write(log_level level, const std::string& msg, const ojson& fields,
                        bool suppress_repeats) {
  std::lock_guard<std::mutex> guard(mtx_);
  if (level < min_)
    return;
  if (suppress_repeats) {
    auto key = std::string(to_string(level)) + '\n' + msg + '\n' + fields.dump();
    if (!seen_.insert(key).second)
      return;
    if (seen_.size() > max_remembered_lines)
      seen_.clear();
  }
  ojson line = ojson::object();
  line["level"] = to_string(level);
  line["time"] = rfc3339_ms(std::chrono::system_clock::now());
  line["msg"] = msg;
  if (!identity_.empty())
    line["identity"] = identity_;
  if (!lease_.empty())
    line["lease"] = lease_;
  if (fields.is_object())
    for (auto& kv : fields.items())
      line[kv.key()] = kv.value();
  auto text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  text += '\n';
  std::fwrite(text.data(), 1, text.size(), out_);
  std::fflush(out_);
}

} // namespace leasehold::agent
