#include "cmd/leasehold/status_command.hpp"
#include "transport/kube/kube_session.hpp"

#include <algorithm>
#include <iomanip>
#include <map>
#include <ostream>
#include <set>
#include <sstream>

#include "cmd/leasehold/agent.hpp"
#include "cmd/leasehold/builtin_registry.hpp"
#include "leasehold/balance_group.hpp"
#include "transport/base64.hpp"
#include "transport/etcd/etcd_client.hpp"
#include "transport/http/http_client.hpp"
#include "transport/kube/kube_client.hpp"
#include "transport/kube/kube_config.hpp"
#include "transport/kube/lease_candidates.hpp"

namespace leasehold::agent {

namespace {

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (auto& s : v)
    out += (out.empty() ? "" : ",") + s;
  return out;
}

/// "1.2s", "3m4s", "-" for none.
std::string ago(const nlohmann::json& ms) {
  if (!ms.is_number())
    return "-";
  auto v = ms.get<std::int64_t>();
  std::ostringstream s;
  if (v < 60000)
    s << std::fixed << std::setprecision(1) << v / 1000.0 << "s";
  else
    s << v / 60000 << "m" << (v % 60000) / 1000 << "s";
  return s.str();
}

} // namespace

nlohmann::json status_report(const status_input& in) {
  using nlohmann::json;
  std::map<std::string, const lease*> stored;
  for (auto& l : in.leases)
    stored[l.name] = &l;
  auto order = in.config_leases;
  if (order.empty())
    for (auto& l : in.leases)
      order.emplace_back(l.name, "");
  json leases = json::array();
  for (auto& [name, group] : order) {
    json j{{"lease", name}, {"group", group}};
    auto it = stored.find(name);
    if (it == stored.end()) {
      j.update(json{{"found", false}, {"holder", ""}, {"term", nullptr}, {"renewed_ago_ms", nullptr},
                    {"expired", nullptr}, {"preferred_holder", ""}, {"idle", name == in.idle_lease}});
    } else {
      auto& s = it->second->spec;
      json renewed = nullptr;
      json expired = nullptr;
      // A bound lease is renewed with its session: its time and its duration.
      auto b = binding_of(*it->second);
      auto sess = b ? stored.find(b->session) : stored.end();
      const lease_spec& by = sess != stored.end() ? sess->second->spec : s;
      if (by.renew_time) {
        auto ago_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(in.now - *by.renew_time).count();
        renewed = ago_ms;
        if (by.lease_duration_seconds)
          expired = ago_ms > *by.lease_duration_seconds * 1000
                    || (sess != stored.end() && !in_incarnation(*sess->second, *b));
      }
      if (b)
        j["session"] = b->session;
      j.update(json{{"found", true},
                    {"holder", s.holder_identity},
                    {"term", s.lease_transitions},
                    {"renewed_ago_ms", renewed},
                    {"lease_duration_s", s.lease_duration_seconds ? json(*s.lease_duration_seconds)
                                                                 : json(nullptr)},
                    {"expired", expired},
                    {"preferred_holder", s.preferred_holder}});
    }
    leases.push_back(std::move(j));
  }
  // Groups: every group a member announced itself in, and every group of the config.
  // A lease outside any group: its candidate set's live announcers are its candidates.
  std::map<std::string, std::pair<std::vector<std::string>, std::vector<std::string>>> members;
  for (auto& [name, group] : in.config_leases)
    if (!group.empty())
      members[group];
  for (auto& m : in.members) {
    auto ttl = in.member_ttl * (is_candidate_set(m.group) ? candidate_set_lease_durations : 1);
    bool live = m.renewed && in.now - *m.renewed <= ttl;
    (live ? members[m.group].first : members[m.group].second).push_back(m.identity);
  }
  for (auto& l : leases) {
    auto set = members.find(candidate_set_group(l["lease"].get<std::string>()));
    if (set == members.end())
      continue;
    std::sort(set->second.first.begin(), set->second.first.end());
    l["candidates"] = set->second.first;
  }
  for (auto m = members.begin(); m != members.end();)
    m = is_candidate_set(m->first) ? members.erase(m) : std::next(m);
  json groups = json::array();
  for (auto& [group, mm] : members) {
    auto live = mm.first;
    std::sort(live.begin(), live.end());
    json g{{"group", group}, {"members", live}, {"stale_members", mm.second}};
    if (in.config_leases.empty()) {
      g.update(json{{"leases", nullptr}, {"held", nullptr}, {"balanced", nullptr},
                    {"why", "which leases form the group is in the config, not the store: "
                            "give --config"}});
      groups.push_back(std::move(g));
      continue;
    }
    std::vector<std::string> names;
    std::map<std::string, int> held;
    std::vector<std::string> problems;
    for (auto& l : leases) {
      if (l["group"] != group)
        continue;
      names.push_back(l["lease"]);
      auto holder = l["holder"].get<std::string>();
      bool member = std::find(live.begin(), live.end(), holder) != live.end();
      if (holder.empty() || l["expired"] == true)
        problems.push_back(l["lease"].get<std::string>() + " has no holder");
      else if (!member)
        problems.push_back(l["lease"].get<std::string>() + " is held by " + holder
                           + ", not a live member");
      else
        ++held[holder];
    }
    json counts = json::object();
    for (auto& id : live)
      counts[id] = held[id];
    if (!live.empty() && !names.empty()) {
      auto lo = names.size() / live.size();
      auto hi = lo + (names.size() % live.size() ? 1 : 0);
      for (auto& id : live)
        if (held[id] < static_cast<int>(lo) || held[id] > static_cast<int>(hi))
          problems.push_back(id + " holds " + std::to_string(held[id]) + " (a share is "
                             + (lo == hi ? std::to_string(lo)
                                         : std::to_string(lo) + " or " + std::to_string(hi))
                             + ")");
    } else if (live.empty()) {
      problems.push_back("no live member");
    }
    g.update(json{{"leases", names}, {"held", counts}, {"balanced", problems.empty()},
                  {"why", joined(problems)}});
    groups.push_back(std::move(g));
  }
  return json{{"namespace", in.ns}, {"leases", leases}, {"groups", groups}};
}

