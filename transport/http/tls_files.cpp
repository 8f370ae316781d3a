#include "transport/http/tls_files.hpp"

#include <unistd.h>

#include <cstdlib>

#include "transport/http/text_files.hpp"

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

std::optional<client_identity> read_client_identity(const connection_config& cfg, std::string& err) {
  auto cert_pem = pem_from(cfg.client_cert_data, cfg.client_cert_file, "client certificate", err);
  auto key_pem = cert_pem ? pem_from(cfg.client_key_data, cfg.client_key_file, "client key", err)
                          : std::nullopt;
  if (!cert_pem || !key_pem)
    return std::nullopt;
  if (cert_pem->empty() != key_pem->empty()) {
    err = "client certificate and key must be set together";
    return std::nullopt;
  }
  client_identity id;
  if (cert_pem->empty())
    return id;
  id.cert.reset(PEM_read_bio_X509(pem_bio(*cert_pem).get(), nullptr, nullptr, nullptr));
  id.key.reset(PEM_read_bio_PrivateKey(pem_bio(*key_pem).get(), nullptr, nullptr, nullptr));
  if (!id.cert || !id.key) {
    err = !id.cert ? "client certificate: invalid PEM" : "client key: invalid PEM";
    return std::nullopt;
  }
  return id;
}

} // namespace leasehold
