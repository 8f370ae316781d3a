// The Lease's JSON text on the hot paths (each renew's body and answer,
// each watch event), read and written in place instead of through
// nlohmann's document: at 10,000 Leases a renew spent ~13 us of its ~65 us
// of CPU building, printing and parsing documents (measured).
//
// Both are fast paths of parse_lease / to_json (lease/lease.cpp), which
// own the semantics: each handles the plain case, and says so; anything
// else (an escape or a byte >= 0x80 in a field it reads, a null or
// mistyped field, a duplicate section, invalid JSON) goes to the
// document path, whose answer, value or error, stands. What leasehold does
// not model (labels, annotations, managedFields, unknown fields) is kept in
// lease::raw and written back, as on the document path.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "leasehold/lease.hpp"

namespace leasehold {

/// The members of a Lease's metadata and spec that lease has members
/// for, in key order (the rest is kept in lease::raw).
extern const std::array<std::string_view, 5> modelled_metadata;
extern const std::array<std::string_view, 7> modelled_spec;

/// The Lease in `text` when every field parse_lease reads is plain and
/// valid and the whole text is valid JSON (the same lease the document
/// path reads); nullopt otherwise.
std::optional<lease> read_plain_lease(std::string_view text);
/// A watch line {"type":T,"object":LEASE} (either order, nothing else)
/// whose T is plain and LEASE read_plain_lease reads: that lease, T in
/// `type`; nullopt otherwise.
std::optional<lease> read_plain_event(std::string_view line, std::string& type);

/// `l`'s JSON text, byte for byte what nlohmann's dump() of to_json_value(l)
/// writes (compact, members in key order), appended to `out`; false (and
/// `out` as it was) when a field needs escaping.
bool write_plain_lease(const lease& l, std::string& out);

} // namespace leasehold
