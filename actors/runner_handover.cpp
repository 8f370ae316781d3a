// Why a runner gives up a term it still holds, besides losing it: a
// leader-only module killed but not down (the fatal checks), a crash-looping
// leader-only module (handover with backoff), told to stand by
// (compete_atom), a yield or a preferredHolder naming another replica
// (actors/handover.hpp). Every one ends in the one step-down path of
// actors/runner.cpp: leader-only modules down, then the release.
#include "actors/runner_impl.hpp"

#include <algorithm>
#include <utility>

#include "actors/runner_view.hpp"

namespace leasehold {

/// A leader-only module got its kill at module_stop_timeout. Normally its
/// down message follows at once; if not shortly after, it is still running
/// (blocked in a handler): the term ends (see on_fatal_check), and unless
/// the module goes down before another replica could take the lease, the
/// process ends.
void runner_impl::on_kill_unconfirmed(const std::string&) {
  delayed_send(this, unconfirmed_kill_grace(opt_.timings), fatal_atom::value, 1);
}

/// Phase 1 (shortly after an unconfirmed kill): renewing stops, and so
/// does the term. The elector is killed, never asked to release (the
/// lease must run out: a module may still be working), and a leader
/// steps down like after any lost term: its fence ends and every other
/// leader-only module is stopped under the same kill/confirm rules. Once
/// all are confirmed down the step-down settles and the replica competes
/// again. Phase 2 (half the safety room before another replica may take
/// the lease): a kill still unconfirmed ends the process.
void runner_impl::on_fatal_check(int phase) {
  auto pending = modules_.unconfirmed_kills();
  if (pending.empty())
    return;
  if (phase == 1) {
    emit(event_type::module_unconfirmed, [&](runtime_event& ev) {
      ev.module = pending.front();
      ev.leader_only = true;
      ev.reason = "killed at module_stop_timeout but not down";
    });
    if (auto e = elector_) {
      elector_gone("leader-only module " + pending.front()
                   + " was killed but has not stopped: renewing stops and the lease must run out");
      anon_send_exit(e, caf::exit_reason::kill);
    }
    auto fatal_at = fatal_deadline(opt_.timings, renewed_until());
    delayed_send(this, std::max(caf::timespan{0}, fatal_at - clock().now()), fatal_atom::value, 2);
    return;
  }
  std::string reason = "leader-only module " + pending.front()
                       + " was killed but has not stopped; another replica may take the lease "
                         "soon, so this process ends now";
  emit(event_type::fatal, [&](runtime_event& ev) {
    ev.module = pending.front();
    ev.reason = reason;
  });
  opt_.on_fatal(reason);
}

/// Compete for the lease or only follow it (compete_atom). The elector
/// learns it at once; a leader told to stand by yields (to anyone: the
/// voluntary handover, with its event and metric), and its next elector
/// follows without competing.
void runner_impl::set_competing(bool on) {
  if (std::exchange(opt_.compete, on) == on)
    return;
  if (on)
    yield_out_until_ = {};   // a group assigned it this lease: its own yield window ends
  if (elector_)
    send(elector_, compete_atom::value, on);
  if (!on)
    begin_yield("", standing_by, std::nullopt);   // refused unless leading
}

/// Who a yield or a preferredHolder may name from now on (a balance group's
/// settled members). A preferredHolder ignored so far because it named
/// none of them is followed once it names one.
void runner_impl::set_candidates(std::vector<std::string>& candidates) {
  auto& r = rare_.set();
  auto& to = memory_.preferred_successor;
  bool ignored = !to.empty() && !may_name(r.candidates, to);
  r.candidates = std::move(candidates);
  if (ignored && may_name(r.candidates, to) && !r.yield.active())
    begin_yield(to, "preferredHolder names " + to, std::nullopt);   // refused unless leading
}

/// A leader-only module crashed more often than its restart policy
/// allows: hand leadership over to a healthy replica through the one
/// step-down path (modules down, then release) and compete again only
/// after the handover backoff.
void runner_impl::on_leader_only_failed(const std::string& name) {
  if (state_ != runner_state::leader)
    return;
  module_failed_this_term_ = true;
  std::uniform_real_distribution<double> u(0.0, 1.0);
  auto delay = handover_backoff_.next(u(rng_));
  compete_after_ = clock().now() + delay;
  rare_.set().handover_module = name;
  emit(event_type::leadership_handed_over, [&](runtime_event& ev) {
    ev.module = name;
    ev.leader_only = true;
    ev.term = term_;
    ev.value = std::chrono::duration<double, std::milli>(delay).count();
  });
  begin_stepdown("module " + name + " is crash-looping");
}

void runner_impl::begin_yield(std::string target, std::string why,
                              std::optional<caf::response_promise> rp) {
  auto& r = rare_.set();
  if (r.yield.begin(state_ == runner_state::leader, opt_.identity, holder_, std::move(target),
                    std::move(why), std::move(rp), r.candidates))
    begin_stepdown(r.yield.why());
}

/// A leader whose Lease names another preferredHolder yields to it, unless
/// it names none of the candidates (a replica that is not a member of the
/// lease's balance group): then nothing moves.
void runner_impl::note_preference(const std::string& to) {
  if (!to.empty() && !rare_.seen().yield.active() && current_sender() == elector_.address()
      && may_name(rare_.seen().candidates, to))
    begin_yield(to, "preferredHolder names " + to, std::nullopt);   // refused unless leading
}

/// The yield's release is done: leader-only modules are down and the lease
/// is free for the successor; this replica watches (its next elector
/// starts now) but acquires nothing within the yield window.
void runner_impl::yield_released(bool released) {
  if (!released || !should_elect()) {
    rare_.set().yield.fail(yield_status::release_failed,
                      released ? "the runner stopped electing" : "the lease could not be released");
    settle();
    return;
  }
  yield_out_until_ = rare_.set().yield.on_released(clock().now(), opt_.timings, term_, emit);
  delayed_send(this, yield_out_until_ - clock().now() + preferred_holder_wait(opt_.timings),
               yield_timeout_atom::value, rare_.set().yield.seq());
  if (releases_ == 0)
    start_elector();
  else
    settle();
}

} // namespace leasehold
