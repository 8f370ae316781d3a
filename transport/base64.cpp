#include "transport/base64.hpp"

#include <algorithm>

#include <openssl/evp.h>

namespace leasehold {

namespace {

const auto* bytes(const std::string& s) { return reinterpret_cast<const unsigned char*>(s.data()); }

} // namespace

std::string encode_base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  out.resize(static_cast<std::size_t>(EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                                      bytes(in), static_cast<int>(in.size()))));
  return out;
}

std::optional<std::string> decode_base64(const std::string& text) {
  std::string clean;
  for (char c : text)
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t')
      clean.push_back(c);
  // EVP_DecodeBlock reads '=' as a zero digit anywhere and keeps the padding
  // bytes: padding is checked and cut here.
  auto pad = clean.size() - std::min(clean.size(), clean.find_last_not_of('=') + 1);
  if (clean.size() % 4 != 0 || pad > 2
      || clean.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
           < clean.size() - pad)
    return std::nullopt;
  std::string out(clean.size() / 4 * 3, '\0');
  if (EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()), bytes(clean),
                      static_cast<int>(clean.size())) < 0)
    return std::nullopt;
  out.resize(out.size() - pad);
  return out;
}

} // namespace leasehold
