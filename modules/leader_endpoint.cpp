#include "modules/leader_endpoint.hpp"

#include "modules/module_type.hpp"
#include "modules/subscription.hpp"

namespace leasehold::modules {

std::optional<std::string> leader_view::respond(const std::string& request_path) const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = published_.find(request_path);
  if (i == published_.end())
    return std::nullopt;
  auto& s = i->second;
  return nlohmann::json{
    {"leader", s.leader}, {"term", s.term}, {"self", s.self}, {"leading", s.leading}}.dump();
}

void leader_view::publish(const std::string& path, const snapshot& s) {
  std::lock_guard<std::mutex> guard{mtx_};
  published_[path] = s;
}

void leader_view::withdraw(const std::string& path) {
  std::lock_guard<std::mutex> guard{mtx_};
  published_.erase(path);
}

parsed<leader_endpoint_settings> parse_leader_endpoint_settings(const nlohmann::json& settings) {
  settings_reader r{settings};
  parsed<leader_endpoint_settings> out;
  if (auto path = r.string("path")) {
    if (path->empty() || path->front() != '/')
      r.fail("path", "must start with /");
    else
      out.value.path = *path;
  }
  out.errors = r.finish();
  return out;
}

namespace {

/// What one module instance has published; withdrawn when the state dies
/// (every exit path).
struct leader_endpoint_state {
  std::shared_ptr<leader_view> view;
  std::string path;
  leader_view::snapshot current;

  void publish() { view->publish(path, current); }
  ~leader_endpoint_state() {
    if (view)
      view->withdraw(path);
  }
};

using leader_endpoint_actor = caf::stateful_actor<leader_endpoint_state>;

caf::behavior leader_endpoint(leader_endpoint_actor* self, std::shared_ptr<leader_view> view,
                              module_context ctx, leader_endpoint_settings settings) {
  auto& st = self->state;
  st.view = std::move(view);
  st.path = settings.path;
  st.current.self = ctx.identity;
  st.publish();
  follow_leadership(self, ctx.runner);
  return {
    [self](const leadership_changed& x) {
      auto& st = self->state;
      st.current.leader = x.holder;
      st.current.term = x.term;
      st.current.leading = x.leading;
      st.publish();
    },
    [self, out = output_reporter{ctx}](const module_settings& update) {
      auto s = accept_settings(parse_leader_endpoint_settings, update.settings, out);
      if (!s)
        return;
      auto& st = self->state;
      st.view->withdraw(st.path);
      st.path = s->path;
      st.publish();
    },
  };
}

} // namespace

module_type leader_endpoint_module(std::shared_ptr<leader_view> view) {
  return make_module_type(
    "leader_endpoint", false, parse_leader_endpoint_settings,
    [view](caf::actor_system& sys, const module_context& ctx, leader_endpoint_settings s) {
      return sys.spawn(leader_endpoint, view, ctx, std::move(s));
    });
}

} // namespace leasehold::modules
