// Reading JSON text in place with simdjson's On-Demand API, for the hot paths:
// plain text only, else false and the caller gives it to nlohmann, whose
// answer stands. Built for baseline x86-64, On-Demand runs simdjson's
// portable kernel: the figures of bench/README.md are that kernel's.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <simdjson.h>

#include "leasehold/lease.hpp"   // wall_time

namespace leasehold {

namespace od = simdjson::ondemand;

/// A text being read, copied with simdjson's padding into the thread's
/// buffer (a fresh one when the thread reads another text already).
class json_text {
public:
  explicit json_text(std::string_view text);
  ~json_text();
  json_text(const json_text&) = delete;
  json_text& operator=(const json_text&) = delete;

  /// The top-level object, when the text is plain (ASCII, no control
  /// character but whitespace) and one.
  bool object(od::object& out);
  /// Nothing is left after the value read.
  bool at_end();
  /// `s`, a view into the copy, as a view into the text.
  std::string_view original(std::string_view s) const;

private:
  struct buffers;
  buffers* b_;
  std::unique_ptr<buffers> own_;
  std::string_view text_;
  od::document doc_;
  bool ok_ = false;
};

/// The string whose contents start at `p` (after its opening quote), when
/// it is plain.
bool plain_string_at(const char* p, std::string_view& out);

/// A string next whose contents are plain (printable ASCII, no escape):
/// a view of them.
bool plain_string(od::value& v, std::string_view& out);
/// A plain string next, copied.
bool read_plain(od::value& v, std::string& out);
/// An integer next that fits an int.
bool read_int(od::value& v, int& out);
/// A plain string next that parse_micro_time reads.
bool read_time(od::value& v, std::optional<wall_time>& out);
/// One value of any kind next, stepped over and its grammar checked.
bool skip(od::value& v);
/// The text of a value next (an object or array whole, a scalar's token).
bool raw_value(od::value& v, std::string_view& out);

/// An object next, read to its end: `on_member(key, value)` reads each
/// member's value; false on a key not plain or on_member's false.
template <class F>
bool each_member(od::object& o, F on_member) {
  for (auto m : o) {
    od::field f;
    std::string_view k;
    if (std::move(m).get(f) || !plain_string_at(f.key().raw(), k) || !on_member(k, f.value()))
      return false;
  }
  return true;
}
template <class F>
bool each_member(od::value& v, F on_member) {
  od::object o;
  return !v.get_object().get(o) && each_member(o, on_member);
}

/// An array next, read to its end: `on_element(index, value)` reads each.
template <class F>
bool each_element(od::value& v, F on_element) {
  od::array a;
  if (v.get_array().get(a))
    return false;
  std::size_t i = 0;
  for (auto e : a) {
    od::value x;
    if (std::move(e).get(x) || !on_element(i++, x))
      return false;
  }
  return true;
}

/// The members of one object a reader took: a repeated one is left to
/// nlohmann, whose last one wins.
struct json_members_seen {
  unsigned bits = 0;
  bool first(unsigned bit) { return !(std::exchange(bits, bits | bit) & bit); }
};

} // namespace leasehold
