// TLS backend of Transport: every connection of a run is mutual TLS 1.3.
//
// Trust model. One run, one CA: every peer and the master hold a certificate
// signed by it and verify the other side's certificate against it, in both
// directions (a connection is fully verified or refused). One exception: a
// master may be given no CA (ca_file empty), and then does not ask peers for
// certificates; peers still verify the master, and membership is left to the
// run secret. A peer always needs the CA (it dials and accepts other peers). Host names are not verified: ferry's peers are
// dialed by the address the master hands out, often behind NAT or a proxy,
// so a name in the certificate would prove nothing the CA does not; who a
// peer is comes from the run secret (core/run_secret.h) and the master's
// plan. TLS adds confidentiality and integrity on the WAN and keeps anyone
// without a CA-signed certificate from even reaching ferry's protocol.
//
// Protocol: TLS 1.3 only, ciphersuites TLS_AES_128_GCM_SHA256 (fastest with
// AES-NI), then TLS_AES_256_GCM_SHA384, then TLS_CHACHA20_POLY1305_SHA256;
// the acceptor's order wins. No session tickets, no resumption. After its
// handshake the acceptor sends one byte (kTlsAcceptedByte) inside TLS, and the
// dialer's open_client completes only when it reads it: in TLS 1.3 the client
// finishes its handshake before the server has checked the client's
// certificate, and this byte is how a refused dialer learns so at once (as
// Errc::auth) instead of at its first read.
//
// Costs: one TCP round trip for the handshake plus half for the byte (which
// rides with the acceptor's first frame in practice: ferry's acceptors always
// speak first). Bulk data: AES-GCM per byte (several GB/s per core with
// AES-NI), plus one copy on each side (OpenSSL encrypts into its own buffer
// and decrypts in place before copying out).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "net/transport.h"

namespace ferry::net {

struct TlsConfig {
  std::string cert_file;  // PEM: this side's certificate (chain), leaf first
  std::string key_file;   // PEM: its private key (unencrypted)
  // PEM: the run's CA; the other side must present a certificate it signed.
  // Empty: acceptor only (a master), which then asks for no certificate.
  std::string ca_file;
  // Deadline of a handshake (TCP connected -> verified in both directions).
  std::chrono::milliseconds handshake_timeout{10'000};
};

inline constexpr uint8_t kTlsAcceptedByte = 0x5a;

// Loads and checks the files at once: Error(Errc::invalid_argument) names the
// file and OpenSSL's reason when one cannot be read or parsed, when the key
// does not match the certificate, or when the certificate does not verify
// against the CA (such a side could never be accepted by anyone in the run).
//
// Handshake failures reach StreamReady as Errc::auth when a certificate was
// refused (by either side), Errc::timeout past handshake_timeout, and
// Errc::connect otherwise (not TLS, reset, ...).
std::shared_ptr<Transport> make_tls_transport(const TlsConfig& config);

}  // namespace ferry::net