void print_status(const nlohmann::json& r, std::ostream& out) {
  // Columns padded to their widest cell, two spaces apart.
  auto table = [&](const std::vector<std::vector<std::string>>& rows) {
    std::vector<std::size_t> w(rows[0].size(), 0);
    for (auto& row : rows)
      for (std::size_t i = 0; i < row.size(); ++i)
        w[i] = std::max(w[i], row[i].size());
    for (auto& row : rows)
      for (std::size_t i = 0; i < row.size(); ++i)
        out << (i + 1 < row.size() ? row[i] + std::string(w[i] - row[i].size() + 2, ' ')
                                   : row[i] + "\n");
  };
  std::vector<std::vector<std::string>> rows{{"LEASE", "GROUP", "HOLDER", "TERM", "RENEWED"}};
  for (auto& l : r["leases"]) {
    std::string renewed = l["found"] != false ? ago(l["renewed_ago_ms"]) + " ago"
                          : l.value("idle", false) ? "(no module runs under it: nobody competes)"
                                                   : "(no such lease)";
    auto holder = l["holder"].get<std::string>();
    if (l.contains("session"))
      renewed += " via " + l["session"].get<std::string>();
    rows.push_back({l["lease"], l["group"], holder.empty() ? "-" : holder,
                    l["term"].is_number() ? std::to_string(l["term"].get<int>()) : "-",
                    renewed + (l["expired"] == true ? " (expired)" : "")});
  }
  out << "namespace " << r["namespace"].get<std::string>() << '\n';
  table(rows);
  if (r["groups"].empty())
    return;
  out << '\n';
  rows = {{"GROUP", "MEMBERS", "LEASES", "BALANCED"}};
  for (auto& g : r["groups"]) {
    std::vector<std::string> ms;
    for (auto& m : g["members"]) {
      auto id = m.get<std::string>();
      ms.push_back(g["held"].is_object() ? id + "(" + std::to_string(g["held"].value(id, 0)) + ")" : id);
    }
    auto why = g["why"].get<std::string>();
    rows.push_back({g["group"], ms.empty() ? "-" : joined(ms),
                    g["leases"].is_array() ? std::to_string(g["leases"].size()) : "-",
                    g["balanced"].is_null() ? "unknown: " + why
                    : g["balanced"] == true ? "yes"
                                            : "no: " + why});
  }
  table(rows);
}

