// The transport's pool of workers (transport/transport_pool.hpp) against a
// loopback server that counts the requests it is serving at once: requests
// run concurrently up to the pool size and no further, a hung worker stalls
// only its own request, each reply is its own request's, a request that
// waited longer than max_wait in the queue is answered `timeout` unsent, an
// invalid pool size is an error naming the field, and queued reads and
// renews go to the client in batches (pipelined on one connection for
// Kubernetes; one txn on etcd), each requester answered with its own reply.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/support/lease_replies.hpp"
#include "tests/unit/test_support.hpp"
#include "cmd/leasehold-apiserver/connection.hpp"
#include "leasehold/transports.hpp"
#include "transport/kube/kube_client.hpp"
#include "transport/transport_pool.hpp"

using namespace leasehold;
using namespace std::chrono_literals;

namespace {

/// A Kubernetes API that answers GET of any Lease after `hold` (a Lease
/// named "hung" only once released), and counts the requests in progress.
/// Its server answers pipelined requests (a worker's batch), as
/// leasehold-apiserver's does.
struct counting_server {
  test::loopback_server<apiserver::plain_server> server;
  std::atomic<int> in_flight{0};
  std::atomic<int> max_in_flight{0};
  std::atomic<int> served{0};
  std::chrono::milliseconds hold{0};
  std::mutex mx;
  std::condition_variable cv;
  bool released = false;
  std::atomic<bool> hung_waiting{false};

  counting_server() {
    server.http().new_task_queue = [] { return new httplib::ThreadPool(16); };
    server.http().Get(leases_path("default") + "/(.+)", [this](const httplib::Request& req,
                                                              httplib::Response& res) {
      auto now = ++in_flight;
      int seen = max_in_flight.load();
      while (now > seen && !max_in_flight.compare_exchange_weak(seen, now)) {
      }
      auto name = req.matches[1].str();
      if (name == "hung") {
        std::unique_lock<std::mutex> g(mx);
        hung_waiting = true;
        cv.wait_for(g, 3s, [this] { return released; });   // bounded
        hung_waiting = false;
      } else if (name == "absent") {
        --in_flight;
        res.status = 404;
        res.set_content(test::fixture("status-notfound.json"), "application/json");
        return;
      } else {
        std::this_thread::sleep_for(hold);
      }
      --in_flight;
      ++served;
      res.set_content(test::lease_body(name, "7", "pod-" + name, 1), "application/json");
    });
    server.http().Put(leases_path("default") + "/(.+)", [](const httplib::Request&,
                                                          httplib::Response& res) {
      res.status = 409;
      res.set_content(test::fixture("status-conflict.json"), "application/json");
    });
    server.start();
  }
  ~counting_server() { release(); }

  void release() {
    {
      std::lock_guard<std::mutex> g(mx);
      released = true;
    }
    cv.notify_all();
  }
};

connection_config pool_config(const std::string& url, std::size_t workers) {
  auto cfg = test::fast_config(url);
  cfg.read_timeout = 4s;   // longer than any handler above: no request times out
  cfg.workers = workers;
  return cfg;
}

/// A transport of `workers` workers on a counting_server; ended (the
/// server's hung request released first) at the end of the test.
struct pool_under_test {
  counting_server api;
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  lease_transport_actor t;
  explicit pool_under_test(std::size_t workers, std::chrono::milliseconds hold = 0ms) {
    api.hold = hold;
    t = spawn_http_backend(sys, pool_config(api.server.url(), workers)).transport;
  }
  ~pool_under_test() {
    api.release();
    caf::anon_send_exit(t, caf::exit_reason::user_shutdown);
  }
};

/// Sends every GET at once (all are in the transport before the first
/// reply is awaited); the replies by lease name.
std::map<std::string, lease_reply> get_all(caf::actor_system& sys, const lease_transport_actor& t,
                                           const std::vector<std::string>& names) {
  caf::scoped_actor self{sys};
  using handle = decltype(self->request(t, 10s, get_lease_atom::value, lease_key{}));
  std::vector<std::pair<std::string, handle>> pending;
  for (auto& n : names)
    pending.emplace_back(n, self->request(t, 10s, get_lease_atom::value, lease_key{"default", n}));
  return test::receive_replies(pending);
}

} // namespace

