#include "transport/http/http_client.hpp"

#include <atomic>
#include <mutex>

#include <httplib.h>

#include "transport/http/text_files.hpp"
#include "transport/http/http_errors.hpp"
#include "transport/http/http_pipeline.hpp"
#include "transport/http/server_url.hpp"
#include "transport/http/tls_files.hpp"

#ifndef LEASEHOLD_VERSION
#define LEASEHOLD_VERSION "dev"
#endif

namespace leasehold {

namespace {

using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

/// How long send_all goes one request at a time (pause_if_unpipelined).
constexpr std::chrono::seconds pipeline_pause{60};

} // namespace

std::chrono::milliseconds max_request_time(const connection_config& cfg) {
  return cfg.connect_timeout + cfg.write_timeout + cfg.read_timeout;
}

struct http_client::impl {
  connection_config cfg;
  endpoint ep;
  std::unique_ptr<httplib::ClientImpl> http;
  private_temp_file ca_file_from_data;
  api_error setup_error;     // kind none when the client is usable
  std::string last_token;    // last good content of cfg.token_file
  std::mutex mtx;            // one request at a time
  std::unique_ptr<http_pipeline> pipeline;   // send_all's connection, opened on first use
  /// send_all sends one request at a time until then (steady ns; 0: never paused).
  std::atomic<steady::rep> pipeline_paused_until{0};

  explicit impl(connection_config c) : cfg(std::move(c)) {
    if (cfg.user_agent.empty())
      cfg.user_agent = std::string("leasehold/") + LEASEHOLD_VERSION;
    setup();
  }

  void fail_setup(error_kind kind, std::string reason) {
    setup_error.kind = kind;
    setup_error.reason = std::move(reason);
    http.reset();
  }

  void setup() {
    std::string err;
    auto parsed = parse_server_url(cfg.server, err);
    if (!parsed)
      return fail_setup(error_kind::other, err);
    ep = *parsed;
    if (ep.tls)
      setup_tls();
    else
      http = std::make_unique<httplib::ClientImpl>(ep.host, ep.port);
    if (!http)
      return;
    http->set_connection_timeout(cfg.connect_timeout);
    http->set_read_timeout(cfg.read_timeout);
    http->set_write_timeout(cfg.write_timeout);
    http->set_keep_alive(true);
    http->set_tcp_nodelay(true);   // small PUT bodies: no 40 ms Nagle delay
    http->set_follow_location(false);
  }

  /// Sets `http` to a TLS client, or fails the setup.
  void setup_tls() {
    std::string err;
    auto id = read_client_identity(cfg, err);
    if (!id)
      return fail_setup(error_kind::tls_error, err);
    // The SSL context takes its own references to the certificate and key.
    auto ssl = id->cert ? std::make_unique<httplib::SSLClient>(ep.host, ep.port, id->cert.get(),
                                                               id->key.get())
                        : std::make_unique<httplib::SSLClient>(ep.host, ep.port);
    if (!ssl->is_valid())
      return fail_setup(error_kind::tls_error, "client certificate and key do not match");
    if (!cfg.ca_data.empty()) {
      if (!ca_file_from_data.write(cfg.ca_data))
        return fail_setup(error_kind::tls_error, "cannot write CA data to a temporary file");
      ssl->set_ca_cert_path(ca_file_from_data.path());
    } else if (!cfg.ca_file.empty()) {
      ssl->set_ca_cert_path(cfg.ca_file);
    }
    ssl->enable_server_certificate_verification(!cfg.insecure_skip_tls_verify);
    http = std::move(ssl);
  }

  /// The bearer token, its file re-read per request (tokens rotate); an
  /// unreadable file keeps the last good token.
  bool bearer_token(std::string& token, std::string& err) {
    if (cfg.token_file.empty()) {
      token = cfg.token;
      return true;
    }
    if (auto text = read_text_file(cfg.token_file); text && !trim_whitespace(*text).empty())
      last_token = trim_whitespace(*text);
    if (last_token.empty()) {
      err = "token file " + cfg.token_file + ": unreadable or empty";
      return false;
    }
    token = last_token;
    return true;
  }

