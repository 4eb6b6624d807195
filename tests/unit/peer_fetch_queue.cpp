// The chunks a shared-state sync fetches and who serves them (peer/fetch_queue.h):
// each chunk handed out once and only to a holder of it, a failed holder's
// chunks back to another holder, and a fetch that cannot finish said so.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "peer/fetch_queue.h"

using namespace ferry::peer;
using namespace std::chrono_literals;

namespace {

// Tensor 0: chunks 0..2 held by peers 1 and 2; tensor 1: chunk 3 held by peer 2 only.
FetchQueue two_holders() {
  return FetchQueue({{0, 0, 100, {1, 2}}, {0, 100, 100, {1, 2}}, {0, 200, 50, {1, 2}}, {1, 0, 10, {2}}});
}

}  // namespace

TEST_CASE("fetch queue: each chunk goes once, only to a holder of it, at most `max` at a time", "[fetch]") {
  FetchQueue queue = two_holders();
  auto first = queue.take(1, 2);
  CHECK(first == std::vector<size_t>{0, 1});
  auto second = queue.take(2, 10);
  CHECK(second == std::vector<size_t>{2, 3});  // 0 and 1 are taken; 3 is peer 2's alone
  CHECK(queue.chunk(3).tensor == 1);
  CHECK(queue.chunk(2).offset == 200);
  CHECK(!queue.complete());
  for (size_t id : {0, 1, 2, 3}) queue.done(id);
  queue.done(3);  // twice: counted once
  CHECK(queue.complete());
  CHECK(queue.take(1, 10).empty());  // all done: nothing more, no wait
  CHECK(queue.take(2, 10).empty());
}

TEST_CASE("fetch queue: a failed holder's unfinished chunks go to another holder, and it gets no more", "[fetch]") {
  FetchQueue queue = two_holders();
  auto of_1 = queue.take(1, 3);
  REQUIRE(of_1 == std::vector<size_t>{0, 1, 2});
  queue.done(0);
  queue.holder_failed(1, {1, 2});
  CHECK(queue.take(1, 10).empty());
  auto of_2 = queue.take(2, 10);
  CHECK(of_2 == std::vector<size_t>{1, 2, 3});
  std::string which;
  CHECK(!queue.stranded(&which));
  for (size_t id : of_2) queue.done(id);
  CHECK(queue.complete());
}

TEST_CASE("fetch queue: a chunk with no live holder left strands the fetch, naming the chunk", "[fetch]") {
  FetchQueue queue = two_holders();
  auto of_2 = queue.take(2, 10);
  REQUIRE(of_2.size() == 4);
  queue.done(0);
  queue.holder_failed(2, {1, 2, 3});
  std::string which;
  REQUIRE(queue.stranded(&which));
  CHECK(which == "tensor 1 at byte 0");  // peer 1 still holds chunks 1 and 2; nobody holds 3
  CHECK(queue.take(1, 10).empty());      // the fetch cannot finish: peer 1 stops too
  CHECK(!queue.complete());
}

TEST_CASE("fetch queue: a holder with nothing to take waits until another hands chunks back", "[fetch]") {
  FetchQueue queue({{0, 0, 100, {1, 2}}, {0, 100, 100, {1, 2}}});
  REQUIRE(queue.take(2, 10).size() == 2);
  auto waiting = std::async(std::launch::async, [&] { return queue.take(1, 10); });
  CHECK(waiting.wait_for(100ms) == std::future_status::timeout);  // unfinished, nothing for peer 1 yet
  queue.holder_failed(2, {0, 1});
  REQUIRE(waiting.wait_for(10s) == std::future_status::ready);
  CHECK(waiting.get() == std::vector<size_t>{0, 1});
}

TEST_CASE("fetch queue: a waiting holder is released when the fetch completes or is closed", "[fetch]") {
  SECTION("completed by others") {
    FetchQueue queue = two_holders();
    auto all = queue.take(2, 10);
    auto waiting = std::async(std::launch::async, [&] { return queue.take(1, 10); });
    CHECK(waiting.wait_for(50ms) == std::future_status::timeout);
    for (size_t id : all) queue.done(id);
    REQUIRE(waiting.wait_for(10s) == std::future_status::ready);
    CHECK(waiting.get().empty());
  }
  SECTION("closed") {
    FetchQueue queue = two_holders();
    queue.take(2, 10);
    auto waiting = std::async(std::launch::async, [&] { return queue.take(1, 10); });
    CHECK(waiting.wait_for(50ms) == std::future_status::timeout);
    queue.close();
    REQUIRE(waiting.wait_for(10s) == std::future_status::ready);
    CHECK(waiting.get().empty());
    CHECK(queue.take(2, 10).empty());
  }
}
