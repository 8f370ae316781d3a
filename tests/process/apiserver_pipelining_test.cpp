// leasehold-apiserver answers pipelined requests (several written on one
// keep-alive connection before the first answer is read) in order, on plain
// HTTP and on TLS. The client here is a raw
// socket (and OpenSSL for TLS): it writes exactly the bytes each case says,
// in the writes it says, and reads the answers with a bounded wait.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "cmd/leasehold-apiserver/api_server.hpp"
#include "tests/support/certificates.hpp"
#include "tests/support/proc.hpp"
#include "tests/support/temp_dir.hpp"

using nlohmann::json;
using namespace std::chrono_literals;
using leasehold::test::temp_dir;

namespace {

const std::string leases = "/apis/coordination.k8s.io/v1/namespaces/ns1/leases";

std::string lease(const std::string& name, const std::string& rv = "", const std::string& holder = "a") {
  json j = {{"apiVersion", "coordination.k8s.io/v1"},
            {"kind", "Lease"},
            {"metadata", {{"name", name}}},
            {"spec", {{"holderIdentity", holder}, {"leaseDurationSeconds", 15}}}};
  if (!rv.empty())
    j["metadata"]["resourceVersion"] = rv;
  return j.dump();
}

/// One HTTP/1.1 request as a client writes it.
std::string http(const std::string& method, const std::string& path, const std::string& body = "") {
  return method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: pipelining-test\r\n" +
         "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

struct answer {
  int status = 0;
  json body;
};

/// A server (plain or TLS) and raw connections to it.
struct pipelining_server {
  temp_dir dir;
  std::unique_ptr<leasehold::local_api_server> server;
  bool tls;

  explicit pipelining_server(bool with_tls) : tls(with_tls) {
    leasehold::api_server_options opts;
    if (tls) {
      REQUIRE_MESSAGE(leasehold::test::command_exists("openssl"),
                      "the openssl command is not installed (scripts/setup installs it)");
      auto error = leasehold::test::make_test_certificates(dir);
      REQUIRE_MESSAGE(error.empty(), error);
      opts.tls_cert_file = dir.file("server.crt");
      opts.tls_key_file = dir.file("server.key");
    }
    server = std::make_unique<leasehold::local_api_server>(opts);
    auto started = server->start();
    REQUIRE_MESSAGE(started.ok(), started.error);
  }
};

/// A keep-alive connection written and read byte for byte.
class raw_connection {
public:
  explicit raw_connection(const pipelining_server& s) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(s.server->port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    timeval tv{2, 0};   // no read below blocks longer
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (!s.tls)
      return;
    ctx_ = SSL_CTX_new(TLS_client_method());
    REQUIRE(SSL_CTX_load_verify_locations(ctx_, s.dir.file("ca.crt").c_str(), nullptr) == 1);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    REQUIRE(SSL_connect(ssl_) == 1);
  }
  ~raw_connection() {
    if (ssl_ != nullptr)
      SSL_free(ssl_);
    if (ctx_ != nullptr)
      SSL_CTX_free(ctx_);
    ::close(fd_);
  }
  raw_connection(const raw_connection&) = delete;
  raw_connection& operator=(const raw_connection&) = delete;

  /// One write of all of `bytes` (one TLS record when it fits).
  void send(const std::string& bytes) {
    if (ssl_ != nullptr) {
      REQUIRE(SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size())) == static_cast<int>(bytes.size()));
      return;
    }
    std::size_t sent = 0;
    while (sent < bytes.size()) {
      auto n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      REQUIRE(n > 0);
      sent += static_cast<std::size_t>(n);
    }
  }

  /// The next `n` answers, in the order they came; fewer when `within`
  /// passes or the connection ends first.
  std::vector<answer> answers(std::size_t n, std::chrono::milliseconds within = 5000ms) {
    std::vector<answer> out;
    auto deadline = std::chrono::steady_clock::now() + within;
    while (out.size() < n) {
      if (auto a = parse_one()) {
        out.push_back(*a);
        continue;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0 || !receive(static_cast<int>(left)))
        break;
    }
    return out;
  }

  /// The server closed the connection (a read saw its end).
  bool ended() const { return ended_; }