TEST_CASE("a transport runs requests concurrently up to its pool size and no further") {
  auto before = current_transport_census();
  pool_under_test p(3, 150ms);   // long enough for every worker's request to overlap
  auto& [api, cfg, sys, t] = p;
  std::vector<std::string> names;
  for (int i = 0; i < 9; ++i)
    names.push_back("lease-" + std::to_string(i));
  auto replies = get_all(sys, t, names);
  REQUIRE(replies.size() == names.size());
  for (auto& [name, r] : replies) {
    REQUIRE_MESSAGE(r.ok(), name << ": " << r.error.describe());
    CHECK(r.value->spec.holder_identity == "pod-" + name);   // its own reply
  }
  CHECK(api.served == 9);
  CHECK(api.max_in_flight == 3);   // the server saw three at once, never four
  auto during = current_transport_census();
  CHECK(during.workers - before.workers == 3);   // one thread and connection each
  CHECK(during.pools - before.pools == 1);
}

TEST_CASE("a hung worker does not stall the requests on the other workers") {
  pool_under_test p(2);
  auto& [api, cfg, sys, t] = p;
  caf::scoped_actor self{sys};
  auto hung = self->request(t, 10s, get_lease_atom::value, lease_key{"default", "hung"});
  for (int i = 0; i < 100 && !api.hung_waiting; ++i)
    std::this_thread::sleep_for(10ms);
  REQUIRE(api.hung_waiting);
  // Five requests, one after the other, each answered while the hung one
  // still waits at the server.
  for (int i = 0; i < 5; ++i) {
    auto name = "quick-" + std::to_string(i);
    auto got = get_all(sys, t, {name});
    REQUIRE_MESSAGE(got[name].ok(), got[name].error.describe());
    CHECK(got[name].value->spec.holder_identity == "pod-" + name);
    CHECK(api.hung_waiting);
  }
  api.release();
  lease_reply r;
  hung.receive([&](lease_reply& x) { r = std::move(x); }, [](caf::error&) {});
  CHECK(r.ok());
}

TEST_CASE("each reply of a transport's pool is its own request's, errors included") {
  pool_under_test p(2);
  auto& [api, cfg, sys, t] = p;
  auto replies = get_all(sys, t, {"absent", "a", "absent-not", "b"});
  CHECK(replies["absent"].kind() == error_kind::not_found);
  CHECK(replies["absent"].error.path == lease_path({"default", "absent"}));
  for (auto* n : {"a", "absent-not", "b"}) {
    REQUIRE_MESSAGE(replies[n].ok(), n);
    CHECK(replies[n].value->spec.holder_identity == std::string("pod-") + n);
  }
  caf::scoped_actor self{sys};
  lease l = *replies["a"].value;
  lease_reply put;
  self->request(t, 10s, update_lease_atom::value, l)
    .receive([&](lease_reply& r) { put = std::move(r); }, [](caf::error&) {});
  CHECK(put.kind() == error_kind::conflict);
}

TEST_CASE("a transport with an invalid pool size answers every request with an error naming it") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto bad = pool_config("http://127.0.0.1:" + std::to_string(test::closed_port()), 0);
  CHECK(validate(bad) == std::vector<std::string>{"workers: must be between 1 and 64 (is 0)"});
  bad.workers = 65;
  CHECK(validate(bad, "etcd.") == std::vector<std::string>{"etcd.workers: must be between 1 and 64 (is 65)"});
  auto t = spawn_http_backend(sys, bad).transport;
  auto got = get_all(sys, t, {"x"});
  CHECK(got["x"].kind() == error_kind::other);
  CHECK(got["x"].error.reason == "workers: must be between 1 and 64 (is 65)");
  caf::anon_send_exit(t, caf::exit_reason::user_shutdown);
}

