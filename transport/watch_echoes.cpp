#include "transport/watch_echoes.hpp"

#include "lease/json_read.hpp"

#include <functional>

namespace leasehold {

namespace {

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' '))
    s.remove_suffix(1);
  return s;
}

bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

std::uint64_t digest(std::string_view bytes) {
  return std::hash<std::string_view>{}(bytes);
}

} // namespace

std::string_view watch_echoes::object_name(std::string_view object) {
  json_text t(object);
  od::object top, meta;
  od::value name;
  std::string_view s;
  if (t.object(top) && !top["metadata"].get_object().get(meta) && !meta["name"].get(name) &&
      plain_string(name, s))
    return t.original(s);
  return {};
}

watch_echoes::flight::~flight() {
  if (of_)
    of_->land(names_);
}

watch_echoes::flight watch_echoes::depart(const std::vector<std::string_view>& names) {
  if (names.empty())
    return {};
  std::vector<std::uint64_t> hashes;
  hashes.reserve(names.size());
  auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> g(mx_);
  for (auto n : names) {
    auto h = digest(n);
    auto& a = aloft_[h];
    ++a.flights;
    a.last_departed = now;
    hashes.push_back(h);
  }
  return flight{this, std::move(hashes)};
}

void watch_echoes::land(const std::vector<std::uint64_t>& names) {
  std::lock_guard<std::mutex> g(mx_);
  for (auto h : names) {
    auto a = aloft_.find(h);
    if (a != aloft_.end() && --a->second.flights <= 0)
      aloft_.erase(a);
  }
  if (waiting_ > 0)
    changed_.notify_all();
}

std::string_view watch_echoes::modified_object(std::string_view line) {
  line = trimmed(line);
  constexpr std::string_view type_first = R"({"type":"MODIFIED","object":)";
  constexpr std::string_view object_first = R"({"object":)";
  constexpr std::string_view type_last = R"(,"type":"MODIFIED"})";
  if (line.substr(0, type_first.size()) == type_first && ends_with(line, "}"))
    return line.substr(type_first.size(), line.size() - type_first.size() - 1);
  if (line.substr(0, object_first.size()) == object_first && ends_with(line, type_last))
    return line.substr(object_first.size(), line.size() - object_first.size() - type_last.size());
  return {};
}

void watch_echoes::note(std::string_view answer, const std::string& name, const std::string& rv) {
  answer = trimmed(answer);
  auto d = digest(answer);
  std::lock_guard<std::mutex> g(mx_);
  by_digest_[d] = entry{answer.size(), echo{name, rv}};
  order_.push_back(d);
  while (order_.size() > capacity_) {
    by_digest_.erase(order_.front());   // gone already if taken: nothing
    order_.pop_front();
  }
  if (waiting_ > 0)
    changed_.notify_all();
}

std::optional<watch_echoes::echo> watch_echoes::take(std::string_view line) {
  auto object = modified_object(line);
  if (object.empty())
    return std::nullopt;
  auto d = digest(object);
  std::unique_lock<std::mutex> g(mx_);
  auto it = by_digest_.find(d);
  if (it == by_digest_.end() && !aloft_.empty()) {
    // Not noted (yet?): if a renew of this Lease is in flight, its answer
    // may still be on its way.
    auto name = object_name(object);
    auto h = digest(name);
    auto a = name.empty() ? aloft_.end() : aloft_.find(h);
    if (a != aloft_.end()) {
      ++waited_;
      ++waiting_;
      changed_.wait_until(g, a->second.last_departed + max_wait_, [&] {
        return by_digest_.count(d) > 0 || aloft_.count(h) == 0;
      });
      --waiting_;
      it = by_digest_.find(d);
    }
  }
  if (it == by_digest_.end() || it->second.size != object.size())
    return std::nullopt;
  auto out = std::move(it->second.what);
  by_digest_.erase(it);
  ++taken_;
  return out;
}

std::uint64_t watch_echoes::taken() const {
  std::lock_guard<std::mutex> g(mx_);
  return taken_;
}

std::uint64_t watch_echoes::waited() const {
  std::lock_guard<std::mutex> g(mx_);
  return waited_;
}

} // namespace leasehold
