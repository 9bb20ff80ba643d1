#include <uma/actors/remote_tls.hpp>

#include <unistd.h>

#include <caf/openssl/manager.hpp>

#include <uma/sys/error.hpp>

namespace uma {

void enable_tls(caf::actor_system_config& cfg, const tls_options& tls) {
  const std::pair<const char*, const std::string*> files[] = {
      {"certificate", &tls.certificate}, {"key", &tls.key}, {"CA file", &tls.ca_file}};
  for (const auto& [what, path] : files) {
    if (path->empty())
      raise(errc::invalid_argument, std::string("TLS needs a certificate, its key and a CA file; "
                                                "the ") +
                                        what + " is missing");
    if (::access(path->c_str(), R_OK) != 0)
      raise(errc::invalid_argument, std::string("TLS: cannot read the ") + what + " " + *path);
  }
  cfg.openssl_certificate = tls.certificate;
  cfg.openssl_key = tls.key;
  cfg.openssl_cafile = tls.ca_file;
  cfg.openssl_passphrase = tls.passphrase;
  cfg.load<caf::openssl::manager>();
}

bool uses_tls(const caf::actor_system& sys) {
  return sys.has_openssl_manager();
}

}  // namespace uma
