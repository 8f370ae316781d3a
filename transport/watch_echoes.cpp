#include "transport/watch_echoes.hpp"

#include <functional>

namespace leasehold {

namespace {

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' '))
    s.remove_suffix(1);
  return s;
}

bool starts_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}

bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

std::uint64_t digest(std::string_view bytes) {
  return std::hash<std::string_view>{}(bytes);
}

/// Reads through JSON text without building anything: enough to find one
/// member's string value. Every step is bounded by the text's length; any
/// surprise is a failure (the caller then knows nothing).
class json_cursor {
public:
  explicit json_cursor(std::string_view s) : s_(s) {}

  /// `c` next (after whitespace): consumed.
  bool eat(char c) {
    space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  /// A string next: its contents (raw, escapes left in) and whether it has
  /// none.
  bool string(std::string_view& out, bool& plain) {
    if (!eat('"'))
      return false;
    auto start = i_;
    plain = true;
    for (; i_ < s_.size(); ++i_) {
      if (s_[i_] == '\\') {
        plain = false;
        ++i_;   // the escaped character
      } else if (s_[i_] == '"') {
        out = s_.substr(start, i_ - start);
        ++i_;
        return true;
      }
    }
    return false;
  }
  /// Skips one value of any kind.
  bool value() {
    space();
    if (i_ >= s_.size())
      return false;
    std::string_view ignored;
    bool plain;
    char c = s_[i_];
    if (c == '"')
      return string(ignored, plain);
    if (c != '{' && c != '[') {   // a number or a literal
      auto start = i_;
      while (i_ < s_.size() && s_[i_] != ',' && s_[i_] != '}' && s_[i_] != ']' && !blank(s_[i_]))
        ++i_;
      return i_ > start;
    }
    int depth = 0;
    for (; i_ < s_.size(); ++i_) {
      char x = s_[i_];
      if (x == '"') {
        if (!string(ignored, plain))
          return false;
        --i_;   // the loop steps past the closing quote
      } else if (x == '{' || x == '[') {
        ++depth;
      } else if (x == '}' || x == ']') {
        if (--depth == 0) {
          ++i_;
          return true;
        }
      }
    }
    return false;
  }
  /// Steps into an object and finds member `key` (its value next): false
  /// when the object ends without it or is not an object.
  bool member(std::string_view key) {
    if (!eat('{'))
      return false;
    if (eat('}'))
      return false;
    do {
      std::string_view k;
      bool plain;
      if (!string(k, plain) || !eat(':'))
        return false;
      if (plain && k == key)
        return true;
      if (!value())
        return false;
    } while (eat(','));
    return false;
  }

private:
  static bool blank(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
  void space() {
    while (i_ < s_.size() && blank(s_[i_]))
      ++i_;
  }
  std::string_view s_;
  std::size_t i_ = 0;
};

} // namespace

std::string_view watch_echoes::object_name(std::string_view object) {
  json_cursor c(object);
  std::string_view name;
  bool plain = false;
  if (c.member("metadata") && c.member("name") && c.string(name, plain) && plain)
    return name;
  return {};
}

watch_echoes::flight::~flight() {
  if (of_)
    of_->land(id_);
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
  auto id = next_flight_++;
  flights_.emplace(id, std::move(hashes));
  return flight{this, id};
}

void watch_echoes::land(std::uint64_t id) {
  std::lock_guard<std::mutex> g(mx_);
  auto f = flights_.find(id);
  if (f == flights_.end())
    return;
  for (auto h : f->second) {
    auto a = aloft_.find(h);
    if (a != aloft_.end() && --a->second.flights <= 0)
      aloft_.erase(a);
  }
  flights_.erase(f);
  if (waiting_ > 0)
    changed_.notify_all();
}

std::string_view watch_echoes::modified_object(std::string_view line) {
  line = trimmed(line);
  constexpr std::string_view type_first = R"({"type":"MODIFIED","object":)";
  constexpr std::string_view object_first = R"({"object":)";
  constexpr std::string_view type_last = R"(,"type":"MODIFIED"})";
  if (starts_with(line, type_first) && ends_with(line, "}"))
    return line.substr(type_first.size(), line.size() - type_first.size() - 1);
  if (starts_with(line, object_first) && ends_with(line, type_last))
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