  /// The TCP segments with data this connection received so far (the
  /// kernel's tcpi_data_segs_in: glibc's tcp_info stops before it).
  std::uint32_t data_segments_in() const {
    struct kernel_tcp_info {
      tcp_info known;   // glibc's 104 bytes, as the kernel lays them out
      std::uint64_t pacing_rate, max_pacing_rate, bytes_acked, bytes_received;
      std::uint32_t segs_out, segs_in, notsent_bytes, min_rtt, data_segs_in, data_segs_out;
    } info{};
    static_assert(sizeof(tcp_info) == 104, "glibc's tcp_info changed: look again at the layout");
    socklen_t size = sizeof info;
    REQUIRE(::getsockopt(fd_, IPPROTO_TCP, TCP_INFO, &info, &size) == 0);
    REQUIRE(size >= offsetof(kernel_tcp_info, data_segs_out));
    return info.data_segs_in;
  }

private:
  /// Reads what arrives within `timeout_ms`; false on timeout or end.
  bool receive(int timeout_ms) {
    if (ssl_ == nullptr || SSL_pending(ssl_) == 0) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, timeout_ms) <= 0)
        return false;
    }
    char buf[16384];
    long n = ssl_ != nullptr ? SSL_read(ssl_, buf, sizeof buf) : ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      ended_ = true;
      return false;
    }
    pending_.append(buf, static_cast<std::size_t>(n));
    return true;
  }

  /// One complete answer (Content-Length framed) off the front of pending_.
  std::optional<answer> parse_one() {
    auto head_end = pending_.find("\r\n\r\n");
    if (head_end == std::string::npos)
      return std::nullopt;
    std::string head = pending_.substr(0, head_end);
    std::size_t length = 0;
    std::size_t line = head.find("\r\n");
    while (line != std::string::npos) {
      auto next = head.find("\r\n", line + 2);
      auto h = head.substr(line + 2, next == std::string::npos ? std::string::npos : next - line - 2);
      auto colon = h.find(':');
      if (colon != std::string::npos) {
        auto name = h.substr(0, colon);
        for (auto& c : name)
          c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (name == "content-length")
          length = std::stoul(h.substr(colon + 1));
      }
      line = next;
    }
    if (pending_.size() < head_end + 4 + length)
      return std::nullopt;
    answer a;
    REQUIRE(head.rfind("HTTP/1.1 ", 0) == 0);
    a.status = std::stoi(head.substr(9, 3));
    auto body = pending_.substr(head_end + 4, length);
    a.body = body.empty() ? json() : json::parse(body);
    pending_.erase(0, head_end + 4 + length);
    return a;
  }

  int fd_ = -1;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  std::string pending_;
  bool ended_ = false;
};

/// Runs the calling test case twice: false (plain HTTP), then true (TLS).
bool plain_then_tls() {
  bool tls = false;
  SUBCASE("plain HTTP") { tls = false; }
  SUBCASE("TLS") { tls = true; }
  return tls;
}

std::string name_of(const answer& a) {
  return a.body["metadata"]["name"].get<std::string>();
}

/// Creates leases l0..l{n-1} one request at a time; their resourceVersions.
std::vector<std::string> create_leases(raw_connection& c, int n) {
  std::vector<std::string> rvs;
  for (int i = 0; i < n; ++i) {
    c.send(http("POST", leases, lease("l" + std::to_string(i))));
    auto a = c.answers(1);
    REQUIRE(a.size() == 1);
    REQUIRE(a[0].status == 201);
    rvs.push_back(a[0].body["metadata"]["resourceVersion"].get<std::string>());
  }
  return rvs;
}

} // namespace