namespace {

/// The LeaseCandidates of leasehold balance groups in a LeaseCandidateList body.
std::vector<status_member> parse_members(const nlohmann::json& list) {
  std::vector<status_member> out;
  if (!list.is_object() || !list["items"].is_array())
    return out;
  for (auto& item : list["items"]) {
    auto md = item.value("metadata", nlohmann::json::object());
    auto labels = md.value("labels", nlohmann::json::object());
    auto notes = md.value("annotations", nlohmann::json::object());
    if (!labels.is_object() || !labels.contains("leasehold.io/group"))
      continue;
    status_member m;
    m.group = labels.value("leasehold.io/group", "");
    m.identity = notes.is_object() ? notes.value("leasehold.io/identity", "") : "";
    auto spec = item.value("spec", nlohmann::json::object());
    if (spec.is_object() && spec["renewTime"].is_string())
      m.renewed = parse_micro_time(spec["renewTime"].get<std::string>());
    out.push_back(std::move(m));
  }
  return out;
}

/// Kubernetes: the namespace's Leases and LeaseCandidates, as `kubectl get`
/// lists them. The exit code: 0 read, 1 the Leases unread, 2 no connection.
int read_kube(agent_config& cfg, status_input& in, std::ostream& err) {
  auto r = load_connection_config(cfg.server, cfg.kubeconfig);
  if (!r.ok()) {
    err << "leasehold status: " << r.error << '\n';
    return 2;
  }
  if (cfg.ns_defaulted && !r.ns.empty())
    cfg.ns = r.ns;
  http_client client(*r.config);
  auto get = [&](const std::string& path, nlohmann::json& body) -> std::string {
    auto res = client.send("GET", path, nullptr);
    if (!res.ok())
      return res.error.describe();
    if (res.value->status == 404)
      return "404";
    if (res.value->status != 200)
      return "GET " + path + ": HTTP " + std::to_string(res.value->status) + ": "
             + res.value->body.substr(0, 200);
    body = nlohmann::json::parse(res.value->body, nullptr, false);
    return body.is_discarded() ? "GET " + path + ": the body is not JSON" : "";
  };
  nlohmann::json list;
  if (auto e = get(leases_path(cfg.ns), list); !e.empty()) {
    err << "leasehold status: cannot list the Leases of namespace " << cfg.ns << ": " << e << '\n';
    return 1;
  }
  if (list["items"].is_array())
    for (auto& item : list["items"])
      if (auto l = parse_lease(item); l.ok())
        in.leases.push_back(std::move(*l.value));
  nlohmann::json cands;
  auto e = get(lease_candidates_path(cfg.ns), cands);
  if (e.empty())
    in.members = parse_members(cands);
  else if (e != "404")   // an API server without LeaseCandidates: no groups
    err << "leasehold status: warning: cannot list the LeaseCandidates: " << e << '\n';
  return 0;
}

/// etcd: the namespace's keys, as `etcdctl get --prefix <prefix>/<ns>/`
/// reads them, and its groups' member keys (etcd_members.hpp: a key is
/// there while its member announces, so each is live). An etcd renew is a
/// keepalive that changes no key: the time since renew is the time since
/// the key's etcd lease was last kept alive (its granted TTL less what is
/// left, whole seconds, so rounded up). The exit code: 0 read, 1 not.
int read_etcd(const agent_config& cfg, status_input& in, std::ostream& err) {
  etcd_client client(cfg.etcd);
  auto keys = client.read_scope(cfg.ns);
  if (!keys.ok()) {
    err << "leasehold status: cannot read the keys of namespace " << cfg.ns << ": "
        << keys.error.describe() << '\n';
    return 1;
  }
  std::map<std::string, std::optional<std::int64_t>> idle;   // etcd lease ID -> seconds unkept
  for (auto& [name, rec] : keys.value->records) {
    auto l = rec.to_lease({cfg.ns, name});
    auto& id = rec.etcd_lease_id;
    if (!id.empty() && id != "0" && !idle.count(id)) {
      auto& v = idle[id];
      auto t = client.post("/v3/lease/timetolive", {{"ID", id}});
      std::int64_t left = 0, granted = 0;
      if (t.ok() && int64_field(*t.value, "TTL", left) && int64_field(*t.value, "grantedTTL", granted)
          && left >= 0)
        v = granted - left;
    }
    if (auto i = idle.find(id); i != idle.end() && i->second)
      l.spec.renew_time = in.now - std::chrono::seconds(*i->second);
    in.leases.push_back(std::move(l));
  }
  etcd_scope groups{cfg.etcd.prefix + "/_members", cfg.ns};   // keys <group>/<identity>
  auto r = client.post("/v3/kv/range", {{"key", encode_base64(groups.dir())},
                                        {"range_end", encode_base64(groups.range_end())},
                                        {"keys_only", true}});
  if (!r.ok()) {
    err << "leasehold status: warning: cannot read the member keys: " << r.error.describe() << '\n';
    return 0;
  }
  for (auto& item : r.value->value("kvs", nlohmann::json::array()))
    if (auto kv = parse_kv(item, "kvs[]"); kv.ok())
      if (auto name = groups.name_of(kv.value->key); name && name->find('/') != std::string::npos)
        in.members.push_back({name->substr(0, name->find('/')), name->substr(name->find('/') + 1),
                              in.now});
  return 0;
}

} // namespace

int status_command(const run_options& opts, bool json_output, std::ostream& out,
                   std::ostream& err) {
  auto modules = make_builtin_modules();
  agent_config cfg;
  auto errs = load_config(opts.config_path, *modules.registry, opts.overrides,
                          config_environment::from_process(), cfg);
  for (auto& e : errs)
    err << "leasehold status: " << e << '\n';
  if (!errs.empty())
    return 2;
  status_input in;
  in.member_ttl = cfg.timings.lease_duration;
  in.now = wall_now();
  if (int code = cfg.backend == "etcd" ? read_etcd(cfg, in, err) : read_kube(cfg, in, err))
    return code;
  in.ns = cfg.ns;
  if (!opts.config_path.empty()) {
    in.config_leases.emplace_back(cfg.leases.main.lease, "");
    if (cfg.leases.main.modules.modules.empty())
      in.idle_lease = cfg.leases.main.lease;
    for (auto& p : cfg.leases.others)
      in.config_leases.emplace_back(p.lease, p.group);
  }
  auto report = status_report(in);
  if (json_output)
    out << report.dump(2) << '\n';
  else
    print_status(report, out);
  return 0;
}

} // namespace leasehold::agent
