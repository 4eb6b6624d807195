// Writes the fuzzers' seed corpora: valid inputs in each target's format, so
// that fuzzing starts from frames, runs and chunks the real code produces.
// Built and run at build time: the seeds follow the wire format as it changes.
//
//   ferry_fuzz_seeds OUT_DIR   ->   OUT_DIR/{wire,master,quant,int_quant,sparse,http}/seed-NNN
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/int_quant.h"
#include "core/quant.h"
#include "core/sparse_codec.h"
#include "master_program.h"
#include "wire/chunk_header.h"
#include "wire/fetch_frames.h"
#include "wire/frame.h"
#include "wire/messages.h"

namespace fs = std::filesystem;
using namespace ferry;
namespace mp = ferry::fuzz::master_program;

namespace {

class SeedDir {
 public:
  explicit SeedDir(fs::path dir) : dir_(std::move(dir)) { fs::create_directories(dir_); }
  void write(const std::vector<uint8_t>& bytes) {
    char name[32];
    std::snprintf(name, sizeof name, "seed-%03zu", next_++);
    std::ofstream(dir_ / name, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                       static_cast<std::streamsize>(bytes.size()));
  }

 private:
  fs::path dir_;
  size_t next_ = 0;
};

std::vector<uint8_t> cat(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<wire::Message> example_messages() {
  std::string nonce(32, 'n'), proof(32, 'p');
  wire::Topology topology{5, 1, 4, {{1, "10.0.0.1", 5001, {"fd00::1"}}, {2, "peer.example", 5002, {}}, {3, "::1", 5003, {}}}};
  wire::SyncBegin sync{5, 2, 9, 0, {{"w", 9, 1024, 0x1234, 0}, {"step", 7, 1, 42, 1}}};
  wire::SyncPlan plan{5, 2, 9, {{0, 0x1234, {1, 2}}}, {3}, {{1, "10.0.0.1", 5001, {}}, {2, "10.0.0.2", 5002, {}}}};
  return {wire::Hello{1, "10.1.2.3", 5000, 4, 10000, nonce, proof, 15000, {"2001:db8::3"}, 0, 0, {}, 0, {}, {}},
          wire::Welcome{7, "10.1.2.3", proof},
          wire::TopologyVote{1},
          topology,
          wire::TopologyReady{5, 6, 2, "no route to host"},
          wire::TopologyDone{5, 3, 1, 3},
          wire::PendingQuery{},
          wire::PendingCount{2},
          wire::CollectiveBegin{5, 0, 1, 77, 1 << 20, 9, 1},
          wire::CollectiveGo{5, 0},
          wire::CollectiveEnd{5, 0, 4, "peer lost"},
          wire::CollectiveResult{5, 0, 0, "", 1},
          wire::Kick{9, "protocol violation"},
          wire::Heartbeat{},
          wire::Leave{},
          wire::LinkHello{1, 2, 5, 0, 4, nonce, proof, "", ""},
          wire::LinkWelcome{0, "", proof, 0},
          sync,
          plan,
          wire::FetchHello{1, 2, 5, 2, nonce, proof},
          wire::AuthChallenge{nonce, 1},
          wire::LinkChallenge{nonce, 0},
          wire::LinkReport{{{1, 2, 0, 25'000'000, 24'000'000, 50'000, 1000, 1u << 26, 3}}},
          wire::LinkMatrixQuery{3},
          wire::LinkMatrix{3, {{1, 2, 0, 25'000'000, 24'000'000, 50'000, 1000, 1u << 26, 3}, {2, 1, 1, 9, 0, 0, 0, 5, 0}}},
          wire::ProbeRound{3, 1, {{2, "10.0.0.2", 7000, {}}}, {3}},
          wire::ProbeDone{3, 1, {{1, 2, 0, 25'000'000, 24'000'000, 50'000, 1000, 1u << 26, 0, 8}}, {4}},
          wire::ProbeHello{1, 2, 3, 1, "n", "p", "boot/net/mnt"},
          wire::GoingAway{"the master was stopped (SIGINT)"},
          wire::PeerLabel{"outer 12: 97 steps, share 24%"}, wire::GatherGo{3, 0, {0, 1, 4096}}};
}

void wire_seeds(SeedDir out) {
  auto messages = example_messages();
  std::vector<uint8_t> all_frames{0, 1};
  for (const auto& m : messages) {
    auto frame = wire::encode_message(m);
    out.write(cat({0, 1}, frame));  // mode 0: a frame stream of one
    all_frames = cat(all_frames, frame);
    uint16_t type = static_cast<uint16_t>(wire::message_type(m));
    std::vector<uint8_t> payload(frame.begin() + wire::kFrameHeaderBytes, frame.end());
    out.write(cat({1, static_cast<uint8_t>(type), static_cast<uint8_t>(type >> 8)}, payload));  // mode 1
  }
  out.write(all_frames);
  auto chunk = wire::encode_chunk_header({3, 17, 1 << 20, 0x0123456789abcdefULL});
  out.write(cat({2}, {chunk.begin(), chunk.end()}));
  auto request = wire::encode_fetch_request({1, 4096, 65536, 3});
  out.write(cat({3, 0}, {request.begin(), request.end()}));
  auto response = wire::encode_fetch_response({1, 4096, 65536, 1200, 1, 0xfeedULL});
  out.write(cat({3, 1}, {response.begin(), response.end()}));
}

// Three peers join group 0, commit a ring, all-reduce, sync, lose one, re-form.
mp::Writer a_run(bool secret) {
  mp::Writer w(secret);
  unsigned valid = secret ? 1 : 0;
  for (unsigned s = 0; s < 3; ++s) w.op(mp::kConnect, {s});
  w.op(mp::kHello, {0, 0, valid, 2, 0});
  w.op(mp::kReady, {0, 0, 0, 0}).u16(0);  // the first peer forms the group alone
  w.op(mp::kHello, {1, 0, valid, 2, 0}).op(mp::kHello, {2, 0, valid | 4, 3, 40});
  w.op(mp::kVote, {0, 0});
  for (unsigned s = 0; s < 3; ++s) w.op(mp::kReady, {s, 0, 0, 0}).u16(0);
  for (unsigned s = 0; s < 3; ++s) w.op(mp::kBegin, {s, 0, 0, 1, 1, 2, 0, 0});
  for (unsigned s = 0; s < 3; ++s) w.op(mp::kEnd, {s, 0, 0, 0}).u16(0);
  for (unsigned s = 0; s < 3; ++s) w.op(mp::kPending, {s});
  for (unsigned s = 0; s < 3; ++s) w.op(mp::kSync, {s, 0, 1, s == 0 ? 3u : 0u, s == 0 ? 2u : 1u, 1, 0, 0, 2, s == 0 ? 1u : 2u, 0});
  for (unsigned s = 0; s < 3; ++s) w.op(mp::kEnd, {s, 0, 1, 0}).u16(0);
  w.op(mp::kDisconnect, {1});
  w.op(mp::kVote, {0, 1}).op(mp::kVote, {2, 0});
  w.op(mp::kReady, {0, 0, 0, 0}).u16(0).op(mp::kReady, {2, 0, 0, 0}).u16(0);
  w.op(mp::kBegin, {0, 0, 0, 1, 1, 2, 0, 0}).op(mp::kBegin, {2, 0, 0, 1, 2, 2, 0, 0});  // a mismatch
  w.op(mp::kLeave, {2});
  return w;
}

void master_seeds(SeedDir out) {
  out.write(a_run(false).bytes());
  out.write(a_run(true).bytes());
  // A stranger without the secret, a failing ring, a forbidden message, a raw hello.
  mp::Writer w(true);
  w.op(mp::kConnect, {0}).op(mp::kHello, {0, 1, 0, 2, 0});
  w.op(mp::kConnect, {1}).op(mp::kHello, {1, 1, 1, 2, 0}).op(mp::kReady, {1, 0, 210, 9}).u16(20);
  w.op(mp::kConnect, {2}).op(mp::kVote, {2, 0});
  auto hello = wire::encode_message(wire::Hello{2, "", 7000, 1, 0, std::string(32, 'n'), std::string(32, 'p'), 0, {}, 0, 0, {}, 0, {}, {}});
  w.op(mp::kConnect, {3}).op(mp::kRaw, {3}).u16(static_cast<unsigned>(wire::MessageType::hello));
  w.raw({static_cast<unsigned>(hello.size() - wire::kFrameHeaderBytes)});
  for (size_t i = wire::kFrameHeaderBytes; i < hello.size(); ++i) w.raw({hello[i]});
  out.write(w.bytes());
  // Peers' reasons at the wire's limit (1024 bytes), which the master's
  // prefixes must not push past it: a ring failure, a failed all-reduce.
  mp::Writer longer(false);
  longer.op(mp::kConnect, {0}).op(mp::kHello, {0, 0, 0, 1, 0}).op(mp::kReady, {0, 0, 201, 1}).u16(1024);
  out.write(longer.bytes());
  mp::Writer failed(false);
  failed.op(mp::kConnect, {0}).op(mp::kHello, {0, 0, 0, 1, 0}).op(mp::kReady, {0, 0, 0, 0}).u16(0);
  failed.op(mp::kBegin, {0, 0, 0, 1, 0, 1, 0, 0}).op(mp::kEnd, {0, 0, 0, 204}).u16(1024);
  out.write(failed.bytes());
}

template <class T>
void quant_seed(SeedDir& out, uint8_t codec, QuantSpec spec, size_t count) {
  std::vector<T> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = static_cast<T>(std::sin(0.1 * static_cast<double>(i)) * 10.0);
  if (count > 5) values[5] = static_cast<T>(NAN);  // one non-finite block
  std::vector<uint8_t> bytes(quant_encoded_bytes<T>(spec, count));
  quant_encode<T>(spec, values.data(), count, bytes.data());
  uint8_t flags = static_cast<uint8_t>(codec | 16 | (sizeof(T) == 8 ? 8 : 0));
  uint16_t block = static_cast<uint16_t>(spec.block - 1);
  std::vector<uint8_t> seed{flags, static_cast<uint8_t>(block), static_cast<uint8_t>(block >> 8),
                            static_cast<uint8_t>(count), static_cast<uint8_t>(count >> 8)};
  out.write(cat(seed, bytes));
}

void quant_seeds(SeedDir out) {
  const Quant codecs[] = {Quant::u8, Quant::i8, Quant::f16, Quant::bf16, Quant::u4};  // fuzz_quant_decode's order
  for (uint8_t c = 0; c < 5; ++c)
    for (uint32_t block : {1u, 7u, 256u})
      for (size_t count : {size_t{0}, size_t{1}, size_t{300}}) {
        quant_seed<float>(out, c, {codecs[c], block}, count);
        if (block == 7) quant_seed<double>(out, c, {codecs[c], block}, count);
      }
}

// Valid partials of 1, 3 and 8 contributions for fuzz_int_quant, with the
// scales they were made with (one non-finite block).
template <class T>
void int_quant_seed(SeedDir& out, IntQuantKind kind, uint32_t block, size_t count, uint32_t contributors) {
  const IntQuantSpec spec{kind, block};
  std::vector<T> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = static_cast<T>(std::sin(0.1 * static_cast<double>(i)) * 10.0);
  if (count > 5) values[5] = static_cast<T>(NAN);
  std::vector<T> absmax(int_quant_block_count(spec, count), T(0));
  int_quant_absmax(spec, values.data(), count, 0, absmax.data());
  std::vector<uint8_t> partial(int_quant_packed_bytes(spec, count, 1));
  int_quant_encode(spec, 0, absmax.data(), 0, values.data(), count, partial.data());
  for (uint32_t k = 1; k < contributors; ++k) {
    std::vector<uint8_t> next(int_quant_packed_bytes(spec, count, k + 1));
    (void)int_quant_encode_add(spec, k, absmax.data(), 0, values.data(), count, partial.data(), partial.size(), k,
                               next.data());
    partial = std::move(next);
  }
  const auto flags = static_cast<uint8_t>((kind == IntQuantKind::i4h ? 1 : 0) | (sizeof(T) == 8 ? 2 : 0) | 4);
  const auto b = static_cast<uint16_t>(block - 1);
  const auto k = static_cast<uint16_t>(contributors - 1);
  std::vector<uint8_t> seed{flags,
                            static_cast<uint8_t>(b),
                            static_cast<uint8_t>(b >> 8),
                            static_cast<uint8_t>(count),
                            static_cast<uint8_t>(count >> 8),
                            static_cast<uint8_t>(k),
                            static_cast<uint8_t>(k >> 8)};
  std::vector<uint8_t> scales(absmax.size() * sizeof(T));
  if (!scales.empty()) std::memcpy(scales.data(), absmax.data(), scales.size());  // an empty tensor has no blocks
  out.write(cat(cat(seed, scales), partial));
}

void int_quant_seeds(SeedDir out) {
  for (IntQuantKind kind : {IntQuantKind::i8h, IntQuantKind::i4h})
    for (uint32_t block : {1u, 7u, 256u})
      for (size_t count : {size_t{0}, size_t{1}, size_t{300}})
        for (uint32_t contributors : {1u, 3u, 8u}) {
          int_quant_seed<float>(out, kind, block, count, contributors);
          if (block == 7) int_quant_seed<double>(out, kind, block, count, contributors);
        }
}

// fuzz_sparse_decode's two modes: valid contributions (flag 0), one with a
// non-finite chunk, and float inputs for the encoder (flag 1).
void sparse_seeds(SeedDir out) {
  for (SparseSpec spec : {SparseSpec{4096, 82, 2}, SparseSpec{64, 5, 4}, SparseSpec{7, 7, 8}, SparseSpec{1, 1, 2}})
    for (size_t count : {size_t{0}, size_t{1}, size_t{300}, size_t{5000}}) {
      std::vector<float> x(count);
      for (size_t i = 0; i < count; ++i) x[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
      if (count == 300) x[3] = NAN;
      std::vector<uint8_t> contribution(sparse_max_encoded_bytes(spec, count));
      contribution.resize(sparse_encode(spec, DType::f32, x.data(), count, contribution.data(), nullptr));
      out.write(cat({0}, contribution));
      if (count == 300) {
        std::vector<uint8_t> floats(count * sizeof(float));
        std::memcpy(floats.data(), x.data(), floats.size());
        const auto c = static_cast<uint16_t>(spec.chunk - 1), k = static_cast<uint16_t>(spec.k - 1);
        const uint8_t bits = spec.bits == 2 ? 0 : spec.bits == 4 ? 1 : 2;
        out.write(cat({1, static_cast<uint8_t>(c), static_cast<uint8_t>(c >> 8), static_cast<uint8_t>(k),
                       static_cast<uint8_t>(k >> 8), bits},
                      floats));
      }
    }
}

}  // namespace

// fuzz_http_request's format: u16 where the first read ends, then a request head.
void http_seeds(SeedDir out) {
  for (std::string head : {"GET /metrics HTTP/1.1\r\nHost: a:9100\r\nAccept: text/plain\r\n\r\n",
                           "HEAD /status?full=1 HTTP/1.0\r\n\r\n", "GET http://h/x#f HTTP/1.1\nHost: h\n\n",
                           "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi"}) {
    std::vector<uint8_t> bytes{static_cast<uint8_t>(head.size() / 2), 0};
    bytes.insert(bytes.end(), head.begin(), head.end());
    out.write(bytes);
  }
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  fs::path root = argv[1];
  fs::remove_all(root);
  wire_seeds(SeedDir(root / "wire"));
  master_seeds(SeedDir(root / "master"));
  quant_seeds(SeedDir(root / "quant"));
  int_quant_seeds(SeedDir(root / "int_quant"));
  sparse_seeds(SeedDir(root / "sparse"));
  http_seeds(SeedDir(root / "http"));
  return 0;
}
