#include "modules/ticker.hpp"

#include <chrono>

#include "modules/module_type.hpp"

namespace leasehold::modules {

parsed<ticker_settings> parse_ticker_settings(const nlohmann::json& settings) {
  settings_reader r{settings};
  parsed<ticker_settings> out;
  out.value.interval_ms = r.duration_ms("interval_ms", out.value.interval_ms, 1);
  out.value.message = r.string("message");
  out.errors = r.finish();
  return out;
}

namespace {

using tick_atom = caf::atom_constant<caf::atom("tk_tick")>;

/// A tick's line reaches the journal a little after the fence check and
/// must land inside the fence (a demo's tick was journaled 67 us past it).
constexpr auto fence_margin = std::chrono::milliseconds(50);

struct ticker_state {
  ticker_settings settings;
  output_reporter out;
  bool leader_only = false;
  fencing_token fence;
  std::uint64_t ticks = 0;
  // A settings change reschedules: ticks of an older generation are ignored.
  std::uint64_t generation = 0;
};

using ticker_actor = caf::stateful_actor<ticker_state>;

void schedule_tick(ticker_actor* self) {
  self->delayed_send(self, std::chrono::milliseconds(self->state.settings.interval_ms),
                     tick_atom::value, self->state.generation);
}

caf::behavior ticker(ticker_actor* self, module_context ctx, ticker_settings settings) {
  self->state.settings = std::move(settings);
  self->state.out = output_reporter{ctx};
  self->state.leader_only = ctx.leader_only;
  self->state.fence = ctx.fence;
  schedule_tick(self);
  return {
    [=](tick_atom, std::uint64_t generation) {
      auto& st = self->state;
      if (generation != st.generation)
        return;
      schedule_tick(self);
      if (st.leader_only && !st.fence.valid(self->clock().now() + fence_margin)) {
        st.out.line("tick skipped: the lease is not confirmed (fence expired)");
        return;
      }
      auto line = "tick " + std::to_string(++st.ticks) + " term " + std::to_string(st.fence.term);
      if (st.settings.message)
        line += ": " + *st.settings.message;
      st.out.line(std::move(line));
    },
    [=](const module_settings& update) {
      auto s = accept_settings(parse_ticker_settings, update.settings, self->state.out);
      if (!s)
        return;
      self->state.settings = std::move(*s);
      ++self->state.generation;
      schedule_tick(self);
    },
  };
}

} // namespace

module_type ticker_module() {
  return make_module_type("ticker", true, parse_ticker_settings,
                          [](caf::actor_system& sys, const module_context& ctx, ticker_settings s) {
                            return sys.spawn(ticker, ctx, std::move(s));
                          });
}

} // namespace leasehold::modules
