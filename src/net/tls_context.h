// The OpenSSL context shared by every TLS connection of a process, and the
// reading of OpenSSL's failures into ferry's error codes.
#pragma once

#include <memory>
#include <string>
#include <system_error>

#include <asio/ssl/context.hpp>

#include "core/error.h"
#include "net/tls_transport.h"

typedef struct ssl_st SSL;

namespace ferry::net {

// Mutual TLS 1.3 as tls_transport.h describes it. Throws Error(invalid_argument).
std::shared_ptr<asio::ssl::context> make_tls_context(const TlsConfig& config);

// A failed handshake: Errc::auth when a certificate was refused (this side
// rejected the other's, or an alert says the other side rejected ours),
// Errc::connect otherwise. `ssl` is the connection's (for its verify result).
Status tls_handshake_failure(const std::error_code& ec, SSL* ssl, const std::string& during);

}  // namespace ferry::net
