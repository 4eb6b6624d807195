#include "net/resolve.h"

#include <asio/ip/tcp.hpp>

#include "core/error.h"

namespace ferry::net {

asio::ip::address resolve_one_address(asio::any_io_executor executor, const std::string& host) {
  std::error_code ec;
  auto literal = asio::ip::make_address(host, ec);
  if (!ec) return literal;
  asio::ip::tcp::resolver resolver(executor);
  auto results = resolver.resolve(host, "", ec);
  if (ec || results.empty())
    throw Error(Errc::invalid_argument, "cannot resolve host '" + host + "': " + ec.message());
  return results.begin()->endpoint().address();
}

}  // namespace ferry::net
