#include "modules/exec.hpp"

#include <chrono>
#include <csignal>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include <sys/wait.h>
#include <unistd.h>

#include "modules/child_process.hpp"
#include "modules/module_type.hpp"

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

std::string command_error(const exec_settings& s) {
  if (s.command.empty())
    return "";
  auto& file = s.command.front();
  auto runnable = [](const std::string& path) { return access(path.c_str(), X_OK) == 0; };
  if (file.find('/') != std::string::npos) {
    auto path = file.front() == '/' || !s.workdir ? file : *s.workdir + "/" + file;
    return runnable(path) ? "" : "\"" + path + "\" is not an executable file";
  }
  const char* env_path = std::getenv("PATH");
  std::string dirs = env_path != nullptr ? env_path : "/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    auto end = dirs.find(':', start);
    if (end == std::string::npos)
      end = dirs.size();
    auto dir = dirs.substr(start, end - start);
    if (runnable((dir.empty() ? "." : dir) + "/" + file))
      return "";
    start = end + 1;
  }
  return "\"" + file + "\" not found on PATH (" + dirs + ")";
}

namespace {

// Private messages: the watcher reports the exit of child `generation`; the
// grace timer of child `generation` expired.
using exec_exit_atom = caf::atom_constant<caf::atom("lh_exexit")>;
using exec_kill_atom = caf::atom_constant<caf::atom("lh_exkill")>;
// Private: time to forward the fence's valid_until to the keeper.
using exec_fence_atom = caf::atom_constant<caf::atom("lh_exfence")>;

/// How often a leader-only exec forwards the fence to its keeper: a renew
/// reaches the keeper at most this late (renew_deadline is seconds).
constexpr std::chrono::milliseconds fence_poll_interval{25};

std::vector<std::string> environment(const module_context& ctx, const exec_settings& s,
                                     const std::string& fence_file) {
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
    env["LEASEHOLD_FENCE_FILE"] = fence_file;
  }
  std::vector<std::string> out;
  for (auto& [k, v] : env)
    out.push_back(k + "=" + v);
  return out;
}

/// A private directory for one child's fence file ($LEASEHOLD_FENCE_DIR, set
/// by the agent from fence_dir, else $TMPDIR, else /tmp), removed with what
/// is in it when replaced or destroyed.
struct fence_directory {
  std::string path;
  fence_directory() = default;
  fence_directory(const fence_directory&) = delete;
  fence_directory& operator=(const fence_directory&) = delete;
  ~fence_directory() { remove(); }

  std::string error;   // why make() failed, naming the directory

  /// The fence file's path in a new directory; empty when none could be made.
  std::string make() {
    remove();
    const char* dir = std::getenv("LEASEHOLD_FENCE_DIR");
    if (dir == nullptr || *dir == '\0')
      dir = std::getenv("TMPDIR");
    std::string base = dir != nullptr && *dir != '\0' ? dir : "/tmp";
    std::string pattern = base + "/leasehold-fence-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      error = "cannot create a fence file in \"" + base + "\" (" + std::strerror(errno)
              + "); set fence_dir to a writable directory";
      return {};
    }
    path = pattern;
    return path + "/fence";
  }

  void remove() {
    if (path.empty())
      return;
    ::unlink((path + "/fence").c_str());
    ::unlink((path + "/fence.tmp").c_str());
    ::rmdir(path.c_str());
    path.clear();
  }
};

struct exec_state {
  module_context ctx;
  exec_settings settings;
  output_reporter out;
  std::uint64_t generation = 0;               // of the current child
  bool terminating = false;                   // TERM sent, grace timer running
  std::optional<caf::error> quit_reason;      // stop requested: quit when the child is gone
  std::optional<exec_settings> restart_with;  // settings changed: start again when gone
  // Leader-only: the valid_until last forwarded to the keeper; a child the
  // fence killed leaves the actor waiting (no child) until the fence is valid
  // again or the module is stopped.
  std::int64_t fence_sent = 0;
  bool waiting_for_fence = false;
  fence_directory fence_dir;                  // holds the current child's fence file
  // Declared last: destroyed first, before anything its threads may use.
  std::unique_ptr<child_process> child;
};

using exec_actor = caf::stateful_actor<exec_state>;

std::int64_t fence_now(exec_actor* self) {
  return self->clock().now().time_since_epoch().count();
}

