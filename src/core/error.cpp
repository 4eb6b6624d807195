#include "core/error.h"

namespace ferry {

std::string_view errc_name(Errc code) {
  switch (code) {
    case Errc::ok: return "ok";
    case Errc::invalid_argument: return "invalid argument";
    case Errc::invalid_usage: return "invalid usage";
    case Errc::timeout: return "timeout";
    case Errc::peer_lost: return "peer lost";
    case Errc::master_lost: return "master lost";
    case Errc::connect: return "cannot connect";
    case Errc::mismatch: return "collective mismatch";
    case Errc::kicked: return "kicked by the master";
    case Errc::protocol: return "protocol violation";
    case Errc::auth: return "authentication failed";
    case Errc::system: return "system error";
    case Errc::internal: return "internal error";
  }
  return "unknown error";
}

}  // namespace ferry
