// The tls_* fields of ferry_master_params and ferry_comm_params, turned into
// a transport: TLS on every connection of the process, or plain TCP on all.
#pragma once

#include <memory>

#include "net/transport.h"

namespace ferry::capi {

// Null when all three are NULL (plain TCP). Otherwise a TLS transport with
// the files loaded and checked. Throws Error(invalid_argument): only some set
// (`ca_required`: the CA too; a peer verifies the master and other peers),
// or a file that cannot be read, parsed or matched.
std::shared_ptr<net::Transport> tls_transport_from(const char* cert_file, const char* key_file, const char* ca_file,
                                                   bool ca_required);

}  // namespace ferry::capi
