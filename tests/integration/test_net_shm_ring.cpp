// The shared-memory ring under same-host links: order through wraps,
// borrowed spans, close and liveness waking every wait, corrupt counters and
// foreign segments refused, and two real processes on one ring.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "core/error.h"
#include "net/shm_ring.h"

using ferry::net::ShmRing;
using namespace std::chrono_literals;

namespace {

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> out(n);
  std::mt19937 rng(seed);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

struct Pair {
  std::unique_ptr<ShmRing> writer, reader;
};

Pair make_pair(size_t capacity) {
  Pair p;
  p.writer = ShmRing::create(capacity);
  p.reader = ShmRing::attach(p.writer->name());
  p.writer->unlink();
  return p;
}

}  // namespace

TEST_CASE("shm ring: bytes come out in order through many wraps, whatever the piece sizes", "[net][shm]") {
  auto [writer, reader] = make_pair(4096);
  REQUIRE(writer->capacity() == 4096);
  const auto data = pattern(1 << 20, 7);
  std::thread producer([&, w = writer.get()] {
    std::mt19937 rng(1);
    size_t at = 0;
    while (at < data.size()) {
      size_t n = std::min<size_t>(data.size() - at, std::uniform_int_distribution<size_t>(1, 10000)(rng));
      if (w->write(data.data() + at, n)) return;  // larger than the ring: streamed as the reader drains
      at += n;
    }
  });
  std::vector<uint8_t> got(data.size());
  std::mt19937 rng(2);
  size_t at = 0;
  bool ok = true;
  while (at < got.size() && ok) {
    size_t n = std::min<size_t>(got.size() - at, std::uniform_int_distribution<size_t>(1, 9000)(rng));
    ok = !reader->read(got.data() + at, n);
    at += n;
  }
  producer.join();
  REQUIRE(ok);
  CHECK(got == data);
}

TEST_CASE("shm ring: a borrowed span is contiguous across the wrap and stays until released", "[net][shm]") {
  auto [writer, reader] = make_pair(4096);
  std::vector<uint8_t> skip(3000);
  REQUIRE_FALSE(writer->write(skip.data(), skip.size()));
  REQUIRE_FALSE(reader->read(skip.data(), skip.size()));
  const auto data = pattern(2500, 3);  // starts at 3000 of 4096: wraps
  REQUIRE_FALSE(writer->write(data.data(), data.size()));
  std::error_code ec;
  const uint8_t* lent = reader->borrow(data.size(), ec);
  REQUIRE_FALSE(ec);
  REQUIRE(lent != nullptr);
  CHECK(std::memcmp(lent, data.data(), data.size()) == 0);

  // Until released, the writer cannot reuse those bytes: only 4096 - 2500 fit.
  auto more = pattern(4096, 4);
  auto wrote = std::async(std::launch::async, [&, w = writer.get()] { return w->write(more.data(), more.size()); });
  CHECK(wrote.wait_for(100ms) == std::future_status::timeout);
  CHECK(std::memcmp(lent, data.data(), data.size()) == 0);
  reader->release(data.size());
  std::vector<uint8_t> got(more.size());
  REQUIRE_FALSE(reader->read(got.data(), got.size()));
  CHECK_FALSE(wrote.get());
  CHECK(got == more);

  lent = reader->borrow(4097, ec);  // more than the ring holds: not lent, and no error: read it
  CHECK(lent == nullptr);
  CHECK_FALSE(ec);
}

TEST_CASE("shm ring: only aligned spans are lent; the rest are read, in order", "[net][shm]") {
  // Reductions read a borrowed span as f32/f64: after an odd-sized chunk the
  // next one would start misaligned (UBSan caught exactly that).
  auto [writer, reader] = make_pair(4096);
  const auto odd = pattern(6, 5), next = pattern(64, 6);
  REQUIRE_FALSE(writer->write(odd.data(), odd.size()));
  REQUIRE_FALSE(writer->write(next.data(), next.size()));
  std::vector<uint8_t> got(odd.size());
  REQUIRE_FALSE(reader->read(got.data(), got.size()));
  CHECK(got == odd);
  std::error_code ec;
  CHECK(reader->borrow(next.size(), ec) == nullptr);  // offset 6: refused at once, nothing consumed
  CHECK_FALSE(ec);
  got.resize(next.size());
  REQUIRE_FALSE(reader->read(got.data(), got.size()));
  CHECK(got == next);
  // Offset 70: still not aligned; 2 more bytes bring it to 72.
  REQUIRE_FALSE(writer->write(next.data(), 2));
  REQUIRE_FALSE(reader->read(got.data(), 2));
  REQUIRE_FALSE(writer->write(next.data(), next.size()));
  const uint8_t* lent = reader->borrow(next.size(), ec);
  REQUIRE(lent != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(lent) % ShmRing::kBorrowAlignment == 0);
  CHECK(std::memcmp(lent, next.data(), next.size()) == 0);
  reader->release(next.size());
}

