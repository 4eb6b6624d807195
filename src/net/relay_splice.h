// A relay's forwarding of one relayed lane (issue 37, section 3): two raw TCP
// connections, one from each ring neighbour, joined so that every byte one
// sends reaches the other unchanged. The neighbours run their transport (TLS
// when the run has it) end to end through it, so the relay holds no key and
// forwards ciphertext only. Each direction copies through a buffer of its own,
// one read and then one write at a time: a slow receiver holds its sender back
// through TCP's windows, never in the relay's memory (kSpliceBuffer a direction).
// The splice ends when either side closes or fails, or on stop(): both
// connections are then closed, and `ended` reports what each direction carried.
//
// Threading: start() and stop() from any thread; the copying runs on a strand of
// the sockets' executor; `ended` runs once, on it. `tap` (tests: what the relay
// saw) runs on it too, before each forwarded piece is written.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <asio/ip/tcp.hpp>
#include <asio/strand.hpp>

namespace ferry::net {

inline constexpr size_t kSpliceBuffer = 256 << 10;

struct SpliceCounts {
  uint64_t a_to_b = 0;
  uint64_t b_to_a = 0;
};

class RelaySplice : public std::enable_shared_from_this<RelaySplice> {
 public:
  using Ended = std::function<void(SpliceCounts)>;
  using Tap = std::function<void(bool a_to_b, const uint8_t* data, size_t size)>;

  // Both sockets connected, on one io_context.
  static std::shared_ptr<RelaySplice> start(asio::ip::tcp::socket a, asio::ip::tcp::socket b, Ended ended,
                                            Tap tap = nullptr);
  void stop();
  // What each direction forwarded so far (any thread).
  SpliceCounts counts() const { return {forward_.bytes.load(), backward_.bytes.load()}; }
  bool ended() const { return done_.load(); }

  RelaySplice(asio::ip::tcp::socket a, asio::ip::tcp::socket b, Ended ended, Tap tap);  // use start()

 private:
  struct Direction {
    asio::ip::tcp::socket* from;
    asio::ip::tcp::socket* to;
    bool a_to_b;
    std::vector<uint8_t> buffer = std::vector<uint8_t>(kSpliceBuffer);
    std::atomic<uint64_t> bytes{0};
  };
  void pump(Direction& d);
  void finish();

  asio::strand<asio::any_io_executor> strand_;
  asio::ip::tcp::socket a_, b_;
  Direction forward_, backward_;
  Ended ended_;
  Tap tap_;
  std::atomic<bool> done_{false};  // written on the strand
};

}  // namespace ferry::net
