// A test CA and a server certificate for 127.0.0.1 and localhost, made with
// the openssl command (a dependency scripts/setup installs).
#pragma once

#include <cstdio>
#include <fstream>
#include <string>

#include "tests/support/temp_dir.hpp"

namespace leasehold::test {

/// Writes ca.crt, ca.key, server.crt and server.key (EC P-256, valid one
/// day) under `dir`; "" on success, else the failed command and its output.
inline std::string make_test_certificates(const temp_dir& dir) {
  auto p = [&](const char* f) { return dir.file(f); };
  std::ofstream(p("san.cnf")) << "subjectAltName=IP:127.0.0.1,DNS:localhost\n";
  std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  for (const std::string& cmd : {
         "openssl req -x509" + ec + " -keyout " + p("ca.key") + " -out " + p("ca.crt") +
           " -days 1 -subj /CN=leasehold-test-ca",
         "openssl req" + ec + " -keyout " + p("server.key") + " -out " + p("server.csr") +
           " -subj /CN=127.0.0.1",
         "openssl x509 -req -in " + p("server.csr") + " -CA " + p("ca.crt") + " -CAkey " + p("ca.key") +
           " -CAcreateserial -out " + p("server.crt") + " -days 1 -extfile " + p("san.cnf")}) {
    std::string out;
    std::FILE* pipe = ::popen((cmd + " 2>&1").c_str(), "r");
    if (pipe == nullptr)
      return cmd + ": cannot run";
    char buf[4096];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, pipe))
      out.append(buf, n);
    if (::pclose(pipe) != 0)
      return cmd + "\n" + out;
  }
  return "";
}

} // namespace leasehold::test
