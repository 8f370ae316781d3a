#include "leasehold/lease.hpp"
#include "lease/lease_json.hpp"
#include "lease/log_time.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <ctime>

namespace leasehold {

namespace {

using json = nlohmann::json;

constexpr const char* lease_api_version = "coordination.k8s.io/v1";

// Days since 1970-01-01 for a proleptic Gregorian date (H. Hinnant's algorithm).
constexpr std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

bool is_leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int days_in_month(int y, int m) {
  static constexpr int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

/// Formats `2006-01-02T15:04:05Z` in UTC with `digits` (0, 3 or 6) fraction
/// digits before the Z.
std::string format_rfc3339(wall_time t, int digits) {
  auto us = t.time_since_epoch().count();
  auto secs = us / 1000000;
  auto frac = us % 1000000;
  if (frac < 0) { // floor toward the past for times before the epoch
    frac += 1000000;
    secs -= 1;
  }
  std::time_t tt = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[48];
  int n = std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900,
                        tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  if (digits == 6)
    std::snprintf(buf + n, sizeof buf - n, ".%06ldZ", static_cast<long>(frac));
  else if (digits == 3)
    std::snprintf(buf + n, sizeof buf - n, ".%03ldZ", static_cast<long>(frac / 1000));
  else
    std::snprintf(buf + n, sizeof buf - n, "Z");
  return buf;
}

/// Reads exactly `n` decimal digits at `pos`; false if any is not a digit.
bool read_digits(const std::string& s, size_t& pos, size_t n, int& out) {
  if (pos + n > s.size())
    return false;
  out = 0;
  for (size_t i = 0; i < n; ++i) {
    char c = s[pos + i];
    if (c < '0' || c > '9')
      return false;
    out = out * 10 + (c - '0');
  }
  pos += n;
  return true;
}

bool expect_char(const std::string& s, size_t& pos, char c) {
  if (pos >= s.size() || s[pos] != c)
    return false;
  ++pos;
  return true;
}

// --- field readers for parse_lease / parse_status --------------------------
// Each returns false and sets `err` (naming the field) on a type mismatch.
// An absent or null field leaves `out` unchanged.

bool absent(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null();
}

bool read_string(const json& obj, const char* key, const std::string& where, std::string& out,
                 std::string& err) {
  if (absent(obj, key))
    return true;
  const auto& v = obj.at(key);
  if (!v.is_string()) {
    err = where + key + ": expected string";
    return false;
  }
  out = v.get<std::string>();
  return true;
}

bool read_int(const json& obj, const char* key, const std::string& where, std::optional<int>& out,
              std::string& err) {
  if (absent(obj, key))
    return true;
  const auto& v = obj.at(key);
  if (!v.is_number_integer()) {
    err = where + key + ": expected integer";
    return false;
  }
  bool in_range = v.is_number_unsigned()
                    ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(INT_MAX)
                    : v.get<std::int64_t>() >= INT_MIN && v.get<std::int64_t>() <= INT_MAX;
  if (!in_range) {
    err = where + key + ": integer out of range";
    return false;
  }
  out = static_cast<int>(v.get<std::int64_t>());
  return true;
}

bool read_time(const json& obj, const char* key, const std::string& where,
               std::optional<wall_time>& out, std::string& err) {
  std::string text;
  if (!read_string(obj, key, where, text, err))
    return false;
  if (absent(obj, key))
    return true;
  out = parse_micro_time(text);
  if (!out) {
    err = where + key + ": invalid time \"" + text + "\"";
    return false;
  }
  return true;
}

/// Parses a body into JSON; on failure names the byte where it stopped.
std::optional<json> parse_body(const std::string& body, std::string& err) {
  if (body.empty()) {
    err = "body: empty";
    return std::nullopt;
  }
  try {
    return json::parse(body);
  } catch (const json::parse_error& e) {
    err = "body: truncated or invalid JSON at byte " + std::to_string(e.byte);
  } catch (const std::exception& e) {
    err = std::string("body: ") + e.what();
  }
  return std::nullopt;
}

void set_or_erase(json& obj, const char* key, const std::string& value) {
  if (value.empty())
    obj.erase(key);
  else
    obj[key] = value;
}

template <class T, class F>
void set_or_erase(json& obj, const char* key, const std::optional<T>& value, F convert) {
  if (value)
    obj[key] = convert(*value);
  else
    obj.erase(key);
}

/// The object at `key` of `parent`, replaced by an empty object if it is not one.
json& object_at(json& parent, const char* key) {
  auto& v = parent[key];
  if (!v.is_object())
    v = json::object();
  return v;
}

} // namespace

std::string format_micro_time(wall_time t) {
  return format_rfc3339(t, 6);
}

std::string format_log_time(wall_clock::time_point t) {
  return format_rfc3339(std::chrono::floor<std::chrono::microseconds>(t), 3);
}

std::optional<wall_time> parse_micro_time(const std::string& text) {
  size_t pos = 0;
  int year, month, day, hour, minute, second;
  if (!read_digits(text, pos, 4, year) || !expect_char(text, pos, '-') ||
      !read_digits(text, pos, 2, month) || !expect_char(text, pos, '-') ||
      !read_digits(text, pos, 2, day) || !expect_char(text, pos, 'T') ||
      !read_digits(text, pos, 2, hour) || !expect_char(text, pos, ':') ||
      !read_digits(text, pos, 2, minute) || !expect_char(text, pos, ':') ||
      !read_digits(text, pos, 2, second))
    return std::nullopt;
  if (month < 1 || month > 12 || day < 1 || day > days_in_month(year, month) || hour > 23 ||
      minute > 59 || second > 59)
    return std::nullopt;
  std::int64_t micros = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    size_t digits = 0;
    std::int64_t scale = 100000;
    for (; pos < text.size() && text[pos] >= '0' && text[pos] <= '9'; ++pos, ++digits) {
      micros += (text[pos] - '0') * scale; // digits past the 6th: scale 0, truncated
      scale /= 10;
    }
    if (digits == 0 || digits > 9)
      return std::nullopt;
  }
  std::int64_t offset_seconds = 0;
  if (pos >= text.size())
    return std::nullopt;
  if (text[pos] == 'Z') {
    ++pos;
  } else if (text[pos] == '+' || text[pos] == '-') {
    int sign = text[pos] == '-' ? -1 : 1;
    ++pos;
    int oh, om;
    if (!read_digits(text, pos, 2, oh) || !expect_char(text, pos, ':') ||
        !read_digits(text, pos, 2, om) || oh > 23 || om > 59)
      return std::nullopt;
    offset_seconds = sign * (oh * 3600 + om * 60);
  } else {
    return std::nullopt;
  }
  if (pos != text.size())
    return std::nullopt;
  std::int64_t secs = days_from_civil(year, static_cast<unsigned>(month),
                                      static_cast<unsigned>(day)) * 86400 +
                      hour * 3600 + minute * 60 + second - offset_seconds;
  return wall_time{std::chrono::microseconds{secs * 1000000 + micros}};
}

bool released_record(const lease_spec& s) {
  return s.holder_identity.empty() && (!s.lease_duration_seconds || *s.lease_duration_seconds <= 1);
}

int duration_seconds(std::chrono::nanoseconds lease_duration) {
  auto secs = std::chrono::duration<double>(lease_duration).count();
  return std::max(2, static_cast<int>(std::ceil(secs)));
}

bool lease_spec::operator==(const lease_spec& o) const {
  return holder_identity == o.holder_identity &&
         lease_duration_seconds == o.lease_duration_seconds && acquire_time == o.acquire_time &&
         renew_time == o.renew_time && lease_transitions == o.lease_transitions &&
         preferred_holder == o.preferred_holder && strategy == o.strategy;
}

namespace {

/// A field of `part` ("metadata" or "spec") that lease has a member for.
bool modelled(const std::string& part, const std::string& key) {
  auto in = [&](const auto& names) {
    return std::find(names.begin(), names.end(), key) != names.end();
  };
  return part == "metadata" ? in(modelled_metadata) : in(modelled_spec);
}

/// `j` without what lease has members for; null when nothing is left, so a
/// lease copies no JSON of its own fields.
json rest_of(const json& j) {
  json rest;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const auto& k = it.key();
    if (k == "apiVersion" || k == "kind")
      continue;
    if ((k == "metadata" || k == "spec") && it->is_object()) {
      json part;
      for (auto f = it->begin(); f != it->end(); ++f)
        if (!modelled(k, f.key()))
          part[f.key()] = *f;
      if (!part.is_null())
        rest[k] = std::move(part);
      continue;
    }
    rest[k] = *it;
  }
  return rest;
}

} // namespace

