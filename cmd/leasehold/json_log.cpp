#include "cmd/leasehold/json_log.hpp"

#include <cctype>

#include "leasehold/lease.hpp"
#include "lease/log_time.hpp"

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

log_level level_of(event_severity s) {
  switch (s) {
    case event_severity::debug: return log_level::debug;
    case event_severity::warning: return log_level::warn;
    case event_severity::error: return log_level::error;
    default: return log_level::info;
  }
}

/// How a runtime event reads in the log: words and level from event_words_table
/// (shared with the default sink), the fields here; nullopt: not logged.
std::optional<log_record> describe(const runtime_event& e) {
  auto& row = words_for(e);
  if (row.severity == event_severity::unlogged)
    return std::nullopt;
  log_record r{level_of(row.severity), row.words, ojson::object()};
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
    if (!e.code.empty())
      r.fields["code"] = e.code;
  };
  switch (e.type) {
    case event_type::renewed:
    case event_type::api_request_failed:
    case event_type::api_recovered:
    case event_type::config_applied:
      break;
    case event_type::term_acquired:
    case event_type::lease_released:
      with_term();
      break;
    case event_type::term_lost:
      with_term();
      with_reason();
      break;
    case event_type::creation_hold:
      with_term();
      r.fields["term_starts_in_ms"] = static_cast<std::int64_t>(e.value);
      break;
    case event_type::outside_write:
    case event_type::leader_changed:
    case event_type::identity_conflict:
      r.fields["holder"] = e.holder;
      with_term();
      with_reason();   // identity_conflict: a release it refused
      break;
    case event_type::elector_started:
      r.fields["attempt"] = e.value;
      break;
    case event_type::api_error:
      r.fields["error_kind"] = to_string(e.error.kind);
      r.fields["error"] = e.error.describe();
      break;
    case event_type::module_started:
      with_module();
      with_term();
      break;
    case event_type::module_stopping:
    case event_type::module_stopped:
    case event_type::module_unconfirmed:
    case event_type::module_crashed:
    case event_type::module_failed:
      with_module();
      with_reason();
      break;
    case event_type::module_killed:
      with_module();
      break;
    case event_type::fatal:
    case event_type::watch_changed:
      with_reason();
      break;
    case event_type::module_restarting:
      with_module();
      r.fields["delay_ms"] = e.value;
      break;
    case event_type::group_config_differs:
      r.fields["member"] = e.holder;
      with_reason();
      break;
    case event_type::voluntary_handover:
      r.fields["holder"] = e.holder;   // the target ("" anyone)
      with_term();
      with_reason();
      r.fields["backoff_ms"] = e.value;
      break;
    case event_type::leadership_handed_over:
      with_module();
      with_term();
      r.fields["backoff_ms"] = e.value;
      break;
    case event_type::config_rejected:
      r.fields["errors"] = e.detail;
      break;
    case event_type::state_changed:
      r.fields["state"] = e.detail;
      break;
    case event_type::module_output:
      r.fields["module"] = e.module;
      if (e.reason == "stdout" || e.reason == "stderr")
        r.fields["stream"] = e.reason;
      r.fields["line"] = e.detail;
      if (e.reason == "fence_kill")
        r.fields["reason"] = e.reason;
      break;
  }
  return r;
}

