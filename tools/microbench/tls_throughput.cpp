// Single-stream loopback throughput, TLS vs plain TCP, the way an out-lane writes (24-byte
// chunk header + 1 MiB payload per write) and an in-lane reads. Also the CPU seconds each
// side spends per GB, which a busy machine distorts less than the wall clock. Not a test:
// numbers only, three runs of each.
//   usage: ferry_tls_throughput [GIB]   (the volume of each run, default 2)
#include <time.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "net/tls_transport.h"
#include "net/transport.h"
#include "tls_loopback.h"
#include "wire/chunk_header.h"

namespace net = ferry::net;
namespace wire = ferry::wire;
using ferry::test::connect_pair;
using ferry::test::Loopback;
using ferry::test::Pair;
using ferry::test::pki;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  const size_t chunk = size_t{1} << 20, total = (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 2) << 30;
  if (total == 0) {
    std::fprintf(stderr, "usage: ferry_tls_throughput [GIB]  (the volume of each run, default 2)\n");
    return 2;
  }
  auto thread_cpu = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
  };
  struct Result {
    double gbps, writer_cpu_per_gb, reader_cpu_per_gb;
  };
  auto measure = [&](std::shared_ptr<net::Transport> server, std::shared_ptr<net::Transport> client) {
    Loopback loop(server);
    Pair pair = connect_pair(loop, client);
    pair.client->enter_blocking_mode();
    pair.server->enter_blocking_mode();
    std::vector<uint8_t> payload(chunk, 0x5c);
    double writer_cpu = 0;
    std::thread writer([&] {
      double begin = thread_cpu();
      for (size_t sent = 0; sent < total; sent += chunk) {
        auto header = wire::encode_chunk_header({0, 0, uint32_t(chunk), 0});
        std::array<asio::const_buffer, 2> b{asio::buffer(header), asio::buffer(payload)};
        if (pair.client->write_all_blocking(b)) break;
      }
      writer_cpu = thread_cpu() - begin;
    });
    std::vector<uint8_t> in(chunk + wire::kChunkHeaderBytes);
    auto start = Clock::now();
    double begin = thread_cpu();
    for (size_t got = 0; got < total; got += chunk) {
      if (pair.server->read_exact_blocking(asio::buffer(in.data(), wire::kChunkHeaderBytes))) break;
      if (pair.server->read_exact_blocking(asio::buffer(in.data(), chunk))) break;
    }
    double reader_cpu = thread_cpu() - begin;
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    writer.join();
    double gbs = double(total) / 1e9;
    return Result{gbs / seconds, writer_cpu / gbs, reader_cpu / gbs};
  };
  for (int repeat = 0; repeat < 3; ++repeat) {
    Result tcp = measure(net::make_tcp_transport(), net::make_tcp_transport());
    Result tls = measure(net::make_tls_transport(pki().config("b")), net::make_tls_transport(pki().config("a")));
    std::printf("single stream, loopback, 1 MiB chunks: TCP %.2f GB/s (CPU s/GB: writer %.3f, reader %.3f); "
                "TLS %.2f GB/s (writer %.3f, reader %.3f)\n",
                tcp.gbps, tcp.writer_cpu_per_gb, tcp.reader_cpu_per_gb, tls.gbps, tls.writer_cpu_per_gb,
                tls.reader_cpu_per_gb);
    std::fflush(stdout);
  }
  return 0;
}
