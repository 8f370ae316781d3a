#include "cmd/leasehold-apiserver/faults.hpp"

namespace leasehold::apiserver {

using nlohmann::json;

namespace {

const char* mode_name(fault_mode m) {
  switch (m) {
    case fault_mode::down: return "down";
    case fault_mode::hang: return "hang";
    case fault_mode::error: return "error";
    case fault_mode::none: break;
  }
  return "none";
}

/// Reads an optional integer field in [min, max]; returns an error text or "".
std::string read_int(const json& body, const char* key, int min, int max, int& out) {
  auto it = body.find(key);
  if (it == body.end())
    return "";
  if (!it->is_number_integer() || it->get<long long>() < min || it->get<long long>() > max)
    return std::string(key) + ": expected an integer in [" + std::to_string(min) + ", " +
           std::to_string(max) + "]";
  out = it->get<int>();
  return "";
}

std::string read_partition(const json& p, partition_rule& out) {
  out = partition_rule{};
  if (p.is_null())
    return "";
  if (!p.is_object())
    return "partition: expected an object or null";
  for (auto& [key, value] : p.items()) {
    if (key == "user_agent" && value.is_string())
      out.user_agent = value.get<std::string>();
    else if (key == "identity" && value.is_string())
      out.identity = value.get<std::string>();
    else if (key == "action" && (value == "close" || value == "hang"))
      out.hang = value == "hang";
    else
      return "partition." + key + ": expected user_agent (string), identity (string) or "
             "action (\"close\" or \"hang\")";
  }
  if (!out.active())
    return "partition: needs user_agent or identity";
  return "";
}

std::string read_watch(const json& w, watch_faults& out) {
  if (w.is_null()) {
    out = watch_faults{};
    return "";
  }
  if (!w.is_object())
    return "watch: expected an object or null";
  for (auto& [key, value] : w.items()) {
    if (key == "hang") {
      if (!value.is_boolean())
        return "watch.hang: expected a boolean";
      out.hang = value.get<bool>();
    } else if (key == "close") {
      if (value != "end" && value != "reset")
        return "watch.close: expected \"end\" or \"reset\"";
      out.reset = value == "reset";
    } else if (key != "close_after_ms" && key != "malformed_lines" && key != "error_events" &&
               key != "error_status" && key != "bookmark_ms") {
      return "watch." + key + ": unknown field";
    }
  }
  struct { const char* key; int min, max; int& out; } ints[] = {
    {"close_after_ms", 0, 3600000, out.close_after_ms},
    {"malformed_lines", 0, 1000000, out.malformed_lines},
    {"error_events", 0, 1000000, out.error_events},
    {"error_status", 400, 599, out.error_status},
    {"bookmark_ms", 0, 3600000, out.bookmark_ms},
  };
  for (auto& i : ints)
    if (auto e = read_int(w, i.key, i.min, i.max, i.out); !e.empty())
      return "watch." + e;
  return "";
}

} // namespace

bool partition_rule::matches(const std::string& user_agent_header,
                             const std::string& identity_header) const {
  return (!user_agent.empty() && user_agent_header.find(user_agent) != std::string::npos) ||
         (!identity.empty() && identity_header == identity);
}

json fault_state::to_json() const {
  json j = {{"mode", mode_name(mode)}, {"latency_ms", latency_ms}};
  if (mode == fault_mode::error) {
    j["status"] = error_status;
    j["retry_after"] = retry_after_seconds;
  }
  if (partition.active())
    j["partition"] = {{"user_agent", partition.user_agent},
                      {"identity", partition.identity},
                      {"action", partition.hang ? "hang" : "close"}};
  else
    j["partition"] = nullptr;
  j["watch"] = {{"close_after_ms", watch.close_after_ms}, {"close", watch.reset ? "reset" : "end"},
                {"hang", watch.hang}, {"malformed_lines", watch.malformed_lines},
                {"error_events", watch.error_events}, {"error_status", watch.error_status},
                {"bookmark_ms", watch.bookmark_ms}};
  return j;
}

std::string parse_fault_request(const json& body, const fault_state& current, fault_request& out) {
  if (!body.is_object())
    return "expected a JSON object";
  out = fault_request{current, false};
  fault_state& s = out.next;
  for (auto& [key, value] : body.items()) {
    if (key == "mode") {
      if (value == "recover" || value == "none")
        s = fault_state{};
      else if (value == "down")
        s.mode = fault_mode::down;
      else if (value == "hang")
        s.mode = fault_mode::hang;
      else if (value == "error")
        s.mode = fault_mode::error;
      else
        return "mode: expected down, hang, error or recover";
    } else if (key == "wipe") {
      if (!value.is_boolean())
        return "wipe: expected a boolean";
      out.wipe = value.get<bool>();
    } else if (key == "partition") {
      if (auto e = read_partition(value, s.partition); !e.empty())
        return e;
    } else if (key == "watch") {
      // Read after "mode" below, so that {"mode":"recover","watch":...} keeps it.
    } else if (key != "status" && key != "retry_after" && key != "latency_ms") {
      return key + ": unknown field";
    }
  }
  // Read after "mode" so that {"mode":"recover","latency_ms":5} keeps the latency.
  if (auto e = read_int(body, "status", 400, 599, s.error_status); !e.empty())
    return e;
  if (auto e = read_int(body, "retry_after", 0, 3600, s.retry_after_seconds); !e.empty())
    return e;
  if (auto w = body.find("watch"); w != body.end())
    if (auto e = read_watch(*w, s.watch); !e.empty())
      return e;
  return read_int(body, "latency_ms", 0, 60000, s.latency_ms);
}

void request_stats::counters::add(const std::string& verb, const std::string& code) {
  ++requests;
  ++by_verb[verb];
  ++by_code[code];
}

void request_stats::record(const std::string& verb, const std::string& user_agent,
                           const std::string& identity, int code,
                           std::chrono::microseconds took) {
  if (verb != "watch") {
    ++timed_;
    took_sum_ += took;
    took_max_ = std::max(took_max_, took);
  }
  std::string code_text = code == 0 ? "none" : std::to_string(code);
  total_.add(verb, code_text);
  by_user_agent_[user_agent].add(verb, code_text);
  if (!identity.empty())
    by_identity_[identity].add(verb, code_text);
}

json request_stats::to_json() const {
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - since_).count();
  json latency = {{"requests", timed_},
                  {"mean_ms", timed_ ? took_sum_.count() / 1000.0 / timed_ : 0.0},
                  {"max_ms", took_max_.count() / 1000.0}};
  return {{"total", total_}, {"by_user_agent", by_user_agent_}, {"by_identity", by_identity_},
          {"seconds", secs}, {"requests_per_s", secs > 0 ? total_.requests / secs : 0.0},
          {"latency", std::move(latency)}};
}

} // namespace leasehold::apiserver
