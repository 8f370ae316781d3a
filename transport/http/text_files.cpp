#include "transport/http/text_files.hpp"

#include <fstream>
#include <sstream>

namespace leasehold {

std::optional<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return std::nullopt;
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad())
    return std::nullopt;
  return out.str();
}

std::string trim_whitespace(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos)
    return {};
  auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

} // namespace leasehold
