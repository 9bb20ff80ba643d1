#include <uma/actors/wire/detail/wire_tls.hpp>

#include <fstream>
#include <iterator>
#include <memory>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <uma/sys/error.hpp>

namespace uma::detail {

namespace {

constexpr std::size_t max_pem_bytes = 1u << 20;

[[nodiscard]] std::string read_file(const char* flag, const std::string& path) {
  if (path.empty())
    raise(errc::invalid_argument,
          std::string("TLS needs --tls-cert, --tls-key and --tls-ca; ") + flag + " is missing");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    raise(errc::invalid_argument, std::string(flag) + " " + path + ": cannot be read");
  std::string text;
  char buffer[4096];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<std::size_t>(in.gcount()));
    if (text.size() > max_pem_bytes)
      raise(errc::invalid_argument, std::string(flag) + " " + path + ": larger than 1 MiB");
  }
  return text;
}

using bio_ptr = std::unique_ptr<BIO, decltype(&BIO_free)>;
using x509_ptr = std::unique_ptr<X509, decltype(&X509_free)>;
using key_ptr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

[[nodiscard]] bio_ptr memory_bio(const std::string& text) {
  return {BIO_new_mem_buf(text.data(), static_cast<int>(text.size())), &BIO_free};
}

[[nodiscard]] x509_ptr parse_certificate(const char* flag, const std::string& path,
                                         const std::string& text) {
  auto bio = memory_bio(text);
  x509_ptr cert{PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), &X509_free};
  if (!cert)
    raise(errc::invalid_argument, std::string(flag) + " " + path + ": no PEM certificate there");
  return cert;
}

}  // namespace

pem_credentials load_pem_credentials(const tls_options& tls) {
  pem_credentials out{read_file("--tls-cert", tls.certificate), read_file("--tls-key", tls.key),
                      read_file("--tls-ca", tls.ca_file)};
  const auto cert = parse_certificate("--tls-cert", tls.certificate, out.certificate);
  static_cast<void>(parse_certificate("--tls-ca", tls.ca_file, out.ca));
  auto bio = memory_bio(out.key);
  key_ptr key{PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free};
  if (!key)
    raise(errc::invalid_argument,
          "--tls-key " + tls.key + ": no PEM private key there (or it is encrypted)");
  if (X509_check_private_key(cert.get(), key.get()) != 1)
    raise(errc::invalid_argument,
          "--tls-key " + tls.key + " is not the key of --tls-cert " + tls.certificate);
  return out;
}

}  // namespace uma::detail