  api_result<http_response> exchange(const std::string& verb, const std::string& path,
                                     const std::string* body, const http_headers& extra = {}) {
    std::lock_guard<std::mutex> guard(mtx);
    httplib::Request req;
    if (auto err = prepare(req, verb, path, body, extra))
      return api_result<http_response>::failure(*err);
    bool got_headers = false;
    bool declares_trailer = false;
    int status = 0;
    req.response_handler = [&](const httplib::Response& r) {
      got_headers = true;
      status = r.status;
      declares_trailer = r.has_header("Trailer");
      return true;
    };
    // The body as it streams in: cpp-httplib 0.11 fails a chunked body that
    // ends in trailers (every error reply of etcd's gRPC gateway) after the
    // body itself was read.
    std::string received;
    req.content_receiver = [&received](const char* data, size_t n, uint64_t, uint64_t) {
      received.append(data, n);
      return true;
    };
    auto start = steady::now();
    auto res = http->send(req);
    if (!res && res.error() == httplib::Error::Read && got_headers && declares_trailer)
      return api_result<http_response>::success({status, std::move(received), ""});
    if (!res) {
      auto elapsed = std::chrono::duration_cast<milliseconds>(steady::now() - start);
      return api_result<http_response>::failure(
        transport_error(verb, path, res.error(), got_headers, elapsed, cfg));
    }
    return api_result<http_response>::success(
      {res->status, std::move(received), res->get_header_value("Retry-After")});
  }

  /// A request with the headers every request carries, plus `extra` (a
  /// `body` is sent as JSON).
  std::optional<api_error> prepare(httplib::Request& req, const std::string& verb,
                                   const std::string& path, const std::string* body,
                                   const http_headers& extra) {
    http_headers headers;
    if (auto err = common_headers(verb, path, headers))
      return err;
    req.method = verb;
    req.path = ep.prefix + path;
    req.headers = {headers.begin(), headers.end()};
    req.headers.insert(extra.begin(), extra.end());
    if (body) {
      req.body = *body;
      req.headers.emplace("Content-Type", "application/json");
    }
    return std::nullopt;
  }

  /// The headers every request carries (the bearer token re-read).
  std::optional<api_error> common_headers(const std::string& verb, const std::string& path,
                                          http_headers& out) {
    if (setup_error.kind != error_kind::none) {
      auto err = setup_error;
      err.verb = verb;
      err.path = path;
      return err;
    }
    out = {{"User-Agent", cfg.user_agent}, {"Accept", "application/json"}};
    std::string token, err_text;
    if (!bearer_token(token, err_text))
      return api_error{error_kind::other, 0, verb, path, err_text, 0};
    if (!token.empty())
      out.emplace_back("Authorization", "Bearer " + token);
    if (!cfg.identity.empty())
      out.emplace_back("X-Leasehold-Identity", cfg.identity);
    return std::nullopt;
  }

  /// A server that answers only a round's first request (cpp-httplib 0.11's
  /// did): batches go one at a time for `pipeline_pause`. Under a server
  /// merely slow the pause costs a little CPU, never an answer.
  void pause_if_unpipelined(std::vector<api_result<http_response>>& answers) {
    for (std::size_t j = 1; j < answers.size(); ++j) {
      if (!answers[j - 1].ok() || answers[j].ok() || answers[j].error.kind != error_kind::timeout)
        continue;
      pipeline_paused_until =
        (steady::now() + pipeline_pause).time_since_epoch().count();
      for (auto k = j; k < answers.size(); ++k)
        if (!answers[k].ok() && answers[k].error.kind == error_kind::timeout)
          answers[k].error.reason +=
            "; the server answered the pipelined request before it and not this one (a server "
            "or proxy that does not pipeline?): batches go one request at a time for " +
            std::to_string(std::chrono::duration_cast<std::chrono::seconds>(pipeline_pause).count())
            + " s";
      return;
    }
  }

  /// `call`'s HTTP/1.1 text for a pipelined batch, or the error that keeps
  /// it from being sent (a header value with a line break).
  std::optional<api_error> wire_text(const http_call& call, const http_headers& headers,
                                     std::string& out) {
    bool default_port = ep.port == (ep.tls ? 443 : 80);
    auto host = ep.host.find(':') != std::string::npos ? "[" + ep.host + "]" : ep.host;
    out = call.verb + " " + ep.prefix + call.path + " HTTP/1.1\r\nHost: " + host +
          (default_port ? "" : ":" + std::to_string(ep.port)) + "\r\n";
    for (auto& [name, value] : headers) {
      if (value.find_first_of("\r\n") != std::string::npos)
        return api_error{error_kind::other, 0, call.verb, call.path,
                         "header " + name + ": contains a line break", 0};
      out += name + ": " + value + "\r\n";
    }
    if (call.body)
      out += "Content-Type: application/json\r\nContent-Length: " +
             std::to_string(call.body->size()) + "\r\n\r\n" + *call.body;
    else
      out += "\r\n";
    return std::nullopt;
  }

