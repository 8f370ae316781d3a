#include "modules/output.hpp"

namespace leasehold::modules {

output_reporter::output_reporter(const module_context& ctx)
  : emit_(ctx.events, ctx.identity,
          ctx.fence.lease.name.empty() ? std::string{} : ctx.fence.lease.to_string()),
    module_(ctx.name),
    holder_(ctx.fence.identity),
    term_(ctx.fence.term),
    leader_only_(ctx.leader_only) {
}

void output_reporter::line(std::string detail, std::string reason) const {
  emit_(event_type::module_output, [&](runtime_event& ev) {
    ev.module = module_;
    ev.holder = holder_;
    ev.term = term_;
    ev.leader_only = leader_only_;
    ev.detail = std::move(detail);
    ev.reason = std::move(reason);
  });
}

} // namespace leasehold::modules
