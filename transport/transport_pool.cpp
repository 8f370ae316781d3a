#include "transport/transport_pool.hpp"

#include <algorithm>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "leasehold/transports.hpp"
#include "transport/thread_name.hpp"

namespace leasehold {

namespace census {
std::atomic<std::int64_t> pools{0}, workers{0}, busy_workers{0}, queued{0}, watch_streams{0};
std::atomic<std::uint64_t> requests{0}, expired{0}, batches{0}, batched{0}, echoes_dropped{0};
} // namespace census

namespace {

/// A batch served one request at a time (a client without batches).
template <class T, class Call>
std::vector<lease_reply> one_by_one(const std::vector<T>& xs, Call&& call) {
  std::vector<lease_reply> out;
  out.reserve(xs.size());
  for (auto& x : xs)
    out.push_back(call(x));
  return out;
}

} // namespace

std::vector<lease_reply> lease_client::get_leases(const std::vector<lease_key>& ks) {
  return one_by_one(ks, [this](const lease_key& k) { return get_lease(k); });
}

std::vector<lease_reply> lease_client::create_leases(const std::vector<lease>& ls) {
  return one_by_one(ls, [this](const lease& l) { return create_lease(l); });
}

std::vector<lease_reply> lease_client::renew_leases(const std::vector<lease>& ls) {
  return one_by_one(ls, [this](const lease& l) { return update_lease(l); });
}

std::vector<lease_reply> lease_client::write_leases(const std::vector<lease>& ls) {
  return one_by_one(ls, [this](const lease& l) { return update_lease(l); });
}

leases_reply lease_client::list_leases(const std::string& ns, const std::string& selector) {
  return leases_reply::failure({error_kind::invalid, 0, "GET", ns + "?labelSelector=" + selector,
                                "this backend lists no leases", 0});
}

transport_census current_transport_census() {
  transport_census c;
  c.pools = census::pools.load();
  c.workers = census::workers.load();
  c.busy_workers = census::busy_workers.load();
  c.queued = census::queued.load();
  c.watch_streams = census::watch_streams.load();
  c.requests = census::requests.load();
  c.expired = census::expired.load();
  c.batches = census::batches.load();
  c.batched = census::batched.load();
  c.echoes_dropped = census::echoes_dropped.load();
  return c;
}

namespace {

using steady = std::chrono::steady_clock;

using run_atom = caf::atom_constant<caf::atom("lh_prun")>;

/// What a request asks of a worker's client.
enum class pool_op { get, create, update, write, list };   // update: a renew; write: any other update; list: key.name is the selector

/// How many queued requests a worker looks at for a batch (the oldest).
constexpr std::size_t batch_scan = 4 * max_batch_requests;

/// One request for a worker, which answers the requester itself: one hop
/// and one wake-up of the dispatcher less per request.
struct pool_job {
  steady::time_point queued;
  pool_op op = pool_op::get;
  bool batchable = false;     // a read, a create or a renew: may go with others of its op
  bool release = false;       // an update naming no holder: waits its turn (see expired())
  const char* verb = "";
  lease_key key;
  lease written;              // create, update: the lease to write
  caf::strong_actor_ptr to;   // the requester (null: an anonymous send, no answer)
  caf::message_id mid;        // its request

  /// Whether `other` may go in one batch call with this job.
  bool batches_with(const pool_job& other) const {
    return batchable && other.batchable && op == other.op;
  }
  /// This request alone.
  lease_reply call(lease_client& c) const {
    return op == pool_op::get      ? c.get_lease(key)
           : op == pool_op::create ? c.create_lease(written)
                                   : c.update_lease(written);   // a renew or a write
  }
};

/// The jobs the dispatcher queues and the workers take (docs/design.md,
/// "The shape"). Locked briefly by both, never across a request.
struct pool_queue {
  std::mutex mx;
  std::deque<pool_job> jobs;
  std::vector<std::optional<pool_job>> handed;   // per worker: its next job
  std::vector<std::size_t> idle;                 // workers waiting, last-in first-out
  std::atomic<bool> closed{false};               // the dispatcher ended: releases left only
  steady::time_point closed_at{};                // set before closed
  transport_pool_options opts;                   // max_wait, workers, where

  /// Answers `j`'s requester with `r` (the answer is sent by `from`).
  template <class Reply>
  static void answer(pool_job& j, Reply r, const caf::strong_actor_ptr& from) {
    if (j.to && j.mid.is_request())
      j.to->enqueue(from, j.mid.response_id(), caf::make_message(std::move(r)), nullptr);
  }

