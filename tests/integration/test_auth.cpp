// The run secret: peers that hold it work together; anyone without it is
// refused by the master and by every peer's p2p listener, and nothing changes.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "harness.h"
#include "stranger_crowd.h"
#include "wire/frame.h"
#include "wire/messages.h"

using namespace ferry::test;
namespace fs = std::filesystem;

namespace {

struct SecretFiles {
  fs::path dir = fs::temp_directory_path() / ("ferry-auth-" + std::to_string(::getpid()));
  SecretFiles() { fs::create_directories(dir); }
  ~SecretFiles() { fs::remove_all(dir); }
  std::string write(const std::string& name, const std::string& content) {
    auto path = dir / name;
    std::ofstream(path) << content;
    return path.string();
  }
};

ferry_master* start_master(const std::string& secret_file, std::string* address) {
  ferry_master_params p;
  ferry_master_params_init(&p);
  p.listen_address = "127.0.0.1:0";
  p.secret_file = secret_file.empty() ? nullptr : secret_file.c_str();
  ferry_master* m = nullptr;
  must(ferry_master_create_with(&p, &m), "ferry_master_create_with");
  uint16_t port = 0;
  must(ferry_master_port(m, &port), "ferry_master_port");
  must(ferry_master_run(m), "ferry_master_run");
  *address = "127.0.0.1:" + std::to_string(port);
  return m;
}

ferry_result join(const std::string& master, const std::string& secret_file, uint16_t p2p_port = 0,
                  ferry_comm** out = nullptr) {
  ferry_comm_params p;
  ferry_comm_params_init(&p);
  p.master_address = master.c_str();
  p.p2p_listen_host = "127.0.0.1";
  p.p2p_port_min = p.p2p_port_max = p2p_port;
  p.timeout_ms = 5000;
  p.secret_file = secret_file.empty() ? nullptr : secret_file.c_str();
  ferry_comm* comm = nullptr;
  must(ferry_comm_create(&p, &comm), "ferry_comm_create");
  ferry_result r = ferry_connect(comm);
  if (out && r == FERRY_OK)
    *out = comm;
  else
    ferry_comm_destroy(comm);
  return r;
}

// Reads one whole frame from a blocking socket; nullopt on close.
std::optional<ferry::wire::Message> read_frame(int fd) {
  std::array<uint8_t, ferry::wire::kFrameHeaderBytes> head{};
  if (::recv(fd, head.data(), head.size(), MSG_WAITALL) != static_cast<ssize_t>(head.size())) return std::nullopt;
  ferry::wire::FrameHeader h;
  if (!ferry::wire::decode_frame_header(head, 4096, h).ok()) return std::nullopt;
  std::vector<uint8_t> payload(h.length);
  if (h.length && ::recv(fd, payload.data(), payload.size(), MSG_WAITALL) != static_cast<ssize_t>(payload.size()))
    return std::nullopt;
  auto decoded = ferry::wire::decode_message(h.type, payload);
  return decoded.message;
}

}  // namespace

