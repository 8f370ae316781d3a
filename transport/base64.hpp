// Standard base64 (RFC 4648, padded): kubeconfig's *-data fields and the
// etcd gateway's keys and values.
#pragma once

#include <optional>
#include <string>

namespace leasehold {

/// Standard base64 (padding required, whitespace ignored); nullopt when invalid.
std::optional<std::string> decode_base64(const std::string& text);
/// Standard base64 with padding.
std::string encode_base64(const std::string& bytes);

} // namespace leasehold
