// The Lease's JSON text on the hot paths (renews, watch events), read and
// written in place: nlohmann's documents cost ~13 us of a renew's ~65 us of
// CPU at 10,000 Leases (measured). Fast paths of parse_lease / to_json, which
// own the semantics: anything not plain goes to them, whose answer stands.
#pragma once

#include <array>
#include <optional>
#include <vector>
#include <string>
#include <string_view>

#include "leasehold/lease.hpp"

namespace leasehold {

/// The members of a Lease's metadata and spec that lease has members
/// for, in key order (the rest is kept in lease::raw).
extern const std::array<std::string_view, 5> modelled_metadata;
extern const std::array<std::string_view, 7> modelled_spec;

/// The Lease in `text` when every field parse_lease reads is plain and the
/// whole text is valid JSON; nullopt otherwise.
std::optional<lease> read_plain_lease(std::string_view text);
/// A watch line {"type":T,"object":LEASE} (either order) read as plainly:
/// that lease, T in `type`.
/// A LeaseList's items, read in place as read_plain_lease reads one;
/// nullopt when one is not plain (then read it as a document).
std::optional<std::vector<lease>> read_plain_lease_list(std::string_view text);
std::optional<lease> read_plain_event(std::string_view line, std::string& type);

/// `l`'s JSON text, byte for byte what nlohmann's dump() of to_json_value(l)
/// writes, appended to `out`; false (`out` untouched) when a field needs escaping.
bool write_plain_lease(const lease& l, std::string& out);

} // namespace leasehold
