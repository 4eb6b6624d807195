#include "net/tls_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <asio/ssl/error.hpp>

namespace ferry::net {
namespace {

constexpr const char* kCiphersuites = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";

// OpenSSL's most recent error as text, and the queue emptied.
std::string openssl_reason() {
  unsigned long last = 0;
  while (unsigned long e = ERR_get_error()) last = e;
  if (last == 0) return "unknown OpenSSL error";
  char text[256];
  ERR_error_string_n(last, text, sizeof text);
  return text;
}

[[noreturn]] void refuse(const std::string& what) { throw Error(Errc::invalid_argument, "TLS: " + what); }

void require_readable(const char* field, const std::string& path) {
  if (path.empty()) refuse(std::string(field) + " is not set");
  std::ifstream file(path);
  if (!file) refuse(std::string("cannot read ") + field + " '" + path + "': " + std::strerror(errno));
}

// Our own certificate must verify against the CA for both roles: every side
// of a run both dials (client) and accepts (server), and a certificate the
// other sides cannot verify would only fail later, at every handshake.
void check_own_certificate(SSL_CTX* ctx, const TlsConfig& config) {
  X509* leaf = SSL_CTX_get0_certificate(ctx);
  STACK_OF(X509)* chain = nullptr;
  SSL_CTX_get0_chain_certs(ctx, &chain);
  for (int purpose : {X509_PURPOSE_SSL_CLIENT, X509_PURPOSE_SSL_SERVER}) {
    std::unique_ptr<X509_STORE_CTX, decltype(&X509_STORE_CTX_free)> check(X509_STORE_CTX_new(), X509_STORE_CTX_free);
    if (!check || X509_STORE_CTX_init(check.get(), SSL_CTX_get_cert_store(ctx), leaf, chain) != 1)
      refuse("cannot check the certificate: " + openssl_reason());
    X509_STORE_CTX_set_purpose(check.get(), purpose);
    if (X509_verify_cert(check.get()) != 1) {
      ERR_clear_error();
      refuse("certificate '" + config.cert_file + "' does not verify against ca_file '" + config.ca_file +
             "' as a TLS " + (purpose == X509_PURPOSE_SSL_CLIENT ? "client" : "server") + ": " +
             X509_verify_cert_error_string(X509_STORE_CTX_get_error(check.get())));
    }
  }
}

bool is_certificate_refusal(int reason) {
  switch (reason) {
    case SSL_R_CERTIFICATE_VERIFY_FAILED:
    case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
    case SSL_R_NO_CERTIFICATES_RETURNED:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
    case SSL_R_TLSV1_ALERT_DECRYPT_ERROR:
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::shared_ptr<asio::ssl::context> make_tls_context(const TlsConfig& config) {
  require_readable("cert_file", config.cert_file);
  require_readable("key_file", config.key_file);
  const bool verify_peer = !config.ca_file.empty();
  if (verify_peer) require_readable("ca_file", config.ca_file);
  if (config.handshake_timeout.count() <= 0) refuse("handshake_timeout must be positive");

  auto context = std::make_shared<asio::ssl::context>(asio::ssl::context::tls);
  SSL_CTX* ctx = context->native_handle();
  ERR_clear_error();
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1 || SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) != 1 ||
      SSL_CTX_set_ciphersuites(ctx, kCiphersuites) != 1)
    refuse("this OpenSSL cannot do TLS 1.3 with AES-GCM: " + openssl_reason());
  SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_verify(ctx, verify_peer ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT : SSL_VERIFY_NONE, nullptr);
  // An encrypted key would make OpenSSL prompt on the terminal: refuse it instead.
  SSL_CTX_set_default_passwd_cb(ctx, [](char*, int, int, void*) { return 0; });

  if (SSL_CTX_use_certificate_chain_file(ctx, config.cert_file.c_str()) != 1)
    refuse("cannot load cert_file '" + config.cert_file + "': " + openssl_reason());
  if (SSL_CTX_use_PrivateKey_file(ctx, config.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH)
      refuse("key_file '" + config.key_file + "' does not match cert_file '" + config.cert_file + "'");
    refuse("cannot load key_file '" + config.key_file + "' (PEM, unencrypted): " + openssl_reason());
  }
  if (SSL_CTX_check_private_key(ctx) != 1)
    refuse("key_file '" + config.key_file + "' does not match cert_file '" + config.cert_file + "': " +
           openssl_reason());
  if (!verify_peer) return context;
  if (SSL_CTX_load_verify_locations(ctx, config.ca_file.c_str(), nullptr) != 1)
    refuse("cannot load ca_file '" + config.ca_file + "': " + openssl_reason());
  check_own_certificate(ctx, config);
  return context;
}

Status tls_handshake_failure(const std::error_code& ec, SSL* ssl, const std::string& during) {
  long verified = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
  if (verified != X509_V_OK)
    return Status::failure(Errc::auth, "TLS " + during + ": the other side's certificate was refused: " +
                                           X509_verify_cert_error_string(verified));
  if (ec.category() == asio::error::get_ssl_category() &&
      is_certificate_refusal(ERR_GET_REASON(static_cast<unsigned long>(ec.value()))))
    return Status::failure(Errc::auth, "TLS " + during + ": certificate refused: " + ec.message());
  return Status::failure(Errc::connect, "TLS " + during + " failed: " + ec.message() +
                                            " (is the other side plain TCP? a run uses TLS on every connection or on none)");
}

}  // namespace ferry::net