TEST_CASE("pipelining: N requests in one write get N answers in order (GETs, POSTs, a stale PUT, a mix)") {
  pipelining_server s(plain_then_tls());
  raw_connection c(s);

  // POST creates, one of them a duplicate.
  std::string batch;
  for (int i = 0; i < 5; ++i)
    batch += http("POST", leases, lease("l" + std::to_string(i)));
  batch += http("POST", leases, lease("l2"));
  c.send(batch);
  auto created = c.answers(6);
  REQUIRE(created.size() == 6);
  for (int i = 0; i < 5; ++i) {
    CHECK(created[i].status == 201);
    CHECK(name_of(created[i]) == "l" + std::to_string(i));
  }
  CHECK(created[5].status == 409);
  CHECK(created[5].body["reason"] == "AlreadyExists");

  // GETs, each answer the lease it asked for.
  batch.clear();
  for (int i = 4; i >= 0; --i)
    batch += http("GET", leases + "/l" + std::to_string(i));
  c.send(batch);
  auto got = c.answers(5);
  REQUIRE(got.size() == 5);
  for (int i = 0; i < 5; ++i) {
    CHECK(got[i].status == 200);
    CHECK(name_of(got[i]) == "l" + std::to_string(4 - i));
  }

  // A mix: a PUT that wins, the same stale PUT again (409), a GET showing
  // the winner, a missing lease, a DELETE, the GET of what it deleted.
  auto rv = created[0].body["metadata"]["resourceVersion"].get<std::string>();
  batch = http("PUT", leases + "/l0", lease("l0", rv, "b")) +
          http("PUT", leases + "/l0", lease("l0", rv, "c")) +
          http("GET", leases + "/l0") +
          http("GET", leases + "/missing") +
          http("DELETE", leases + "/l1") +
          http("GET", leases + "/l1");
  c.send(batch);
  auto mixed = c.answers(6);
  REQUIRE(mixed.size() == 6);
  CHECK(mixed[0].status == 200);
  CHECK(mixed[0].body["spec"]["holderIdentity"] == "b");
  CHECK(mixed[1].status == 409);
  CHECK(mixed[1].body["reason"] == "Conflict");
  CHECK(mixed[2].status == 200);
  CHECK(mixed[2].body["spec"]["holderIdentity"] == "b");
  CHECK(mixed[2].body["metadata"]["resourceVersion"] == mixed[0].body["metadata"]["resourceVersion"]);
  CHECK(mixed[3].status == 404);
  CHECK(mixed[4].status == 200);
  CHECK(mixed[5].status == 404);
}

TEST_CASE("pipelining: 100 PUTs in one write, each renewing its own lease, all answered") {
  pipelining_server s(plain_then_tls());
  raw_connection c(s);
  constexpr int n = 100;
  auto rvs = create_leases(c, n);
  std::string batch;   // ~25 KB: more than one read of the server's buffer
  for (int i = 0; i < n; ++i)
    batch += http("PUT", leases + "/l" + std::to_string(i), lease("l" + std::to_string(i), rvs[i], "renewed"));
  c.send(batch);
  auto renewed = c.answers(n);
  REQUIRE(renewed.size() == n);
  for (int i = 0; i < n; ++i) {
    CHECK(renewed[i].status == 200);
    CHECK(name_of(renewed[i]) == "l" + std::to_string(i));
    CHECK(renewed[i].body["spec"]["holderIdentity"] == "renewed");
  }
}

TEST_CASE("pipelining: a batch's answers go out together, not one write each") {
  pipelining_server s(plain_then_tls());
  raw_connection c(s);
  constexpr int n = 20;
  create_leases(c, n);
  std::string batch;
  for (int i = 0; i < n; ++i)
    batch += http("GET", leases + "/l" + std::to_string(i));
  auto before = c.data_segments_in();
  c.send(batch);   // ~3 KB: the server reads it whole, answers ~12 KB
  auto got = c.answers(n);
  REQUIRE(got.size() == n);
  for (int i = 0; i < n; ++i)
    CHECK(name_of(got[i]) == "l" + std::to_string(i));
  // One write of all the answers (TLS: a record per 16 KiB, each its own
  // segment); an answer per write was 20 segments.
  auto segments = c.data_segments_in() - before;
  MESSAGE(n << " pipelined answers came in " << segments << " segments");
  CHECK(segments <= 3);
}