namespace {

/// A client whose GET takes `delay`; counts its calls.
struct slow_client : lease_client {
  std::chrono::milliseconds delay;
  std::shared_ptr<std::atomic<int>> calls;
  slow_client(std::chrono::milliseconds d, std::shared_ptr<std::atomic<int>> c)
    : delay(d), calls(std::move(c)) {}
  lease_reply get_lease(const lease_key& k) override {
    ++*calls;
    std::this_thread::sleep_for(delay);
    lease l;
    l.ns = k.ns;
    l.name = k.name;
    return lease_reply::success(l);
  }
  lease_reply create_lease(const lease& l) override { return lease_reply::success(l); }
  lease_reply update_lease(const lease& l) override { return lease_reply::success(l); }
};

/// `workers` slow_clients of `delay` a request.
transport_pool_options slow_workers(std::size_t workers, std::chrono::milliseconds delay,
                                    std::shared_ptr<std::atomic<int>> calls) {
  transport_pool_options o;
  o.workers = workers;
  o.make_client = [calls, delay] { return std::make_unique<slow_client>(delay, calls); };
  return o;
}

/// One worker that takes 300 ms a request, a 50 ms queue limit, and the
/// backend's name of a request: "VERB ns/name".
transport_pool_options one_slow_worker(std::shared_ptr<std::atomic<int>> calls) {
  auto o = slow_workers(1, 300ms, std::move(calls));
  o.max_wait = 50ms;
  o.where = [](const std::string& verb, const lease_key& k) { return verb + " " + k.to_string(); };
  return o;
}

} // namespace

TEST_CASE("a request that waited longer than max_wait for a worker is answered timeout, unsent") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto t = spawn_transport_pool(sys, one_slow_worker(calls));
  // The second is sent once the first is being served (two reads queued
  // together would go in one batch).
  caf::scoped_actor self{sys};
  auto first = self->request(t, 10s, get_lease_atom::value, lease_key{"default", "first"});
  for (int i = 0; i < 200 && *calls == 0; ++i)
    std::this_thread::sleep_for(5ms);
  REQUIRE(*calls == 1);
  auto replies = get_all(sys, t, {"second"});
  first.receive([&](lease_reply& r) { replies["first"] = std::move(r); }, [](caf::error&) {});
  CHECK(replies["first"].ok());
  CHECK(replies["second"].kind() == error_kind::timeout);
  CHECK(replies["second"].error.verb == "GET");
  CHECK(replies["second"].error.path == "GET default/second");   // named by the backend
  CHECK(replies["second"].error.reason.find("not sent") == 0);
  CHECK(*calls == 1);   // the second never reached the client
  caf::anon_send_exit(t, caf::exit_reason::user_shutdown);
}

TEST_CASE("a PUT or POST that waited longer than max_wait names its lease in the timeout") {
  // Regression: the dispatcher built the lease's key from a lease
  // it had already moved into the request (arguments evaluated right to
  // left), so an expired write named ".../namespaces//leases/".
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto t = spawn_transport_pool(sys, one_slow_worker(calls));
  caf::scoped_actor self{sys};
  lease busy, put, post;
  busy.ns = put.ns = post.ns = "default";
  busy.name = "busy";
  put.name = "put-me";
  put.spec.holder_identity = "me";   // not a release: those wait their turn
  post.name = "post-me";
  auto first = self->request(t, 10s, get_lease_atom::value, lease_key{"default", "busy"});
  auto updated = self->request(t, 10s, update_lease_atom::value, put);
  auto created = self->request(t, 10s, create_lease_atom::value, post);
  std::map<std::string, lease_reply> got;
  auto keep = [&](const char* as) {
    return [&got, as](lease_reply& r) { got[as] = std::move(r); };
  };
  auto lost = [](caf::error&) {};
  first.receive(keep("GET"), lost);
  updated.receive(keep("PUT"), lost);
  created.receive(keep("POST"), lost);
  REQUIRE(got.size() == 3);
  CHECK(got["GET"].ok());
  CHECK(got["PUT"].kind() == error_kind::timeout);
  CHECK(got["PUT"].error.path == "PUT default/put-me");
  CHECK(got["POST"].kind() == error_kind::timeout);
  CHECK(got["POST"].error.path == "POST default/post-me");
  caf::anon_send_exit(t, caf::exit_reason::user_shutdown);
}

