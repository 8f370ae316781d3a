// The etcd lease transport against a real etcd (one member, started by
// tests/faults/etcd_cluster.py on ephemeral loopback ports): the mapping
// of get/create/update/release to the v3 API, terms = create_revision,
// TTL expiry, endpoint failover, auth, the actor interface, the shared watch
// stream, and 3 replicas x 20 leases electing in one process through it.
#include <doctest/doctest.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include <dirent.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "leasehold/runtime.hpp"
#include "tests/support/lease_replies.hpp"
#include "tests/support/timings.hpp"
#include "tests/support/wait.hpp"
#include "transport/etcd/etcd_evidence.hpp"
#include "transport/base64.hpp"
#include "transport/etcd/etcd_members.hpp"
#include "transport/etcd/etcd_transport.hpp"
#include "transport/transport_pool.hpp"

using namespace leasehold;
using namespace std::chrono_literals;

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  auto* v = std::getenv(name);
  return v && *v ? v : fallback;
}

/// `etcd_cluster.py --members 1` as a child: its endpoints, SIGTERM on exit.
class etcd_member {
public:
  etcd_member() {
    std::string script = env_or("LEASEHOLD_SOURCE_ROOT", ".") + "/tests/faults/etcd_cluster.py";
    int out[2];
    if (pipe(out) != 0)
      return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], 1);
      close(out[0]);
      close(out[1]);
      execl("/usr/bin/python3", "/usr/bin/python3", script.c_str(), "--members", "1",
            static_cast<char*>(nullptr));
      _exit(127);
    }
    close(out[1]);
    std::string line;
    for (auto deadline = std::chrono::steady_clock::now() + 20s;
         line.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline;) {
      pollfd p{out[0], POLLIN, 0};
      if (poll(&p, 1, 100) <= 0)
        continue;
      char buf[512];
      ssize_t n = read(out[0], buf, sizeof buf);
      if (n <= 0)
        break;
      line.append(buf, static_cast<size_t>(n));
    }
    close(out[0]);
    auto j = nlohmann::json::parse(line.substr(0, line.find('\n')), nullptr, false);
    if (j.is_object() && j.contains("endpoints"))
      endpoint_ = j["endpoints"][0].get<std::string>();
    if (j.is_object() && j.contains("pids"))
      member_pid_ = j["pids"][0].get<int>();
  }
  ~etcd_member() {
    if (pid_ <= 0)
      return;
    kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 100 && waitpid(pid_, &status, WNOHANG) == 0; ++i)
      std::this_thread::sleep_for(100ms);
    if (waitpid(pid_, &status, WNOHANG) == 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
  }
  const std::string& endpoint() const { return endpoint_; }
  /// SIGSTOP / SIGCONT the etcd member (a network pause). pause() returns
  /// once every thread of the member is stopped (2 s at most): kill()
  /// returns before the stop takes hold, and on a loaded machine a member
  /// still running then answered requests sent after it (a batch "timed
  /// out" in 4 ms with every renew answered, 1 run in 12 beside three busy
  /// loops).
  void pause() {
    kill(member_pid_, SIGSTOP);
    for (auto deadline = std::chrono::steady_clock::now() + 2s;
         !stopped() && std::chrono::steady_clock::now() < deadline;)
      std::this_thread::sleep_for(1ms);
  }
  void resume() { kill(member_pid_, SIGCONT); }
  bool has_pid() const { return member_pid_ > 0; }

private:
  /// Every thread of the member is stopped (state T in /proc).
  bool stopped() const {
    std::error_code ec;
    std::filesystem::directory_iterator tasks("/proc/" + std::to_string(member_pid_) + "/task", ec);
    if (ec)
      return false;
    for (auto& task : tasks) {
      std::ifstream f(task.path() / "stat");
      std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      auto end = stat.rfind(')');   // the state follows the command's closing parenthesis
      if (end == std::string::npos || end + 2 >= stat.size() || stat[end + 2] != 'T')
        return false;
    }
    return true;
  }

  pid_t pid_ = -1;
  pid_t member_pid_ = -1;
  std::string endpoint_;
};

etcd_config config(std::vector<std::string> endpoints) {
  etcd_config c;
  c.endpoints = std::move(endpoints);
  c.prefix = "/lh-test";
  c.http.connect_timeout = 300ms;
  c.http.read_timeout = 1000ms;
  c.http.write_timeout = 1000ms;
  return c;
}

lease record(const std::string& name, const std::string& holder, int duration_s = 5) {
  lease l;
  l.ns = "ns1";
  l.name = name;
  l.spec.holder_identity = holder;
  l.spec.lease_duration_seconds = duration_s;
  l.spec.acquire_time = std::chrono::time_point_cast<std::chrono::microseconds>(
    wall_clock::now());
  l.spec.lease_transitions = 1;   // what the elector asks for; the store's revision wins
  return l;
}

/// The next watch event of the subscriber `self`, or nullopt after `within`.
std::optional<lease_watch_event> next_event(caf::scoped_actor& self, caf::timespan within) {
  std::optional<lease_watch_event> out;
  self->receive([&](lease_watch_event& ev) { out = std::move(ev); },
                caf::after(within) >> [] {});
  return out;
}

/// Skips events until one of kind `k` (at most `within` in all).
std::optional<lease_watch_event> wait_event(caf::scoped_actor& self, lease_watch_event::kind k,
                                            caf::timespan within) {
  auto deadline = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < deadline) {
    auto left = std::chrono::duration_cast<caf::timespan>(deadline - std::chrono::steady_clock::now());
    auto ev = next_event(self, left);
    if (ev && ev->what == k)
      return ev;
  }
  return std::nullopt;
}

