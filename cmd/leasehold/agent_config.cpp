#include "cmd/leasehold/agent_config.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <random>
#include <set>

#include <yaml-cpp/yaml.h>

#include "cmd/leasehold/json_log.hpp"
#include "leasehold/suggest.hpp"
#include "transport/kube/kube_config.hpp"
#include "transport/http/server_url.hpp"

namespace leasehold::agent {

namespace {

using json = nlohmann::json;

struct timing_field {
  const char* key;
  caf::timespan election_timings::*member;
  std::optional<std::string> config_overrides::*override_value;  // nullptr: file only
};

const timing_field timing_fields[] = {
  {"lease_duration", &election_timings::lease_duration, &config_overrides::lease_duration},
  {"renew_deadline", &election_timings::renew_deadline, &config_overrides::renew_deadline},
  {"retry_period", &election_timings::retry_period, &config_overrides::retry_period},
  {"module_stop_timeout", &election_timings::module_stop_timeout,
   &config_overrides::module_stop_timeout},
  {"request_timeout", &election_timings::request_timeout, nullptr},
  {"release_timeout", &election_timings::release_timeout, nullptr},
  {"backoff_min", &election_timings::backoff_min, nullptr},
  {"backoff_max", &election_timings::backoff_max, nullptr},
  {"handover_backoff_min", &election_timings::handover_backoff_min, nullptr},
  {"handover_backoff_max", &election_timings::handover_backoff_max, nullptr},
};

struct string_field {
  const char* key;
  std::string agent_config::*member;
  std::optional<std::string> config_overrides::*override_value;
};

const string_field string_fields[] = {
  {"identity", &agent_config::identity, &config_overrides::identity},
  {"namespace", &agent_config::ns, &config_overrides::ns},
  {"lease_name", &agent_config::lease_name, &config_overrides::lease_name},
  {"server", &agent_config::server, &config_overrides::server},
  {"kubeconfig", &agent_config::kubeconfig, &config_overrides::kubeconfig},
  {"health_addr", &agent_config::health_addr, &config_overrides::health_addr},
  {"journal", &agent_config::journal, &config_overrides::journal},
  {"fence_dir", &agent_config::fence_dir, &config_overrides::fence_dir},
  {"log_level", &agent_config::log_level, &config_overrides::log_level},
  {"log_format", &agent_config::log_format, &config_overrides::log_format},
  {"session", &agent_config::session, &config_overrides::session},
};

void parse_timings(const json& j, const config_overrides& over, election_timings& t,
                   std::vector<std::string>& errs) {
  if (!j.is_null() && !j.is_object()) {
    errs.push_back("timings: must be an object");
    return;
  }
  if (j.is_object()) {
    std::vector<std::string> names;
    for (auto& f : timing_fields)
      names.emplace_back(f.key);
    for (auto& kv : j.items())
      if (!one_of(kv.key(), names))
        errs.push_back("timings." + kv.key() + ": unknown field" + did_you_mean(kv.key(), names));
  }
  for (auto& f : timing_fields) {
    std::string path = std::string("timings.") + f.key;
    std::optional<std::string> text;
    if (f.override_value != nullptr && over.*f.override_value) {
      text = *(over.*f.override_value);
      path = std::string("--") + f.key;
      for (auto& c : path)
        c = c == '_' ? '-' : c;
    } else if (j.is_object() && j.contains(f.key)) {
      auto& v = j.at(f.key);
      if (!v.is_string()) {
        errs.push_back(path + ": must be a duration string like \"15s\" or \"500ms\"");
        continue;
      }
      text = v.get<std::string>();
    }
    if (!text)
      continue;
    auto d = parse_duration(*text);
    if (!d)
      errs.push_back(path + ": invalid duration \"" + *text + "\": " + duration_error(*text));
    else
      t.*f.member = *d;
  }
}

/// One string field of the `etcd` object.
struct etcd_string_field {
  const char* key;
  std::string* (*member)(etcd_config&);
};

const etcd_string_field etcd_string_fields[] = {
  {"prefix", [](etcd_config& c) { return &c.prefix; }},
  {"username", [](etcd_config& c) { return &c.username; }},
  {"password", [](etcd_config& c) { return &c.password; }},
  {"ca_file", [](etcd_config& c) { return &c.http.ca_file; }},
  {"cert_file", [](etcd_config& c) { return &c.http.client_cert_file; }},
  {"key_file", [](etcd_config& c) { return &c.http.client_key_file; }},
};

void parse_etcd(const json& j, etcd_config& out, std::vector<std::string>& errs) {
  if (!j.is_object()) {
    errs.push_back("etcd: must be an object");
    return;
  }
  for (auto& kv : j.items()) {
    if (kv.key() == "endpoints") {
      if (!kv.value().is_array()) {
        errs.push_back("etcd.endpoints: must be an array of URLs");
        continue;
      }
      out.endpoints.clear();
      for (size_t i = 0; i < kv.value().size(); ++i) {
        auto& e = kv.value()[i];
        if (!e.is_string())
          errs.push_back("etcd.endpoints[" + std::to_string(i) + "]: must be a string");
        else
          out.endpoints.push_back(e.get<std::string>());
      }
      continue;
    }
    const etcd_string_field* field = nullptr;
    for (auto& f : etcd_string_fields)
      field = kv.key() == f.key ? &f : field;
    if (!field) {
      std::vector<std::string> names{"endpoints"};
      for (auto& f : etcd_string_fields)
        names.emplace_back(f.key);
      errs.push_back("etcd." + kv.key() + ": unknown field" + did_you_mean(kv.key(), names));
    }
    else if (!kv.value().is_string())
      errs.push_back("etcd." + kv.key() + ": must be a string");
    else
      *field->member(out) = kv.value().get<std::string>();
  }
}

bool same_etcd(etcd_config fa, etcd_config fb) {
  for (auto& f : etcd_string_fields)
    if (*f.member(fa) != *f.member(fb))
      return false;
  return fa.endpoints == fb.endpoints;
}

bool valid_host_port(const std::string& s) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size())
    return false;
  auto port = s.substr(colon + 1);
  for (char c : port)
    if (!std::isdigit(static_cast<unsigned char>(c)))
      return false;
  return port.size() <= 5 && std::stoi(port) <= 65535;
}

} // namespace

