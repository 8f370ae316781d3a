// Watch streams (GET ...?watch=1; cmd/leasehold-apiserver/README.md, 'Watch'). Each
// lives in a chunked content provider on one of the main listener's threads.
#include <algorithm>
#include <cstdlib>
#include <deque>
#include <limits>

#include "cmd/leasehold-apiserver/http_replies.hpp"
#include "cmd/leasehold-apiserver/resources.hpp"
#include "cmd/leasehold-apiserver/server_impl.hpp"

namespace leasehold {

using nlohmann::json;
using namespace apiserver;

/// One open watch stream; lives in the chunked content provider.
struct local_api_server::impl::watch_stream {
  const resource_type* resource = nullptr;
  object_filter filter;
  std::uint64_t since = 0;
  bool bookmarks = false;
  bool table = false;
  bool include_object = false;
  std::string user_agent, identity;
  std::chrono::steady_clock::time_point started, deadline, next_bookmark, hang_since;
  std::deque<std::string> pending;   // lines to write, in order
  bool ending = false;               // end once pending is written
};

void local_api_server::impl::start_watch(const httplib::Request& req, const resource_type& r,
                                         object_filter filter, httplib::Response& res) {
  auto w = std::make_shared<watch_stream>();
  w->resource = &r;
  w->filter = std::move(filter);
  auto bookmarks = parse_bool(req.get_param_value("allowWatchBookmarks"));
  if (!bookmarks)
    return set_status(res, 400, "allowWatchBookmarks: invalid value");
  w->bookmarks = *bookmarks;
  w->table = wants_table(req);
  w->include_object = req.get_param_value("includeObject") == "Object";
  w->user_agent = req.get_header_value("User-Agent");
  w->identity = req.get_header_value("X-Leasehold-Identity");
  w->started = std::chrono::steady_clock::now();
  auto timeout = std::chrono::seconds(opts.max_watch);
  if (req.has_param("timeoutSeconds")) {
    char* end = nullptr;
    auto text = req.get_param_value("timeoutSeconds");
    long long v = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || v < 0)
      return set_status(res, 400, "timeoutSeconds: invalid value \"" + text + "\"");
    if (v > 0)
      timeout = std::min(timeout, std::chrono::seconds(v));
  }
  w->deadline = w->started + timeout;
  auto rv = req.get_param_value("resourceVersion");
  if (rv.empty() || rv == "0") {
    // As the real API: the current objects as ADDED first, then changes.
    auto list = store.list(r, w->filter, 0, "");
    w->since = std::stoull(list.body["metadata"]["resourceVersion"].get<std::string>());
    for (auto& item : list.body["items"])
      w->pending.push_back(event_line("ADDED", *w, item));
  } else {
    char* end = nullptr;
    w->since = std::strtoull(rv.c_str(), &end, 10);
    if (*end != '\0')
      return set_status(res, 400, "resourceVersion: invalid value \"" + rv + "\"");
  }
  if (watches.fetch_add(1) + 16 >= opts.worker_threads) {
    --watches;
    res.set_header("Retry-After", "1");
    return set_status(res, 429, "too many open watches; retry later");
  }
  // With the parameter, cpp-httplib does not gzip the stream (it would hold
  // every event in the compressor until the stream ends).
  res.set_chunked_content_provider(
    "application/json;charset=utf-8",
    [this, w, &req](std::size_t, httplib::DataSink& sink) { return watch_step(*w, req, sink); },
    [this](bool) { --watches; });
}

std::string local_api_server::impl::event_line(const std::string& type, const watch_stream& w,
                                               const json& object) const {
  if (!w.table)
    return watch_line(type, object.dump());
  json metadata = {{"resourceVersion", object["metadata"]["resourceVersion"]}};
  return watch_line(type,
                    as_table(*w.resource, json::array({object}), metadata, w.include_object).dump());
}

void local_api_server::impl::queue_events(watch_stream& w, const watch_batch& batch) {
  for (auto& e : batch.events) {
    bool now = w.filter.matches(*e->object);
    bool before = e->previous && w.filter.matches(*e->previous);
    if (e->type == "MODIFIED" && now != before)
      w.pending.push_back(event_line(now ? "ADDED" : "DELETED", w, *e->object));
    else if (now)
      w.pending.push_back(w.table ? event_line(e->type, w, *e->object) : e->line);
  }
  w.since = batch.current;
}

