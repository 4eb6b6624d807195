// FrameConnection reads whatever the socket holds and cuts frames out of it
// (frame_connection.cpp, kInboxBytes): several frames in one read, one frame
// over many reads, a frame larger than the inbox, and a header over the
// payload limit must each come out as before, when it read header then payload.
// Driven from a raw socket into a FrameConnection over a TCP stream.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include <asio/ip/tcp.hpp>

#include "io_thread.h"
#include "net/frame_connection.h"
#include "net/transport.h"
#include "wire/messages.h"

using namespace ferry;
using namespace std::chrono_literals;

namespace {

// A FrameConnection on the accepting end of a loopback TCP connection; the
// test writes raw bytes into the other end.
class FrameReceiver {
 public:
  explicit FrameReceiver(uint32_t max_payload = wire::kMaxControlPayload) {
    asio::ip::tcp::acceptor acceptor(io_.io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(acceptor.local_endpoint().port());
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    std::promise<std::shared_ptr<net::Stream>> opened;
    net::make_tcp_transport()->open_server(acceptor.accept(), [&](Status st, std::shared_ptr<net::Stream> stream) {
      opened.set_value(st.ok() ? stream : nullptr);
    });
    auto stream = opened.get_future().get();
    REQUIRE(stream);
    connection_ = net::FrameConnection::create(stream, max_payload);
    connection_->start({[this](wire::Message m) {
                          std::lock_guard lock(mu_);
                          messages_.push_back(std::move(m));
                          cv_.notify_all();
                        },
                        [this](const Status& why) {
                          std::lock_guard lock(mu_);
                          closed_ = why;
                          cv_.notify_all();
                        }});
  }
  ~FrameReceiver() {
    // The close handler runs on the io thread and writes closed_: wait for it before the members go.
    connection_->close(Status::success());
    wait_closed();
    ::close(fd_);
  }

  void send_raw(const std::vector<uint8_t>& bytes) {
    REQUIRE(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
  }
  // Waits until `count` messages arrived (or the connection closed); returns them.
  std::vector<wire::Message> wait_for(size_t count) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, 5s, [&] { return messages_.size() >= count || closed_; });
    return messages_;
  }
  std::optional<Status> wait_closed() {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, 5s, [&] { return closed_.has_value(); });
    return closed_;
  }

 private:
  test::IoThread io_;
  int fd_ = -1;
  std::shared_ptr<net::FrameConnection> connection_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<wire::Message> messages_;  // guarded by mu_
  std::optional<Status> closed_;         // guarded by mu_
};

std::vector<uint8_t> joined(const std::vector<wire::Message>& messages) {
  std::vector<uint8_t> bytes;
  for (const wire::Message& m : messages) {
    std::vector<uint8_t> frame = wire::encode_message(m);
    bytes.insert(bytes.end(), frame.begin(), frame.end());
  }
  return bytes;
}

// A topology of `members` ring members: its frame outgrows the 4 KiB inbox from ~150.
wire::Topology topology_of(uint64_t members) {
  wire::Topology t;
  t.epoch = 7;
  for (uint64_t id = 1; id <= members; ++id) t.ring.push_back({id, "10.0.0." + std::to_string(id % 250), 4000, {}});
  return t;
}

}  // namespace

TEST_CASE("net: frames that arrive in one read are all delivered, in order", "[net][frames]") {
  FrameReceiver receiver;
  receiver.send_raw(joined({wire::CollectiveGo{1, 0}, wire::Heartbeat{}, wire::CollectiveGo{1, 1},
                            wire::PendingCount{3}}));
  auto got = receiver.wait_for(3);
  REQUIRE(got.size() == 3);  // the heartbeat is consumed, as before
  CHECK(std::get<wire::CollectiveGo>(got[0]).seq == 0);
  CHECK(std::get<wire::CollectiveGo>(got[1]).seq == 1);
  CHECK(std::get<wire::PendingCount>(got[2]).pending == 3);
}

TEST_CASE("net: a frame that arrives a byte at a time is delivered once, whole", "[net][frames]") {
  FrameReceiver receiver;
  std::vector<uint8_t> bytes = joined({wire::CollectiveResult{2, 5, 0, "committed"}});
  for (uint8_t byte : bytes) {
    receiver.send_raw({byte});
    std::this_thread::sleep_for(1ms);
  }
  auto got = receiver.wait_for(1);
  REQUIRE(got.size() == 1);
  CHECK(std::get<wire::CollectiveResult>(got[0]).reason == "committed");
}

TEST_CASE("net: a frame larger than the read buffer, between small ones, is delivered whole", "[net][frames]") {
  FrameReceiver receiver;
  wire::Topology big = topology_of(400);
  REQUIRE(wire::encode_message(big).size() > 2 * 4096);  // grows the inbox, read over several reads
  receiver.send_raw(joined({wire::PendingCount{1}, big, wire::PendingCount{2}}));
  auto got = receiver.wait_for(3);
  REQUIRE(got.size() == 3);
  CHECK(std::get<wire::PendingCount>(got[0]).pending == 1);
  CHECK(std::get<wire::Topology>(got[1]).ring == big.ring);
  CHECK(std::get<wire::PendingCount>(got[2]).pending == 2);
}

TEST_CASE("net: a header announcing more than the payload limit closes the connection as malformed",
          "[net][frames]") {
  FrameReceiver receiver(wire::kMaxHandshakePayload);
  receiver.send_raw(joined({wire::PendingCount{1}, topology_of(400)}));
  auto closed = receiver.wait_closed();
  REQUIRE(closed);
  CHECK(closed->code == Errc::protocol);
  CHECK(receiver.wait_for(1).size() == 1);  // the frame before it still came through
}
