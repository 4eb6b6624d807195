// BufferPool: released buffers come back to the next acquire, idle memory
// stays bounded, and a buffer may outlive its pool.
#include <catch2/catch.hpp>

#include <thread>
#include <vector>

#include "core/buffer_pool.h"

using ferry::BufferPool;

TEST_CASE("buffer pool: a released buffer is handed out again, the smallest that fits", "[core][buffer_pool]") {
  BufferPool pool;
  uint8_t* big = nullptr;
  uint8_t* small = nullptr;
  {
    BufferPool::Buffer a = pool.acquire(1 << 20);
    BufferPool::Buffer b = pool.acquire(1 << 12);
    REQUIRE(a.size() == 1 << 20);
    REQUIRE(b.size() == 1 << 12);
    big = a.data();
    small = b.data();
    a.data()[(1 << 20) - 1] = 7;  // the whole size is writable
  }
  CHECK(pool.idle_bytes() == (1 << 20) + (1 << 12));
  BufferPool::Buffer c = pool.acquire(100);
  CHECK(c.data() == small);  // not the 1 MiB one
  CHECK(c.size() == 100);
  BufferPool::Buffer d = pool.acquire(1 << 19);
  CHECK(d.data() == big);
  CHECK(pool.idle_bytes() == 0);
  BufferPool::Buffer e = pool.acquire(1 << 20);  // none idle: a new one
  CHECK(e.data() != big);
  CHECK(e.data() != small);
}

TEST_CASE("buffer pool: at most kKeep buffers stay idle, the largest", "[core][buffer_pool]") {
  BufferPool pool;
  {
    std::vector<BufferPool::Buffer> held;
    for (size_t k = 1; k <= BufferPool::kKeep + 3; ++k) held.push_back(pool.acquire(k * 1000));
  }
  size_t expected = 0;
  for (size_t k = 4; k <= BufferPool::kKeep + 3; ++k) expected += k * 1000;
  CHECK(pool.idle_bytes() == expected);
}

TEST_CASE("buffer pool: empty buffers, moves, and a buffer that outlives its pool", "[core][buffer_pool]") {
  BufferPool::Buffer survivor;
  {
    BufferPool pool;
    BufferPool::Buffer empty = pool.acquire(0);
    CHECK(empty.size() == 0);
    BufferPool::Buffer a = pool.acquire(64);
    uint8_t* bytes = a.data();
    BufferPool::Buffer moved(std::move(a));
    CHECK(moved.data() == bytes);
    CHECK(a.data() == nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
    survivor = std::move(moved);
    CHECK(survivor.data() == bytes);
    CHECK(pool.idle_bytes() == 0);  // nothing came back: the bytes moved, they were not released
  }
  survivor.data()[63] = 1;  // still ours; freed, not returned, when it goes
}

TEST_CASE("buffer pool: acquires and releases from many threads", "[core][buffer_pool]") {
  BufferPool pool;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&pool, t] {
      for (int i = 0; i < 2000; ++i) {
        BufferPool::Buffer b = pool.acquire(static_cast<size_t>(64 + (i + t) % 7 * 64));
        b.data()[0] = static_cast<uint8_t>(i);
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(pool.idle_bytes() <= BufferPool::kKeep * 7 * 64);
  CHECK(pool.idle_bytes() > 0);
}