void start_child(exec_actor* self) {
  auto& st = self->state;
  std::optional<child_process::fence> fence;
  if (st.ctx.leader_only) {
    // Leader-only work starts only on a valid fence, and dies at its end.
    auto valid_until = st.ctx.fence.valid_until ? st.ctx.fence.valid_until->load() : 0;
    if (valid_until <= fence_now(self)) {
      if (!st.waiting_for_fence)
        st.out.line("fence not valid: not starting the command");
      st.waiting_for_fence = true;
      return;
    }
    fence = child_process::fence{st.ctx.fence.term, valid_until, st.fence_dir.make()};
    if (fence->file.empty()) {   // never a child with an empty LEASEHOLD_FENCE_FILE
      st.out.line(st.fence_dir.error);
      self->quit(caf::make_error(caf::sec::runtime_error, "exec: " + st.fence_dir.error));
      return;
    }
    st.fence_sent = valid_until;
  }
  st.waiting_for_fence = false;
  auto generation = ++st.generation;
  auto out = st.out;
  auto me = caf::actor_cast<caf::actor>(self);
  auto started = child_process::start(
    {st.settings.command, environment(st.ctx, st.settings, fence ? fence->file : std::string{}),
     st.settings.workdir},
    fence,
    {[out](child_process::stream s, std::string line) {
       out.line(std::move(line), s == child_process::stream::out ? "stdout" : "stderr");
     },
     [me, generation](int status, const std::string& fence_kill) {
       caf::anon_send(me, exec_exit_atom::value, generation, status, !fence_kill.empty());
     },
     [out, fenced = fence.has_value()](pid_t pid) {
       out.line("started pid " + std::to_string(pid) + (fenced ? " (fenced)" : ""));
     },
     [out](const std::string& fence_kill) {
       // Reported at once (the log line and leasehold_fence_kills_total).
       out.line(fence_kill, "fence_kill");
     }});
  if (!started.child) {
    st.out.line(started.error);
    self->quit(caf::make_error(caf::sec::runtime_error, "exec: " + started.error));
    return;
  }
  st.child = std::move(started.child);
}

/// Starts the command again, with the settings that changed meanwhile.
void restart_child(exec_actor* self) {
  auto& st = self->state;
  if (st.restart_with) {
    st.settings = std::move(*st.restart_with);
    st.restart_with.reset();
  }
  start_child(self);
}

/// Leader-only: forwards a changed valid_until to the keeper (0: the term
/// ended), restarts a fence-killed command if the fence is valid again.
void forward_fence(exec_actor* self) {
  auto& st = self->state;
  auto valid_until = st.ctx.fence.valid_until ? st.ctx.fence.valid_until->load() : 0;
  if (st.child && valid_until != st.fence_sent) {
    if (valid_until == 0)
      st.child->end_fence();
    else
      st.child->extend(valid_until);
    st.fence_sent = valid_until;
  } else if (!st.child && st.waiting_for_fence && !st.quit_reason
             && valid_until > fence_now(self)) {
    restart_child(self);
  }
  self->delayed_send(self, fence_poll_interval, exec_fence_atom::value);
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

void child_exited(exec_actor* self, int status, bool fence_killed) {
  auto& st = self->state;
  st.child.reset(); // the watcher has finished: this only joins it
  st.fence_dir.remove();
  // A child that ends of the SIGTERM sent to stop it did what it was asked.
  bool stopped = std::exchange(st.terminating, false) && WIFSIGNALED(status)
                 && WTERMSIG(status) == SIGTERM;
  auto what = stopped ? std::string("stopped by the SIGTERM sent to stop it")
                      : child_process::describe(status);
  st.out.line(what);
  if (st.quit_reason) {
    self->quit(*st.quit_reason);
  } else if (fence_killed) {
    // Not a crash: this replica may not act. Wait for a valid fence (a late
    // renew) or, far more likely, the stop that follows the lost term.
    st.waiting_for_fence = true;
  } else if (st.restart_with) {
    restart_child(self);
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
  if (self->state.ctx.leader_only)
    self->delayed_send(self, fence_poll_interval, exec_fence_atom::value);
  return {
    [self](exec_exit_atom, std::uint64_t generation, int status, bool fence_killed) {
      if (generation == self->state.generation)
        child_exited(self, status, fence_killed);
    },
    [self](exec_fence_atom) { forward_fence(self); },
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
      auto s = accept_settings(parse_exec_settings, update.settings, st.out);
      if (!s || *s == st.settings || st.quit_reason)
        return;
      st.restart_with = std::move(*s);
      if (st.child) {
        st.out.line("settings changed: restarting the command");
        terminate_child(self);
      } else if (!st.waiting_for_fence) {
        restart_child(self);
      }
    },
  };
}

} // namespace

module_type exec_module() {
  auto t = make_module_type("exec", true, parse_exec_settings,
                            [](caf::actor_system& sys, const module_context& ctx, exec_settings s) {
                              return sys.spawn<caf::detached>(exec, ctx, std::move(s));
                            });
  // Validation also finds the command: a missing binary is a config error
  // no restart can fix. (The module itself still reports one that vanishes.)
  t.validate = [](const nlohmann::json& s) {
    auto p = parse_exec_settings(s);
    if (p.errors.empty())
      if (auto e = command_error(p.value); !e.empty())
        p.errors.push_back("command: " + e);
    return p.errors;
  };
  t.stop_time = [](const nlohmann::json& s) -> std::optional<stop_bound> {
    auto field = s.contains("grace") ? "grace" : "grace_ms";   // the name the config gave
    return stop_bound{field, std::chrono::milliseconds(parse_exec_settings(s).value.grace_ms)};
  };
  return t;
}

} // namespace leasehold::modules
