// The send queue a ring link's lanes share: a lane that has not come back for
// more (its connection is slow) leaves the rest of the chunks to the others,
// chunks go out in the order they were queued, and nothing queued is lost
// silently when the link closes.
#include <catch2/catch.hpp>

#include <sys/eventfd.h>
#include <unistd.h>

#include "peer/send_queue.h"

using namespace ferry;
using namespace ferry::peer;

namespace {

struct CountingOwner : ChunkConsumer {
  int dropped = 0;
  Status payload_destination(const wire::ChunkHeader&, uint32_t, std::vector<uint8_t>&, uint8_t*&) override {
    return Status::success();
  }
  Status payload_received(const wire::ChunkHeader&, uint32_t, const uint8_t*) override { return Status::success(); }
  void payload_abandoned() override {}
  void chunk_sent(size_t) override {}
  void chunk_dropped() override { ++dropped; }
  void links_failed(const Status&) override {}
};

SendQueue::Item chunk(uint32_t unit, const std::shared_ptr<CountingOwner>& owner) {
  return SendQueue::Item{wire::ChunkHeader{1, unit, 64, 0}, nullptr, owner, false};
}

struct WakeFd {
  int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  ~WakeFd() { ::close(fd); }
  uint64_t drain() const {
    uint64_t n = 0;
    return ::read(fd, &n, sizeof n) == sizeof n ? n : 0;
  }
};

}  // namespace

TEST_CASE("a lane that does not come back for more leaves the other chunks to the other lanes") {
  SendQueue queue;
  auto owner = std::make_shared<CountingOwner>();
  WakeFd slow, fast;
  for (uint32_t unit = 0; unit < 8; ++unit) queue.push(chunk(unit, owner));

  SendQueue::Item item;
  REQUIRE(queue.take(item, slow.fd) == SendQueue::Take::item);  // the slow lane takes one and stalls in write
  CHECK(item.header.unit == 0);
  std::vector<uint32_t> fast_units;
  while (queue.take(item, fast.fd) == SendQueue::Take::item) fast_units.push_back(item.header.unit);
  CHECK(fast_units == std::vector<uint32_t>{1, 2, 3, 4, 5, 6, 7});
  CHECK(owner->dropped == 0);
}

TEST_CASE("an idle lane is woken once per queued chunk, and only while it sleeps") {
  SendQueue queue;
  auto owner = std::make_shared<CountingOwner>();
  WakeFd a, b;
  SendQueue::Item item;
  REQUIRE(queue.take(item, a.fd) == SendQueue::Take::empty);
  REQUIRE(queue.take(item, a.fd) == SendQueue::Take::empty);  // asking twice registers once
  REQUIRE(queue.take(item, b.fd) == SendQueue::Take::empty);
  queue.push(chunk(0, owner));
  queue.push(chunk(1, owner));
  CHECK(a.drain() + b.drain() == 2);  // one wake each: both lanes get to work
  queue.push(chunk(2, owner));
  CHECK(a.drain() + b.drain() == 0);  // nobody sleeps now: nothing to wake
  CHECK(queue.take(item, a.fd) == SendQueue::Take::item);
}

TEST_CASE("closing the queue drops what is queued and every later push") {
  SendQueue queue;
  auto owner = std::make_shared<CountingOwner>();
  WakeFd lane;
  SendQueue::Item item;
  for (uint32_t unit = 0; unit < 3; ++unit) queue.push(chunk(unit, owner));
  REQUIRE(queue.take(item, lane.fd) == SendQueue::Take::item);  // in a lane's hands: the lane's to settle
  queue.close();
  CHECK(owner->dropped == 2);
  CHECK(queue.take(item, lane.fd) == SendQueue::Take::closed);
  queue.push(chunk(3, owner));
  CHECK(owner->dropped == 3);
  queue.close();
  CHECK(owner->dropped == 3);
}

TEST_CASE("closing the queue wakes the lanes waiting on it") {
  SendQueue queue;
  WakeFd a, b;
  SendQueue::Item item;
  REQUIRE(queue.take(item, a.fd) == SendQueue::Take::empty);
  REQUIRE(queue.take(item, b.fd) == SendQueue::Take::empty);
  queue.close();
  CHECK(a.drain() == 1);
  CHECK(b.drain() == 1);
  CHECK(queue.take(item, a.fd) == SendQueue::Take::closed);
}

TEST_CASE("a lane that leaves (idle by its link's count) passes a wakeup meant for it to a sleeping lane") {
  SendQueue queue;
  auto owner = std::make_shared<CountingOwner>();
  WakeFd idle, working;
  SendQueue::Item item;
  REQUIRE(queue.take(item, working.fd) == SendQueue::Take::empty);
  REQUIRE(queue.take(item, idle.fd) == SendQueue::Take::empty);  // the last to sleep is woken first
  queue.push(chunk(0, owner));
  REQUIRE(idle.drain() == 1);
  REQUIRE(working.drain() == 0);
  // The woken lane is idle now: leaving hands the chunk's wakeup on instead of sitting on it.
  CHECK(queue.leave(idle.fd));
  CHECK(working.drain() == 1);
  CHECK(queue.take(item, working.fd) == SendQueue::Take::item);
  // A lane that left is no longer woken.
  REQUIRE(queue.take(item, working.fd) == SendQueue::Take::empty);
  queue.push(chunk(1, owner));
  CHECK(idle.drain() == 0);
  CHECK(working.drain() == 1);
  queue.close();
  CHECK_FALSE(queue.leave(idle.fd));
}
