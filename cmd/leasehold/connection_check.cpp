#include "cmd/leasehold/connection_check.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

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

/// "etcd.ca_file: /x/ca.pem: cannot read it: No such file or directory".
std::string unreadable(const std::string& setting, const std::string& path, const char* what) {
  // The OS's words ("No such file or directory"); none when only reading failed.
  auto why = ::access(path.c_str(), R_OK) == 0 ? std::string() : ": " + std::string(std::strerror(errno));
  return setting + ": " + path + ": cannot read " + what + why;
}

void check_ca(const std::string& what, const std::optional<std::string>& pem,
              std::vector<std::string>& errs) {
  if (pem && count_certificates(*pem) == 0)
    errs.push_back(what + ": no PEM certificate found (bad CA file)");
}

} // namespace

std::vector<std::string> check_connection_files(const connection_config& cfg,
                                                const connection_file_names& names) {
  std::vector<std::string> errs;
  if (!cfg.ca_data.empty()) {
    check_ca("certificate-authority-data", cfg.ca_data, errs);
  } else if (!cfg.ca_file.empty()) {
    auto pem = read_text_file(cfg.ca_file);
    if (!pem)
      errs.push_back(unreadable(names.ca_file, cfg.ca_file, "the CA file"));
    else
      check_ca(names.ca_file + ": " + cfg.ca_file, pem, errs);
  }
  if (!cfg.token_file.empty()) {
    auto token = read_text_file(cfg.token_file);
    if (!token)
      errs.push_back(unreadable(names.token_file, cfg.token_file, "the token file"));
    else if (trim_whitespace(*token).empty())
      errs.push_back(names.token_file + ": " + cfg.token_file + ": empty token file");
  }
  const std::pair<const std::string*, const std::string*> files[] = {
    {&cfg.client_cert_file, &names.client_cert_file}, {&cfg.client_key_file, &names.client_key_file}};
  for (auto& [file, setting] : files)
    if (!file->empty() && !read_text_file(*file))
      errs.push_back(unreadable(*setting, *file, "it"));
  return errs;
}

} // namespace leasehold::agent
