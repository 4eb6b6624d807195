// connect's first dial to a wrong master address (issue 42, item 3): an address that refuses
// is tried a few times, a name that does not resolve once, and either ends in seconds (not
// master_connect_timeout_ms's minute) with an error that names the address and what to check;
// one that never answers can still be aborted at once.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "harness.h"

using namespace ferry::test;

namespace {

struct DialResult {
  ferry_result code;
  std::string error;
  std::chrono::milliseconds took;
};

// ferry_connect with the library's defaults (master_connect_timeout_ms 60 s) to `master`.
DialResult connect_to(const std::string& master) {
  ferry_comm_params p;
  ferry_comm_params_init(&p);
  p.master_address = master.c_str();
  p.p2p_listen_host = "127.0.0.1";
  ferry_comm* comm = nullptr;
  REQUIRE(ferry_comm_create(&p, &comm) == FERRY_OK);
  const auto started = std::chrono::steady_clock::now();
  DialResult result{ferry_connect(comm), ferry_last_error(), {}};
  result.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  ferry_comm_destroy(comm);
  return result;
}

// A TCP socket bound to a free port of 127.0.0.1 (not listening); `at` gets its address.
int bound_on_loopback(sockaddr_in& at) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  at = sockaddr_in{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof at;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&at), &length) == 0);
  return fd;
}

}  // namespace

TEST_CASE("first dial: a refused address is tried a few times, then named within seconds", "[api][connect]") {
  // A port held bound but not listening: every dial is refused at once, and no other test
  // running beside this one can listen there meanwhile (a stopped master's port could be
  // taken by another test's listener within the seconds of redials: seen in CI).
  sockaddr_in at{};
  const int held = bound_on_loopback(at);
  const std::string address = "127.0.0.1:" + std::to_string(ntohs(at.sin_port));
  auto result = connect_to(address);
  ::close(held);
  INFO(result.error);
  CHECK(result.code == FERRY_ERR_CONNECT);
  CHECK(result.took < std::chrono::seconds(15));
  CHECK(result.took >= std::chrono::milliseconds(1'000));  // dialed again meanwhile: a master may be starting
  CHECK(result.error.find(address) != std::string::npos);
  CHECK(result.error.find("refused 10 times") != std::string::npos);
  CHECK(result.error.find("is a ferry master listening at that address") != std::string::npos);
}

TEST_CASE("first dial: a master name that does not resolve is named at once", "[api][connect]") {
  const std::string address = "no-such-master.invalid:48148";
  auto result = connect_to(address);
  INFO(result.error);
  CHECK(result.code == FERRY_ERR_CONNECT);
  CHECK(result.took < std::chrono::seconds(15));
  CHECK(result.error.find(address) != std::string::npos);
  CHECK(result.error.find("cannot resolve") != std::string::npos);
  CHECK(result.error.find("check the master's host name") != std::string::npos);
}

TEST_CASE("first dial: ferry_comm_abort ends a dial to an address that never answers at once", "[api][connect]") {
  // A listener whose accept queue of one is full and never drained drops every further SYN:
  // a dial there waits for its whole deadline (60 s at the defaults) unless it is abandoned.
  sockaddr_in at{};
  const int hole = bound_on_loopback(at);
  const int filler = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(filler >= 0);
  REQUIRE(::listen(hole, 0) == 0);
  REQUIRE(::connect(filler, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0);
  const std::string address = "127.0.0.1:" + std::to_string(ntohs(at.sin_port));

  ferry_comm_params p;
  ferry_comm_params_init(&p);
  p.master_address = address.c_str();
  p.p2p_listen_host = "127.0.0.1";
  ferry_comm* comm = nullptr;
  REQUIRE(ferry_comm_create(&p, &comm) == FERRY_OK);
  ferry_result code = FERRY_OK;
  std::chrono::steady_clock::time_point returned;
  std::thread dialing([&] {
    code = ferry_connect(comm);
    returned = std::chrono::steady_clock::now();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // inside the dial
  const auto aborted = std::chrono::steady_clock::now();
  REQUIRE(ferry_comm_abort(comm) == FERRY_OK);
  dialing.join();
  CHECK(code != FERRY_OK);
  CHECK(returned - aborted < std::chrono::seconds(2));  // before: the dial's own deadline, a minute on
  ferry_comm_destroy(comm);
  ::close(filler);
  ::close(hole);
}