/// The JSON line for a person: `time LEVEL msg  key=value ...`, a string bare
/// unless it needs JSON quotes, so that grep still finds `term=3`.
std::string as_text(const ojson& line) {
  auto dump = [](const ojson& v) {
    return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  std::string level = line.value("level", "");
  for (auto& c : level)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string text = line.value("time", "") + ' ' + level
                     + std::string(level.size() < 6 ? 6 - level.size() : 1, ' ')
                     + line.value("msg", "") + ' ';
  for (auto& kv : line.items()) {
    if (kv.key() == "level" || kv.key() == "time" || kv.key() == "msg")
      continue;
    text += ' ' + kv.key() + '=';
    if (!kv.value().is_string()) {
      text += dump(kv.value());
      continue;
    }
    auto v = kv.value().get<std::string>();
    text += !v.empty() && v.find_first_of(" \"=\t\n") == std::string::npos ? v : dump(kv.value());
  }
  return text;
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

const char* to_string(log_format f) { return f == log_format::text ? "text" : "json"; }

std::optional<log_format> parse_log_format(const std::string& s) {
  for (auto f : {log_format::json, log_format::text})
    if (s == to_string(f))
      return f;
  return std::nullopt;
}

json_logger::json_logger(log_level min, std::string identity, std::string lease, std::FILE* out,
                         std::chrono::steady_clock::duration summary_every)
  : min_(min), identity_(std::move(identity)), lease_(std::move(lease)), out_(out),
    summary_every_(summary_every) {}

void json_logger::set_format(log_format f) {
  std::lock_guard<std::mutex> guard(mtx_);
  format_ = f;
}

void json_logger::log(log_level level, const std::string& msg, const ojson& fields) {
  write(level, msg, fields, false);
}

event_sink json_logger::sink() {
  return [this](const runtime_event& e) {
    // One line per fact: every lease's runner applies the config and follows
    // the namespace's one watch stream, but the agent's own lease says it.
    bool other_lease = !e.lease.empty() && e.lease != lease_;
    if (other_lease && (e.type == event_type::config_applied || e.type == event_type::watch_changed))
      return;
    if (is_state_change(e.type)) {
      std::lock_guard<std::mutex> guard(mtx_);
      for (auto& kv : seen_)
        summarize(kv.second, std::chrono::steady_clock::now());
      seen_.clear();
    }
    if (auto r = describe(e)) {
      // The event's own lease where it is not the agent's (a module's lease).
      if (other_lease)
        r->fields["lease"] = e.lease;
      // Module output is content, not status: identical lines are kept.
      write(r->level, r->msg, r->fields, e.type != event_type::module_output);
    }
  };
}

void json_logger::write(log_level level, const std::string& msg, const ojson& fields,
                        bool suppress_repeats) {
  std::lock_guard<std::mutex> guard(mtx_);
  if (level < min_)
    return;
  if (suppress_repeats) {
    auto now = std::chrono::steady_clock::now();
    auto key = std::string(to_string(level)) + '\n' + msg + '\n' + fields.dump();
    auto it = seen_.find(key);
    if (it != seen_.end()) {
      ++it->second.suppressed;
      if (now - it->second.since >= summary_every_)
        summarize(it->second, now);
      return;
    }
    if (seen_.size() >= max_remembered_lines) {
      for (auto& kv : seen_)
        summarize(kv.second, now);
      seen_.clear();
    }
    seen_.emplace(key, repeat{level, msg, fields, 0, now});
  }
  emit(level, msg, fields);
}

void json_logger::summarize(repeat& r, std::chrono::steady_clock::time_point now) {
  if (r.suppressed > 0) {
    auto secs = std::chrono::duration_cast<std::chrono::seconds>(now - r.since).count();
    auto fields = r.fields;
    fields["repeated"] = r.suppressed;
    fields["repeated_in_s"] = secs;
    emit(r.level,
         r.msg + " … repeated " + std::to_string(r.suppressed) + " times in "
           + std::to_string(secs) + " s",
         fields);
  }
  r.suppressed = 0;
  r.since = now;
}

void json_logger::emit(log_level level, const std::string& msg, const ojson& fields) {
  ojson line = ojson::object();
  line["level"] = to_string(level);
  line["time"] = format_log_time(std::chrono::system_clock::now());
  line["msg"] = msg;
  if (!identity_.empty())
    line["identity"] = identity_;
  if (!lease_.empty())
    line["lease"] = lease_;
  if (fields.is_object())
    for (auto& kv : fields.items())
      line[kv.key()] = kv.value();
  auto text = format_ == log_format::text
                ? as_text(line)
                : line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  text += '\n';
  std::fwrite(text.data(), 1, text.size(), out_);
  std::fflush(out_);
}

} // namespace leasehold::agent