TEST_CASE("a transport ended with requests in flight and queued lets its actor system end") {
  // Regression: the queued requests held the pool's state, the state held
  // the workers, so their threads and ~actor_system waited forever.
  auto calls = std::make_shared<std::atomic<int>>(0);
  std::promise<void> ended;
  auto done = ended.get_future();
  std::thread([&ended, calls] {
    {
      caf::actor_system_config cfg;
      caf::actor_system sys{cfg};
      auto t = spawn_transport_pool(sys, slow_workers(2, 100ms, calls));
      caf::scoped_actor self{sys};
      for (int i = 0; i < 6; ++i)   // requests (replies awaited), never received
        self->request(t, 10s, get_lease_atom::value, lease_key{"default", "l" + std::to_string(i)});
      for (int i = 0; i < 100 && *calls < 2; ++i)
        std::this_thread::sleep_for(10ms);
      caf::anon_send_exit(t, caf::exit_reason::user_shutdown);
    }
    ended.set_value();
  }).detach();
  bool finished = done.wait_for(10s) == std::future_status::ready;
  CHECK(*calls >= 2);
  CHECK_MESSAGE(finished, "~actor_system still waiting for the pool's workers after 10 s");
  if (!finished) {
    std::fprintf(stderr, "FAILED: ~actor_system still waiting for the pool's workers after 10 s\n");
    std::_Exit(1);   // the stuck thread cannot be joined
  }
}

TEST_CASE("a worker answers the requester itself and takes the queued requests after its own") {
  // CPU per renewal: the reply used to go worker -> dispatcher
  // -> requester, and each queued request dispatcher -> worker: a hop and a
  // wake-up of the dispatcher each way per request.
  auto calls = std::make_shared<std::atomic<int>>(0);
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto t = spawn_transport_pool(sys, slow_workers(1, 20ms, calls));
  caf::scoped_actor self{sys};
  using handle = decltype(self->request(t, 10s, get_lease_atom::value, lease_key{}));
  std::vector<handle> pending;
  for (int i = 0; i < 5; ++i)   // all in the transport before the first reply
    pending.push_back(self->request(t, 10s, get_lease_atom::value, lease_key{"default", "l" + std::to_string(i)}));
  std::vector<caf::actor_addr> from;
  for (int i = 0; i < 5; ++i)
    pending[i].receive(
      [&](lease_reply& r) {
        CHECK(r.ok());
        CHECK(r.value->name == "l" + std::to_string(i));   // its own reply
        from.push_back(caf::actor_cast<caf::actor_addr>(self->current_sender()));
      },
      [&](caf::error& e) { FAIL("request " << i << ": " << sys.render(e)); });
  REQUIRE(from.size() == 5);
  CHECK(*calls == 5);
  for (auto& a : from) {
    CHECK(a != t.address());      // not relayed by the dispatcher
    CHECK(a == from.front());     // the one worker, request after request
  }
  caf::anon_send_exit(t, caf::exit_reason::user_shutdown);
}

namespace {

/// A client that records how it was called (one by one or in batches) and
/// answers each request with a record naming its lease: holder "read-<name>"
/// for a read, "renew-<name>" for a renew. Its first call waits for `open`
/// (bounded), so requests sent meanwhile queue up: a backlog. `fail`: every
/// batch answers each request with an error naming its lease.
struct recording_client : lease_client {
  struct log {
    std::mutex mx;
    std::condition_variable cv;
    bool open = false;
    bool fail = false;
    std::atomic<bool> first_waiting{false};
    std::vector<std::string> calls;   // "get x", "put x", "post x", "gets 5", "renews 4"
    void add(std::string c) {
      std::lock_guard<std::mutex> g(mx);
      calls.push_back(std::move(c));
    }
    void gate() {
      std::unique_lock<std::mutex> g(mx);
      if (first_waiting.exchange(true))
        return;
      cv.wait_for(g, 5s, [this] { return open; });   // bounded
    }
    void release() {
      {
        std::lock_guard<std::mutex> g(mx);
        open = true;
      }
      cv.notify_all();
    }
    std::vector<std::string> seen() {
      std::lock_guard<std::mutex> g(mx);
      return calls;
    }
  };
  std::shared_ptr<log> l;
  explicit recording_client(std::shared_ptr<log> lg) : l(std::move(lg)) {}

