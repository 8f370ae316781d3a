#include "cmd/leasehold/connection_check.hpp"

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "transport/kube/kube_config.hpp"

namespace leasehold::agent {

namespace {

/// Number of PEM certificates in `pem`.
int count_certificates(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr)
    return 0;
  int n = 0;
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    ++n;
    X509_free(cert);
  }
  BIO_free(bio);
  return n;
}

void check_ca(const std::string& what, const std::optional<std::string>& pem,
              std::vector<std::string>& errs) {
  if (!pem)
    errs.push_back(what + ": unreadable CA file");
  else if (count_certificates(*pem) == 0)
    errs.push_back(what + ": no PEM certificate found (bad CA file)");
}

} // namespace

std::vector<std::string> check_connection_files(const connection_config& cfg) {
  std::vector<std::string> errs;
  if (!cfg.ca_data.empty())
    check_ca("certificate-authority-data", cfg.ca_data, errs);
  else if (!cfg.ca_file.empty())
    check_ca(cfg.ca_file, read_text_file(cfg.ca_file), errs);
  if (!cfg.token_file.empty()) {
    auto token = read_text_file(cfg.token_file);
    if (!token || trim_whitespace(*token).empty())
      errs.push_back(cfg.token_file + ": unreadable or empty token file");
  }
  for (auto* file : {&cfg.client_cert_file, &cfg.client_key_file})
    if (!file->empty() && !read_text_file(*file))
      errs.push_back(*file + ": unreadable");
  return errs;
}

} // namespace leasehold::agent