TEST_CASE("auth: peers holding the run secret join, all-reduce and sync, others are refused", "[auth]") {
  SecretFiles files;
  std::string good = files.write("good", "correct horse battery staple\n");
  std::string other = files.write("other", "a different secret, long enough");
  std::string address;
  ferry_master* master = start_master(good, &address);

  // Refusals first: they must change nothing for the run that follows.
  CHECK(join(address, "") == FERRY_ERR_AUTH);
  CHECK(std::string(ferry_last_error()).find("refused") != std::string::npos);
  CHECK(join(address, other) == FERRY_ERR_AUTH);

  std::vector<double> sums(3);
  std::vector<float> synced(3);
  auto results = run_peers(3, [&](size_t) {
    ferry_comm_params p;
    ferry_comm_params_init(&p);
    p.master_address = address.c_str();
    p.p2p_listen_host = "127.0.0.1";
    p.secret_file = good.c_str();
    ferry_comm* comm = nullptr;
    must(ferry_comm_create(&p, &comm), "ferry_comm_create");
    grow_group(comm, 3);
    size_t rank = static_cast<size_t>(attribute(comm, FERRY_ATTR_RANK));
    double one = 1.0;
    ferry_allreduce_desc d;
    ferry_allreduce_desc_init(&d);
    d.dtype = FERRY_F64;
    must(ferry_allreduce(comm, &one, &one, 1, &d, nullptr), "ferry_allreduce");
    sums[rank] = one;
    std::vector<float> w(100000, rank == 0 ? 7.0f : 0.0f);  // fetched over authenticated p2p connections
    ferry_tensor t;
    ferry_tensor_init(&t);
    t.name = "w";
    t.data = w.data();
    t.count = w.size();
    ferry_shared_state s;
    ferry_shared_state_init(&s);
    s.revision = rank == 0 ? 1 : 0;
    s.tensors = &t;
    s.count = 1;
    must(ferry_sync_shared_state(comm, &s, rank == 0 ? FERRY_SYNC_SEND_ONLY : FERRY_SYNC_RECEIVE_ONLY, nullptr),
         "ferry_sync_shared_state");
    synced[rank] = w[99999];
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(results) == "");
  CHECK(sums == std::vector<double>{3, 3, 3});
  CHECK(synced == std::vector<float>{7, 7, 7});
  ferry_master_destroy(master);
}

TEST_CASE("auth: a peer with a secret refuses a master that cannot prove it", "[auth]") {
  SecretFiles files;
  std::string secret = files.write("s", "sixteen bytes or more");
  std::string address;
  ferry_master* open_master = start_master("", &address);
  CHECK(join(address, secret) == FERRY_ERR_AUTH);
  CHECK(std::string(ferry_last_error()).find("does not check the run secret") != std::string::npos);
  CHECK(join(address, "") == FERRY_OK);  // an unauthenticated run still works, for those who want one
  ferry_master_destroy(open_master);

  ferry_comm_params p;
  ferry_comm_params_init(&p);
  p.master_address = "127.0.0.1:1";
  std::string short_secret = files.write("short", "tiny");
  p.secret_file = short_secret.c_str();
  ferry_comm* comm = nullptr;
  CHECK(ferry_comm_create(&p, &comm) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(std::string(ferry_last_error()).find("shorter than 16") != std::string::npos);
  p.secret_file = "/nonexistent/secret";
  CHECK(ferry_comm_create(&p, &comm) == FERRY_ERR_INVALID_ARGUMENT);
}

TEST_CASE("auth: a peer's p2p listener refuses a stranger's link and fetch handshakes", "[auth]") {
  SecretFiles files;
  std::string secret = files.write("s", "the secret of this run");
  std::string address;
  ferry_master* master = start_master(secret, &address);
  uint16_t p2p = free_loopback_port();
  ferry_comm* comm = nullptr;
  REQUIRE(join(address, secret, p2p, &comm) == FERRY_OK);

  for (int attempt = 0; attempt < 2; ++attempt) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(p2p);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    auto challenge = read_frame(fd);
    REQUIRE(challenge.has_value());
    REQUIRE(std::holds_alternative<ferry::wire::LinkChallenge>(*challenge));
    CHECK(std::get<ferry::wire::LinkChallenge>(*challenge).required == 1);
    // A stranger cannot compute the proof; it sends its best guess.
    ferry::wire::Message hello = attempt == 0
                                     ? ferry::wire::Message(ferry::wire::LinkHello{9, 1, 1, 0, 1, std::string(32, 'n'), std::string(32, 'p'), "", ""})
                                     : ferry::wire::Message(ferry::wire::FetchHello{9, 1, 1, 0, std::string(32, 'n'), std::string(32, 'p')});
    auto bytes = ferry::wire::encode_message(hello);
    REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
    auto answer = read_frame(fd);
    REQUIRE(answer.has_value());
    REQUIRE(std::holds_alternative<ferry::wire::LinkWelcome>(*answer));
    CHECK(std::get<ferry::wire::LinkWelcome>(*answer).code == FERRY_ERR_AUTH);
    CHECK_FALSE(read_frame(fd).has_value());  // and the connection is closed
    ::close(fd);
  }
  // The peer is unharmed.
  double one = 1.0;
  ferry_allreduce_desc d;
  ferry_allreduce_desc_init(&d);
  d.dtype = FERRY_F64;
  CHECK(ferry_allreduce(comm, &one, &one, 1, &d, nullptr) == FERRY_OK);
  ferry_comm_destroy(comm);
  ferry_master_destroy(master);
}