nlohmann::json to_json_value(const lease& l) {
  json j = l.raw.is_object() ? l.raw : json::object();
  j["apiVersion"] = lease_api_version;
  j["kind"] = "Lease";
  auto& meta = object_at(j, "metadata");
  meta["name"] = l.name;
  set_or_erase(meta, "namespace", l.ns);
  set_or_erase(meta, "resourceVersion", l.resource_version);
  set_or_erase(meta, "uid", l.uid);
  set_or_erase(meta, "creationTimestamp", l.creation_timestamp);
  auto& spec = object_at(j, "spec");
  set_or_erase(spec, "holderIdentity", l.spec.holder_identity);
  set_or_erase(spec, "leaseDurationSeconds", l.spec.lease_duration_seconds,
               [](int v) { return v; });
  set_or_erase(spec, "acquireTime", l.spec.acquire_time, format_micro_time);
  set_or_erase(spec, "renewTime", l.spec.renew_time, format_micro_time);
  spec["leaseTransitions"] = l.spec.lease_transitions;
  set_or_erase(spec, "preferredHolder", l.spec.preferred_holder);
  set_or_erase(spec, "strategy", l.spec.strategy);
  return j;
}

parse_result<lease> parse_lease(const nlohmann::json& j) {
  parse_result<lease> r;
  auto fail = [&r](std::string why) {
    r.error = std::move(why);
    return r;
  };
  try {
    if (!j.is_object())
      return fail("body: expected object");
    lease l;
    std::string kind;
    if (!read_string(j, "kind", "", kind, r.error))
      return r;
    if (!kind.empty() && kind != "Lease")
      return fail("kind: expected Lease, got " + kind);
    if (absent(j, "metadata"))
      return fail("metadata: missing");
    const auto& meta = j.at("metadata");
    if (!meta.is_object())
      return fail("metadata: expected object");
    if (!read_string(meta, "name", "metadata.", l.name, r.error) ||
        !read_string(meta, "namespace", "metadata.", l.ns, r.error) ||
        !read_string(meta, "resourceVersion", "metadata.", l.resource_version, r.error) ||
        !read_string(meta, "uid", "metadata.", l.uid, r.error) ||
        !read_string(meta, "creationTimestamp", "metadata.", l.creation_timestamp, r.error))
      return r;
    if (l.name.empty())
      return fail("metadata.name: missing");
    if (absent(j, "spec"))
      return fail("spec: missing");
    const auto& spec = j.at("spec");
    if (!spec.is_object())
      return fail("spec: expected object");
    std::optional<int> transitions;
    if (!read_string(spec, "holderIdentity", "spec.", l.spec.holder_identity, r.error) ||
        !read_int(spec, "leaseDurationSeconds", "spec.", l.spec.lease_duration_seconds,
                  r.error) ||
        !read_time(spec, "acquireTime", "spec.", l.spec.acquire_time, r.error) ||
        !read_time(spec, "renewTime", "spec.", l.spec.renew_time, r.error) ||
        !read_int(spec, "leaseTransitions", "spec.", transitions, r.error) ||
        !read_string(spec, "preferredHolder", "spec.", l.spec.preferred_holder, r.error) ||
        !read_string(spec, "strategy", "spec.", l.spec.strategy, r.error))
      return r;
    l.spec.lease_transitions = transitions.value_or(0);
    l.raw = rest_of(j);
    r.value = std::move(l);
  } catch (const std::exception& e) {
    r.error = std::string("body: ") + e.what();
  }
  return r;
}