  static lease_reply named(const lease_key& k, const std::string& holder) {
    lease out;
    out.ns = k.ns;
    out.name = k.name;
    out.spec.holder_identity = holder + "-" + k.name;
    return lease_reply::success(out);
  }
  lease_reply get_lease(const lease_key& k) override {
    l->gate();
    l->add("get " + k.name);
    return named(k, "read");
  }
  lease_reply create_lease(const lease& x) override {
    l->gate();
    l->add("post " + x.name);
    return lease_reply::success(x);
  }
  lease_reply update_lease(const lease& x) override {
    l->gate();
    l->add("put " + x.name);
    return named(x.key(), x.spec.holder_identity.empty() ? "released" : "renew");
  }
  std::vector<lease_reply> get_leases(const std::vector<lease_key>& ks) override {
    l->gate();
    l->add("gets " + std::to_string(ks.size()));
    std::vector<lease_reply> out;
    for (auto& k : ks)
      out.push_back(l->fail ? lease_reply::failure({error_kind::timeout, 0, "POST",
                                                    "/v3/kv/txn (range of " + k.name + ")",
                                                    "read timed out", 0})
                            : named(k, "read"));
    return out;
  }
  std::vector<lease_reply> create_leases(const std::vector<lease>& ls) override {
    l->gate();
    l->add("posts " + std::to_string(ls.size()));
    std::vector<lease_reply> out;
    for (auto& x : ls)
      out.push_back(lease_reply::success(x));
    return out;
  }
  std::vector<lease_reply> renew_leases(const std::vector<lease>& ls) override {
    l->gate();
    l->add("renews " + std::to_string(ls.size()));
    std::vector<lease_reply> out;
    for (auto& x : ls)
      out.push_back(named(x.key(), "renew"));
    return out;
  }
  std::vector<lease_reply> write_leases(const std::vector<lease>& ls) override {
    l->gate();
    l->add("writes " + std::to_string(ls.size()));
    std::vector<lease_reply> out;
    for (auto& x : ls)
      out.push_back(named(x.key(), x.spec.holder_identity.empty() ? "released" : "taken"));
    return out;
  }
};

/// One recording worker (max_wait `wait`).
transport_pool_options one_recording_worker(std::shared_ptr<recording_client::log> lg,
                                            std::chrono::milliseconds wait = 10s) {
  transport_pool_options o;
  o.workers = 1;
  o.max_wait = wait;
  o.where = [](const std::string& verb, const lease_key& k) { return verb + " " + k.to_string(); };
  o.make_client = [lg] { return std::make_unique<recording_client>(lg); };
  return o;
}

/// A renew as the elector sends it (renew_max_age set), of ns1/`name`.
lease renew_of(const std::string& name, const std::string& holder = "me") {
  lease l;
  l.ns = "default";
  l.name = name;
  l.spec.holder_identity = holder;
  l.renew_max_age = 1s;
  return l;
}

using reply_handle = decltype(std::declval<caf::scoped_actor&>()->request(
  std::declval<lease_transport_actor&>(), caf::timespan{}, get_lease_atom::value, lease_key{}));

/// Waits (bounded) until the recording worker's first call waits at its gate.
bool first_call_waiting(recording_client::log& lg) {
  for (int i = 0; i < 200 && !lg.first_waiting; ++i)
    std::this_thread::sleep_for(10ms);
  return lg.first_waiting;
}

/// Waits (bounded) until `n` requests wait in the queue of the pools
/// (this test's only one): the dispatcher queues them after the test sent
/// them.
bool queued(std::int64_t n) {
  for (int i = 0; i < 500 && current_transport_census().queued < n; ++i)
    std::this_thread::sleep_for(10ms);
  return current_transport_census().queued == n;
}

/// Once `n` requests wait behind the recording worker's first call: lets
/// it go on, and every reply of `pending`, each its own requester's (by
/// name) and successful.
std::map<std::string, lease_reply> own_replies(recording_client::log& lg,
                                               std::vector<std::pair<std::string, reply_handle>>& pending,
                                               std::int64_t n) {
  REQUIRE(queued(n));
  lg.release();
  auto got = test::receive_replies(pending);
  REQUIRE(got.size() == pending.size());
  for (auto& [name, r] : got) {
    REQUIRE_MESSAGE(r.ok(), name << ": " << r.error.describe());
    CHECK(r.value->name == name);   // its own reply
  }
  return got;
}

} // namespace

