#include "modules/exec.hpp"

#include <chrono>
#include <csignal>
#include <memory>

#include <sys/wait.h>

#include "modules/child_process.hpp"
#include "modules/output.hpp"

extern char** environ;

namespace leasehold::modules {

parsed<exec_settings> parse_exec_settings(const nlohmann::json& settings) {
  settings_reader r{settings};
  parsed<exec_settings> out;
  out.value.command = r.string_array("command");
  out.value.env = r.string_map("env");
  out.value.grace_ms = r.duration_ms("grace_ms", out.value.grace_ms, 0);
  out.value.workdir = r.string("workdir", false);
  out.errors = r.finish();
  return out;
}

namespace {

// Private messages: the watcher reports the exit of child `generation`; the
// grace timer of child `generation` expired.
using exec_exit_atom = caf::atom_constant<caf::atom("lh_exexit")>;
using exec_kill_atom = caf::atom_constant<caf::atom("lh_exkill")>;

std::vector<std::string> environment(const module_context& ctx, const exec_settings& s) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv{*e};
    auto eq = kv.find('=');
    if (eq != std::string::npos)
      env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (auto& [k, v] : s.env)
    env[k] = v;
  if (ctx.leader_only) {
    env["LEASEHOLD_TERM"] = std::to_string(ctx.fence.term);
    env["LEASEHOLD_IDENTITY"] = ctx.fence.identity.empty() ? ctx.identity : ctx.fence.identity;
    env["LEASEHOLD_LEASE"] = ctx.fence.lease.to_string();
  }
  std::vector<std::string> out;
  for (auto& [k, v] : env)
    out.push_back(k + "=" + v);
  return out;
}

struct exec_state {
  module_context ctx;
  exec_settings settings;
  output_reporter out;
  // Declared last: destroyed first, before anything its threads may use.
  std::unique_ptr<child_process> child;
  std::uint64_t generation = 0;               // of the current child
  bool terminating = false;                   // TERM sent, grace timer running
  std::optional<caf::error> quit_reason;      // stop requested: quit when the child is gone
  std::optional<exec_settings> restart_with;  // settings changed: start again when gone
};

using exec_actor = caf::stateful_actor<exec_state>;

void start_child(exec_actor* self) {
  auto& st = self->state;
  auto generation = ++st.generation;
  auto out = st.out;
  auto me = caf::actor_cast<caf::actor>(self);
  auto started = child_process::start(
    {st.settings.command, environment(st.ctx, st.settings), st.settings.workdir},
    [out](child_process::stream s, std::string line) {
      out.line(std::move(line), s == child_process::stream::out ? "stdout" : "stderr");
    },
    [me, generation](int status) {
      caf::anon_send(me, exec_exit_atom::value, generation, status);
    });
  if (!started.child) {
    st.out.line(started.error);
    self->quit(caf::make_error(caf::sec::runtime_error, "exec: " + started.error));
    return;
  }
  st.child = std::move(started.child);
  st.out.line("started pid " + std::to_string(st.child->pid()));
}

/// SIGTERM now, SIGKILL when grace_ms passes without the exit report.
void terminate_child(exec_actor* self) {
  auto& st = self->state;
  if (st.terminating)
    return;
  st.terminating = true;
  st.child->signal_group(SIGTERM);
  self->delayed_send(self, std::chrono::milliseconds(st.settings.grace_ms),
                     exec_kill_atom::value, st.generation);
}

void child_exited(exec_actor* self, int status) {
  auto& st = self->state;
  st.child.reset(); // the watcher has finished: this only joins it
  st.terminating = false;
  auto what = child_process::describe(status);
  st.out.line(what);
  if (st.quit_reason) {
    self->quit(*st.quit_reason);
  } else if (st.restart_with) {
    st.settings = std::move(*st.restart_with);
    st.restart_with.reset();
    start_child(self);
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    self->quit();
  } else {
    self->quit(caf::make_error(caf::sec::runtime_error, "exec: command " + what));
  }
}

caf::behavior exec(exec_actor* self, module_context ctx, exec_settings settings) {
  self->state.out = output_reporter{ctx};
  self->state.ctx = std::move(ctx);
  self->state.settings = std::move(settings);
  self->set_exit_handler([self](caf::exit_msg& msg) {
    auto& st = self->state;
    if (!st.child) {
      self->quit(msg.reason);
      return;
    }
    if (!st.quit_reason)
      st.quit_reason = msg.reason;
    terminate_child(self);
  });
  start_child(self);
  return {
    [self](exec_exit_atom, std::uint64_t generation, int status) {
      if (generation == self->state.generation)
        child_exited(self, status);
    },
    [self](exec_kill_atom, std::uint64_t generation) {
      auto& st = self->state;
      if (generation != st.generation || !st.child)
        return;
      st.out.line("still running after grace_ms " + std::to_string(st.settings.grace_ms)
                  + ": SIGKILL");
      st.child->signal_group(SIGKILL);
    },
    [self](const module_settings& update) {
      auto& st = self->state;
      auto p = parse_exec_settings(update.settings);
      if (!p.errors.empty()) {
        st.out.line("settings rejected: " + p.errors.front());
        return;
      }
      if (p.value == st.settings || st.quit_reason)
        return;
      st.restart_with = std::move(p.value);
      if (st.child) {
        st.out.line("settings changed: restarting the command");
        terminate_child(self);
      }
    },
  };
}

} // namespace

module_type exec_module() {
  module_type t;
  t.type = "exec";
  t.default_leader_only = true;
  t.factory = [](caf::actor_system& sys, const module_context& ctx) {
    return sys.spawn<caf::detached>(exec, ctx, parse_exec_settings(ctx.settings).value);
  };
  t.validate = [](const nlohmann::json& s) { return parse_exec_settings(s).errors; };
  return t;
}

} // namespace leasehold::modules