election_timings agent_default_timings() {
  election_timings t;
  t.release_timeout = default_release_timeout;
  return t;
}

std::vector<std::string> agent_config::restart_fields_changed(const agent_config& o) const {
  std::vector<std::string> out;
  for (auto& f : string_fields)
    if (this->*f.member != o.*f.member)
      out.push_back(f.key);
  for (auto& f : timing_fields)
    if (timings.*f.member != o.timings.*f.member)
      out.push_back(std::string("timings.") + f.key);
  if (watch != o.watch)
    out.push_back("watch");
  if (session_lease_seconds != o.session_lease_seconds)
    out.push_back("session_lease_seconds");
  if (backend != o.backend)
    out.push_back("backend");
  if (!same_etcd(etcd, o.etcd))
    out.push_back("etcd");
  return out;
}

std::string default_identity(const config_environment& env) {
  if (!env.pod_name.empty())
    return env.pod_name;
  if (env.process_suffix.empty())
    return env.hostname;
  return env.hostname + "_" + env.process_suffix;
}

config_environment config_environment::from_process() {
  config_environment env;
  std::random_device rd;
  std::uniform_int_distribution<unsigned> nibble(0, 15);
  for (int i = 0; i < 12; ++i)
    env.process_suffix.push_back("0123456789abcdef"[nibble(rd)]);
  if (auto* v = std::getenv("POD_NAME"))
    env.pod_name = v;
  if (auto* v = std::getenv("POD_NAMESPACE"))
    env.pod_namespace = v;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0)
    env.hostname = host;
  env.service_account_namespace = leasehold::service_account_namespace();
  return env;
}

void apply_environment(config_overrides& over,
                       const std::function<const char*(const char*)>& getenv) {
  auto fill = [&](std::optional<std::string>& dst, std::initializer_list<const char*> names) {
    if (dst)
      return;   // a flag
    for (auto* name : names)
      if (const char* v = getenv(name); v != nullptr && *v != '\0') {
        dst = v;
        return;
      }
  };
  fill(over.identity, {"LEASEHOLD_IDENTITY", "POD_NAME"});
  fill(over.ns, {"LEASEHOLD_NAMESPACE", "POD_NAMESPACE"});
  fill(over.lease_name, {"LEASEHOLD_LEASE_NAME"});
  fill(over.server, {"LEASEHOLD_SERVER"});
  fill(over.kubeconfig, {"LEASEHOLD_KUBECONFIG"});
  fill(over.lease_duration, {"LEASEHOLD_LEASE_DURATION"});
  fill(over.renew_deadline, {"LEASEHOLD_RENEW_DEADLINE"});
  fill(over.retry_period, {"LEASEHOLD_RETRY_PERIOD"});
  fill(over.module_stop_timeout, {"LEASEHOLD_MODULE_STOP_TIMEOUT"});
  fill(over.health_addr, {"LEASEHOLD_HEALTH_ADDR"});
  fill(over.journal, {"LEASEHOLD_JOURNAL"});
  fill(over.fence_dir, {"LEASEHOLD_FENCE_DIR"});
  fill(over.log_level, {"LEASEHOLD_LOG_LEVEL"});
  fill(over.log_format, {"LEASEHOLD_LOG_FORMAT"});
  fill(over.backend, {"LEASEHOLD_BACKEND"});
  fill(over.etcd_endpoints, {"LEASEHOLD_ETCD_ENDPOINTS"});
  fill(over.session, {"LEASEHOLD_SESSION"});
}

