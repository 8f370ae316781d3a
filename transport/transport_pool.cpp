#include "transport/transport_pool.hpp"

#include <deque>
#include <vector>

#include "leasehold/transports.hpp"
#include "transport/common/thread_name.hpp"

namespace leasehold {

namespace census {
std::atomic<std::int64_t> pools{0}, workers{0}, busy_workers{0}, queued{0}, watch_streams{0};
std::atomic<std::uint64_t> requests{0}, expired{0};
} // namespace census

transport_census current_transport_census() {
  transport_census c;
  c.pools = census::pools.load();
  c.workers = census::workers.load();
  c.busy_workers = census::busy_workers.load();
  c.queued = census::queued.load();
  c.watch_streams = census::watch_streams.load();
  c.requests = census::requests.load();
  c.expired = census::expired.load();
  return c;
}

namespace {

using steady = std::chrono::steady_clock;

/// What a worker answers: the transport's requests without the watch.
using pool_worker_actor = caf::typed_actor<
  caf::replies_to<get_lease_atom, lease_key>::with<lease_reply>,
  caf::replies_to<create_lease_atom, lease>::with<lease_reply>,
  caf::replies_to<update_lease_atom, lease>::with<lease_reply>>;

/// One worker: detached (its client blocks), one request at a time; ends
/// when its dispatcher does.
pool_worker_actor::behavior_type pool_worker(pool_worker_actor::pointer self,
                                             std::shared_ptr<lease_client> client,
                                             std::string thread_name, caf::actor_addr dispatcher) {
  name_this_thread(thread_name.c_str());
  ++census::workers;
  self->attach_functor([] { --census::workers; });
  self->monitor(dispatcher);
  self->set_down_handler([self](caf::down_msg&) { self->quit(); });
  return {
    [client](get_lease_atom, const lease_key& k) { return client->get_lease(k); },
    [client](create_lease_atom, const lease& l) { return client->create_lease(l); },
    [client](update_lease_atom, const lease& l) { return client->update_lease(l); },
  };
}

/// The dispatcher's state: the workers, which of them are idle, the queue.
struct pool_state {
  struct job {
    steady::time_point queued;
    std::function<void(std::size_t worker)> run;   // sends the request to a worker
    std::function<void(steady::duration waited)> expire;   // answers `timeout` unsent
  };

  lease_transport_actor::pointer self;
  transport_pool_options opts;
  std::vector<pool_worker_actor> workers;
  std::vector<std::size_t> idle;   // indexes into workers, used last-in first-out
  std::deque<job> queue;

  /// Runs queued jobs while a worker is idle or can be started.
  void pump() {
    while (!queue.empty()) {
      auto j = std::move(queue.front());
      queue.pop_front();
      --census::queued;
      auto waited = steady::now() - j.queued;
      if (waited > opts.max_wait) {
        ++census::expired;
        j.expire(waited);
        continue;
      }
      if (idle.empty() && workers.size() < opts.workers) {
        workers.push_back(self->spawn<caf::detached>(pool_worker, std::shared_ptr(opts.make_client()),
                                                     opts.thread_name, self->address()));
        idle.push_back(workers.size() - 1);
      }
      if (idle.empty()) {
        queue.push_front(std::move(j));
        ++census::queued;
        return;
      }
      auto w = idle.back();
      idle.pop_back();
      ++census::busy_workers;
      j.run(w);
    }
  }

  void done(std::size_t w) {
    --census::busy_workers;
    ++census::requests;
    idle.push_back(w);
    pump();
  }

