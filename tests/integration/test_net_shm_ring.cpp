// The shared-memory ring under same-host links: order through wraps,
// borrowed spans, close and liveness waking every wait, corrupt counters and
// foreign or unsealed segments refused, two real processes on one ring, and
// a third process that tries to truncate it.
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
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
#include "shm_ring_files.h"

using ferry::net::ShmRing;
using ferry::test::shm_ring_files;
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

// A name in the writer's format for a segment this test made itself.
std::string name_of(int fd) {
  struct stat st {};
  REQUIRE(::fstat(fd, &st) == 0);
  return "memfd:" + std::to_string(::getpid()) + ":" + std::to_string(fd) + ":" + std::to_string(st.st_ino);
}

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

TEST_CASE("shm ring: only aligned spans are lent, the rest are read in order", "[net][shm]") {
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
  auto files = shm_ring_files(::getpid());
  REQUIRE_FALSE(files.empty());
  int fd = ::open(files.front().c_str(), O_RDWR);
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

TEST_CASE("shm ring: attaching to something that is not a sealed ring fails cleanly", "[net][shm]") {
  auto refused = [](const std::string& name) {
    try {
      ShmRing::attach(name);
      return std::string("attached");
    } catch (const ferry::Error& e) {
      return std::string(e.code() == ferry::Errc::protocol ? "protocol" : "system") + ": " + e.what();
    }
  };
  CHECK_THROWS_AS(ShmRing::attach("/ferry-no-such-ring-0000"), ferry::Error);
  CHECK_THROWS_AS(ShmRing::attach("../etc/passwd"), ferry::Error);
  CHECK_THROWS_AS(ShmRing::attach("memfd:1:2"), ferry::Error);
  CHECK_THROWS_AS(ShmRing::attach("memfd:1:2:3:4"), ferry::Error);
  CHECK_THROWS_AS(ShmRing::attach(""), ferry::Error);
  // Right shape, zero header; then the same unsealed: a writer (or anyone)
  // could shrink that under the mapping, so it is refused before it is mapped.
  for (bool sealed : {true, false}) {
    INFO((sealed ? "sealed" : "unsealed"));
    int fd = ::memfd_create("ferry-test-not-a-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, 3 * 4096) == 0);
    if (sealed) REQUIRE(::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0);
    std::string outcome = refused(name_of(fd));
    CHECK(outcome.rfind("protocol", 0) == 0);
    if (!sealed) CHECK(outcome.find("not sealed") != std::string::npos);
    ::close(fd);
  }
  // A live ring's pid and descriptor with another inode (a recycled number).
  auto writer = ShmRing::create(4096);
  std::string name = writer->name();
  name.back() = name.back() == '1' ? '2' : '1';
  CHECK(refused(name).find("another file") != std::string::npos);
}

TEST_CASE("shm ring: a third process that tries to truncate the segment kills neither end, and the ring works on",
          "[net][shm]") {
  // The ring's two ends live in a child; this process is the stranger. A
  // shrunk file under a live mapping is SIGBUS for whoever touches it next.
  int ready[2], go[2];
  REQUIRE(::pipe(ready) == 0);
  REQUIRE(::pipe(go) == 0);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int status = 3;  // an exception
    try {
      auto writer = ShmRing::create(8192);
      auto reader = ShmRing::attach(writer->name());
      const auto first = pattern(6000, 21);
      std::vector<uint8_t> got(first.size());
      std::error_code ec;
      if (writer->write(first.data(), first.size()) || reader->read(got.data(), 1000)) ::_exit(2);
      const uint8_t* lent = reader->borrow(4096, ec);  // held across the attack, as a reduction holds it
      if (!lent || ec) ::_exit(2);
      char byte = 1;
      if (::write(ready[1], &byte, 1) != 1 || ::read(go[0], &byte, 1) != 1) ::_exit(5);
      bool same = std::memcmp(lent, first.data() + 1000, 4096) == 0;
      reader->release(4096);
      if (reader->read(got.data() + 5096, 904)) ::_exit(2);
      writer->unlink();
      // And on through many wraps.
      const auto more = pattern(1 << 20, 22);
      std::vector<uint8_t> back(more.size());
      for (size_t at = 0; at < more.size(); at += 4000) {
        size_t n = std::min<size_t>(4000, more.size() - at);
        if (writer->write(more.data() + at, n) || reader->read(back.data() + at, n)) ::_exit(2);
      }
      same = same && std::equal(got.begin() + 5096, got.end(), first.begin() + 5096) && back == more;
      status = same ? 0 : 4;
    } catch (...) {
    }
    ::_exit(status);
  }
  ::close(ready[1]);
  ::close(go[0]);
  pollfd p{ready[0], POLLIN, 0};
  REQUIRE(::poll(&p, 1, 10'000) == 1);
  // The attack, through every route /proc offers this process.
  auto files = shm_ring_files(child);
  std::string outcomes;
  int truncated = 0;
  for (const auto& path : files) {
    int fd = ::open(path.c_str(), O_RDWR);
    if (fd < 0) {
      outcomes += path + ": open: " + std::strerror(errno) + "\n";
      continue;
    }
    if (::ftruncate(fd, 0) == 0) {
      ++truncated;
      outcomes += path + ": truncated\n";
    } else {
      outcomes += path + ": ftruncate: " + std::strerror(errno) + "\n";
    }
    ::close(fd);
  }
  char byte = 1;
  REQUIRE(::write(go[1], &byte, 1) == 1);
  ::close(go[1]);
  ::close(ready[0]);
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (::waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      FAIL("the ring's process hung after the attack");
    }
    std::this_thread::sleep_for(10ms);
  }
  INFO(outcomes);
  REQUIRE_FALSE(files.empty());  // the attacker did find the segment
  INFO("the ring's process " << (WIFSIGNALED(status) ? std::string("was killed by ") + ::strsignal(WTERMSIG(status))
                                                        : "exited " + std::to_string(WEXITSTATUS(status))));
  CHECK_FALSE(WIFSIGNALED(status));
  CHECK(truncated == 0);  // sealed: no opener may shrink it
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));  // every byte exact, before and after
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
