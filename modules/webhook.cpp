#include "modules/webhook.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include <httplib.h>

#include "modules/module_type.hpp"
#include "modules/subscription.hpp"
#include "leasehold/lease.hpp"

namespace leasehold::modules {

std::string http_url::origin() const {
  return scheme + "://" + host + ":" + std::to_string(port);
}

std::optional<http_url> parse_http_url(const std::string& url) {
  http_url out;
  auto sep = url.find("://");
  if (sep == std::string::npos)
    return std::nullopt;
  out.scheme = url.substr(0, sep);
  if (out.scheme != "http" && out.scheme != "https")
    return std::nullopt;
  auto rest = url.substr(sep + 3);
  auto slash = rest.find('/');
  auto authority = rest.substr(0, slash);
  out.path = slash == std::string::npos ? "/" : rest.substr(slash);
  if (authority.empty())
    return std::nullopt;
  auto bracketed = authority.front() == '[';
  auto host_end = bracketed ? authority.find(']') : authority.rfind(':');
  if (bracketed && host_end == std::string::npos)
    return std::nullopt;
  if (bracketed)
    ++host_end;
  else if (host_end == std::string::npos)
    host_end = authority.size();
  out.host = authority.substr(0, host_end);
  out.port = out.scheme == "https" ? 443 : 80;
  if (host_end < authority.size()) {
    auto port = authority.substr(host_end);
    if (port.size() < 2 || port.size() > 6 || port[0] != ':'
        || !std::all_of(port.begin() + 1, port.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return std::nullopt;
    out.port = std::stoi(port.substr(1));
  }
  if (out.host.empty() || out.host == "[]" || out.port < 1 || out.port > 65535)
    return std::nullopt;
  return out;
}

parsed<webhook_settings> parse_webhook_settings(const nlohmann::json& settings) {
  settings_reader r{settings};
  parsed<webhook_settings> out;
  if (auto url = r.string("url", true)) {
    if (auto u = parse_http_url(*url))
      out.value.url = *u;
    else
      r.fail("url", "must be an http:// or https:// URL with a host (http://host:port/path)");
  }
  out.value.timeout_ms = r.duration_ms("timeout_ms", out.value.timeout_ms, 1);
  out.value.max_retries = r.integer("max_retries", out.value.max_retries, 0, 100);
  out.errors = r.finish();
  return out;
}

namespace {

using std::chrono::milliseconds;

constexpr milliseconds backoff_initial{100};
constexpr milliseconds backoff_max{2000};

/// Owns the thread that POSTs queued bodies in order.
class webhook_sender {
public:
  webhook_sender(const webhook_settings& s, output_reporter out)
    : settings_(s), out_(std::move(out)), client_(s.url.origin()) {
    auto timeout = milliseconds(s.timeout_ms);
    client_.set_connection_timeout(timeout);
    client_.set_read_timeout(timeout);
    client_.set_write_timeout(timeout);
    worker_ = std::thread{[this] { run(); }};
  }

  ~webhook_sender() {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      stopping_ = true;
    }
    cv_.notify_all();
    client_.stop(); // cancels a request in flight
    worker_.join();
  }

  webhook_sender(const webhook_sender&) = delete;
  webhook_sender& operator=(const webhook_sender&) = delete;

  /// Never blocks beyond the queue's mutex.
  void post(std::string body) {
    bool dropped = false;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      queue_.push_back(std::move(body));
      if (queue_.size() > webhook_max_queue) {
        queue_.pop_front();
        dropped = true;
      }
    }
    cv_.notify_all();
    if (dropped)
      out_.line("queue full (" + std::to_string(webhook_max_queue)
                + "): dropped the oldest notification");
  }

private:
  void run() {
    for (;;) {
      std::string body;
      {
        std::unique_lock<std::mutex> lock{mtx_};
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (stopping_)
          return;
        body = std::move(queue_.front());
        queue_.pop_front();
      }
      deliver(body);
    }
  }

  void deliver(const std::string& body) {
    auto backoff = backoff_initial;
    std::string failure;
    for (std::int64_t attempt = 0; attempt <= settings_.max_retries; ++attempt) {
      if (attempt > 0) {
        if (!sleep_unless_stopping(backoff))
          return;
        backoff = std::min(backoff * 2, backoff_max);
      }
      auto res = client_.Post(settings_.url.path, body, "application/json");
      if (res && res->status >= 200 && res->status < 300)
        return;
      failure = res ? "status " + std::to_string(res->status) : httplib::to_string(res.error());
      if (res && res->status != 429 && res->status < 500)
        break;
    }
    if (!stopping())
      out_.line("POST " + settings_.url.origin() + settings_.url.path + " failed ("
                + failure + "): notification dropped");
  }

  bool stopping() {
    std::lock_guard<std::mutex> guard{mtx_};
    return stopping_;
  }

  /// False when the sender is stopping.
  bool sleep_unless_stopping(milliseconds d) {
    std::unique_lock<std::mutex> lock{mtx_};
    return !cv_.wait_for(lock, d, [this] { return stopping_; });
  }

  webhook_settings settings_;
  output_reporter out_;
  httplib::Client client_;
  std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  bool stopping_ = false;
  std::thread worker_; // last: started after everything it uses exists
};

struct webhook_state {
  module_context ctx;
  std::unique_ptr<webhook_sender> sender;
};

using webhook_actor = caf::stateful_actor<webhook_state>;

std::string notification(const module_context& ctx, const leadership_changed& x) {
  auto now = wall_now();
  nlohmann::json body{{"identity", ctx.identity},
                      {"leading", x.leading},
                      {"holder", x.holder},
                      {"term", x.term},
                      {"time", format_micro_time(now)},
                      {"lease", ctx.fence.lease.name.empty() ? "" : ctx.fence.lease.to_string()}};
  return body.dump();
}

caf::behavior webhook(webhook_actor* self, module_context ctx, webhook_settings settings) {
  self->state.sender = std::make_unique<webhook_sender>(settings, output_reporter{ctx});
  self->state.ctx = std::move(ctx);
  follow_leadership(self, self->state.ctx.runner);
  return {
    [self](const leadership_changed& x) {
      self->state.sender->post(notification(self->state.ctx, x));
    },
    [self](const module_settings& update) {
      output_reporter out{self->state.ctx};
      auto s = accept_settings(parse_webhook_settings, update.settings, out);
      if (!s)
        return;
      self->state.sender.reset();
      self->state.sender = std::make_unique<webhook_sender>(*s, out);
    },
  };
}

} // namespace

module_type webhook_module() {
  // Detached: stopping joins the sender thread, which may wait on a connect.
  return make_module_type("webhook", false, parse_webhook_settings,
                          [](caf::actor_system& sys, const module_context& ctx, webhook_settings s) {
                            return sys.spawn<caf::detached>(webhook, ctx, std::move(s));
                          });
}

} // namespace leasehold::modules
