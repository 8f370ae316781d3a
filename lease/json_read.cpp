#include "lease/json_read.hpp"

#include <climits>

namespace leasehold {

struct json_text::buffers {
  od::parser parser;
  std::string text;
  bool busy = false;
};

namespace {

bool plain_text(std::string_view text) {
  for (unsigned char c : text)
    if (c >= 0x80 || (c < 0x20 && c != ' ' && c != '\n' && c != '\r' && c != '\t'))
      return false;
  return true;
}

} // namespace

json_text::json_text(std::string_view text) : text_(text) {
  thread_local buffers mine;
  if (mine.busy) {
    own_ = std::make_unique<buffers>();
    b_ = own_.get();
  } else {
    b_ = &mine;
  }
  b_->busy = true;
  if (!plain_text(text))
    return;
  auto& buf = b_->text;
  buf.reserve(text.size() + simdjson::SIMDJSON_PADDING);
  buf.assign(text.data(), text.size());   // buf[size] is a NUL: plain_string_at stops there
  ok_ = !b_->parser.iterate(buf.data(), buf.size(), buf.capacity()).get(doc_);
}

json_text::~json_text() {
  if (!own_)
    b_->busy = false;
}

bool json_text::object(od::object& out) {
  return ok_ && !doc_.get_object().get(out);
}

bool json_text::at_end() {
  return ok_ && doc_.current_location().error() == simdjson::OUT_OF_BOUNDS;
}

std::string_view json_text::original(std::string_view s) const {
  return text_.substr(static_cast<std::size_t>(s.data() - b_->text.data()), s.size());
}

bool plain_string_at(const char* p, std::string_view& out) {
  // simdjson's first pass found the closing quote; a NUL ends the copy.
  for (const char* q = p;; ++q) {
    const auto c = static_cast<unsigned char>(*q);
    if (c == '"') {
      out = std::string_view(p, static_cast<std::size_t>(q - p));
      return true;
    }
    if (c < 0x20 || c >= 0x80 || c == '\\')
      return false;
  }
}

bool plain_string(od::value& v, std::string_view& out) {
  od::raw_json_string r;
  return !v.get_raw_json_string().get(r) && plain_string_at(r.raw(), out);
}

bool read_plain(od::value& v, std::string& out) {
  std::string_view s;
  if (!plain_string(v, s))
    return false;
  out.assign(s.data(), s.size());
  return true;
}

bool read_int(od::value& v, int& out) {
  std::int64_t x = 0;
  if (v.get_int64().get(x) || x < INT_MIN || x > INT_MAX)
    return false;
  out = static_cast<int>(x);
  return true;
}

bool read_time(od::value& v, std::optional<wall_time>& out) {
  std::string text;
  if (!read_plain(v, text))
    return false;
  out = parse_micro_time(text);
  return out.has_value();
}

bool skip(od::value& v) {
  od::json_type t;
  if (v.type().get(t))
    return false;
  switch (t) {
    case od::json_type::object: {
      od::object o;
      if (v.get_object().get(o))
        return false;
      for (auto m : o) {
        od::field f;
        std::string_view k;
        if (std::move(m).get(f) || f.unescaped_key().get(k) || !skip(f.value()))
          return false;
      }
      return true;
    }
    case od::json_type::array:
      return each_element(v, [](std::size_t, od::value& x) { return skip(x); });
    case od::json_type::string: {
      std::string_view s;
      return !v.get_string().get(s);
    }
    case od::json_type::number: {
      od::number n;
      return !v.get_number().get(n);
    }
    case od::json_type::boolean: {
      bool b;
      return !v.get_bool().get(b);
    }
    default: {
      bool null = false;
      return !v.is_null().get(null) && null;
    }
  }
}

bool raw_value(od::value& v, std::string_view& out) {
  od::json_type t;
  if (v.type().get(t))
    return false;
  if (t == od::json_type::object) {
    od::object o;
    return !v.get_object().get(o) && !o.raw_json().get(out);
  }
  if (t == od::json_type::array) {
    od::array a;
    return !v.get_array().get(a) && !a.raw_json().get(out);
  }
  out = v.raw_json_token();
  return skip(v);   // consumed, so its object or array steps on from it
}

} // namespace leasehold
