#include "capi/tls_params.h"

#include <string>

#include "core/error.h"
#include "net/tls_transport.h"

namespace ferry::capi {

std::shared_ptr<net::Transport> tls_transport_from(const char* cert_file, const char* key_file, const char* ca_file,
                                                   bool ca_required) {
  if (!cert_file && !key_file && !ca_file) return nullptr;
  if (!cert_file || !key_file)
    throw Error(Errc::invalid_argument, "TLS: tls_cert_file and tls_key_file go together (both set, or neither)");
  if (ca_required && !ca_file)
    throw Error(Errc::invalid_argument,
                "TLS: a peer needs tls_ca_file too (it verifies the master and the other peers against it)");
  net::TlsConfig config;
  config.cert_file = cert_file;
  config.key_file = key_file;
  if (ca_file) config.ca_file = ca_file;
  if (config.cert_file.empty() || config.key_file.empty() || (ca_file && config.ca_file.empty()))
    throw Error(Errc::invalid_argument, "TLS: a tls_*_file is an empty string");
  return net::make_tls_transport(config);
}

}  // namespace ferry::capi
