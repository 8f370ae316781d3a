// The TLS material a client reads: PEM text from a kubeconfig's data or a
// file, a private temporary file for a CA bundle given as data (cpp-httplib
// takes only a path), and owners for OpenSSL's objects.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <openssl/pem.h>
#include <openssl/x509.h>

#include "leasehold/transports.hpp"

namespace leasehold {

/// A file private to this process (mode 0600), removed on destruction.
class private_temp_file {
public:
  private_temp_file() = default;
  private_temp_file(const private_temp_file&) = delete;
  private_temp_file& operator=(const private_temp_file&) = delete;
  ~private_temp_file();

  /// Writes `content` to a new file under $TMPDIR (or /tmp); false on failure.
  bool write(const std::string& content);
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

struct x509_deleter {
  void operator()(X509* p) const { X509_free(p); }
};
struct pkey_deleter {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct bio_deleter {
  void operator()(BIO* p) const { BIO_free(p); }
};
using bio_ptr = std::unique_ptr<BIO, bio_deleter>;

/// A read-only memory BIO over `pem` (which must outlive it).
bio_ptr pem_bio(const std::string& pem);

/// PEM text from `data`, else the contents of `file`; empty when neither is set.
std::optional<std::string> pem_from(const std::string& data, const std::string& file,
                                    const char* what, std::string& err);

/// A client's certificate and its key, parsed; both null when neither is set.
struct client_identity {
  std::unique_ptr<X509, x509_deleter> cert;
  std::unique_ptr<EVP_PKEY, pkey_deleter> key;
};

/// `cfg`'s client certificate and key (data, else files); nullopt with
/// `err` when one is unreadable or not PEM, or only one of the two is set.
std::optional<client_identity> read_client_identity(const connection_config& cfg, std::string& err);

} // namespace leasehold
