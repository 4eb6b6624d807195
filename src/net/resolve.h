// Name resolution shared by the listener and the dialer.
#pragma once

#include <string>

#include <asio/any_io_executor.hpp>
#include <asio/ip/address.hpp>

namespace ferry::net {

// An IP literal as is; a name through the system resolver (blocking: used at
// set-up only). Throws Error(Errc::invalid_argument) when nothing resolves.
asio::ip::address resolve_one_address(asio::any_io_executor executor, const std::string& host);

}  // namespace ferry::net
