// json_readers: ns per Lease read from its JSON text, for each reader of
// the A/B, interleaved round by round (the median of the rounds printed):
// a renew's answer body and a watch event line.
//
//   json_readers [--rounds 15] [--iterations 20000]
//
// Readers: simdjson's On-Demand API (read_plain_lease and
// parse_watch_line, the hot paths),
// nlohmann's SAX reader (the modelled members only, the rest not kept: a
// lower bound of what a SAX reader would cost), and nlohmann's document
// (parse_lease's document path, for scale).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "leasehold/lease.hpp"
#include "lease/lease_json.hpp"
#include "transport/kube/kube_watch.hpp"

using namespace leasehold;
using json = nlohmann::json;

namespace {

/// A renew's answer as the API server sends it (managedFields and all).
std::string renew_answer(int i) {
  return R"({"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"name":"lease-)" +
         std::to_string(i) +
         R"(","namespace":"default","uid":"7d6a6f7c-0f5e-4a8e-9a55-1c6a2f0b3e11",)"
         R"("resourceVersion":")" +
         std::to_string(100000 + i) +
         R"(","creationTimestamp":"2024-05-01T10:00:00Z","managedFields":[{"manager":)"
         R"("leasehold","operation":"Update","apiVersion":"coordination.k8s.io/v1",)"
         R"("time":"2024-05-01T10:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":)"
         R"({"f:acquireTime":{},"f:holderIdentity":{},"f:leaseDurationSeconds":{},)"
         R"("f:leaseTransitions":{},"f:renewTime":{}}}}]},"spec":{"holderIdentity":)"
         R"("many-leases","leaseDurationSeconds":15,"acquireTime":)"
         R"("2024-05-01T10:00:00.123456Z","renewTime":"2024-05-01T10:00:02.654321Z",)"
         R"("leaseTransitions":3}})";
}

/// nlohmann's SAX reader, taking what lease models and stepping over the
/// rest (it keeps nothing of it: a lower bound).
struct lease_sax : nlohmann::json_sax<json> {
  lease l;
  int depth = 0;
  int part = 0;   // 1: in metadata, 2: in spec (at depth 2)
  std::string at;   // the last key

  bool field_string(const std::string& v) {
    if (depth == 2 && part == 1) {
      if (at == "name") l.name = v;
      else if (at == "namespace") l.ns = v;
      else if (at == "resourceVersion") l.resource_version = v;
      else if (at == "uid") l.uid = v;
      else if (at == "creationTimestamp") l.creation_timestamp = v;
    } else if (depth == 2 && part == 2) {
      if (at == "holderIdentity") l.spec.holder_identity = v;
      else if (at == "acquireTime") l.spec.acquire_time = parse_micro_time(v);
      else if (at == "renewTime") l.spec.renew_time = parse_micro_time(v);
      else if (at == "preferredHolder") l.spec.preferred_holder = v;
      else if (at == "strategy") l.spec.strategy = v;
    }
    return true;
  }
  bool field_int(std::int64_t v) {
    if (depth == 2 && part == 2) {
      if (at == "leaseDurationSeconds") l.spec.lease_duration_seconds = static_cast<int>(v);
      else if (at == "leaseTransitions") l.spec.lease_transitions = static_cast<int>(v);
    }
    return true;
  }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t v) override { return field_int(v); }
  bool number_unsigned(number_unsigned_t v) override {
    return field_int(static_cast<std::int64_t>(v));
  }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t& v) override { return field_string(v); }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    if (depth == 1)
      part = at == "metadata" ? 1 : at == "spec" ? 2 : 0;
    ++depth;
    return true;
  }
  bool key(string_t& k) override {
    at = k;
    return true;
  }
  bool end_object() override {
    --depth;
    return true;
  }
  bool start_array(std::size_t) override {
    ++depth;
    return true;
  }
  bool end_array() override {
    --depth;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }
};

std::optional<lease> sax_read(const std::string& text, int depth_of_lease) {
  lease_sax s;
  s.depth = -depth_of_lease;   // a watch line's Lease is one level down
  if (!json::sax_parse(text, &s) || s.l.name.empty())
    return std::nullopt;
  return std::move(s.l);
}

struct reader {
  const char* name;
  std::function<bool(const std::string&)> read;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

int main(int argc, char** argv) {
  int rounds = 15, iterations = 20000;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--rounds")
      rounds = std::atoi(argv[i + 1]);
    else if (a == "--iterations")
      iterations = std::atoi(argv[i + 1]);
  }
  std::vector<std::string> bodies, lines;
  for (int i = 0; i < 64; ++i) {
    bodies.push_back(renew_answer(i));
    lines.push_back(R"({"type":"MODIFIED","object":)" + renew_answer(i) + "}\n");
  }
  const std::vector<std::pair<const char*, std::vector<reader>>> cases = {
    {"renew answer", {
      {"simdjson On-Demand", [](const std::string& t) { return !!read_plain_lease(t); }},
      {"nlohmann SAX (lower bound)", [](const std::string& t) { return !!sax_read(t, 0); }},
      {"nlohmann document", [](const std::string& t) { return parse_lease(json::parse(t)).ok(); }},
    }},
    {"watch event line", {
      {"simdjson On-Demand", [](const std::string& t) { return parse_watch_line(t).ok(); }},
      {"nlohmann SAX (lower bound)", [](const std::string& t) { return !!sax_read(t, 1); }},
      {"nlohmann document", [](const std::string& t) {
         auto j = json::parse(t);
         return parse_lease(j["object"]).ok();
       }},
    }},
  };
  std::printf("%-18s %-28s %10s %10s %10s  (%d rounds of %d, %zu bytes a body)\n", "text",
              "reader", "median ns", "min ns", "max ns", rounds, iterations, bodies[0].size());
  for (const auto& [what, readers] : cases) {
    const auto& texts = std::string(what) == "renew answer" ? bodies : lines;
    std::vector<std::vector<double>> ns(readers.size());
    for (int r = 0; r < rounds; ++r)
      for (std::size_t k = 0; k < readers.size(); ++k) {
        std::size_t ok = 0;
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < iterations; ++i)
          ok += readers[k].read(texts[static_cast<std::size_t>(i) % texts.size()]);
        auto t1 = std::chrono::steady_clock::now();
        if (ok != static_cast<std::size_t>(iterations)) {
          std::fprintf(stderr, "%s: %s read %zu of %d\n", what, readers[k].name, ok, iterations);
          return 1;
        }
        ns[k].push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / iterations);
      }
    for (std::size_t k = 0; k < readers.size(); ++k)
      std::printf("%-18s %-28s %10.0f %10.0f %10.0f\n", what, readers[k].name, median(ns[k]),
                  *std::min_element(ns[k].begin(), ns[k].end()),
                  *std::max_element(ns[k].begin(), ns[k].end()));
  }
  return 0;
}