  /// A job that waited longer than max_wait: answered `timeout` unsent. Not a
  /// release: docs/safety.md, "Other bounds in the code".
  bool expired(pool_job& j, const caf::strong_actor_ptr& from) {
    auto now = steady::now();
    if (j.release && !closed)
      return false;
    auto limit = j.release ? opts.release_drain : opts.max_wait;
    auto waited = now - (j.release ? std::max(j.queued, closed_at) : j.queued);
    if (waited <= limit)
      return false;
    ++census::expired;
    auto ms = std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(waited).count());
    auto why = j.release ? "not sent: the transport ended " + ms + "ms ago (it sends the releases "
                             "left for " + std::to_string(limit.count()) + "ms)"
                         : "not sent: waited " + ms + "ms for one of the transport's "
                             + std::to_string(opts.workers) + " workers (all busy; the limit is "
                             + std::to_string(limit.count()) + "ms)";
    api_error e{error_kind::timeout, 0, j.verb,
                opts.where && j.op != pool_op::list ? opts.where(j.verb, j.key) : j.key.to_string(), why, 0};
    if (j.op == pool_op::list)
      answer(j, leases_reply::failure(std::move(e)), from);
    else
      answer(j, lease_reply::failure(std::move(e)), from);
    return true;
  }

  /// Worker `w`'s next jobs: the one handed to it, else the queue's oldest,
  /// with its batch. None: `w` is idle from now on.
  std::vector<pool_job> next(std::size_t w) {
    std::lock_guard<std::mutex> g(mx);
    std::vector<pool_job> out;
    if (handed[w]) {
      out.push_back(std::move(*handed[w]));
      handed[w].reset();
    } else if (!jobs.empty()) {
      out.push_back(std::move(jobs.front()));
      jobs.pop_front();
      --census::queued;
    } else {
      if (!closed) {
        idle.push_back(w);
        --census::busy_workers;
      }
      return out;
    }
    if (!out.front().batchable || jobs.empty())
      return out;
    std::vector<pool_job> others;   // looked at, not taken: put back in order
    for (std::size_t seen = 0;
         seen < batch_scan && !jobs.empty() && out.size() < max_batch_requests; ++seen) {
      auto& j = jobs.front();
      if (out.front().batches_with(j)) {
        out.push_back(std::move(j));
        --census::queued;
      } else {
        others.push_back(std::move(j));
      }
      jobs.pop_front();
    }
    for (auto i = others.rbegin(); i != others.rend(); ++i)
      jobs.push_front(std::move(*i));
    return out;
  }

  /// The dispatcher ended: all but releases is dropped (its requesters'
  /// deadlines answer them); the workers send the releases left, then end.
  void close() {
    std::lock_guard<std::mutex> g(mx);
    census::busy_workers -= static_cast<std::int64_t>(handed.size() - idle.size());
    auto before = jobs.size();
    jobs.erase(std::remove_if(jobs.begin(), jobs.end(), [](const pool_job& j) { return !j.release; }),
               jobs.end());
    census::queued -= static_cast<std::int64_t>(before - jobs.size());
    for (auto& h : handed)
      if (h && !h->release)
        h.reset();
    closed_at = steady::now();
    closed = true;
  }
};

/// Serves `batch` (jobs of one kind, none expired) with `client`: a lone
/// job by its own call, more by one batch call; then answers each.
void serve(std::vector<pool_job>& batch, lease_client& client, const caf::strong_actor_ptr& me) {
  if (batch.front().op == pool_op::list) {   // never batched
    auto& j = batch.front();
    ++census::requests;
    pool_queue::answer(j, client.list_leases(j.key.ns, j.key.name), me);
    return;
  }
  if (batch.size() == 1) {
    auto r = batch.front().call(client);
    ++census::requests;
    pool_queue::answer(batch.front(), std::move(r), me);
    return;
  }
  std::vector<lease_reply> replies;
  if (batch.front().op == pool_op::get) {
    std::vector<lease_key> keys;
    for (auto& j : batch)
      keys.push_back(j.key);
    replies = client.get_leases(keys);
  } else {
    std::vector<lease> leases;
    for (auto& j : batch)
      leases.push_back(std::move(j.written));
    replies = batch.front().op == pool_op::create  ? client.create_leases(leases)
              : batch.front().op == pool_op::write ? client.write_leases(leases)
                                                   : client.renew_leases(leases);
  }
  ++census::batches;
  census::batched += batch.size();
  census::requests += batch.size();
  for (std::size_t i = 0; i < batch.size(); ++i)
    pool_queue::answer(batch[i],
                       i < replies.size()
                         ? std::move(replies[i])
                         : lease_reply::failure({error_kind::other, 0, batch[i].verb, batch[i].key.to_string(),
                                                 "internal error: a batch of " + std::to_string(batch.size())
                                                   + " requests got " + std::to_string(replies.size())
                                                   + " replies",
                                                 0}),
                       me);
}

/// What a worker is sent: "a job was handed to you".
using pool_worker_actor = caf::typed_actor<caf::reacts_to<run_atom>>;

/// One worker: detached (its client blocks), one request at a time, until
/// the queue is empty; when its dispatcher ends, the releases left.
pool_worker_actor::behavior_type pool_worker(pool_worker_actor::pointer self,
                                             std::shared_ptr<lease_client> client,
                                             std::shared_ptr<pool_queue> q, std::size_t w,
                                             caf::actor_addr dispatcher) {
  name_this_thread(q->opts.thread_name.c_str());
  ++census::workers;
  self->attach_functor([] { --census::workers; });
  self->monitor(dispatcher);
  auto work = [self, client, q, w] {
    auto me = self->ctrl();
    for (auto batch = q->next(w); !batch.empty(); batch = q->next(w)) {
      batch.erase(std::remove_if(batch.begin(), batch.end(),
                                 [&](pool_job& j) { return q->expired(j, me); }),
                  batch.end());
      if (!batch.empty())
        serve(batch, *client, me);
    }
  };
  self->set_down_handler([self, work](caf::down_msg&) {
    work();
    self->quit();
  });
  return {
    [work](run_atom) { work(); },
  };
}

/// The dispatcher's state: the workers and the queue they share.
struct pool_state {
  lease_transport_actor::pointer self;
  std::shared_ptr<pool_queue> q = std::make_shared<pool_queue>();
  std::vector<pool_worker_actor> workers;

