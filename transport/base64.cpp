#include "transport/base64.hpp"

namespace leasehold {

std::string encode_base64(const std::string& in) {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < in.size(); i += 3) {
    unsigned n = static_cast<unsigned>(static_cast<unsigned char>(in[i])) << 16;
    if (i + 1 < in.size()) n |= static_cast<unsigned>(static_cast<unsigned char>(in[i + 1])) << 8;
    if (i + 2 < in.size()) n |= static_cast<unsigned char>(in[i + 2]);
    out += alphabet[n >> 18 & 63];
    out += alphabet[n >> 12 & 63];
    out += i + 1 < in.size() ? alphabet[n >> 6 & 63] : '=';
    out += i + 2 < in.size() ? alphabet[n & 63] : '=';
  }
  return out;
}

std::optional<std::string> decode_base64(const std::string& text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string clean;
  for (char c : text)
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t')
      clean.push_back(c);
  if (clean.size() % 4 != 0)
    return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < clean.size(); i += 4) {
    bool last = i + 4 == clean.size();
    int pad = last ? (clean[i + 3] == '=') + (clean[i + 2] == '=') : 0;
    if (pad == 1 && clean[i + 2] == '=')
      return std::nullopt; // "x=y=" shapes
    unsigned bits = 0;
    for (int k = 0; k < 4 - pad; ++k) {
      int v = value(clean[i + k]);
      if (v < 0)
        return std::nullopt;
      bits = bits << 6 | static_cast<unsigned>(v);
    }
    bits <<= 6 * pad;
    out.push_back(static_cast<char>(bits >> 16 & 0xff));
    if (pad < 2)
      out.push_back(static_cast<char>(bits >> 8 & 0xff));
    if (pad < 1)
      out.push_back(static_cast<char>(bits & 0xff));
  }
  return out;
}

} // namespace leasehold