/// The threads of this process named `name` (/proc/self/task/*/comm).
int threads_named(const std::string& name) {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  if (!d)
    return -1;
  while (auto* e = readdir(d)) {
    std::ifstream in(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string comm;
    if (std::getline(in, comm) && comm == name)
      ++n;
  }
  closedir(d);
  return n;
}

/// etcd's gauge `metric` (its /metrics); -1 when it cannot be read.
long etcd_gauge(const std::string& endpoint, const std::string& metric) {
  httplib::Client c(endpoint);
  c.set_connection_timeout(std::chrono::seconds(2));
  auto r = c.Get("/metrics");
  if (!r || r->status != 200)
    return -1;
  auto at = r->body.find("\n" + metric + " ");
  if (at == std::string::npos)
    return -1;
  return std::atol(r->body.c_str() + at + metric.size() + 2);
}

/// A runner of `identity` for lease ns1/`name` whose one leader-only
/// module "work" is of registry type `type`.
runner_options one_module_runner(const std::string& identity, const std::string& name,
                                 const std::string& type, const election_timings& timings,
                                 const lease_backend& backend,
                                 const std::shared_ptr<module_registry>& registry) {
  runner_options o;
  o.identity = identity;
  o.lease = {"ns1", name};
  o.timings = timings;
  o.backend = backend;
  o.registry = registry;
  module_spec m;
  m.name = "work";
  m.type = type;
  o.modules.modules = {m};
  return o;
}

/// A loopback HTTP proxy in front of one etcd member that fails the
/// gateway calls a test arms (503, nothing forwarded): the reaper's
/// keepalive or its range of one key, while every other call goes through.
class failing_proxy {
public:
  explicit failing_proxy(const std::string& upstream) : upstream_(upstream) {
    server_.Post(".*", [this](const httplib::Request& req, httplib::Response& res) {
      if (fails(req.path, req.body)) {
        res.status = 503;
        res.set_content("{\"error\":\"armed by the test\"}", "application/json");
        return;
      }
      httplib::Client c(upstream_);
      c.set_read_timeout(std::chrono::seconds(2));
      auto r = c.Post(req.path, req.body, "application/json");
      if (!r) {
        res.status = 502;
        return;
      }
      res.status = r->status;
      res.set_content(r->body, "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~failing_proxy() {
    server_.stop();
    thread_.join();
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  /// Fails every call to `path` whose body contains `needle` until disarm().
  void arm(const std::string& path, const std::string& needle) {
    std::lock_guard<std::mutex> g(mx_);
    path_ = path;
    needle_ = needle;
    failed_ = 0;
  }
  void disarm() {
    std::lock_guard<std::mutex> g(mx_);
    path_.clear();
  }
  int failed() const {
    std::lock_guard<std::mutex> g(mx_);
    return failed_;
  }

private:
  bool fails(const std::string& path, const std::string& body) {
    std::lock_guard<std::mutex> g(mx_);
    if (path_.empty() || path != path_ || body.find(needle_) == std::string::npos)
      return false;
    ++failed_;
    return true;
  }
  std::string upstream_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mx_;
  std::string path_, needle_;
  int failed_ = 0;
};

/// Runs `cmd` (etcdctl) and returns its exit status.
int run(const std::string& cmd) {
  return std::system((cmd + " >/dev/null 2>&1").c_str());
}

} // namespace

TEST_CASE("etcd transport: the lease mapping on a real etcd") {
  etcd_member etcd;
  REQUIRE_MESSAGE(!etcd.endpoint().empty(), "etcd_cluster.py printed no endpoint");
  etcd_client a(config({etcd.endpoint()}));
  etcd_client b(config({etcd.endpoint()}));
  lease_key key{"ns1", "mapping"};
  CHECK(a.scope(key.ns).key(key.name) == "/lh-test/ns1/mapping");

  SUBCASE("absent, create, conflicting create, renew, foreign write, release") {
    auto got = a.get_lease(key);
    CHECK(got.kind() == error_kind::not_found);

    auto created = a.create_lease(record("mapping", "A"));
    REQUIRE_MESSAGE(created.ok(), created.error.describe());
    int term = created.value->spec.lease_transitions;
    CHECK(term > 1);   // the key's create_revision, not the requested 1
    CHECK(created.value->spec.holder_identity == "A");

    got = b.get_lease(key);
    REQUIRE(got.ok());
    CHECK(got.value->spec.lease_transitions == term);
    CHECK(got.value->spec.holder_identity == "A");
    CHECK(got.value->spec.lease_duration_seconds == 5);
    CHECK(got.value->spec.acquire_time == created.value->spec.acquire_time);
    // The read reports the etcd lease's remaining TTL (timetolive), by
    // which followers judge a key that vanishes (docs/safety.md).
    REQUIRE(got.value->ttl_seconds);
    CHECK(*got.value->ttl_seconds >= 3);
    CHECK(*got.value->ttl_seconds <= 5);

    auto taken = b.create_lease(record("mapping", "B"));
    CHECK(taken.kind() == error_kind::already_exists);
    CHECK(taken.error.reason.find("\"A\"") != std::string::npos);

    auto renewed = a.update_lease(*got.value);
    REQUIRE_MESSAGE(renewed.ok(), renewed.error.describe());
    CHECK(renewed.value->spec.lease_transitions == term);

    auto foreign = *got.value;
    foreign.spec.holder_identity = "B";
    foreign.spec.lease_transitions = term + 1;
    CHECK(b.update_lease(foreign).kind() == error_kind::conflict);

    auto stale_release = *got.value;
    stale_release.spec.holder_identity.clear();
    stale_release.spec.lease_transitions = term - 1;
    CHECK(a.update_lease(stale_release).kind() == error_kind::conflict);

    auto release = *got.value;
    release.spec.holder_identity.clear();
    release.spec.lease_duration_seconds = 1;
    auto released = a.update_lease(release);
    REQUIRE_MESSAGE(released.ok(), released.error.describe());
    CHECK(released.value->spec.holder_identity.empty());
    // The released record stays on the key (same term, same etcd lease):
    // a follower tells the holder's release from an outside delete by it.
    auto marked = b.get_lease(key);
    REQUIRE_MESSAGE(marked.ok(), marked.error.describe());
    CHECK(marked.value->spec.holder_identity.empty());
    CHECK(marked.value->spec.lease_duration_seconds == 1);
    CHECK(marked.value->spec.lease_transitions == term);
    CHECK(marked.value->resource_version == released.value->resource_version);
    CHECK(marked.value->ttl_seconds);

    // Another replica takes the released key at once: deleted if unchanged
    // and created anew, so its term is a new create_revision.
    auto take = *marked.value;
    take.spec = record("mapping", "B").spec;
    auto next = b.update_lease(take);
    REQUIRE_MESSAGE(next.ok(), next.error.describe());
    CHECK(next.value->spec.holder_identity == "B");
    CHECK(next.value->spec.lease_transitions > term);   // terms strictly increase
    CHECK(a.update_lease(take).kind() == error_kind::conflict);   // that version is gone
  }

  SUBCASE("another replica's put_record writes preferredHolder on the holder's key: same term, "
          "same etcd lease, refused on a stale version") {
    auto created = a.create_lease(record("mapping", "A"));
    REQUIRE_MESSAGE(created.ok(), created.error.describe());
    auto got = b.get_lease(key);
    REQUIRE(got.ok());
    auto prefer = *got.value;
    prefer.spec.preferred_holder = "B";
    auto put = b.put_record(prefer);
    REQUIRE_MESSAGE(put.ok(), put.error.describe());
    auto now = a.get_lease(key);
    REQUIRE(now.ok());
    CHECK(now.value->spec.holder_identity == "A");
    CHECK(now.value->spec.preferred_holder == "B");
    CHECK(now.value->spec.lease_transitions == created.value->spec.lease_transitions);
    CHECK(now.value->etcd_lease_id == got.value->etcd_lease_id);   // still A's to keep alive
    CHECK(now.value->resource_version == put.value->resource_version);
    CHECK(b.put_record(prefer).kind() == error_kind::conflict);   // `got`'s version is gone
    CHECK(a.update_lease(*now.value).ok());   // the holder renews on
  }

  SUBCASE("the TTL ends a term: the key is gone and a renew is not_found") {
    auto created = a.create_lease(record("ttl", "A", 1));
    REQUIRE(created.ok());
    auto deadline = std::chrono::steady_clock::now() + 6s;
    while (a.get_lease({"ns1", "ttl"}).ok() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(100ms);
    CHECK(a.get_lease({"ns1", "ttl"}).kind() == error_kind::not_found);
    CHECK(a.update_lease(*created.value).kind() == error_kind::not_found);
  }

  SUBCASE("the holder re-takes its own ended term: a new, larger term") {
    auto created = a.create_lease(record("retake", "A"));
    REQUIRE(created.ok());
    auto again = *created.value;
    again.spec.lease_transitions += 1;   // acquired_spec: a new term on a record naming A
    auto retaken = a.update_lease(again);
    REQUIRE_MESSAGE(retaken.ok(), retaken.error.describe());
    CHECK(retaken.value->spec.lease_transitions > created.value->spec.lease_transitions);
    CHECK(retaken.value->spec.holder_identity == "A");
    auto stale = again;   // the old resourceVersion: somebody wrote since
    CHECK(a.update_lease(stale).kind() == error_kind::conflict);
  }

  SUBCASE("a namespace is read in pages, all at the first page's revision") {
    for (const char* name : {"p1", "p2", "p3", "p4", "p5"})
      REQUIRE(a.create_lease(record(name, std::string("H-") + name)).ok());
    auto whole = a.read_scope("ns1");
    REQUIRE_MESSAGE(whole.ok(), whole.error.describe());
    auto paged = b.read_scope("ns1", 2);   // pages of 2, 2 and 1 keys
    REQUIRE_MESSAGE(paged.ok(), paged.error.describe());
    CHECK(paged.value->revision == whole.value->revision);
    REQUIRE(paged.value->records.size() == 5);
    CHECK(paged.value->records["p5"].holder_identity == "H-p5");
    CHECK(paged.value->next_key.empty());
    auto exact = b.read_scope("ns1", 5);   // one full page: etcd says no more
    REQUIRE(exact.ok());
    CHECK(exact.value->records.size() == 5);
  }

  SUBCASE("a create names the read that found the key absent: etcd's history of that key says "
          "whether another term came and went in between") {
    auto gone = a.get_lease(key);
    REQUIRE(gone.kind() == error_kind::not_found);
    std::int64_t read_at = gone.error.store_revision;
    REQUIRE(read_at > 0);
    // Other keys' writes move the store's revision, not this key's history.
    REQUIRE(b.create_lease(record("other-1", "B")).ok());
    REQUIRE(b.create_lease(record("other-2", "B")).ok());
    auto l = record("mapping", "A");
    l.absent_at_revision = read_at;
    auto created = a.create_lease(l);
    REQUIRE_MESSAGE(created.ok(), created.error.describe());
    CHECK(created.value->unwritten_since_read);

    // A term of B created and deleted (from outside) after the read: held for.
    auto again = a.get_lease({"ns1", "unseen"});
    REQUIRE(again.kind() == error_kind::not_found);
    read_at = again.error.store_revision;
    REQUIRE(b.create_lease(record("unseen", "B")).ok());
    auto del = b.post("/v3/kv/deleterange", {{"key", encode_base64("/lh-test/ns1/unseen")}});
    REQUIRE_MESSAGE(del.ok(), del.error.describe());
    l = record("unseen", "A");
    l.absent_at_revision = read_at;
    created = a.create_lease(l);
    REQUIRE_MESSAGE(created.ok(), created.error.describe());
    CHECK_FALSE(created.value->unwritten_since_read);

    // Not asked: not claimed.
    created = a.create_lease(record("unasked", "A"));
    REQUIRE(created.ok());
    CHECK_FALSE(created.value->unwritten_since_read);
  }

  SUBCASE("failover: a dead endpoint first, then the live one") {
    etcd_client c(config({"http://127.0.0.1:1", etcd.endpoint()}));
    CHECK(c.get_lease(key).kind() == error_kind::not_found);
    CHECK(c.current_endpoint() == etcd.endpoint());
    etcd_client dead(config({"http://127.0.0.1:1"}));
    auto r = dead.get_lease(key);
    CHECK(r.kind() == error_kind::connection_refused);
    CHECK(r.error.reason.find("http://127.0.0.1:1") != std::string::npos);
  }

  SUBCASE("the actor interface") {
    caf::actor_system_config cfg;
    caf::actor_system sys{cfg};
    auto t = spawn_etcd_backend(sys, config({etcd.endpoint()})).transport;
    caf::scoped_actor self{sys};
    bool answered = false;
    self->request(t, 5s, create_lease_atom::value, record("actor", "A"))
      .receive([&](lease_reply& r) { answered = r.ok() && r.value->spec.lease_transitions > 1; },
               [&](caf::error&) {});
    CHECK(answered);
    self->send_exit(t, caf::exit_reason::user_shutdown);
  }

  SUBCASE("username/password auth: a token header; without it, unauthorized") {
    std::string ctl = "ETCDCTL_API=3 etcdctl --endpoints " + etcd.endpoint();
    REQUIRE(run(ctl + " user add root --new-user-password=pw") == 0);
    REQUIRE(run(ctl + " auth enable") == 0);
    auto with = config({etcd.endpoint()});
    with.username = "root";
    with.password = "pw";
    etcd_client authed(with);
    auto created = authed.create_lease(record("auth", "A"));
    REQUIRE_MESSAGE(created.ok(), created.error.describe());
    // A batch's txn of ranges (its answer read in place) authenticates too.
    auto batch = authed.get_leases({{"ns1", "auth"}, {"ns1", "absent"}});
    REQUIRE(batch.size() == 2);
    REQUIRE_MESSAGE(batch[0].ok(), batch[0].error.describe());
    CHECK(batch[0].value->spec.holder_identity == "A");
    CHECK(batch[0].value->resource_version == created.value->resource_version);
    CHECK_MESSAGE(batch[1].kind() == error_kind::not_found, batch[1].error.describe());
    {   // the watch authenticates too
      caf::actor_system_config cfg;
      caf::actor_system sys{cfg};
      auto t = spawn_etcd_backend(sys, with).transport;
      caf::scoped_actor self{sys};
      lease_watch_request req;
      req.lease = {"ns1", "auth"};
      req.resource_version = created.value->resource_version;
      req.idle_timeout = 2s;
      req.subscriber = caf::actor_cast<lease_watch_subscriber>(self.ptr());   // a scoped_actor: unchecked
      self->send(t, watch_lease_atom::value, req);
      // The stream's first read tells the key (authenticated), then it opens.
      auto first = next_event(self, 5s);
      REQUIRE(first);
      CHECK_MESSAGE(first->what == lease_watch_event::kind::record, first->reason);
      auto up = next_event(self, 5s);
      REQUIRE(up);
      CHECK_MESSAGE(up->what == lease_watch_event::kind::up, up->reason);
      auto release = *created.value;
      release.spec.holder_identity.clear();
      REQUIRE(authed.update_lease(release).ok());
      auto marked = wait_event(self, lease_watch_event::kind::record, 3s);
      REQUIRE(marked);
      CHECK(marked->record->spec.holder_identity.empty());
      self->send_exit(t, caf::exit_reason::user_shutdown);
    }
    etcd_client anonymous(config({etcd.endpoint()}));
    auto denied = anonymous.get_lease({"ns1", "auth"});
    CHECK_MESSAGE(denied.kind() == error_kind::invalid, denied.error.describe());
    CHECK(denied.error.reason.find("user name is empty") != std::string::npos);
    auto denied_batch = anonymous.get_leases({{"ns1", "auth"}});
    REQUIRE(denied_batch.size() == 1);
    CHECK_MESSAGE(denied_batch[0].kind() == error_kind::invalid, denied_batch[0].error.describe());
    CHECK(denied_batch[0].error.path.find("/v3/kv/txn (range 1 of 1: ") == 0);
    with.password = "wrong";
    etcd_client bad(with);
    auto r = bad.get_lease({"ns1", "auth"});
    CHECK(!r.ok());
    CHECK(r.error.path == "/v3/auth/authenticate");
  }
}

/// How many requests of gRPC method `method` etcd has handled (the sum of
/// its grpc_server_handled_total rows); -1 when /metrics cannot be read.
long etcd_handled(const std::string& endpoint, const std::string& method) {
  httplib::Client c(endpoint);
  c.set_connection_timeout(std::chrono::seconds(2));
  auto r = c.Get("/metrics");
  if (!r || r->status != 200)
    return -1;
  long sum = 0;
  std::size_t at = 0;
  const std::string row = "\ngrpc_server_handled_total{";
  while ((at = r->body.find(row, at)) != std::string::npos) {
    auto end = r->body.find('\n', at + 1);
    auto line = r->body.substr(at + 1, end - at - 1);
    at = end;
    if (line.find("grpc_method=\"" + method + "\"") != std::string::npos)
      sum += std::atol(line.c_str() + line.rfind(' ') + 1);
  }
  return sum;
}

TEST_CASE("etcd transport: a create's history check reads no revision its own transport wrote "
          "to another key (a killed process's 1,000 keys)") {
  // Regression: a follower taking over a killed process's keys creates them
  // one after another; each create's history check read the key at every
  // revision since its vanish read, i.e. at every create of its own before
  // it (~4 txns of 128 ranges per create at 1,000 keys): the SIGKILL
  // takeover of 1,000 keys took 33-40 s instead of ~17 s.
  etcd_member etcd;
  REQUIRE_MESSAGE(!etcd.endpoint().empty(), "etcd_cluster.py printed no endpoint");
  etcd_client c(config({etcd.endpoint()}));
  etcd_client outside(config({etcd.endpoint()}));
  auto gone = c.get_lease({"ns1", "mine"});
  REQUIRE(gone.kind() == error_kind::not_found);
  auto read_at = gone.error.store_revision;
  for (const char* name : {"o1", "o2", "o3", "o4", "o5"})
    REQUIRE(c.create_lease(record(name, "B")).ok());
  long before = etcd_handled(etcd.endpoint(), "Txn");
  REQUIRE(before >= 0);
  auto l = record("mine", "B");
  l.absent_at_revision = read_at;
  auto created = c.create_lease(l);
  REQUIRE_MESSAGE(created.ok(), created.error.describe());
  CHECK(created.value->unwritten_since_read);
  CHECK(etcd_handled(etcd.endpoint(), "Txn") - before == 1);   // the create's own txn only

  // Its own write of the same key in between is history like anyone's: a
  // create of "twice", deleted from outside, then created again: held.
  gone = c.get_lease({"ns1", "twice"});
  REQUIRE(gone.kind() == error_kind::not_found);
  read_at = gone.error.store_revision;
  REQUIRE(c.create_lease(record("twice", "B")).ok());
  REQUIRE(c.create_lease(record("o6", "B")).ok());
  auto del = outside.post("/v3/kv/deleterange", {{"key", encode_base64("/lh-test/ns1/twice")}});
  REQUIRE_MESSAGE(del.ok(), del.error.describe());
  l = record("twice", "B");
  l.absent_at_revision = read_at;
  created = c.create_lease(l);
  REQUIRE_MESSAGE(created.ok(), created.error.describe());
  CHECK_FALSE(created.value->unwritten_since_read);
}

TEST_CASE("etcd transport: a batch of creates judged ran out checks every key's history in one "
          "txn (a killed process's 10,000 keys)") {
  // Regression: each create of a batch asked its own history txn after the
  // batch's create txn, 128 requests per batch. Taking a killed process's
  // 10,000 keys, the creates timed out in the workers' queue: 35-52 s
  // instead of ~18 s (bench/run --takeover 10000).
  etcd_member etcd;
  REQUIRE_MESSAGE(!etcd.endpoint().empty(), "etcd_cluster.py printed no endpoint");
  etcd_client a(config({etcd.endpoint()}));
  etcd_client b(config({etcd.endpoint()}));
  etcd_client admin(config({etcd.endpoint()}));
  std::vector<lease> want;
  for (int i = 0; i < 100; ++i) {
    auto name = "k" + std::to_string(i);
    REQUIRE(a.create_lease(record(name, "A")).ok());
    want.push_back(record(name, "B"));
  }
  // Each key read present, as a follower's last read before it judged the
  // key ran out; then A's session lease goes (as by its TTL) with every key.
  for (auto& l : want) {
    auto seen = b.get_lease(l.key());
    REQUIRE(seen.ok());
    l.seen_at_revision = seen.value->read_revision;
  }
  auto id = a.get_lease({"ns1", "k0"}).value->etcd_lease_id;
  REQUIRE(admin.post("/v3/lease/revoke", {{"ID", id}}).ok());
  long before = etcd_handled(etcd.endpoint(), "Txn");
  auto created = b.create_leases(want);
  long txns = etcd_handled(etcd.endpoint(), "Txn") - before;
  REQUIRE(created.size() == want.size());
  for (auto& c : created) {
    REQUIRE_MESSAGE(c.ok(), c.error.describe());
    CHECK(c.value->unwritten_since_read);
  }
  CHECK(txns <= 2);   // the creates, then every history (one revision each)
}

TEST_CASE("etcd transport: a key nobody asked about for a TTL (a create whose answer was lost) "
          "gets the released record from the session reaper, and another replica takes it at once") {
  // Regression (docs/safety.md, "The session reaper's released record"):
  // the reaper deleted such a key, and every replica waited that delete out
  // as an operator's write (a second lease duration and the outside-write
  // warning; a 7 s fresh start in agent-balance).
  etcd_member etcd;
  REQUIRE_MESSAGE(!etcd.endpoint().empty(), "etcd_cluster.py printed no endpoint");
  etcd_client a(config({etcd.endpoint()}));
  etcd_client b(config({etcd.endpoint()}));
  // etcd applied A's create; its answer was lost, so A's elector never asks
  // about the key again. Another key of A's keeps the session lease alive.
  auto lost = a.create_lease(record("lost", "A", 2));
  REQUIRE_MESSAGE(lost.ok(), lost.error.describe());
  auto keeper = a.create_lease(record("keeper", "A", 2));
  REQUIRE_MESSAGE(keeper.ok(), keeper.error.describe());
  std::optional<lease> seen;
  bool gone = false;
  for (auto deadline = std::chrono::steady_clock::now() + 6s;
       !seen && !gone && std::chrono::steady_clock::now() < deadline;) {
    auto renewed = a.update_lease(*keeper.value);   // a keepalive each (renew_max_age 0)
    CHECK_MESSAGE(renewed.ok(), renewed.error.describe());
    auto g = b.get_lease({"ns1", "lost"});
    gone = g.kind() == error_kind::not_found;
    if (g.ok() && g.value->spec.holder_identity.empty())
      seen = *g.value;
    std::this_thread::sleep_for(200ms);
  }
  CHECK_FALSE(gone);   // the old reaper's delete
  REQUIRE_MESSAGE(seen, "no released record on the key within 6 s");
  CHECK(seen->spec.lease_duration_seconds == 1);   // released_record()
  CHECK(seen->spec.lease_transitions == lost.value->spec.lease_transitions);   // the same key
  // The term A never started cannot be renewed on it.
  CHECK(a.update_lease(*lost.value).kind() == error_kind::conflict);
  // B takes it as a released key: delete if unchanged, then create.
  auto take = *seen;
  take.spec = record("lost", "B", 2).spec;
  auto next = b.update_lease(take);
  REQUIRE_MESSAGE(next.ok(), next.error.describe());
  CHECK(next.value->spec.holder_identity == "B");
  CHECK(next.value->spec.lease_transitions > lost.value->spec.lease_transitions);
}

TEST_CASE("etcd session reaper: a stale key whose keepalive or range failed is still released "
          "within a TTL of going stale") {
  // Regression: the reaper took a stale key off its books before its
  // keepalive was sent, so one failed keepalive (or range, or txn) of it
  // left the key naming its old holder for as long as the process kept
  // any other key of the session alive: nobody ever took it.
  for (const char* failing : {"/v3/lease/keepalive", "/v3/kv/range"}) {
    CAPTURE(failing);
    etcd_member etcd;
    REQUIRE_MESSAGE(!etcd.endpoint().empty(), "etcd_cluster.py printed no endpoint");
    failing_proxy proxy(etcd.endpoint());
    etcd_client a(config({proxy.endpoint()}));
    etcd_client b(config({etcd.endpoint()}));
    auto start = std::chrono::steady_clock::now();
    // "lost": a create whose answer was lost (its elector never asks again);
    // "keeper" keeps the session lease alive with a keepalive per renew.
    auto lost = a.create_lease(record("lost", "A", 2));
    REQUIRE_MESSAGE(lost.ok(), lost.error.describe());
    auto keeper = a.create_lease(record("keeper", "A", 2));
    REQUIRE_MESSAGE(keeper.ok(), keeper.error.describe());
    auto stale_at = start + 2s;   // a TTL unasked
    std::string needle = std::string(failing) == "/v3/kv/range"
                           ? encode_base64("/lh-test/ns1/lost") : std::string("\"ID\"");
    bool armed = false;
    std::optional<lease> seen;
    for (auto deadline = start + 7s; !seen && std::chrono::steady_clock::now() < deadline;) {
      auto now = std::chrono::steady_clock::now();
      // Every reaper attempt from just before the key goes stale to 0.6 s
      // after fails; the keeper's term lives on (its TTL is 2 s).
      if (!armed && now >= stale_at - 100ms) {
        proxy.arm(failing, needle);
        armed = true;
      }
      if (armed && now >= stale_at + 600ms)
        proxy.disarm();
      (void)a.update_lease(*keeper.value);   // a keepalive each (renew_max_age 0)
      auto g = b.get_lease({"ns1", "lost"});
      if (g.ok() && g.value->spec.holder_identity.empty())
        seen = *g.value;
      std::this_thread::sleep_for(100ms);
    }
    CHECK(proxy.failed() > 0);
    REQUIRE_MESSAGE(seen, "the stale key still names its holder 5 s after it went stale");
    CHECK(std::chrono::steady_clock::now() < stale_at + 2s + 1s);   // within a TTL, with margin
    CHECK(seen->spec.lease_transitions == lost.value->spec.lease_transitions);
    // Its TTL is not kept alive for ever: deleted a TTL later, untaken.
    bool gone = false;
    for (auto deadline = std::chrono::steady_clock::now() + 5s;
         !gone && std::chrono::steady_clock::now() < deadline;) {
      (void)a.update_lease(*keeper.value);
      gone = b.get_lease({"ns1", "lost"}).kind() == error_kind::not_found;
      std::this_thread::sleep_for(100ms);
    }
    CHECK(gone);
  }
}

TEST_CASE("etcd transport: keys bound to one etcd lease cost one TTL read per transport, "
          "answered with the reading's age") {
  etcd_member etcd;
  REQUIRE_MESSAGE(!etcd.endpoint().empty(), "etcd_cluster.py printed no endpoint");
  etcd_client admin(config({etcd.endpoint()}));
  auto g = admin.post("/v3/lease/grant", {{"TTL", "10"}});
  REQUIRE_MESSAGE(g.ok(), g.error.describe());
  auto id = id_field(*g.value, "ID");
  REQUIRE(!id.empty());
  for (auto name : {"k1", "k2", "k3"}) {
    auto value = nlohmann::json{{"holderIdentity", "X"}, {"leaseDurationSeconds", 10}}.dump();
    auto p = admin.post("/v3/kv/put", {{"key", encode_base64(admin.scope("ns1").key(name))},
                                       {"value", encode_base64(value)}, {"lease", id}});
    REQUIRE_MESSAGE(p.ok(), p.error.describe());
  }
  // Two workers of one transport share their readings; a third client
  // (another transport) has its own.
  auto shared = std::make_shared<etcd_client::ttl_cache>();
  etcd_client w1(config({etcd.endpoint()}), shared), w2(config({etcd.endpoint()}), shared);
  etcd_client other(config({etcd.endpoint()}));
  long before = etcd_handled(etcd.endpoint(), "LeaseTimeToLive");
  REQUIRE(before >= 0);
  auto first = w1.get_lease({"ns1", "k1"});
  REQUIRE_MESSAGE(first.ok(), first.error.describe());
  REQUIRE(first.value->ttl_seconds);
  CHECK(*first.value->ttl_seconds >= 8);
  CHECK(first.value->ttl_age == std::chrono::nanoseconds{0});   // read during this get
  std::this_thread::sleep_for(50ms);
  auto second = w2.get_lease({"ns1", "k2"});
  auto third = w1.get_lease({"ns1", "k3"});
  REQUIRE_MESSAGE(second.ok(), second.error.describe());
  REQUIRE_MESSAGE(third.ok(), third.error.describe());
  CHECK(second.value->ttl_seconds == first.value->ttl_seconds);
  CHECK(third.value->ttl_seconds == first.value->ttl_seconds);
  // Served from the first reading, with its age (the follower counts from it).
  CHECK(second.value->ttl_age >= 50ms);
  CHECK(second.value->ttl_age < 4s);
  CHECK(third.value->ttl_age >= second.value->ttl_age);
  CHECK(etcd_handled(etcd.endpoint(), "LeaseTimeToLive") - before == 1);
  auto own = other.get_lease({"ns1", "k2"});
  REQUIRE_MESSAGE(own.ok(), own.error.describe());
  CHECK(own.value->ttl_age == std::chrono::nanoseconds{0});
  CHECK(etcd_handled(etcd.endpoint(), "LeaseTimeToLive") - before == 2);
}

/// Sends every request of `reqs` at once to `t` while etcd is paused (the
/// first one blocks in the one worker, the others queue up: a backlog),
/// resumes etcd and returns the replies by lease name.
template <class Atom, class Req>
std::map<std::string, lease_reply> backlog(caf::actor_system& sys, etcd_member& etcd,
                                           const lease_transport_actor& t,
                                           const std::vector<std::pair<std::string, Req>>& reqs) {
  caf::scoped_actor self{sys};
  using handle = decltype(self->request(t, 10s, Atom::value, reqs.front().second));
  std::vector<std::pair<std::string, handle>> pending;
  etcd.pause();
  for (auto& [name, r] : reqs)
    pending.emplace_back(name, self->request(t, 10s, Atom::value, r));
  std::this_thread::sleep_for(300ms);   // less than the read timeout (1 s)
  etcd.resume();
  return test::receive_replies(pending);
}

TEST_CASE("etcd transport: queued creates cost one txn per batch (each alone when one key "
          "exists), queued renews and reads one txn of ranges; an outside delete inside a batch "
          "ends exactly that key's term") {
  etcd_member etcd;
  REQUIRE_MESSAGE(!etcd.endpoint().empty(), "etcd_cluster.py printed no endpoint");
  REQUIRE(etcd.has_pid());
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto c = config({etcd.endpoint()});
  c.http.workers = 1;
  auto backend = spawn_etcd_backend(sys, c);
  auto& t = backend.transport;
  etcd_client admin(config({etcd.endpoint()}));
  constexpr int keys = 40;
  auto name_of = [](int i) { return "batch-" + std::to_string(i); };
  // Creates, queued: the first alone, the others in one txn (all keys
  // compared absent, all put at one revision).
  std::vector<std::pair<std::string, lease>> creates;
  for (int i = 0; i < keys / 2; ++i)
    creates.emplace_back(name_of(i), record(name_of(i), "A", 10));
  long txns0 = etcd_handled(etcd.endpoint(), "Txn");
  auto made = backlog<create_lease_atom>(sys, etcd, t, creates);
  long create_txns = etcd_handled(etcd.endpoint(), "Txn") - txns0;
  std::set<int> terms;
  for (auto& [name, r] : made) {
    REQUIRE_MESSAGE(r.ok(), name << ": " << r.error.describe());
    CHECK(r.value->name == name);
    terms.insert(r.value->spec.lease_transitions);
  }
  MESSAGE((keys / 2) << " creates: " << create_txns << " txns, " << terms.size() << " revisions");
  CHECK(create_txns <= 3);
  CHECK(terms.size() <= 2);   // the lone one's revision and the batch's
  // A batch with a key that exists (batch-0, created above): the txn's
  // compares fail, so each is created alone: batch-0 is already there,
  // the others are created.
  creates.clear();
  for (int i = keys / 2; i < keys; ++i)
    creates.emplace_back(name_of(i), record(name_of(i), "A", 10));
  creates.emplace_back(name_of(0), record(name_of(0), "B", 10));
  auto more = backlog<create_lease_atom>(sys, etcd, t, creates);
  CHECK(more[name_of(0)].kind() == error_kind::already_exists);
  CHECK(more[name_of(0)].error.reason.find("\"A\"") != std::string::npos);   // held by A
  more.erase(name_of(0));
  made.merge(more);
  REQUIRE(made.size() == keys);
  std::vector<std::pair<std::string, lease>> renews;
  for (auto& [name, r] : made) {
    REQUIRE_MESSAGE(r.ok(), name << ": " << r.error.describe());
    lease l = *r.value;
    l.renew_max_age = 1s;
    renews.emplace_back(name, l);
  }
  // An outside write: key 7 is deleted (an operator).
  auto gone = admin.post("/v3/kv/deleterange",
                         {{"key", encode_base64(admin.scope("ns1").key("batch-7"))}});
  REQUIRE_MESSAGE(gone.ok(), gone.error.describe());

  auto census0 = current_transport_census();
  long ranges0 = etcd_handled(etcd.endpoint(), "Range");
  txns0 = etcd_handled(etcd.endpoint(), "Txn");
  long kept0 = etcd_handled(etcd.endpoint(), "LeaseKeepAlive");
  auto renewed = backlog<update_lease_atom>(sys, etcd, t, renews);
  long ranges = etcd_handled(etcd.endpoint(), "Range") - ranges0;
  long txns = etcd_handled(etcd.endpoint(), "Txn") - txns0;
  long kept = etcd_handled(etcd.endpoint(), "LeaseKeepAlive") - kept0;
  auto census1 = current_transport_census();
  MESSAGE(keys << " renews: " << ranges << " ranges, " << txns << " txns, " << kept
                << " keepalives; batches " << census1.batches - census0.batches << " of "
                << census1.batched - census0.batched << " requests");
  REQUIRE(renewed.size() == keys);
  for (auto& [name, r] : renewed) {
    if (name == "batch-7") {
      // Its term ended, named by its key; the others in its batch go on.
      CHECK(r.kind() == error_kind::not_found);
      CHECK(r.error.path.find("/lh-test/ns1/batch-7") != std::string::npos);
      continue;
    }
    REQUIRE_MESSAGE(r.ok(), name << ": " << r.error.describe());
    CHECK(r.value->name == name);   // its own reply
    CHECK(r.value->spec.holder_identity == "A");
    CHECK(r.value->renewed_age <= 1s);
  }
  // The first renew alone (it blocked on the paused etcd), the other 39 in
  // one txn of ranges; far fewer requests than renews either way.
  CHECK(census1.batched - census0.batched >= keys / 2);
  CHECK(ranges + txns <= keys / 4);
  CHECK(kept <= 3);   // one keepalive serves the whole batch

  // Reads in a batch: each its own record and the TTL of its etcd lease;
  // the deleted key not found at the store's revision, named.
  std::vector<std::pair<std::string, lease_key>> reads;
  for (auto& [name, l] : renews)
    reads.emplace_back(name, l.key());
  txns0 = etcd_handled(etcd.endpoint(), "Txn");
  auto read = backlog<get_lease_atom>(sys, etcd, t, reads);
  CHECK(etcd_handled(etcd.endpoint(), "Txn") - txns0 <= 3);
  for (auto& [name, r] : read) {
    if (name == "batch-7") {
      CHECK(r.kind() == error_kind::not_found);
      CHECK(r.error.path.find("/lh-test/ns1/batch-7") != std::string::npos);
      CHECK(r.error.store_revision > 0);
      continue;
    }
    REQUIRE_MESSAGE(r.ok(), name << ": " << r.error.describe());
    CHECK(r.value->name == name);
    CHECK(r.value->ttl_seconds.value_or(0) >= 5);
  }
  caf::anon_send_exit(t, caf::exit_reason::user_shutdown);
}

TEST_CASE("etcd client: a batch of releases is one txn of puts, a batch of new terms one txn of "
          "deletes and one of creates; a compare that fails sends each alone (SIGTERM)") {
  // Regression: releases and new terms went one by one (a range, a
  // keepalive and a txn per release; a range, a delete, a keepalive and a
  // create per new term): a SIGTERM of 10,000 leases took ~20 s to hand over.
  etcd_member etcd;
  REQUIRE_MESSAGE(!etcd.endpoint().empty(), "etcd_cluster.py printed no endpoint");
  etcd_client a(config({etcd.endpoint()}));
  etcd_client b(config({etcd.endpoint()}));
  etcd_client admin(config({etcd.endpoint()}));
  std::vector<lease> made;
  for (int i = 1; i <= 6; ++i)
    made.push_back(record("w" + std::to_string(i), "A"));
  auto created = a.create_leases(made);
  std::vector<lease> releases;
  for (auto& r : created) {
    REQUIRE_MESSAGE(r.ok(), r.error.describe());
    auto l = *r.value;
    l.spec.holder_identity.clear();
    l.spec.lease_duration_seconds = 1;
    releases.push_back(l);
  }
  releases.back().spec.lease_transitions -= 1;   // w6: not its term
  long txns0 = etcd_handled(etcd.endpoint(), "Txn");
  auto released = a.write_leases(releases);
  CHECK(etcd_handled(etcd.endpoint(), "Txn") - txns0 == 2);   // the ranges, the puts
  REQUIRE(released.size() == 6);
  CHECK(released.back().kind() == error_kind::conflict);
  std::vector<lease> marked;
  for (int i = 0; i < 5; ++i) {
    REQUIRE_MESSAGE(released[i].ok(), released[i].error.describe());
    CHECK(released[i].value->name == "w" + std::to_string(i + 1));
    auto got = b.get_lease(released[i].value->key());
    REQUIRE(got.ok());
    CHECK(got.value->spec.holder_identity.empty());
    CHECK(got.value->spec.lease_duration_seconds == 1);
    CHECK(got.value->spec.lease_transitions == created[i].value->spec.lease_transitions);
    CHECK(got.value->resource_version == released[i].value->resource_version);
    auto take = *got.value;
    take.spec = record(take.name, "B").spec;
    marked.push_back(take);
  }
  // B takes w1, w2: the ranges, the deletes, the creates.
  txns0 = etcd_handled(etcd.endpoint(), "Txn");
  auto taken = b.write_leases({marked[0], marked[1]});
  CHECK(etcd_handled(etcd.endpoint(), "Txn") - txns0 == 3);
  for (int i = 0; i < 2; ++i) {
    REQUIRE_MESSAGE(taken[i].ok(), taken[i].error.describe());
    CHECK(taken[i].value->spec.holder_identity == "B");
    CHECK(taken[i].value->spec.lease_transitions > created[i].value->spec.lease_transitions);
  }
  // w4 written from outside after B read it: the deletes' txn changes
  // nothing, each is taken alone; w4 is a conflict, w3 and w5 are B's.
  auto w4 = admin.post("/v3/kv/put", {{"key", encode_base64(admin.scope("ns1").key("w4"))},
                                      {"value", encode_base64("{\"holderIdentity\":\"\"}")}});
  REQUIRE_MESSAGE(w4.ok(), w4.error.describe());
  taken = b.write_leases({marked[2], marked[3], marked[4]});
  CHECK(taken[1].kind() == error_kind::conflict);
  for (int i : {0, 2}) {
    REQUIRE_MESSAGE(taken[i].ok(), taken[i].error.describe());
    CHECK(taken[i].value->spec.holder_identity == "B");
    CHECK(taken[i].value->spec.lease_transitions > created[i + 2].value->spec.lease_transitions);
  }
  CHECK(b.get_lease({"ns1", "w3"}).value->spec.holder_identity == "B");
}

TEST_CASE("etcd client: a batch whose txn fails answers every request with the error, naming its key") {
  etcd_member etcd;
  REQUIRE_MESSAGE(!etcd.endpoint().empty(), "etcd_cluster.py printed no endpoint");
  REQUIRE(etcd.has_pid());
  etcd_client c(config({etcd.endpoint()}));
  std::vector<lease> ls;
  std::vector<lease_key> ks;
  for (auto* name : {"f1", "f2", "f3"}) {
    auto created = c.create_lease(record(name, "A", 10));
    REQUIRE_MESSAGE(created.ok(), created.error.describe());
    ls.push_back(*created.value);
    ls.back().renew_max_age = 1s;
    ks.push_back(ls.back().key());
  }
  std::vector<lease> fresh;
  for (auto* name : {"f4", "f5"})
    fresh.push_back(record(name, "A", 10));
  etcd.pause();   // the txn times out (read timeout 1 s)
  auto renewed = c.renew_leases(ls);
  auto read = c.get_leases(ks);
  auto created = c.create_leases(fresh);
  etcd.resume();
  REQUIRE(created.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(created[i].kind() == error_kind::timeout);
    CHECK_MESSAGE(created[i].error.path.find("/lh-test/ns1/" + fresh[i].name) != std::string::npos,
                  created[i].error.describe());
  }
  REQUIRE(renewed.size() == 3);
  REQUIRE(read.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    auto key = "/lh-test/ns1/" + ls[i].name;
    for (auto* r : {&renewed[i], &read[i]}) {
      CHECK(r->kind() == error_kind::timeout);
      CHECK_MESSAGE(r->error.path.find("/v3/kv/txn") == 0, r->error.describe());
      CHECK_MESSAGE(r->error.path.find(key) != std::string::npos, r->error.describe());
    }
  }
  // Once etcd answers again, the same batch renews every key.
  auto again = c.renew_leases(ls);
  for (auto& r : again)
    CHECK_MESSAGE(r.ok(), r.error.describe());
}

TEST_CASE("etcd watch on a real etcd: PUT is a record, release and expiry wake, a paused member goes down and up") {
  etcd_member etcd;
  REQUIRE_MESSAGE(!etcd.endpoint().empty(), "etcd_cluster.py printed no endpoint");
  etcd_client a(config({etcd.endpoint()}));
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto t = spawn_etcd_backend(sys, config({etcd.endpoint()})).transport;
  caf::scoped_actor self{sys};
  lease_watch_request req;
  req.lease = {"ns1", "watched"};
  req.idle_timeout = 1s;
  req.subscriber = caf::actor_cast<lease_watch_subscriber>(self.ptr());   // a scoped_actor: unchecked
  self->send(t, watch_lease_atom::value, req);
  using kind = lease_watch_event::kind;
  // No key yet: nothing to report but that the stream is open.
  auto first = next_event(self, 5s);
  REQUIRE(first);
  CHECK(first->what == kind::up);

  auto created = a.create_lease(record("watched", "A"));
  REQUIRE_MESSAGE(created.ok(), created.error.describe());
  auto put = wait_event(self, kind::record, 3s);
  REQUIRE(put);
  CHECK(put->record->spec.holder_identity == "A");
  CHECK(put->record->spec.lease_transitions == created.value->spec.lease_transitions);
  CHECK(put->record->resource_version == created.value->resource_version);

  // A release puts the released record on the key, and the watch says so
  // at once (a follower takes it then).
  auto release = *created.value;
  release.spec.holder_identity.clear();
  release.spec.lease_duration_seconds = 1;
  auto released_at = std::chrono::steady_clock::now();
  auto released = a.update_lease(release);
  REQUIRE(released.ok());
  auto marked = wait_event(self, kind::record, 3s);
  REQUIRE(marked);
  CHECK(marked->record->spec.holder_identity.empty());
  MESSAGE("release to its record on the watch: "
          << std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now() - released_at).count()
          << " ms");

  // B takes the released key (delete + create: both streamed), with a TTL
  // of 1 s that it never renews: etcd deletes the key, the watch tells.
  auto take = *released.value;
  take.spec = record("watched", "B", 1).spec;
  REQUIRE(a.update_lease(take).ok());
  CHECK(wait_event(self, kind::deleted, 3s));
  CHECK(wait_event(self, kind::record, 3s));
  CHECK(wait_event(self, kind::deleted, 6s));

  // A quiet stream reads the key again and watches on without going down; a
  // member that stops answering goes down: the read or the reopen times
  // out. It comes back up when the member does.
  REQUIRE(etcd.has_pid());
  auto quiet = next_event(self, 2500ms);
  CHECK_MESSAGE(!quiet, "an idle stream reported " << (quiet ? quiet->reason : ""));
  etcd.pause();
  auto down = wait_event(self, kind::down, 8s);
  etcd.resume();
  REQUIRE(down);
  // The quiet stream's re-read (POST /v3/kv/range) or the reopened stream
  // (POST /v3/watch) timed out, naming the request and the member.
  CHECK_MESSAGE(down->reason.find("watch POST /v3/") == 0, down->reason);
  CHECK_MESSAGE(down->reason.find(etcd.endpoint()) != std::string::npos, down->reason);
  CHECK(wait_event(self, kind::up, 10s));

  // Still watching after the pause: a new record arrives.
  REQUIRE(a.create_lease(record("watched", "C")).ok());
  auto again = wait_event(self, kind::record, 5s);
  REQUIRE(again);
  CHECK(again->record->spec.holder_identity == "C");
  self->send_exit(t, caf::exit_reason::user_shutdown);
}

namespace {

/// A registry of one leader-only module, "idle", that does nothing: the
/// many-lease cases watch leadership, not work.
std::shared_ptr<module_registry> idle_module_registry() {
  auto registry = std::make_shared<module_registry>();
  registry->add({"idle", /*default_leader_only*/ true,
                 [](caf::actor_system& s, const module_context&) {
                   return s.spawn([](caf::event_based_actor*) -> caf::behavior {
                     return {[](module_settings&) {}};
                   });
                 },
                 nullptr});
  return registry;
}

/// Shuts `runners` down (each releases its lease; bounded wait for their
/// answers), then ends them and the `transports`.
void shut_down(caf::scoped_actor& self, const std::vector<runner_actor>& runners,
               std::initializer_list<lease_transport_actor> transports) {
  for (auto& r : runners)
    self->send(r, shutdown_atom::value);
  for (std::size_t i = 0; i < runners.size(); ++i)
    self->receive([](bool) {}, caf::after(10s) >> [] {});
  for (auto& r : runners)
    self->send_exit(r, caf::exit_reason::user_shutdown);
  for (auto& t : transports)
    self->send_exit(t, caf::exit_reason::user_shutdown);
}

} // namespace

TEST_CASE("3 replicas x 20 leases in one process on a real etcd: one watch stream, one leader per lease, "
          "releases taken over through it") {
  // Before, each watching runner opened its own watch (a thread and a
  // connection per lease); now the transport opens one stream for the
  // namespace, whatever the number of runners and leases.
  etcd_member etcd;
  REQUIRE_MESSAGE(!etcd.endpoint().empty(), "etcd_cluster.py printed no endpoint");
  constexpr int leases = 20;
  const std::vector<std::string> replicas{"r0", "r1", "r2"};
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto registry = idle_module_registry();
  // Who runs leader-only work, per lease, as the modules start and stop.
  std::mutex mx;
  std::map<std::string, std::set<std::string>> working;
  std::vector<std::string> overlaps;
  event_sink sink = [&](const runtime_event& e) {
    std::lock_guard<std::mutex> g(mx);
    if (e.type == event_type::module_started) {
      auto& w = working[e.lease];
      w.insert(e.identity);
      if (w.size() > 1)
        overlaps.push_back(e.lease);
    } else if (e.type == event_type::module_stopped || e.type == event_type::module_killed) {
      working[e.lease].erase(e.identity);
    }
  };
  auto timings = test::short_timings();
  auto ec = config({etcd.endpoint()});
  auto backend = spawn_etcd_backend(sys, ec);   // its traits: server_expiry
  auto transport = backend.transport;
  std::map<std::string, std::vector<runner_actor>> runners;   // by replica
  for (auto& id : replicas)
    for (int i = 0; i < leases; ++i) {
      auto o = one_module_runner(id, "many-" + std::to_string(i), "idle", timings, backend, registry);
      o.events = sink;
      auto spawned = spawn_runner(sys, o);
      REQUIRE(spawned.errors.empty());
      runners[id].push_back(spawned.runner);
    }
  /// Every lease worked by exactly one replica: lease -> replica.
  auto led = [&] {
    std::lock_guard<std::mutex> g(mx);
    std::map<std::string, std::string> out;
    for (auto& [lease, who] : working)
      if (who.size() == 1)
        out[lease] = *who.begin();
    return out;
  };
  auto wait_all_led = [&](caf::timespan within) {
    auto deadline = std::chrono::steady_clock::now() + within;
    while (led().size() < static_cast<std::size_t>(leases) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(50ms);
    return led();
  };
  // A fresh lease's term starts a lease duration after its creation.
  auto first = wait_all_led(timings.lease_duration + 10s);
  CHECK(first.size() == static_cast<std::size_t>(leases));
  // One stream: one watch thread here, one watcher on the server.
  CHECK(threads_named("lh.watch") == 1);
  CHECK(etcd_gauge(etcd.endpoint(), "etcd_debugging_mvcc_watcher_total") == 1);

  // The replica leading the most leases shuts down: it releases each, and
  // the others take them over, woken by the shared stream.
  std::map<std::string, int> count;
  for (auto& [lease, who] : first)
    ++count[who];
  std::string gone = replicas[0];
  for (auto& id : replicas)
    if (count[id] > count[gone])
      gone = id;
  REQUIRE(count[gone] > 0);
  caf::scoped_actor self{sys};
  for (auto& r : runners[gone])
    self->send(r, shutdown_atom::value);
  for (std::size_t i = 0; i < runners[gone].size(); ++i)
    self->receive([](bool) {}, caf::after(10s) >> [] {});
  auto second = wait_all_led(timings.lease_duration + 10s);
  CHECK(second.size() == static_cast<std::size_t>(leases));
  for (auto& [lease, who] : second)
    CHECK_MESSAGE(who != gone, lease << " still worked by " << who);
  CHECK(threads_named("lh.watch") == 1);
  CHECK(etcd_gauge(etcd.endpoint(), "etcd_debugging_mvcc_watcher_total") == 1);
  {
    std::lock_guard<std::mutex> g(mx);
    CHECK_MESSAGE(overlaps.empty(), "two replicas worked " << (overlaps.empty() ? "" : overlaps[0]));
  }
  std::vector<runner_actor> others;
  for (auto& [id, rs] : runners)
    if (id != gone)
      others.insert(others.end(), rs.begin(), rs.end());
  shut_down(self, others, {transport});
  for (auto& r : runners[gone])
    self->send_exit(r, caf::exit_reason::user_shutdown);
}

TEST_CASE("one process, 8 leases on a real etcd: every key on one session lease, one keepalive "
          "per renew round, and revoking that lease stops every lease's work; election goes on") {
  etcd_member etcd;
  REQUIRE_MESSAGE(!etcd.endpoint().empty(), "etcd_cluster.py printed no endpoint");
  constexpr int leases = 8;
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  // The work itself says when it runs: each leader-only module counts
  // itself while its actor lives (until it has terminated, not when the
  // runtime says it stopped it). One module per lease: the count is the
  // number of leases whose work runs.
  std::atomic<int> live{0};
  auto registry = std::make_shared<module_registry>();
  registry->add({"marker", /*default_leader_only*/ true,
                 [&](caf::actor_system& s, const module_context&) {
                   return s.spawn([&](caf::event_based_actor* self) -> caf::behavior {
                     ++live;
                     self->attach_functor([&] { --live; });
                     return {[](module_settings&) {}};
                   });
                 },
                 nullptr});
  auto working = [&] { return live.load(); };
  auto timings = test::short_timings();
  timings.lease_duration = 3s;   // TTL 3 s: whole seconds
  timings.renew_deadline = 2s;
  auto backend = spawn_etcd_backend(sys, config({etcd.endpoint()}));
  std::vector<runner_actor> runners;
  for (int i = 0; i < leases; ++i) {
    auto spawned = spawn_runner(
      sys, one_module_runner("solo", "session-" + std::to_string(i), "marker", timings, backend, registry));
    REQUIRE(spawned.errors.empty());
    runners.push_back(spawned.runner);
  }
  etcd_client admin(config({etcd.endpoint()}));
  auto leases_of_keys = [&] {
    std::set<std::string> ids;
    for (int i = 0; i < leases; ++i) {
      auto r = admin.post("/v3/kv/range",
                          {{"key", encode_base64(admin.scope("ns1").key("session-" + std::to_string(i)))}});
      if (r.ok())
        if (auto kv = first_kv(*r.value); kv.ok() && *kv.value)
          ids.insert((*kv.value)->lease_id);
    }
    return ids;
  };
  auto ms = [](caf::timespan t) { return std::chrono::duration_cast<std::chrono::milliseconds>(t); };
  CHECK(test::eventually([&] { return working() == leases; },
                         ms(timings.lease_duration + 5s) + test::load_slack, 50ms));
  auto bound = leases_of_keys();
  REQUIRE(bound.size() == 1);   // every key on the one session lease

  // Renews: one range per key (alone, or in a txn of ranges when they
  // queue up: the pool's batches), and the keepalives of one round shared.
  long kept0 = etcd_handled(etcd.endpoint(), "LeaseKeepAlive");
  long ranges0 = etcd_handled(etcd.endpoint(), "Range");
  auto batched0 = current_transport_census().batched;
  REQUIRE(kept0 >= 0);
  std::this_thread::sleep_for(3s);
  long kept = etcd_handled(etcd.endpoint(), "LeaseKeepAlive") - kept0;
  long ranges = etcd_handled(etcd.endpoint(), "Range") - ranges0
                + static_cast<long>(current_transport_census().batched - batched0);
  MESSAGE("in 3 s: " << kept << " keepalives, " << ranges << " ranges for " << leases
                     << " leases renewed every " << ms(timings.retry_period).count() << " ms");
  CHECK(ranges >= leases * 4);   // 10 rounds of 8 renews, at load fewer
  // One keepalive per key would be as many as the ranges; shared, a round of
  // 8 renews spread over a retry period needs 2-3 (renew_max_age is half of it).
  CHECK(kept * 2 <= ranges);
  CHECK(working() == leases);

  // An operator revokes the session lease: every key goes, and every
  // lease's work stops (within renew deadline + stop); then the leases are
  // created anew, on one new session lease.
  auto revoked = admin.post("/v3/lease/revoke", {{"ID", *bound.begin()}});
  REQUIRE_MESSAGE(revoked.ok(), revoked.error.describe());
  CHECK(test::eventually([&] { return working() == 0; },
                         ms(timings.renew_deadline + timings.module_stop_timeout) + test::load_slack, 20ms));
  CHECK(test::eventually([&] { return working() == leases; },
                         ms(2 * timings.lease_duration + 5s) + test::load_slack, 50ms));
  auto rebound = leases_of_keys();
  CHECK(rebound.size() == 1);
  CHECK(rebound != bound);

  caf::scoped_actor self{sys};
  shut_down(self, runners, {backend.transport});
}

TEST_CASE("a second process following 10 etcd keys of a live holder sends ~no range: "
          "its followers share the holder's TTL reading") {
  // Two transports (two processes' worth): A leads 10 keys, B only follows
  // them. etcd's own Range count over a window, less A's renews (one range
  // each, counted from its events) and the streams' quiet reads, is B's:
  // a range per key every half lease duration before (~40 in 10 s), now
  // about one TTL read per holder lease per n - 0.5 s and no range.
  etcd_member etcd;
  REQUIRE_MESSAGE(!etcd.endpoint().empty(), "etcd_cluster.py printed no endpoint");
  constexpr int leases = 10;
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto registry = idle_module_registry();
  std::atomic<int> a_leading{0};
  std::atomic<long> a_renews{0};
  auto timings = test::short_timings();
  timings.lease_duration = 5s;   // TTL 5 s: readings of 3-4 s, which serve (ttl_tells_expiry)
  timings.renew_deadline = 2500ms;
  timings.retry_period = 500ms;
  timings.request_timeout = 1s;
  timings.module_stop_timeout = 1s;
  REQUIRE(ttl_tells_expiry(timings, 5s));
  auto a = spawn_etcd_backend(sys, config({etcd.endpoint()}));
  auto b = spawn_etcd_backend(sys, config({etcd.endpoint()}));
  std::vector<runner_actor> runners;
  for (int i = 0; i < leases; ++i) {
    auto o = one_module_runner("A", "follow-" + std::to_string(i), "idle", timings, a, registry);
    o.events = [&](const runtime_event& e) {
      if (e.type == event_type::term_acquired)
        ++a_leading;
      else if (e.type == event_type::renewed)
        ++a_renews;
    };
    auto spawned = spawn_runner(sys, o);
    REQUIRE_MESSAGE(spawned.errors.empty(), (spawned.errors.empty() ? "" : spawned.errors.front()));
    runners.push_back(spawned.runner);
  }
  REQUIRE(test::eventually([&] { return a_leading.load() == leases; }, 15s + test::load_slack, 50ms));
  for (int i = 0; i < leases; ++i) {
    auto o = one_module_runner("B", "follow-" + std::to_string(i), "idle", timings, b, registry);
    o.compete = false;   // a follower only
    auto spawned = spawn_runner(sys, o);
    REQUIRE(spawned.errors.empty());
    runners.push_back(spawned.runner);
  }
  std::this_thread::sleep_for(6s);   // B's first reads, then its readings shared
  long ranges0 = etcd_handled(etcd.endpoint(), "Range");
  long renews0 = a_renews.load();
  REQUIRE(ranges0 >= 0);
  std::this_thread::sleep_for(10s);
  long ranges = etcd_handled(etcd.endpoint(), "Range") - ranges0;
  long renews = a_renews.load() - renews0;
  long follower = ranges - renews;
  MESSAGE("in 10 s: " << ranges << " ranges, " << renews << " of them A's renews: " << follower
                      << " B's reads and the streams' quiet reads");
  CHECK(renews >= leases * 10);   // A renewed all along (at load fewer than 20 rounds)
  CHECK(follower <= 12);          // before: ~40 (10 keys every 2.5 s), and the quiet reads
  CHECK(a_leading.load() == leases);

  caf::scoped_actor self{sys};
  shut_down(self, runners, {a.transport, b.transport});
}

TEST_CASE("balance membership on a real etcd: keys bound to the replica's etcd lease, join order, withdraw, expiry") {
  etcd_member etcd;
  REQUIRE_MESSAGE(!etcd.endpoint().empty(), "etcd_cluster.py printed no endpoint");
  etcd_members a(config({etcd.endpoint()})), b(config({etcd.endpoint()}));
  candidate ca{"default", "workers", "agent-a", std::chrono::seconds(2), ""};
  candidate cb{"default", "workers", "agent-b", std::chrono::seconds(2), ""};
  candidate other{"default", "others", "agent-c", std::chrono::seconds(2), ""};
  auto first = a.announce(ca);
  REQUIRE_MESSAGE(first.ok(), first.error.describe());
  REQUIRE(b.announce(other).ok());
  auto seen = b.announce(cb);
  REQUIRE_MESSAGE(seen.ok(), seen.error.describe());
  REQUIRE(seen.value->size() == 2);   // the other group is not listed
  std::map<std::string, std::int64_t> joined;
  for (auto& m : *seen.value) {
    joined[m.identity] = m.joined;
    CHECK(m.renewed.empty());   // the store expires members itself
  }
  REQUIRE(joined.count("agent-a"));
  REQUIRE(joined.count("agent-b"));
  CHECK(joined["agent-a"] < joined["agent-b"]);
  // Announcing again keeps the key (and its place).
  auto again = a.announce(ca);
  REQUIRE(again.ok());
  for (auto& m : *again.value)
    CHECK(m.joined == joined[m.identity]);
  // A withdraw deletes it at once.
  auto w = a.withdraw(ca);
  REQUIRE(w.ok());
  CHECK(*w.value);
  auto after = b.announce(cb);
  REQUIRE(after.ok());
  REQUIRE(after.value->size() == 1);
  CHECK(after.value->front().identity == "agent-b");
  // A replica that stops announcing is gone once its TTL ran out: a new
  // member soon sees only itself.
  etcd_members c(config({etcd.endpoint()}));
  candidate cc{"default", "workers", "agent-c", std::chrono::seconds(2), ""};
  std::vector<member_record> late;
  CHECK(leasehold::test::eventually(
    [&] {
      auto r = c.announce(cc);
      if (r.ok())
        late = *r.value;
      return r.ok() && late.size() == 1;
    },
    4s + leasehold::test::load_slack, 100ms));
  REQUIRE(late.size() == 1);
  CHECK(late.front().identity == "agent-c");
}

TEST_CASE("an etcd request that fails on every endpoint names the endpoint in its error") {
  // The error is what the log, /readyz ("lease API failing for Nms ...: <the
  // failure>") and the metrics' kind show: the operator sees which member.
  etcd_client c(config({"http://127.0.0.1:1", "http://127.0.0.1:2"}));
  auto r = c.get_lease({"default", "x"});
  REQUIRE_FALSE(r.ok());
  CHECK(r.kind() == error_kind::connection_refused);
  CHECK_MESSAGE(r.error.describe().find("(endpoint http://127.0.0.1:") != std::string::npos,
                r.error.describe());
}