  const transport_pool_options& opts() const { return q->opts; }

  /// Queues one request, handed to an idle or new worker if any; the
  /// dispatcher answers nothing itself.
  template <class Reply = lease_reply>
  caf::result<Reply> submit(const char* verb, pool_op op, bool batchable, const lease_key& k,
                            lease written = {}, bool release = false) {
    if (!opts().invalid.empty())
      return Reply::failure({error_kind::other, 0, verb, "", opts().invalid, 0});
    pool_job j;
    j.queued = steady::now();
    j.op = op;
    j.batchable = batchable;
    j.release = release;
    j.verb = verb;
    j.key = k;
    j.written = std::move(written);
    j.to = self->current_sender();
    j.mid = self->current_message_id();
    std::optional<std::size_t> wake;
    {
      std::lock_guard<std::mutex> g(q->mx);
      if (q->idle.empty() && workers.size() < opts().workers) {
        q->handed.emplace_back();
        workers.push_back(self->spawn<caf::detached>(pool_worker, std::shared_ptr(opts().make_client()),
                                                     q, workers.size(), self->address()));
        q->idle.push_back(workers.size() - 1);
      }
      if (q->idle.empty()) {
        q->jobs.push_back(std::move(j));
        ++census::queued;
      } else {
        wake = q->idle.back();
        q->idle.pop_back();
        ++census::busy_workers;
        q->handed[*wake] = std::move(j);
      }
    }
    if (wake)
      self->send(workers[*wake], run_atom::value);
    return caf::delegated<Reply>{};
  }
};

lease_transport_actor::behavior_type dispatcher(lease_transport_actor::pointer self,
                                                transport_pool_options opts) {
  auto st = std::make_shared<pool_state>();
  st->self = self;
  st->q->opts = std::move(opts);
  ++census::pools;
  // Ending the dispatcher must end the workers (they monitor it), or the
  // actor system waits for them forever.
  self->attach_functor([st] {
    --census::pools;
    st->q->close();
    st->workers.clear();
  });
  shared_watches watch;
  if (st->opts().make_watch && st->opts().invalid.empty())
    watch = st->opts().make_watch(self);
  return {
    [st](get_lease_atom, lease_key& k) -> caf::result<lease_reply> {
      return st->submit("GET", pool_op::get, true, k);
    },
    [st](create_lease_atom, lease& l) -> caf::result<lease_reply> {
      lease_key k{l.ns, l.name};
      return st->submit("POST", pool_op::create, true, k, std::move(l));
    },
    [st, self, leave = watch.leave](update_lease_atom, lease& l) -> caf::result<lease_reply> {
      lease_key k{l.ns, l.name};
      bool renew = l.renew_max_age > std::chrono::nanoseconds{0} && !l.spec.holder_identity.empty();
      bool release = l.spec.holder_identity.empty();
      if (renew)
        return st->submit("PUT", pool_op::update, true, k, std::move(l));
      if (release && leave)
        // A releasing elector needs no stream: a SIGTERMed process closes
        // its watches at once instead of streaming back its successors' takes.
        leave(caf::actor_cast<caf::actor_addr>(self->current_sender()));
      return st->submit("PUT", pool_op::write, st->opts().batch_writes, k, std::move(l), release);
    },
    [st](list_leases_atom, std::string& ns, std::string& selector) -> caf::result<leases_reply> {
      return st->submit<leases_reply>("GET", pool_op::list, false, {ns, selector});
    },
    [join = watch.join](watch_lease_atom, lease_watch_request& req) {
      if (join)
        join(req);
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