  /// Queues one request for a worker; the reply (or the queue's timeout)
  /// goes to the requester through the returned promise.
  template <class Reply, class Atom, class Arg>
  caf::typed_response_promise<Reply> submit(const std::shared_ptr<pool_state>& st, const char* verb,
                                            const lease_key& k, Atom atom, Arg arg) {
    auto rp = self->make_response_promise<Reply>();
    if (!opts.invalid.empty()) {
      rp.deliver(Reply::failure({error_kind::other, 0, verb, "", opts.invalid, 0}));
      return rp;
    }
    job j;
    j.queued = steady::now();
    j.run = [st, rp, atom, arg](std::size_t w) mutable {
      st->self->request(st->workers[w], caf::infinite, atom, std::move(arg))
        .then([st, rp, w](Reply& r) mutable {
                rp.deliver(std::move(r));
                st->done(w);
              },
              [st, rp, w](caf::error& e) mutable {
                rp.deliver(std::move(e));
                st->done(w);
              });
    };
    // The request's path is named only if it expires (built then, not per request).
    j.expire = [this, rp, verb, k](steady::duration waited) mutable {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(waited).count();
      rp.deliver(Reply::failure(
        {error_kind::timeout, 0, verb, opts.where ? opts.where(verb, k) : k.to_string(),
         "not sent: waited " + std::to_string(ms) + "ms for one of the transport's "
           + std::to_string(opts.workers) + " workers (all busy; the limit is "
           + std::to_string(opts.max_wait.count()) + "ms)",
         0}));
    };
    queue.push_back(std::move(j));
    ++census::queued;
    pump();
    return rp;
  }
};

lease_transport_actor::behavior_type dispatcher(lease_transport_actor::pointer self,
                                                transport_pool_options opts) {
  auto st = std::make_shared<pool_state>();
  st->self = self;
  st->opts = std::move(opts);
  ++census::pools;
  // The queued jobs hold `st` (and promises holding the dispatcher), `st`
  // holds the workers: break the cycle, or the workers' threads wait for
  // their destruction forever and so does the actor system.
  self->attach_functor([st] {
    --census::pools;
    census::queued -= static_cast<std::int64_t>(st->queue.size());
    census::busy_workers -= static_cast<std::int64_t>(st->workers.size() - st->idle.size());
    st->queue.clear();
    st->idle.clear();
    st->workers.clear();
  });
  std::function<void(lease_watch_request&)> watch;
  if (st->opts.make_watch && st->opts.invalid.empty())
    watch = st->opts.make_watch(self);
  return {
    [st](get_lease_atom atom, lease_key& k) -> caf::result<lease_reply> {
      return st->submit<lease_reply>(st, "GET", k, atom, k);
    },
    // The key is taken before the lease moves into the request (arguments
    // are evaluated in no set order).
    [st](create_lease_atom atom, lease& l) -> caf::result<lease_reply> {
      lease_key k{l.ns, l.name};
      return st->submit<lease_reply>(st, "POST", k, atom, std::move(l));
    },
    [st](update_lease_atom atom, lease& l) -> caf::result<lease_reply> {
      lease_key k{l.ns, l.name};
      return st->submit<lease_reply>(st, "PUT", k, atom, std::move(l));
    },
    [watch](watch_lease_atom, lease_watch_request& req) {
      if (watch)
        watch(req);
      else if (req.subscriber)
        caf::anon_send(req.subscriber,
                       lease_watch_event{lease_watch_event::kind::down, std::nullopt,
                                         "this transport does not watch"});
    },
  };
}

} // namespace

std::vector<std::string> validate(const connection_config& cfg, const std::string& prefix) {
  std::vector<std::string> errs;
  if (cfg.workers < min_transport_workers || cfg.workers > max_transport_workers)
    errs.push_back(prefix + "workers: must be between " + std::to_string(min_transport_workers)
                   + " and " + std::to_string(max_transport_workers) + " (is "
                   + std::to_string(cfg.workers) + ")");
  return errs;
}

lease_transport_actor spawn_transport_pool(caf::actor_system& sys, transport_pool_options opts) {
  if (opts.invalid.empty()) {
    connection_config c;
    c.workers = opts.workers;
    auto errs = validate(c);
    if (!errs.empty())
      opts.invalid = errs.front();
  }
  return sys.spawn(dispatcher, std::move(opts));
}

} // namespace leasehold