bool local_api_server::impl::watch_step(watch_stream& w, const httplib::Request& req,
                                        httplib::DataSink& sink) {
  using clock = std::chrono::steady_clock;
  for (;;) {
    auto wakes = store.wakes();
    bool hung = false, drop = false, malformed = false;
    int error_code = 0;
    auto close_at = clock::time_point::max();
    auto bookmark_every = opts.bookmark_interval;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stopping)
        return false;
      bool partitioned = faults.partition.matches(w.user_agent, w.identity);
      drop = faults.mode == fault_mode::down || (partitioned && !faults.partition.hang);
      hung = faults.mode == fault_mode::hang || faults.watch.hang || partitioned;
      if (faults.watch.close_after_ms > 0) {
        close_at = w.started + std::chrono::milliseconds(faults.watch.close_after_ms);
        drop = drop || (faults.watch.reset && clock::now() >= close_at);
      }
      if (faults.watch.bookmark_ms > 0)
        bookmark_every = std::chrono::milliseconds(faults.watch.bookmark_ms);
      if (!hung && !w.ending && faults.watch.error_events > 0) {
        --faults.watch.error_events;
        error_code = faults.watch.error_status;
      }
      if (!hung && !w.pending.empty() && faults.watch.malformed_lines > 0) {
        --faults.watch.malformed_lines;
        malformed = true;
      }
    }
    auto now = clock::now();
    if (drop) {
      drop_connection(req);
      return false;
    }
    if (now >= close_at || now >= w.deadline || (w.ending && w.pending.empty())) {
      sink.done();
      return true;
    }
    if (!hung) {
      w.hang_since = clock::time_point{};
      if (malformed) {
        static const std::string bad = "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\n";
        if (!sink.write(bad.data(), bad.size()))
          return false;
      }
      if (!w.pending.empty()) {   // the lines queued so far in one write (one chunk)
        constexpr std::size_t chunk = 64 * 1024;
        std::size_t size = 0, count = 0;
        for (auto it = w.pending.begin(); it != w.pending.end() && size < chunk; ++it, ++count)
          size += it->size();
        if (count == 1) {
          std::string line = std::move(w.pending.front());
          w.pending.pop_front();
          return sink.write(line.data(), line.size());
        }
        std::string lines;
        lines.reserve(size);   // one allocation, not one per doubling
        for (; count > 0; --count, w.pending.pop_front())
          lines += w.pending.front();
        return sink.write(lines.data(), lines.size());
      }
      // An ERROR event ends the stream.
      auto batch = error_code != 0 ? watch_batch{} : store.events_since(*w.resource, w.since);
      if (error_code != 0 || batch.expired) {
        auto status = error_code != 0
          ? failure_status(error_code, reason_for(error_code),
                           "injected watch fault: " + reason_for(error_code))
          : failure_status(410, "Expired", "too old resource version: " + std::to_string(w.since)
                                             + " (" + std::to_string(batch.oldest) + ")");
        w.pending.push_back(watch_line("ERROR", status.dump()));
        w.ending = true;
        continue;
      }
      queue_events(w, batch);
      if (!w.pending.empty())
        continue;
      if (w.bookmarks && now >= w.next_bookmark) {
        if (w.next_bookmark != clock::time_point{}) {
          json object = {{"kind", w.resource->kind}, {"apiVersion", w.resource->api_version()},
                         {"metadata", {{"resourceVersion", std::to_string(w.since)}}}};
          w.pending.push_back(watch_line("BOOKMARK", object.dump()));
        }
        w.next_bookmark = now + bookmark_every;
        continue;
      }
    } else if (w.hang_since == clock::time_point{}) {
      w.hang_since = now;
    } else if (now - w.hang_since >= opts.hang_limit) {
      drop_connection(req);   // a hung stream is dropped as a hung request
      return false;
    }
    auto until = std::min({w.deadline, close_at, now + std::chrono::seconds(1) * 3600});
    if (hung)
      until = std::min(until, w.hang_since + opts.hang_limit);
    else if (w.bookmarks)
      until = std::min(until, w.next_bookmark);
    store.wait(hung ? std::numeric_limits<std::uint64_t>::max() : w.since, wakes, until);
  }
}

} // namespace leasehold
