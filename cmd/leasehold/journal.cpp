#include "cmd/leasehold/journal.hpp"

#include <nlohmann/json.hpp>

#include "cmd/leasehold/clock.hpp"
#include "leasehold/lease.hpp"
#include "lease/log_time.hpp"

namespace leasehold::agent {

std::optional<const char*> journal_event_name(event_type t) {
  switch (t) {
    case event_type::term_acquired: return "term_acquired";
    case event_type::term_lost: return "term_lost";
    case event_type::lease_released: return "lease_released";
    case event_type::module_started: return "module_started";
    case event_type::module_stopped: return "module_stopped";
    case event_type::module_killed: return "module_killed";
    case event_type::fatal: return "fatal";
    case event_type::module_crashed: return "module_crashed";
    case event_type::module_output: return "module_output";
    case event_type::renewed: return "renewed";
    default: return std::nullopt;
  }
}

journal::journal(const std::string& path, std::string identity)
  : file_(std::fopen(path.c_str(), "a")), identity_(std::move(identity)) {}

journal::~journal() {
  if (file_ != nullptr)
    std::fclose(file_);
}

event_sink journal::sink() {
  return [this](const runtime_event& e) { on_event(e); };
}

void journal::on_event(const runtime_event& e) {
  auto name = journal_event_name(e.type);
  if (!name || file_ == nullptr)
    return;
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["mono_ns"] = monotonic_ns();
  j["wall"] = format_log_time(e.wall);
  j["identity"] = identity_;
  j["event"] = *name;
  if (!e.lease.empty())
    j["lease"] = e.lease;   // ns/name: an agent with leases of its modules runs several
  j["term"] = e.term;
  if (!e.module.empty()) {
    j["module"] = e.module;
    j["leader_only"] = e.leader_only;
  }
  if (!e.reason.empty())
    j["reason"] = e.reason;
  if (e.type == event_type::module_output)
    j["detail"] = e.detail;
  if (e.valid_until_ns > 0)
    j["valid_until_ns"] = e.valid_until_ns;
  auto line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::lock_guard<std::mutex> guard(mtx_);
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
}

} // namespace leasehold::agent
