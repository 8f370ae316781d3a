// A temporary directory for a test, removed with its contents at scope exit.
// LEASEHOLD_KEEP_TEMP=1 keeps it (its path is printed on stderr) to read the
// logs and journals after a failure; the fault suite's Python harness reads
// the same variable.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include <unistd.h>

namespace leasehold::test {

class temp_dir {
public:
  /// A fresh directory $TMPDIR/<prefix>-XXXXXX (else under /tmp).
  explicit temp_dir(const std::string& prefix = "leasehold-test") {
    auto tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr)
      throw std::runtime_error("mkdtemp failed for " + tmpl);
    path_ = tmpl;
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    if (const char* keep = std::getenv("LEASEHOLD_KEEP_TEMP"); keep && std::string(keep) == "1") {
      std::fprintf(stderr, "kept %s\n", path_.c_str());
      return;
    }
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  std::filesystem::path operator/(const std::string& name) const {
    return std::filesystem::path(path_) / name;
  }

private:
  std::string path_;
};

} // namespace leasehold::test
