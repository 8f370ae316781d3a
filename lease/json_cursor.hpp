// Reading JSON text in place, without building a document: what the
// Lease's hot paths need (a renew's answer, a watch line) to take a few
// members and step over the rest, ~10x cheaper than nlohmann's DOM. The
// grammar is checked strictly (RFC 8259: strings, escapes, numbers,
// literals, nesting), every step bounded by the text's length; a caller
// that meets anything it does not handle itself (an escape in a value it
// reads, a byte >= 0x80, nesting past 64) gives the text to nlohmann, whose
// answer then stands (lease/lease_json.cpp).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "leasehold/lease.hpp"   // wall_time

namespace leasehold {

class json_cursor {
public:
  explicit json_cursor(std::string_view text) : s_(text) {}

  /// `c` next (after whitespace): consumed.
  bool eat(char c);
  /// Only whitespace is left.
  bool at_end();
  /// A string next: its contents between the quotes (escapes left as
  /// written) and whether it is plain (printable ASCII, no escape).
  bool string(std::string_view& contents, bool& plain);
  /// A number next: its text, and whether it is an integer (no fraction,
  /// no exponent).
  bool number(std::string_view& text, bool& integer);
  /// One value of any kind next: stepped over, its text in `span`.
  bool value(std::string_view* span = nullptr);
  /// A member's key and its colon next.
  bool key(std::string_view& contents, bool& plain);
  /// Steps into an object and on to its member `name` (the value next):
  /// false when the object ends without it, or is not an object.
  bool member(std::string_view name);
  /// An object next, read to its end: `on_member(key)` reads each member's
  /// value. False when it is not an object, a key is not plain, or
  /// on_member says false.
  template <class F>
  bool object(F on_member) {
    if (!eat('{'))
      return false;
    if (eat('}'))
      return true;
    do {
      std::string_view k;
      bool plain;
      if (!key(k, plain) || !plain || !on_member(k))
        return false;
    } while (eat(','));
    return eat('}');
  }

  /// An array next, read to its end: `on_element(index)` reads each
  /// element. False when it is not an array or on_element says false.
  template <class F>
  bool array(F on_element) {
    if (!eat('['))
      return false;
    if (eat(']'))
      return true;
    std::size_t i = 0;
    do {
      if (!on_element(i++))
        return false;
    } while (eat(','));
    return eat(']');
  }

private:
  static bool blank(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
  void space();
  bool literal(std::string_view word);
  bool scalar();   // a string, number or literal next

  std::string_view s_;
  std::size_t i_ = 0;
};

/// The members of one object a reader takes, each at most once (a member
/// repeated is left to nlohmann, whose last one wins): `first(bit)` is
/// true the first time a member's bit is asked for.
struct json_members_seen {
  unsigned bits = 0;
  bool first(unsigned bit) { return !(std::exchange(bits, bits | bit) & bit); }
};

/// No byte >= 0x80 in `text` (then the cursor's plain strings are the
/// document's strings, and no UTF-8 is left to check).
bool json_ascii(std::string_view text);
/// A plain string next (no escape: its contents are its value).
bool read_plain(json_cursor& c, std::string& out);
/// An integer next that fits an int.
bool read_int(json_cursor& c, int& out);
/// A plain string next that parse_micro_time reads.
bool read_time(json_cursor& c, std::optional<wall_time>& out);

} // namespace leasehold
