#include "cmd/leasehold/journal.hpp"

#include <algorithm>
#include <iterator>

#include <nlohmann/json.hpp>

#include "leasehold/lease.hpp"
#include "lease/log_time.hpp"
#include "modules/fence_keeper.hpp"

namespace leasehold::agent {

namespace {

/// The events journaled, under their to_string() names.
constexpr event_type journaled[] = {
  event_type::term_acquired, event_type::term_lost, event_type::lease_released,
  event_type::module_started, event_type::module_stopped, event_type::module_killed,
  event_type::fatal, event_type::module_crashed, event_type::module_output, event_type::renewed,
};

} // namespace

journal::journal(const std::string& path, std::string identity)
  : file_(std::fopen(path.c_str(), "a")), identity_(std::move(identity)) {}

journal::~journal() {
  if (file_ != nullptr)
    std::fclose(file_);
}

event_sink journal::sink() {
  return [this](const runtime_event& e) {
    if (file_ == nullptr || std::find(std::begin(journaled), std::end(journaled), e.type)
                              == std::end(journaled))
      return;
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    j["mono_ns"] = modules::monotonic_ns();
    j["wall"] = format_log_time(e.wall);
    j["identity"] = identity_;
    j["event"] = to_string(e.type);
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
  };
}

} // namespace leasehold::agent