std::string to_json_text(const lease& l) {
  std::string out;
  if (write_plain_lease(l, out))
    return out;
  return to_json_value(l).dump();
}

parse_result<lease> parse_lease(const std::string& body) {
  parse_result<lease> r;
  if ((r.value = read_plain_lease(body)))
    return r;
  if (auto j = parse_body(body, r.error))
    return parse_lease(*j);
  return r;
}

parse_result<api_status> parse_status(const std::string& body) {
  parse_result<api_status> r;
  try {
    auto j = parse_body(body, r.error);
    if (!j)
      return r;
    if (!j->is_object()) {
      r.error = "body: expected object";
      return r;
    }
    api_status s;
    std::string kind;
    std::optional<int> code;
    if (!read_string(*j, "kind", "", kind, r.error) ||
        !read_string(*j, "status", "", s.status, r.error) ||
        !read_string(*j, "message", "", s.message, r.error) ||
        !read_string(*j, "reason", "", s.reason, r.error) ||
        !read_int(*j, "code", "", code, r.error))
      return r;
    if (kind != "Status") {
      r.error = kind.empty() ? "kind: missing" : "kind: expected Status, got " + kind;
      return r;
    }
    s.code = code.value_or(0);
    r.value = std::move(s);
  } catch (const std::exception& e) {
    r.error = std::string("body: ") + e.what();
  }
  return r;
}

