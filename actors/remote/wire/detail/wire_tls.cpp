#include <uma/actors/remote/wire/detail/wire_tls.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <vector>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <uma/sys/error.hpp>

namespace uma::detail {

namespace {

constexpr std::size_t max_pem_bytes = 1u << 20;

[[nodiscard]] std::string read_file(const char* flag, const std::string& path) {
  if (path.empty())
    raise(errc::invalid_argument,
          std::string("TLS needs --tls-cert, --tls-key and --tls-ca; ") + flag + " is missing");
  // Opened without waiting and checked as a regular file first: a FIFO or a device must not
  // hang the start (or a SIGHUP's reload), where SIGTERM would then not stop it either.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    raise(errc::invalid_argument, std::string(flag) + " " + path + ": cannot be read");
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } const close_at_return{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    raise(errc::invalid_argument,
          std::string(flag) + " " + path + ": not a regular file (a FIFO or a device is refused)");
  std::string text;
  char buffer[4096];
  while (true) {
    const auto n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      raise(errc::invalid_argument, std::string(flag) + " " + path + ": cannot be read");
    if (n == 0)
      return text;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > max_pem_bytes)
      raise(errc::invalid_argument, std::string(flag) + " " + path + ": larger than 1 MiB");
  }
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

/// Refuses a certificate outside its validity period: a server would present it and every peer
/// refuse it, or a client would be refused in every handshake.
void check_validity(const char* flag, const std::string& path, X509* cert) {
  if (X509_cmp_current_time(X509_get0_notBefore(cert)) > 0)
    raise(errc::invalid_argument, std::string(flag) + " " + path + ": not valid yet");
  if (X509_cmp_current_time(X509_get0_notAfter(cert)) < 0)
    raise(errc::invalid_argument, std::string(flag) + " " + path + ": expired");
}

/// Every certificate of a PEM text, in order.
[[nodiscard]] std::vector<x509_ptr> all_certificates(const std::string& text) {
  auto bio = memory_bio(text);
  std::vector<x509_ptr> out;
  while (X509* c = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr))
    out.emplace_back(c, &X509_free);
  ERR_clear_error();  // the end of the text reads as an error
  return out;
}

/// Chooses "h2" from the client's ALPN list; a client that offers no h2 is no gRPC client.
int select_h2(SSL*, const unsigned char** out, unsigned char* out_len, const unsigned char* in,
              unsigned in_len, void*) {
  static const unsigned char h2[] = {2, 'h', '2'};
  unsigned char* chosen = nullptr;
  if (SSL_select_next_proto(&chosen, out_len, h2, sizeof h2, in, in_len) != OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

/// The certificate (with the chain after it in the file), the key and the CA into `ctx`.
void load_into(SSL_CTX* ctx, const pem_credentials& pem, const tls_options& tls) {
  auto chain = all_certificates(pem.certificate);
  auto cas = all_certificates(pem.ca);
  if (chain.empty() || cas.empty())
    raise(errc::invalid_argument, "--tls-cert or --tls-ca: no PEM certificate there");
  if (SSL_CTX_use_certificate(ctx, chain.front().get()) != 1)
    raise(errc::invalid_argument, "--tls-cert " + tls.certificate + ": refused by OpenSSL");
  for (std::size_t i = 1; i < chain.size(); ++i)
    if (SSL_CTX_add1_chain_cert(ctx, chain[i].get()) != 1)
      raise(errc::invalid_argument, "--tls-cert " + tls.certificate + ": a bad chain");
  auto bio = memory_bio(pem.key);
  key_ptr key{PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free};
  if (!key || SSL_CTX_use_PrivateKey(ctx, key.get()) != 1 || SSL_CTX_check_private_key(ctx) != 1)
    raise(errc::invalid_argument,
          "--tls-key " + tls.key + " is not the key of --tls-cert " + tls.certificate);
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  for (const auto& ca : cas)
    if (X509_STORE_add_cert(store, ca.get()) != 1 || SSL_CTX_add_client_CA(ctx, ca.get()) != 1)
      raise(errc::invalid_argument, "--tls-ca " + tls.ca_file + ": refused by OpenSSL");
}

}  // namespace

std::shared_ptr<SSL_CTX> make_server_context(const pem_credentials& pem, const tls_options& tls) {
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_server_method()), &SSL_CTX_free);
  if (!ctx)
    raise(errc::out_of_memory, "TLS: OpenSSL could not make a context");
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_OFF);
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_num_tickets(ctx.get(), 0);
  SSL_CTX_set_alpn_select_cb(ctx.get(), select_h2, nullptr);
  load_into(ctx.get(), pem, tls);
  return ctx;
}

std::string peer_common_name(SSL* ssl) {
  if (SSL_get_verify_result(ssl) != X509_V_OK)
    return {};
  x509_ptr cert{SSL_get1_peer_certificate(ssl), &X509_free};
  if (!cert)
    return {};
  char name[256] = {};
  const int n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert.get()), NID_commonName, name,
                                          sizeof name);
  return n > 0 ? std::string(name, static_cast<std::size_t>(n)) : std::string{};
}

namespace {

/// Refuses a CA file without a certificate, or with one outside its validity period (a client
/// certificate it signed would fail every handshake, with nothing said at start).
void check_every_validity(const char* flag, const std::string& path, const std::string& text) {
  static_cast<void>(parse_certificate(flag, path, text));
  for (const auto& cert : all_certificates(text))
    check_validity(flag, path, cert.get());
}

}  // namespace

pem_credentials load_pem_credentials(const tls_options& tls) {
  pem_credentials out{read_file("--tls-cert", tls.certificate), read_file("--tls-key", tls.key),
                      read_file("--tls-ca", tls.ca_file)};
  const auto cert = parse_certificate("--tls-cert", tls.certificate, out.certificate);
  check_validity("--tls-cert", tls.certificate, cert.get());
  check_every_validity("--tls-ca", tls.ca_file, out.ca);
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