TEST_CASE("queued reads, creates and renews go in batches of one kind, each requester answered with its own reply") {
  auto lg = std::make_shared<recording_client::log>();
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto before = current_transport_census();
  auto t = spawn_transport_pool(sys, one_recording_worker(lg));
  caf::scoped_actor self{sys};
  std::vector<std::pair<std::string, reply_handle>> pending;
  pending.emplace_back("busy", self->request(t, 10s, get_lease_atom::value, lease_key{"default", "busy"}));
  REQUIRE(first_call_waiting(*lg));
  // The backlog, kinds interleaved: reads r0-r4, renews n0-n3, a release,
  // a create, and an acquisition (an update without renew_max_age).
  lease released = renew_of("rel", "");
  lease created = renew_of("new");
  lease acquired = renew_of("acq");
  acquired.renew_max_age = {};
  for (int i = 0; i < 5; ++i) {
    auto r = "r" + std::to_string(i);
    pending.emplace_back(r, self->request(t, 10s, get_lease_atom::value, lease_key{"default", r}));
    if (i < 4) {
      auto n = "n" + std::to_string(i);
      pending.emplace_back(n, self->request(t, 10s, update_lease_atom::value, renew_of(n)));
    }
    if (i == 1)
      pending.emplace_back("rel", self->request(t, 10s, update_lease_atom::value, released));
    if (i == 2)
      pending.emplace_back("new", self->request(t, 10s, create_lease_atom::value, created));
    if (i == 4)
      pending.emplace_back("new2", self->request(t, 10s, create_lease_atom::value, renew_of("new2")));
    if (i == 3)
      pending.emplace_back("acq", self->request(t, 10s, update_lease_atom::value, acquired));
  }
  auto got = own_replies(*lg, pending, 13);
  for (int i = 0; i < 5; ++i)
    CHECK(got["r" + std::to_string(i)].value->spec.holder_identity == "read-r" + std::to_string(i));
  for (int i = 0; i < 4; ++i)
    CHECK(got["n" + std::to_string(i)].value->spec.holder_identity == "renew-n" + std::to_string(i));
  CHECK(got["rel"].value->spec.holder_identity == "released-rel");
  // The busy read alone; the 5 queued reads in one batch, the 4 renews in
  // another, the 2 creates in a third; the release and the acquisition
  // one by one, in their order.
  auto calls = lg->seen();
  std::string seen;
  for (auto& c : calls)
    seen += c + "; ";
  CHECK_MESSAGE((calls == std::vector<std::string>{"get busy", "gets 5", "renews 4", "put rel", "posts 2", "put acq"}), seen);
  auto after = current_transport_census();
  CHECK(after.batches - before.batches == 3);
  CHECK(after.batched - before.batched == 11);
  caf::anon_send_exit(t, caf::exit_reason::user_shutdown);
}

TEST_CASE("queued releases and new terms go in batches of writes where the client sends them as "
          "one (etcd: batch_writes), never with renews; each requester answered with its own reply") {
  // Regression (SIGTERM of 10,000 leases on etcd): a process's
  // releases at shutdown and a follower's takeover of them went one by one,
  // three or four requests per key.
  auto lg = std::make_shared<recording_client::log>();
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto opts = one_recording_worker(lg);
  opts.batch_writes = true;
  auto t = spawn_transport_pool(sys, opts);
  caf::scoped_actor self{sys};
  std::vector<std::pair<std::string, reply_handle>> pending;
  pending.emplace_back("busy", self->request(t, 10s, get_lease_atom::value, lease_key{"default", "busy"}));
  REQUIRE(first_call_waiting(*lg));
  // The backlog: releases rel0-rel2 and acquisitions acq0-acq1 (updates
  // without renew_max_age), renews n0-n1 among them.
  for (int i = 0; i < 3; ++i) {
    auto r = "rel" + std::to_string(i);
    pending.emplace_back(r, self->request(t, 10s, update_lease_atom::value, renew_of(r, "")));
    if (i < 2) {
      auto n = "n" + std::to_string(i);
      pending.emplace_back(n, self->request(t, 10s, update_lease_atom::value, renew_of(n)));
      auto acq = renew_of("acq" + std::to_string(i));
      acq.renew_max_age = {};
      pending.emplace_back(acq.name, self->request(t, 10s, update_lease_atom::value, acq));
    }
  }
  auto got = own_replies(*lg, pending, 7);
  for (int i = 0; i < 3; ++i)
    CHECK(got["rel" + std::to_string(i)].value->spec.holder_identity == "released-rel" + std::to_string(i));
  for (int i = 0; i < 2; ++i) {
    CHECK(got["acq" + std::to_string(i)].value->spec.holder_identity == "taken-acq" + std::to_string(i));
    CHECK(got["n" + std::to_string(i)].value->spec.holder_identity == "renew-n" + std::to_string(i));
  }
  auto calls = lg->seen();
  std::string seen;
  for (auto& c : calls)
    seen += c + "; ";
  CHECK_MESSAGE((calls == std::vector<std::string>{"get busy", "writes 5", "renews 2"}), seen);
  caf::anon_send_exit(t, caf::exit_reason::user_shutdown);
}