  std::vector<api_result<http_response>> exchange_all(const std::vector<http_call>& calls) {
    if (steady::now().time_since_epoch().count() < pipeline_paused_until.load()) {
      std::vector<api_result<http_response>> out;   // one request at a time meanwhile
      for (auto& c : calls)
        out.push_back(exchange(c.verb, c.path, c.body));
      return out;
    }
    std::lock_guard<std::mutex> guard(mtx);
    std::vector<api_result<http_response>> out(calls.size());
    std::vector<pipelined_request> reqs;
    std::vector<std::size_t> sent_index;   // reqs[j] is calls[sent_index[j]]
    http_headers headers;   // the same for every call: read (the token) once
    std::optional<api_error> header_error;
    if (!calls.empty())
      header_error = common_headers(calls.front().verb, calls.front().path, headers);
    for (std::size_t i = 0; i < calls.size(); ++i) {
      auto& c = calls[i];
      pipelined_request r{c.verb, c.path, {}};
      auto err = header_error;
      if (err) {
        err->verb = c.verb;
        err->path = c.path;
      } else {
        err = wire_text(c, headers, r.wire);
      }
      if (err) {
        out[i] = api_result<http_response>::failure(*err);
        continue;
      }
      reqs.push_back(std::move(r));
      sent_index.push_back(i);
    }
    if (reqs.empty())
      return out;
    if (!pipeline)
      pipeline = std::make_unique<http_pipeline>(cfg, ep);
    auto answers = pipeline->exchange(reqs);
    pause_if_unpipelined(answers);
    for (std::size_t j = 0; j < answers.size(); ++j)
      out[sent_index[j]] = std::move(answers[j]);
    return out;
  }
};

http_client::http_client(connection_config cfg) : impl_(std::make_unique<impl>(std::move(cfg))) {}

http_client::~http_client() = default;

api_error http_client::stream(const std::string& verb, const std::string& path,
                              const std::string* body, const http_headers& headers,
                              std::chrono::milliseconds idle_timeout,
                              const std::function<void()>& on_open,
                              const std::function<bool(const char*, std::size_t)>& on_data) {
  auto& d = *impl_;
  std::lock_guard<std::mutex> guard(d.mtx);
  httplib::Request req;
  if (auto err = d.prepare(req, verb, path, body, headers))
    return *err;
  // A stream's connection is not kept for the next one: between streams (a
  // backoff after a refusal, say) it would hold one of the server's worker
  // threads for nothing.
  req.headers.emplace("Connection", "close");
  d.http->set_read_timeout(idle_timeout);
  int status = 0;
  std::string error_body;   // a non-200 answer's Status, kept for the error
  auto start = steady::now();
  auto last_data = start;   // a read error this long after it is the idle timeout
  req.response_handler = [&](const httplib::Response& r) {
    last_data = steady::now();
    status = r.status;
    if (status == 200)
      on_open();
    return true;
  };
  bool cancelled = false;
  req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
    if (status != 200) {
      if (error_body.size() < 65536)
        error_body.append(data, n);
      return true;
    }
    last_data = steady::now();
    cancelled = !on_data(data, n);
    return !cancelled;
  };
  auto res = d.http->send(req);
  d.http->set_read_timeout(d.cfg.read_timeout);
  if (cancelled)
    return api_error{};
  if (!res) {
    auto elapsed = std::chrono::duration_cast<milliseconds>(steady::now() - start);
    auto e = transport_error(verb, path, res.error(), status != 0, elapsed, d.cfg);
    if (status == 200 && res.error() == httplib::Error::Read) {
      auto quiet = std::chrono::duration_cast<milliseconds>(steady::now() - last_data);
      if (quiet >= idle_timeout) {
        e.kind = error_kind::timeout;
        e.reason = "watch stream delivered nothing for " + std::to_string(idle_timeout.count())
                   + "ms";
      } else {
        e.kind = error_kind::connection_refused;   // "nobody listening / connection reset"
        e.reason = "watch stream broken after " + std::to_string(quiet.count())
                   + "ms without data (connection closed or reset mid-stream)";
      }
    }
    return e;
  }
  if (status != 200)
    return classify_response(verb, path, status, error_body, res->get_header_value("Retry-After"));
  return api_error{};
}

void http_client::stop() {
  if (impl_->http)
    impl_->http->stop();
}

api_result<http_response> http_client::send(const std::string& verb, const std::string& path,
                                            const std::string* body,
                                            const http_headers& headers) {
  return never_throw<http_response>(verb, path,
                                    [&] { return impl_->exchange(verb, path, body, headers); });
}

std::vector<api_result<http_response>> http_client::send_all(const std::vector<http_call>& calls) {
  try {
    return impl_->exchange_all(calls);
  } catch (const std::exception& e) {
    std::vector<api_result<http_response>> out;
    for (auto& c : calls)
      out.push_back(api_result<http_response>::failure(
        {error_kind::other, 0, c.verb, c.path, std::string("internal error: ") + e.what(), 0}));
    return out;
  }
}

const connection_config& http_client::config() const {
  return impl_->cfg;
}

} // namespace leasehold