namespace {

/// A YAML document as JSON: plain scalars typed (true/false, null/~,
/// integers, floats), quoted ones strings.
json yaml_node_to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (auto& e : n)
        a.push_back(yaml_node_to_json(e));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (auto& kv : n)
        o[kv.first.as<std::string>()] = yaml_node_to_json(kv.second);
      return o;
    }
    case YAML::NodeType::Scalar:
      break;
  }
  const auto& s = n.Scalar();
  if (n.Tag() != "?")   // quoted ("!") or explicitly tagged: a string
    return s;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (!s.empty()) {
    char* end = nullptr;
    errno = 0;
    long long i = std::strtoll(s.c_str(), &end, 10);
    if (*end == '\0' && errno == 0 && (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-'))
      return i;
    double d = std::strtod(s.c_str(), &end);
    if (*end == '\0' && (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s[0] == '.'))
      return d;
  }
  return s;
}

} // namespace

std::vector<std::string> parse_config(const std::string& text, const module_registry& reg,
                                      const config_overrides& over,
                                      const config_environment& env, agent_config& out) {
  std::vector<std::string> errs;
  json doc;
  auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    try {
      doc = json::parse(text);
    } catch (const json::parse_error& e) {
      return {std::string("$: invalid JSON: ") + e.what()};
    }
  } else {
    try {
      doc = yaml_node_to_json(YAML::Load(text));
    } catch (const YAML::Exception& e) {   // its message names the line and column
      return {std::string("$: invalid YAML: ") + e.what()};
    }
    if (doc.is_null())
      doc = json::object();   // an empty file: defaults
  }
  if (!doc.is_object())
    return {"$: must be a JSON object (or a YAML mapping)"};

  static const std::set<std::string> known
    = {"identity", "namespace", "lease_name", "server", "kubeconfig", "timings",
       "health_addr", "journal", "fence_dir", "log_level", "log_format", "watch", "modules",
       "backend", "etcd", "session", "session_lease_seconds"};
  for (auto& kv : doc.items())
    if (known.count(kv.key()) == 0)
      errs.push_back(kv.key() + ": unknown field"
                     + did_you_mean(kv.key(), {known.begin(), known.end()}));

  agent_config cfg;
  for (auto& f : string_fields) {
    if (auto it = doc.find(f.key); it != doc.end()) {
      if (!it->is_string())
        errs.push_back(std::string(f.key) + ": must be a string");
      else
        cfg.*f.member = it->get<std::string>();
    }
    if (over.*f.override_value)
      cfg.*f.member = *(over.*f.override_value);
  }
  // Defaults that depend on where we run. An identity given empty (flag,
  // LEASEHOLD_IDENTITY or file) is an error, not a request for the default.
  bool identity_given = over.identity.has_value() || doc.contains("identity");
  if (identity_given && cfg.identity.empty())
    errs.push_back(std::string(over.identity ? "--identity" : "identity")
                   + ": must not be empty (leave it unset for the default: $POD_NAME, else "
                     "the hostname plus a per-process suffix)");
  else if (cfg.identity.empty())
    cfg.identity = default_identity(env);
  if (cfg.ns.empty()) {
    if (!env.pod_namespace.empty()) cfg.ns = env.pod_namespace;
    else if (!env.service_account_namespace.empty()) cfg.ns = env.service_account_namespace;
    else {
      cfg.ns = "default";
      cfg.ns_defaulted = true;
    }
  }

  if (auto it = doc.find("watch"); it != doc.end()) {
    if (!it->is_boolean())
      errs.push_back("watch: must be true or false" + quoted_boolean(*it));
    else
      cfg.watch = it->get<bool>();
  }
  auto before_timings = errs.size();
  parse_timings(doc.contains("timings") ? doc.at("timings") : json(), over, cfg.timings, errs);
  // The relations are checked whenever every timing parsed, whatever else is
  // wrong: one run reports every error of every stage.
  bool timings_parsed = errs.size() == before_timings;
  bool stop_timeout_parsed = true;   // what the modules' stop bounds compare against
  for (auto i = before_timings; i < errs.size(); ++i)
    stop_timeout_parsed = stop_timeout_parsed
                          && errs[i].find("module_stop_timeout") == std::string::npos
                          && errs[i].find("module-stop-timeout") == std::string::npos
                          && errs[i].rfind("timings: ", 0) != 0;
  if (timings_parsed)
    for (auto& e : validate(cfg.timings))
      errs.push_back("timings." + e);

  if (cfg.identity.empty() && !identity_given)
    errs.push_back("identity: must not be empty (set it, POD_NAME or the hostname)");
  if (cfg.identity.size() > max_identity_length)
    errs.push_back(std::string(over.identity ? "--identity" : "identity") + ": "
                   + std::to_string(cfg.identity.size()) + " characters, above the limit of "
                   + std::to_string(max_identity_length)
                   + " (the Kubernetes object-name length; it is in every log line)");
  if (auto e = lease_name_error(cfg.lease_name); !e.empty())
    errs.push_back("lease_name: " + e);
  if (auto e = namespace_error(cfg.ns); !e.empty())
    errs.push_back("namespace: " + e);
  if (!parse_log_level(cfg.log_level))
    errs.push_back("log_level: must be one of debug, info, warn, error (is \"" + cfg.log_level
                   + "\")");
  if (cfg.session != "auto" && cfg.session != "on" && cfg.session != "off")
    errs.push_back(std::string(over.session ? "--session" : "session")
                   + ": must be auto, on or off (is \"" + cfg.session + "\")");
  if (auto it = doc.find("session_lease_seconds"); it != doc.end()) {
    if (!it->is_number_integer() || it->get<std::int64_t>() < 1 || it->get<std::int64_t>() > 86400)
      errs.push_back("session_lease_seconds: must be a whole number of seconds from 1 to 86400"
                     " (the leaseDurationSeconds readers that are not leasehold wait on a bound Lease)");
    else
      cfg.session_lease_seconds = it->get<int>();
  }
  if (!parse_log_format(cfg.log_format))
    errs.push_back("log_format: must be json or text (is \"" + cfg.log_format + "\")");
  if (!valid_host_port(cfg.health_addr))
    errs.push_back("health_addr: must be host:port (is \"" + cfg.health_addr + "\")");
  if (!cfg.server.empty())
    if (auto e = server_url_error(cfg.server); !e.empty())
      errs.push_back("server: " + e);

  if (auto it = doc.find("backend"); it != doc.end()) {
    if (!it->is_string())
      errs.push_back("backend: must be a string");
    else
      cfg.backend = it->get<std::string>();
  }
  if (over.backend)
    cfg.backend = *over.backend;
  if (cfg.backend != "kubernetes" && cfg.backend != "etcd")
    errs.push_back("backend: must be kubernetes or etcd (is \"" + cfg.backend + "\")");
  if (auto it = doc.find("etcd"); it != doc.end())
    parse_etcd(*it, cfg.etcd, errs);
  if (over.etcd_endpoints) {
    cfg.etcd.endpoints.clear();
    std::string list = *over.etcd_endpoints;
    for (size_t start = 0; start <= list.size();) {
      auto comma = std::min(list.find(',', start), list.size());
      if (comma > start)
        cfg.etcd.endpoints.push_back(list.substr(start, comma - start));
      start = comma + 1;
    }
  }
  if (cfg.backend == "etcd")
    for (auto& e : validate(cfg.etcd))
      errs.push_back(e);

  if (auto it = doc.find("modules"); it != doc.end()) {
    auto module_errs
      = parse_modules(*it, reg, cfg.modules,
                      stop_timeout_parsed ? std::optional<caf::timespan>{cfg.timings.module_stop_timeout}
                                     : std::nullopt);
    for (auto& e : module_errs)
      errs.push_back(e);
  }
  for (auto& e : plan_leases(cfg.modules, cfg.lease_name, cfg.leases))
    errs.push_back(e);
  if (errs.empty())
    out = std::move(cfg);
  return errs;
}

std::vector<std::string> load_config(const std::string& path, const module_registry& reg,
                                     const config_overrides& over,
                                     const config_environment& env, agent_config& out) {
  if (path.empty())
    return parse_config("{}", reg, over, env, out);   // no file: defaults and flags
  auto text = read_text_file(path);
  if (!text)
    return {path + ": cannot read the config file"};
  return parse_config(*text, reg, over, env, out);
}

} // namespace leasehold::agent
