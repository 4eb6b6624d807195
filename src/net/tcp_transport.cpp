#include <asio/post.hpp>

#include "net/socket_options.h"
#include "net/tcp_stream.h"
#include "net/transport.h"

namespace ferry::net {
namespace {

class TcpTransport final : public Transport {
 public:
  std::string name() const override { return "tcp"; }
  void open_client(asio::ip::tcp::socket socket, StreamReady ready) override {
    open(std::move(socket), std::move(ready));
  }
  void open_server(asio::ip::tcp::socket socket, StreamReady ready) override {
    open(std::move(socket), std::move(ready));
  }

 private:
  static void open(asio::ip::tcp::socket socket, StreamReady ready) {
    apply_socket_options(socket);
    auto executor = socket.get_executor();
    std::shared_ptr<Stream> stream = std::make_shared<TcpStream>(std::move(socket));
    asio::post(executor, [stream, ready = std::move(ready)] { ready(Status::success(), stream); });
  }
};

}  // namespace

std::shared_ptr<Transport> make_tcp_transport() { return std::make_shared<TcpTransport>(); }

}  // namespace ferry::net
