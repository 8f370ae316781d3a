#include "lease/json_cursor.hpp"

#include <charconv>
#include <climits>

namespace leasehold {

namespace {

constexpr int max_depth = 64;

bool digit(char c) { return c >= '0' && c <= '9'; }

bool hex(char c) {
  return digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

} // namespace

void json_cursor::space() {
  while (i_ < s_.size() && blank(s_[i_]))
    ++i_;
}

bool json_cursor::eat(char c) {
  space();
  if (i_ < s_.size() && s_[i_] == c) {
    ++i_;
    return true;
  }
  return false;
}

bool json_cursor::at_end() {
  space();
  return i_ == s_.size();
}

bool json_cursor::string(std::string_view& contents, bool& plain) {
  if (!eat('"'))
    return false;
  const auto start = i_;
  plain = true;
  while (i_ < s_.size()) {
    const auto c = static_cast<unsigned char>(s_[i_]);
    if (c == '"') {
      contents = s_.substr(start, i_ - start);
      ++i_;
      return true;
    }
    if (c < 0x20)
      return false;   // a control character must be escaped
    if (c >= 0x80)
      plain = false;
    if (c != '\\') {
      ++i_;
      continue;
    }
    plain = false;
    if (++i_ >= s_.size())
      return false;
    const char e = s_[i_];
    if (e == 'u') {
      if (i_ + 4 >= s_.size())
        return false;
      for (int k = 1; k <= 4; ++k)
        if (!hex(s_[i_ + k]))
          return false;
      i_ += 5;
    } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' ||
               e == 'r' || e == 't') {
      ++i_;
    } else {
      return false;
    }
  }
  return false;   // no closing quote
}

bool json_cursor::number(std::string_view& text, bool& integer) {
  space();
  const auto start = i_;
  auto digits = [&] {
    const auto from = i_;
    while (i_ < s_.size() && digit(s_[i_]))
      ++i_;
    return i_ > from;
  };
  if (i_ < s_.size() && s_[i_] == '-')
    ++i_;
  if (i_ < s_.size() && s_[i_] == '0')
    ++i_;
  else if (!digits())
    return false;
  integer = true;
  if (i_ < s_.size() && s_[i_] == '.') {
    ++i_;
    integer = false;
    if (!digits())
      return false;
  }
  if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
    ++i_;
    integer = false;
    if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-'))
      ++i_;
    if (!digits())
      return false;
  }
  text = s_.substr(start, i_ - start);
  return true;
}

bool json_cursor::literal(std::string_view word) {
  if (s_.substr(i_, word.size()) != word)
    return false;
  i_ += word.size();
  return true;
}

bool json_cursor::scalar() {
  space();
  if (i_ >= s_.size())
    return false;
  std::string_view ignored;
  bool flag;
  switch (s_[i_]) {
    case '"': return string(ignored, flag);
    case 't': return literal("true");
    case 'f': return literal("false");
    case 'n': return literal("null");
    default: return number(ignored, flag);
  }
}

bool json_cursor::key(std::string_view& contents, bool& plain) {
  return string(contents, plain) && eat(':');
}

bool json_cursor::value(std::string_view* span) {
  space();
  const auto start = i_;
  char open[max_depth];   // the containers we are in: '{' or '['
  int depth = 0;
  std::string_view k;
  bool plain;
  for (;;) {
    // A value is next.
    bool closed = false;   // the value was an empty container
    if (eat('{')) {
      if (eat('}'))
        closed = true;
      else if (depth == max_depth || !key(k, plain))
        return false;
      else
        open[depth++] = '{';
    } else if (eat('[')) {
      if (eat(']'))
        closed = true;
      else if (depth == max_depth)
        return false;
      else
        open[depth++] = '[';
    } else if (!scalar()) {
      return false;
    } else {
      closed = true;
    }
    if (!closed)
      continue;   // the container's first value is next
    // After a value: the next member or element, or the end of containers.
    for (;;) {
      if (depth == 0) {
        if (span)
          *span = s_.substr(start, i_ - start);
        return true;
      }
      if (eat(',')) {
        if (open[depth - 1] == '{' && !key(k, plain))
          return false;
        break;   // a value is next
      }
      if (!eat(open[depth - 1] == '{' ? '}' : ']'))
        return false;
      --depth;
    }
  }
}

bool json_cursor::member(std::string_view name) {
  if (!eat('{') || eat('}'))
    return false;
  do {
    std::string_view k;
    bool plain;
    if (!key(k, plain))
      return false;
    if (plain && k == name)
      return true;
    if (!value())
      return false;
  } while (eat(','));
  return false;
}

bool json_ascii(std::string_view text) {
  for (unsigned char c : text)
    if (c >= 0x80)
      return false;
  return true;
}

bool read_plain(json_cursor& c, std::string& out) {
  std::string_view v;
  bool plain;
  if (!c.string(v, plain) || !plain)
    return false;
  out.assign(v.data(), v.size());
  return true;
}

bool read_int(json_cursor& c, int& out) {
  std::string_view t;
  bool integer;
  if (!c.number(t, integer) || !integer)
    return false;
  long long v = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc{} || end != t.data() + t.size() || v < INT_MIN || v > INT_MAX)
    return false;
  out = static_cast<int>(v);
  return true;
}

bool read_time(json_cursor& c, std::optional<wall_time>& out) {
  std::string text;
  if (!read_plain(c, text))
    return false;
  out = parse_micro_time(text);
  return out.has_value();
}

} // namespace leasehold
