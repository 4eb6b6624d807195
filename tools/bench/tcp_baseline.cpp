#include "tcp_baseline.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "input_pattern.h"  // tools/common
#include "json.h"  // tools/common
#include "peer_session.h"
#include "sync_content.h"

namespace ferry::bench {

namespace {

constexpr int kExitFailed = 1;
constexpr std::size_t kRequestBytes = 24;

class SocketError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd& operator=(Fd&&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

sockaddr_in ipv4(const std::string& host, int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) throw SocketError("not an IPv4 address: " + host);
  return address;
}

void set_congestion_control(int fd, const std::string& cc) {
  if (cc.empty()) return;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc.data(), static_cast<socklen_t>(cc.size())) != 0) {
    throw SocketError(errno_text("TCP_CONGESTION " + cc));
  }
}

void send_all(int fd, const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw SocketError(errno_text("send"));
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

// False on a clean end of stream before the first byte.
bool recv_all(int fd, void* data, std::size_t bytes) {
  auto* p = static_cast<unsigned char*>(data);
  const std::size_t wanted = bytes;
  while (bytes > 0) {
    const ssize_t n = ::recv(fd, p, bytes, MSG_WAITALL);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 && bytes == wanted) return false;
    if (n <= 0) throw SocketError(n == 0 ? "connection closed mid-message" : errno_text("recv"));
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}

struct Request {
  std::uint64_t total = 0, offset = 0, length = 0;
};

std::array<unsigned char, kRequestBytes> encode(const Request& r) {
  std::array<unsigned char, kRequestBytes> out{};
  const std::uint64_t fields[3] = {r.total, r.offset, r.length};
  for (int f = 0; f < 3; ++f)
    for (int b = 0; b < 8; ++b) out[static_cast<std::size_t>(f * 8 + b)] = static_cast<unsigned char>(fields[f] >> (8 * b));
  return out;
}

Request decode(const std::array<unsigned char, kRequestBytes>& in) {
  std::uint64_t fields[3] = {0, 0, 0};
  for (int f = 0; f < 3; ++f)
    for (int b = 7; b >= 0; --b) fields[f] = (fields[f] << 8) | in[static_cast<std::size_t>(f * 8 + b)];
  return {fields[0], fields[1], fields[2]};
}

// The source's state; replaced when a prepare asks for another size.
class SourceState {
 public:
  explicit SourceState(std::string state_file) : state_file_(std::move(state_file)) {}

  void prepare(std::size_t total) {
    std::lock_guard lock(mu_);
    if (buffer_ && size_ == total) return;
    auto fresh = std::make_shared<Buffer>(allocate(total));
    fill_holder_state(state_file_, fresh->get(), total);
    buffer_ = std::move(fresh);
    size_ = total;
  }
  // The requested bytes, kept alive by the pointer: another connection may prepare the next
  // size while this one still sends from the last.
  std::shared_ptr<const std::byte> bytes(const Request& r) {
    std::lock_guard lock(mu_);
    if (!buffer_ || r.total != size_ || r.offset > size_ || r.length > size_ - r.offset) {
      throw SocketError("request outside the prepared state");
    }
    return {buffer_, buffer_->get() + r.offset};
  }

 private:
  const std::string state_file_;
  std::mutex mu_;
  std::shared_ptr<Buffer> buffer_;  // guarded by mu_
  std::size_t size_ = 0;            // guarded by mu_
};

void serve(int fd, SourceState& state) {
  const Fd owned(fd);
  try {
    std::array<unsigned char, kRequestBytes> raw{};
    while (recv_all(fd, raw.data(), raw.size())) {
      const Request r = decode(raw);
      if (r.length == 0) {
        state.prepare(r.total);
        const unsigned char ready = 1;
        send_all(fd, &ready, 1);
      } else {
        const auto bytes = state.bytes(r);
        send_all(fd, bytes.get(), r.length);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry-bench tcp-source: %s\n", e.what());
  }
}

Fd connect_to(const std::string& address, const std::string& cc) {
  const std::size_t colon = address.rfind(':');
  if (colon == std::string::npos) throw SocketError("--tcp-source wants HOST:PORT, got " + address);
  const sockaddr_in to = ipv4(address.substr(0, colon), std::stoi(address.substr(colon + 1)));
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) throw SocketError(errno_text("socket"));
  set_congestion_control(fd.get(), cc);
  const int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) {
    throw SocketError(errno_text("connect to " + address));
  }
  return fd;
}

// One timed transfer: K connections, each fetching its slice into `out`.
double transfer(const BenchArgs& args, std::byte* out, std::size_t total) {
  const std::size_t k = args.connections;
  std::vector<std::thread> threads;
  std::vector<std::string> errors(k);
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < k; ++i) {
    threads.emplace_back([&, i] {
      const std::size_t begin = total * i / k, end = total * (i + 1) / k;
      try {
        const Fd fd = connect_to(args.tcp_source, args.congestion_control);
        const auto request = encode({total, begin, end - begin});
        send_all(fd.get(), request.data(), request.size());
        if (end > begin && !recv_all(fd.get(), out + begin, end - begin)) throw SocketError("the source closed");
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const auto stop = std::chrono::steady_clock::now();
  for (const std::string& error : errors)
    if (!error.empty()) throw SocketError("connection: " + error);
  return std::chrono::duration<double>(stop - start).count();
}

}  // namespace

int run_tcp_source(const BenchArgs& args) {
  try {
    const Fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (listener.get() < 0) throw SocketError(errno_text("socket"));
    const int one = 1;
    ::setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in address = ipv4(args.bind_host, 0);
    if (::bind(listener.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(listener.get(), 64) != 0) {
      throw SocketError(errno_text("listen on " + args.bind_host));
    }
    socklen_t length = sizeof address;
    ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&address), &length);
    std::printf("tcp-source listening on %s:%d\n", args.bind_host.c_str(), ntohs(address.sin_port));
    std::fflush(stdout);
    SourceState state(args.state_file);
    for (;;) {
      const int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        throw SocketError(errno_text("accept"));
      }
      set_congestion_control(fd, args.congestion_control);
      std::thread(serve, fd, std::ref(state)).detach();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry-bench tcp-source: %s\n", e.what());
    return kExitFailed;
  }
}

int run_tcp_sink(const BenchArgs& args) {
  try {
    for (const std::size_t bytes : args.sizes) {
      Buffer state = allocate(bytes);
      std::memset(state.get(), 0, bytes);  // fault the pages in outside the timing
      {
        const Fd fd = connect_to(args.tcp_source, args.congestion_control);
        const auto prepare = encode({bytes, 0, 0});
        send_all(fd.get(), prepare.data(), prepare.size());
        unsigned char ready = 0;
        if (!recv_all(fd.get(), &ready, 1)) throw SocketError("the source closed while preparing");
      }
      std::vector<double> times;
      for (int iteration = 0; iteration < args.warmup + args.iters; ++iteration) {
        const double seconds = transfer(args, state.get(), bytes);
        if (iteration >= args.warmup) times.push_back(seconds);
      }
      tooling::JsonWriter json;
      json.begin_object();
      json.key("impl").value("tcp");
      json.key("connections").value(args.connections);
      json.key("bytes").value(static_cast<std::uint64_t>(bytes));
      json.key("times_s").begin_array();
      for (const double t : times) json.value(t);
      json.end_array();
      json.key("hashes").begin_array().value(tooling::hash_hex(state.get(), bytes)).end_array();
      json.end_object();
      std::printf("%s\n", json.str().c_str());
      std::fflush(stdout);
      std::fprintf(stderr, "ferry-bench tcp-sink: %s over %u connections done\n", format_byte_size(bytes).c_str(),
                   args.connections);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry-bench tcp-sink: %s\n", e.what());
    return kExitFailed;
  }
  return 0;
}

}  // namespace ferry::bench