TEST_CASE("a lone read or renew is sent alone, and a batch holds at most 128 requests") {
  auto lg = std::make_shared<recording_client::log>();
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto t = spawn_transport_pool(sys, one_recording_worker(lg));
  caf::scoped_actor self{sys};
  lg->release();
  std::vector<std::pair<std::string, reply_handle>> one;
  one.emplace_back("a", self->request(t, 10s, get_lease_atom::value, lease_key{"default", "a"}));
  CHECK(test::receive_replies(one)["a"].ok());
  one.clear();
  one.emplace_back("b", self->request(t, 10s, update_lease_atom::value, renew_of("b")));
  CHECK(test::receive_replies(one)["b"].ok());
  CHECK(lg->seen() == std::vector<std::string>{"get a", "put b"});

  // A backlog of 130 reads behind a busy one: 128, then 2.
  auto lg2 = std::make_shared<recording_client::log>();
  auto t2 = spawn_transport_pool(sys, one_recording_worker(lg2));
  std::vector<std::pair<std::string, reply_handle>> many;
  many.emplace_back("busy", self->request(t2, 10s, get_lease_atom::value, lease_key{"default", "busy"}));
  REQUIRE(first_call_waiting(*lg2));
  for (int i = 0; i < 130; ++i) {
    auto n = "m" + std::to_string(i);
    many.emplace_back(n, self->request(t2, 10s, get_lease_atom::value, lease_key{"default", n}));
  }
  REQUIRE(queued(130));
  lg2->release();
  auto got = test::receive_replies(many);
  REQUIRE(got.size() == 131);
  for (auto& [name, r] : got)
    CHECK((r.ok() && r.value->spec.holder_identity == "read-" + name));
  std::string seen;
  for (auto& c : lg2->seen())
    seen += c + "; ";
  CHECK_MESSAGE((lg2->seen() == std::vector<std::string>{"get busy", "gets 128", "gets 2"}), seen);
  caf::anon_send_exit(t, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(t2, caf::exit_reason::user_shutdown);
}

TEST_CASE("in a batch, each request still expires on its own after max_wait in the queue") {
  auto lg = std::make_shared<recording_client::log>();
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto t = spawn_transport_pool(sys, one_recording_worker(lg, 1000ms));
  caf::scoped_actor self{sys};
  std::vector<std::pair<std::string, reply_handle>> pending;
  pending.emplace_back("busy", self->request(t, 10s, get_lease_atom::value, lease_key{"default", "busy"}));
  REQUIRE(first_call_waiting(*lg));
  for (auto* n : {"old1", "old2"})
    pending.emplace_back(n, self->request(t, 10s, update_lease_atom::value, renew_of(n)));
  std::this_thread::sleep_for(1500ms);   // the old ones wait longer than max_wait
  for (auto* n : {"new1", "new2"})
    pending.emplace_back(n, self->request(t, 10s, update_lease_atom::value, renew_of(n)));
  REQUIRE(queued(4));
  lg->release();
  auto got = test::receive_replies(pending);
  for (auto* n : {"old1", "old2"}) {
    CHECK(got[n].kind() == error_kind::timeout);
    CHECK(got[n].error.path == std::string("PUT default/") + n);
    CHECK(got[n].error.reason.find("not sent") == 0);
  }
  for (auto* n : {"new1", "new2"})
    CHECK((got[n].ok() && got[n].value->spec.holder_identity == std::string("renew-") + n));
  CHECK(lg->seen() == std::vector<std::string>{"get busy", "renews 2"});   // the new ones only
  caf::anon_send_exit(t, caf::exit_reason::user_shutdown);
}

TEST_CASE("a batch's error reaches every requester in it, each naming its own lease") {
  auto lg = std::make_shared<recording_client::log>();
  lg->fail = true;
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto t = spawn_transport_pool(sys, one_recording_worker(lg));
  caf::scoped_actor self{sys};
  std::vector<std::pair<std::string, reply_handle>> pending;
  pending.emplace_back("busy", self->request(t, 10s, get_lease_atom::value, lease_key{"default", "busy"}));
  REQUIRE(first_call_waiting(*lg));
  for (auto* n : {"x", "y", "z"})
    pending.emplace_back(n, self->request(t, 10s, get_lease_atom::value, lease_key{"default", n}));
  REQUIRE(queued(3));
  lg->release();
  auto got = test::receive_replies(pending);
  CHECK(got["busy"].ok());
  for (auto* n : {"x", "y", "z"}) {
    CHECK(got[n].kind() == error_kind::timeout);
    CHECK(got[n].error.path == std::string("/v3/kv/txn (range of ") + n + ")");
  }
  CHECK(lg->seen() == std::vector<std::string>{"get busy", "gets 3"});
  caf::anon_send_exit(t, caf::exit_reason::user_shutdown);
}

namespace {

/// A transport of one recording worker (max_wait 1.5 s, release_drain 1 s) whose first call
/// (a read) waits at the gate, then, queued behind it in this order: a
/// release queued longer than max_wait before the others, a renew, a
/// release, a read, a create and a handover's release; ended with all of
/// them queued; the gate opened `after_end` after the end. What the client
/// was asked, in order, once the actor system ended.
std::vector<std::string> end_with_releases_queued(std::chrono::milliseconds after_end) {
  auto lg = std::make_shared<recording_client::log>();
  auto pools = current_transport_census().pools;
  {
    caf::actor_system_config cfg;
    caf::actor_system sys{cfg};
    auto opts = one_recording_worker(lg, 1500ms);
    opts.release_drain = 1000ms;
    auto t = spawn_transport_pool(sys, opts);
    caf::scoped_actor self{sys};
    auto send = [&](auto atom, auto arg) { self->request(t, 10s, atom, std::move(arg)); };
    send(get_lease_atom::value, lease_key{"default", "busy"});
    REQUIRE(first_call_waiting(*lg));
    send(update_lease_atom::value, renew_of("rel0", ""));
    std::this_thread::sleep_for(1600ms);   // rel0 waits longer than max_wait
    send(update_lease_atom::value, renew_of("n0"));
    send(update_lease_atom::value, renew_of("rel1", ""));
    send(get_lease_atom::value, lease_key{"default", "r0"});
    send(create_lease_atom::value, renew_of("new"));
    lease handover = renew_of("rel2", "");
    handover.spec.preferred_holder = "other";
    handover.renew_max_age = {};
    send(update_lease_atom::value, handover);
    REQUIRE(queued(6));
    caf::anon_send_exit(t, caf::exit_reason::user_shutdown);
    for (int i = 0; i < 200 && current_transport_census().pools > pools; ++i)
      std::this_thread::sleep_for(10ms);
    REQUIRE(current_transport_census().pools == pools);   // the dispatcher ended
    std::this_thread::sleep_for(after_end);
    lg->release();
  }   // ~actor_system: the worker ended
  return lg->seen();
}

} // namespace

TEST_CASE("a transport ended with releases queued still sends them, however long they waited; its other requests are dropped") {
  // Regression (SIGTERM of 10,000 leases): releases queued at
  // once waited longer than max_wait for the 4 workers and were answered
  // `timeout` unsent, or dropped when the process then stopped its
  // transport: thousands of leases were left held by nobody until they
  // expired, and the second process waited a lease duration for each.
  auto before = current_transport_census();
  auto calls = end_with_releases_queued(0ms);
  CHECK(calls == std::vector<std::string>{"get busy", "put rel0", "put rel1", "put rel2"});
  auto after = current_transport_census();
  CHECK(after.queued == before.queued);
  CHECK(after.busy_workers == before.busy_workers);
  CHECK(after.workers == before.workers);
  CHECK(after.expired == before.expired);
}

TEST_CASE("a transport ended with releases queued stops sending them release_drain after its end") {
  auto before = current_transport_census();
  auto calls = end_with_releases_queued(1100ms);   // the worker is busy past release_drain
  CHECK(calls == std::vector<std::string>{"get busy"});
  auto after = current_transport_census();
  CHECK(after.expired - before.expired == 3);   // the releases, answered timeout unsent
  CHECK(after.queued == before.queued);
  CHECK(after.workers == before.workers);
}
