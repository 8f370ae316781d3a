#include "transport/tls_files.hpp"

#include <unistd.h>

#include <cstdlib>

#include "transport/common/text_files.hpp"

namespace leasehold {

private_temp_file::~private_temp_file() {
  if (!path_.empty())
    ::unlink(path_.c_str());
}

bool private_temp_file::write(const std::string& content) {
  const char* dir = std::getenv("TMPDIR");
  std::string templ = std::string(dir && *dir ? dir : "/tmp") + "/leasehold-ca-XXXXXX";
  int fd = ::mkstemp(templ.data());   // mode 0600
  if (fd < 0)
    return false;
  path_ = templ;
  size_t done = 0;
  while (done < content.size()) {
    auto n = ::write(fd, content.data() + done, content.size() - done);
    if (n <= 0)
      break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return done == content.size();
}

bio_ptr pem_bio(const std::string& pem) {
  return bio_ptr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

std::optional<std::string> pem_from(const std::string& data, const std::string& file,
                                    const char* what, std::string& err) {
  if (!data.empty() || file.empty())
    return data;
  auto text = read_text_file(file);
  if (!text)
    err = std::string(what) + " " + file + ": unreadable";
  return text;
}

} // namespace leasehold