TEST_CASE("shm ring: close wakes a blocked reader or writer, on either side, and later calls fail at once",
          "[net][shm]") {
  std::vector<uint8_t> buf(8192);
  {  // a writer waiting for room; the far side closes
    auto [writer, reader] = make_pair(4096);
    REQUIRE_FALSE(writer->write(buf.data(), 4096));  // full
    auto blocked = std::async(std::launch::async, [&, w = writer.get()] { return w->write(buf.data(), 100); });
    CHECK(blocked.wait_for(100ms) == std::future_status::timeout);
    reader->close();
    REQUIRE(blocked.wait_for(2s) == std::future_status::ready);
    CHECK(blocked.get() == std::errc::connection_aborted);
    CHECK(writer->write(buf.data(), 1) == std::errc::connection_aborted);
  }
  {  // a reader waiting for data; the far side closes
    auto [writer, reader] = make_pair(4096);
    auto blocked = std::async(std::launch::async, [&, r = reader.get()] { return r->read(buf.data(), 10); });
    CHECK(blocked.wait_for(100ms) == std::future_status::timeout);
    writer->close();
    REQUIRE(blocked.wait_for(2s) == std::future_status::ready);
    CHECK(blocked.get() == std::errc::connection_aborted);
    std::error_code ec;
    CHECK(reader->borrow(1, ec) == nullptr);
    CHECK(ec == std::errc::connection_aborted);
  }
  {  // a reader waiting for a whole borrowed span; its own side closes
    auto [writer, reader] = make_pair(4096);
    REQUIRE_FALSE(writer->write(buf.data(), 100));
    auto blocked = std::async(std::launch::async, [&, r = reader.get()] {
      std::error_code ec;
      r->borrow(1000, ec);
      return ec;
    });
    CHECK(blocked.wait_for(100ms) == std::future_status::timeout);
    reader->close();
    REQUIRE(blocked.wait_for(2s) == std::future_status::ready);
    CHECK(blocked.get() == std::errc::connection_aborted);
  }
}

TEST_CASE("shm ring: a dead far side is noticed through the liveness check", "[net][shm]") {
  auto [writer, reader] = make_pair(4096);
  std::atomic<bool> alive{true};
  reader->set_alive([&] { return alive.load(); });
  std::vector<uint8_t> buf(16);
  auto blocked = std::async(std::launch::async, [&, r = reader.get()] { return r->read(buf.data(), buf.size()); });
  CHECK(blocked.wait_for(3 * ShmRing::kLivenessPoll) == std::future_status::timeout);
  alive = false;
  REQUIRE(blocked.wait_for(2s) == std::future_status::ready);
  CHECK(blocked.get() == std::errc::connection_reset);
}

TEST_CASE("shm ring: counters the far side corrupted are a protocol error, not a wild access", "[net][shm]") {
  auto writer = ShmRing::create(4096);
  auto reader = ShmRing::attach(writer->name());
  // Reach the shared header as a misbehaving writer would: head is the
  // second cache line (after magic and capacity).
  int fd = ::shm_open(writer->name().c_str(), O_RDWR, 0);
  REQUIRE(fd >= 0);
  void* page = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  REQUIRE(page != MAP_FAILED);
  writer->unlink();
  auto* head = reinterpret_cast<std::atomic<uint64_t>*>(static_cast<uint8_t*>(page) + 64);
  head->store(1 << 20);  // a megabyte "in flight" in a 4 KiB ring
  std::vector<uint8_t> buf(16);
  CHECK(reader->read(buf.data(), buf.size()) == std::errc::protocol_error);
  std::error_code ec;
  CHECK(reader->borrow(16, ec) == nullptr);
  CHECK(ec == std::errc::protocol_error);
  ::munmap(page, 4096);
}

TEST_CASE("shm ring: attaching to something that is not a ring fails cleanly", "[net][shm]") {
  CHECK_THROWS_AS(ShmRing::attach("/ferry-no-such-ring-0000"), ferry::Error);
  CHECK_THROWS_AS(ShmRing::attach("../etc/passwd"), ferry::Error);
  CHECK_THROWS_AS(ShmRing::attach(""), ferry::Error);
  // The right name, the wrong contents.
  const std::string name = "/ferry-test-not-a-ring-" + std::to_string(::getpid());
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, 3 * 4096) == 0);  // right shape, zero header
  ::close(fd);
  try {
    ShmRing::attach(name);
    FAIL("attached to a zeroed segment");
  } catch (const ferry::Error& e) {
    CHECK(e.code() == ferry::Errc::protocol);
  }
  ::shm_unlink(name.c_str());
}

TEST_CASE("shm ring: works between two processes", "[net][shm]") {
  auto writer = ShmRing::create(8192);
  const auto data = pattern(1 << 20, 11);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The child reads everything and exits 0 only if every byte matched.
    int status = 1;
    try {
      auto reader = ShmRing::attach(writer->name());
      std::vector<uint8_t> got(data.size());
      if (!reader->read(got.data(), got.size()) && got == data) status = 0;
    } catch (...) {
    }
    ::_exit(status);
  }
  // A child that died early must not leave the writer waiting for room.
  int status = -1;
  bool reaped = false;
  writer->set_alive([&] {
    reaped = ::waitpid(child, &status, WNOHANG) == child;
    return !reaped;
  });
  std::error_code ec = writer->write(data.data(), data.size());
  writer->unlink();
  if (!reaped) REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK_FALSE(ec);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
