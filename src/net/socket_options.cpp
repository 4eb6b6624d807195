#include "net/socket_options.h"

namespace ferry::net {

void apply_socket_options(asio::ip::tcp::socket& socket) {
  std::error_code ignored;  // a socket that refuses an option still works, only slower
  socket.set_option(asio::ip::tcp::no_delay(true), ignored);
  socket.set_option(asio::socket_base::keep_alive(true), ignored);
}

}  // namespace ferry::net