nlohmann::json to_json_value(const kube_event& e) {
  json involved = {{"kind", "Lease"},
                   {"apiVersion", lease_api_version},
                   {"namespace", e.involved.ns},
                   {"name", e.involved.name}};
  if (!e.involved_uid.empty())
    involved["uid"] = e.involved_uid;
  const auto seconds = format_rfc3339(e.time, 0);
  return {{"apiVersion", "v1"},
          {"kind", "Event"},
          {"metadata", {{"generateName", e.involved.name + "."}, {"namespace", e.involved.ns}}},
          {"involvedObject", std::move(involved)},
          {"reason", e.reason},
          {"message", e.message},
          {"type", e.type},
          {"action", e.reason},
          {"source", {{"component", e.component}}},
          {"reportingComponent", e.component},
          {"reportingInstance", e.reporting_instance},
          {"firstTimestamp", seconds},
          {"lastTimestamp", seconds},
          {"eventTime", format_micro_time(e.time)},
          {"count", 1}};
}

std::string dns1123_error(const std::string& name, std::size_t max, bool label) {
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  std::string rule = std::string("must be a lowercase RFC 1123 ") + (label ? "label" : "subdomain")
                     + " (a-z, 0-9, '-'" + (label ? "" : ", '.'")
                     + ", starting and ending with a letter or digit, at most "
                     + std::to_string(max) + " characters)";
  if (name.empty())
    return "must not be empty; " + rule;
  bool ok = name.size() <= max && alnum(name.front()) && alnum(name.back());
  for (std::size_t i = 0; ok && i < name.size(); ++i) {
    char c = name[i];
    bool dot_ok = !label && c == '.' && name[i - 1] != '.' && name[i - 1] != '-'
                  && alnum(name[i + 1]);
    ok = alnum(c) || c == '-' || dot_ok;
  }
  return ok ? std::string{} : rule + " (is \"" + name + "\")";
}

std::string lease_name_error(const std::string& name) { return dns1123_error(name, 253); }

std::string namespace_error(const std::string& ns) { return dns1123_error(ns, 63, /*label*/ true); }

} // namespace leasehold