TEST_CASE("pipelining: a batch, then more requests later on the same connection") {
  pipelining_server s(plain_then_tls());
  raw_connection c(s);
  create_leases(c, 3);
  c.send(http("GET", leases + "/l0") + http("GET", leases + "/l1") + http("GET", leases + "/l2"));
  auto first = c.answers(3);
  REQUIRE(first.size() == 3);
  CHECK(name_of(first[2]) == "l2");
  std::this_thread::sleep_for(200ms);   // the connection idles in the keep-alive wait
  c.send(http("GET", leases + "/l2") + http("GET", leases + "/l0"));
  auto later = c.answers(2);
  REQUIRE(later.size() == 2);
  CHECK(name_of(later[0]) == "l2");
  CHECK(name_of(later[1]) == "l0");
  c.send(http("GET", leases + "/l1"));
  auto single = c.answers(1);
  REQUIRE(single.size() == 1);
  CHECK(name_of(single[0]) == "l1");
}

TEST_CASE("pipelining: a request split across two writes; a truncated last request") {
  pipelining_server s(plain_then_tls());
  raw_connection c(s);
  create_leases(c, 2);

  // Two whole requests and the head of a third in one write, its rest in a
  // second: three answers in order.
  auto put = http("PUT", leases + "/l1", lease("l1", "1", "stale"));
  auto batch = http("GET", leases + "/l0") + http("GET", leases + "/l1") + put;
  auto cut = batch.size() - put.size() / 2;   // in the third one's body
  c.send(batch.substr(0, cut));
  auto before = c.answers(3, 300ms);
  CHECK(before.size() == 2);
  c.send(batch.substr(cut));
  auto after = c.answers(1);
  REQUIRE(after.size() == 1);
  CHECK(after[0].status == 409);   // resourceVersion 1 is not l1's
  REQUIRE(before.size() == 2);
  CHECK(name_of(before[0]) == "l0");
  CHECK(name_of(before[1]) == "l1");

  // Split inside the request line and the headers.
  auto get = http("GET", leases + "/l0");
  c.send(get.substr(0, 7));
  std::this_thread::sleep_for(50ms);
  c.send(get.substr(7, 30));
  std::this_thread::sleep_for(50ms);
  c.send(get.substr(37) + http("GET", leases + "/l1"));
  auto split = c.answers(2);
  REQUIRE(split.size() == 2);
  CHECK(name_of(split[0]) == "l0");
  CHECK(name_of(split[1]) == "l1");

  // A truncated last request never completed: the ones before it are
  // answered, it is not, and the server serves other connections meanwhile.
  c.send(http("GET", leases + "/l1") + http("GET", leases + "/l0") + get.substr(0, 20));
  auto truncated = c.answers(3, 500ms);
  REQUIRE(truncated.size() == 2);
  CHECK(name_of(truncated[0]) == "l1");
  CHECK(name_of(truncated[1]) == "l0");
  raw_connection other(s);
  other.send(http("GET", leases + "/l1"));
  auto answered = other.answers(1);
  REQUIRE(answered.size() == 1);
  CHECK(answered[0].status == 200);
}

TEST_CASE("pipelining: a partition drops the connection a batch came on; other clients are served") {
  pipelining_server s(plain_then_tls());
  raw_connection c(s);
  create_leases(c, 1);
  httplib::Client control("127.0.0.1", s.server->control_port());
  auto set = control.Post("/_leasehold/faults", R"({"partition":{"user_agent":"pipelining-test"}})",
                          "application/json");
  REQUIRE(set);
  REQUIRE(set->status == 200);
  c.send(http("GET", leases + "/l0") + http("GET", leases + "/l0") + http("GET", leases + "/l0"));
  auto cut = c.answers(3);
  CHECK(cut.empty());
  CHECK(c.ended());   // cut, not left hanging
  auto stats = control.Get("/_leasehold/stats");
  REQUIRE(stats);
  // The first GET was dropped with its connection; the two behind it went
  // with the connection, unread.
  auto client = json::parse(stats->body)["by_user_agent"]["pipelining-test"];
  CHECK(client["by_code"]["none"] == 1);
  CHECK(client["by_verb"]["get"] == 1);
  auto lifted = control.Post("/_leasehold/faults", R"({"partition":null})", "application/json");
  REQUIRE(lifted);
  raw_connection again(s);
  again.send(http("GET", leases + "/l0") + http("GET", leases + "/l0"));
  auto answered = again.answers(2);
  REQUIRE(answered.size() == 2);
  CHECK(name_of(answered[1]) == "l0");
}
