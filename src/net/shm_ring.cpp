#include "net/shm_ring.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <cstring>

#include "core/error.h"

namespace ferry::net {
namespace {

constexpr uint64_t kMagic = 0x31676e6972797266;  // "ferryring1"
constexpr size_t kPage = 4096;
constexpr size_t kMaxCapacity = size_t{1} << 30;

size_t round_to_pages(size_t bytes) { return (bytes + kPage - 1) / kPage * kPage; }

std::error_code last_error() { return {errno, std::system_category()}; }
std::error_code protocol_error() { return std::make_error_code(std::errc::protocol_error); }
std::error_code closed_error() { return std::make_error_code(std::errc::connection_aborted); }

std::string random_name() {
  uint8_t bytes[16];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno != EINTR) throw Error(Errc::system, std::string("getrandom: ") + std::strerror(errno));
    if (n > 0) got += static_cast<size_t>(n);
  }
  static const char* hex = "0123456789abcdef";
  std::string name = "/ferry-";
  for (uint8_t b : bytes) {
    name.push_back(hex[b >> 4]);
    name.push_back(hex[b & 15]);
  }
  return name;
}

// Shared (not private) futexes: the two sides are different processes.
int futex_wait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::milliseconds timeout) {
  timespec ts{static_cast<time_t>(timeout.count() / 1000), static_cast<long>(timeout.count() % 1000) * 1'000'000};
  return static_cast<int>(::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, expected, &ts, nullptr, 0));
}

void futex_wake(std::atomic<uint32_t>& word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// ThreadSanitizer cannot pair the two ends' counters: each end maps the ring
// at its own address, or lives in another process. So, as TSan itself does for
// every socket, publishing a counter releases one process-wide object and
// seeing it acquires that object: a chunk written to the next peer then
// happens-before the answer that comes back (an in-place all-reduce receives
// its result into the bytes it sent). Nothing in other builds.
#if defined(__SANITIZE_THREAD__)
#define FERRY_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FERRY_TSAN 1
#endif
#endif
#ifdef FERRY_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
char ring_order;
void counter_published() { __tsan_release(&ring_order); }
void counter_seen() { __tsan_acquire(&ring_order); }
#else
void counter_published() {}
void counter_seen() {}
#endif

}  // namespace

// The header page. Each counter has a cache line of its own: the writer
// stores head and the reader tail, thousands of times a second.
struct ShmRing::Control {
  uint64_t magic;
  uint64_t capacity;
  alignas(64) std::atomic<uint64_t> head;  // bytes ever written
  alignas(64) std::atomic<uint64_t> tail;  // bytes ever consumed
  alignas(64) std::atomic<uint32_t> data_signal;  // futex: bumped when head moves under a waiting reader
  std::atomic<uint32_t> reader_waiting;
  alignas(64) std::atomic<uint32_t> space_signal;  // futex: bumped when tail moves under a waiting writer
  std::atomic<uint32_t> writer_waiting;
  alignas(64) std::atomic<uint32_t> closed;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
              "the counters are shared between processes: they must not hide a lock");

ShmRing::ShmRing(Role role, std::string name, int fd, size_t capacity)
    : role_(role), name_(std::move(name)), fd_(fd), capacity_(capacity) {}

std::unique_ptr<ShmRing> ShmRing::create(size_t capacity) {
  static_assert(sizeof(Control) <= kPage);
  capacity = round_to_pages(std::max<size_t>(capacity, kPage));
  if (capacity > kMaxCapacity) throw Error(Errc::invalid_argument, "shared-memory ring too large");
  std::string name = random_name();
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw Error(Errc::system, "shm_open " + name + ": " + std::strerror(errno));
  std::unique_ptr<ShmRing> ring(new ShmRing(Role::writer, name, fd, capacity));
  // Reserve the pages now: a tmpfs that runs out would otherwise kill us with
  // SIGBUS on first touch instead of failing here, where TCP can take over.
  if (int err = ::posix_fallocate(fd, 0, static_cast<off_t>(kPage + capacity)); err != 0)
    throw Error(Errc::system, "reserving a " + std::to_string(capacity) + "-byte shared-memory ring: " +
                                  std::strerror(err));
  if (auto ec = ring->map()) throw Error(Errc::system, "mapping a shared-memory ring: " + ec.message());
  auto* c = new (ring->mapping_) Control{};
  c->magic = kMagic;
  c->capacity = capacity;
  ring->control_ = c;
  return ring;
}

std::unique_ptr<ShmRing> ShmRing::attach(const std::string& name) {
  if (name.size() < 2 || name.size() > 64 || name[0] != '/' || name.find('/', 1) != std::string::npos)
    throw Error(Errc::protocol, "not a shared-memory ring name");
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) throw Error(Errc::system, "shm_open " + name + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw Error(Errc::system, std::string("fstat: ") + std::strerror(err));
  }
  size_t total = static_cast<size_t>(st.st_size);
  if (total < 2 * kPage || total % kPage != 0 || total - kPage > kMaxCapacity) {
    ::close(fd);
    throw Error(Errc::protocol, "shared-memory ring " + name + " has the wrong size");
  }
  std::unique_ptr<ShmRing> ring(new ShmRing(Role::reader, name, fd, total - kPage));
  ring->linked_ = false;  // the writer's to unlink
  if (auto ec = ring->map()) throw Error(Errc::system, "mapping a shared-memory ring: " + ec.message());
  ring->control_ = static_cast<Control*>(ring->mapping_);
  if (ring->control_->magic != kMagic || ring->control_->capacity != ring->capacity_)
    throw Error(Errc::protocol, "shared-memory ring " + name + " has no valid header");
  return ring;
}

std::error_code ShmRing::map() {
  mapping_bytes_ = kPage + 2 * capacity_;
  void* base = ::mmap(nullptr, mapping_bytes_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return last_error();
  mapping_ = base;
  auto* bytes = static_cast<uint8_t*>(base);
  // Header and data, then the data again right behind itself.
  if (::mmap(bytes, kPage + capacity_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd_, 0) == MAP_FAILED ||
      ::mmap(bytes + kPage + capacity_, capacity_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd_,
             static_cast<off_t>(kPage)) == MAP_FAILED)
    return last_error();
  data_ = bytes + kPage;
  return {};
}

ShmRing::~ShmRing() {
  close();
  unlink();
  if (mapping_) ::munmap(mapping_, mapping_bytes_);
  if (fd_ >= 0) ::close(fd_);
}

void ShmRing::unlink() {
  if (!linked_) return;
  linked_ = false;
  ::shm_unlink(name_.c_str());
}

void ShmRing::close() {
  if (closed_.exchange(true) || !control_) return;
  control_->closed.store(1);
  // Wake whoever sleeps on either word, on either side.
  control_->data_signal.fetch_add(1);
  control_->space_signal.fetch_add(1);
  futex_wake(control_->data_signal);
  futex_wake(control_->space_signal);
}

void ShmRing::notify(std::atomic<uint32_t>& signal, std::atomic<uint32_t>& waiting) {
  // Pairs with the waiter's store to `waiting` then re-check (both seq_cst):
  // either it sees our counter or we see it waiting.
  if (waiting.load() == 0) return;
  signal.fetch_add(1);
  futex_wake(signal);
}

template <class Ready>
std::error_code ShmRing::wait_until(std::atomic<uint32_t>& signal, std::atomic<uint32_t>& waiting, Ready ready) {
  for (;;) {
    if (closed_.load(std::memory_order_relaxed) || control_->closed.load(std::memory_order_acquire))
      return closed_error();
    if (std::error_code ec; ready(ec) || ec) return ec;
    uint32_t seen = signal.load();
    waiting.store(1);
    std::error_code ec;
    if (ready(ec) || ec) {
      waiting.store(0);
      return ec;
    }
    int rc = futex_wait(signal, seen, kLivenessPoll);
    int err = errno;
    waiting.store(0);
    if (rc != 0 && err == ETIMEDOUT && alive_ && !alive_()) return std::make_error_code(std::errc::connection_reset);
  }
}

std::error_code ShmRing::write(const void* data, size_t size) {
  const auto* in = static_cast<const uint8_t*>(data);
  while (size > 0) {
    size_t space = 0;
    auto has_space = [&](std::error_code& ec) {
      uint64_t tail = control_->tail.load(std::memory_order_acquire);
      if (tail > position_ || position_ - tail > capacity_) {
        ec = protocol_error();  // the reader claims bytes we never wrote
        return false;
      }
      space = capacity_ - static_cast<size_t>(position_ - tail);
      if (space == 0) return false;
      counter_seen();
      return true;
    };
    if (auto ec = wait_until(control_->space_signal, control_->writer_waiting, has_space)) return ec;
    size_t n = std::min(space, size);
    std::memcpy(data_ + position_ % capacity_, in, n);  // contiguous: the data area is mapped twice
    position_ += n;
    in += n;
    size -= n;
    counter_published();
    control_->head.store(position_);
    notify(control_->data_signal, control_->reader_waiting);
  }
  return {};
}

std::error_code ShmRing::wait_for_data(size_t size, uint64_t& head) {
  auto has_data = [&](std::error_code& ec) {
    head = control_->head.load(std::memory_order_acquire);
    if (head < position_ || head - position_ > capacity_) {
      ec = protocol_error();  // the writer claims more in flight than the ring holds
      return false;
    }
    if (head - position_ < size) return false;
    counter_seen();
    return true;
  };
  return wait_until(control_->data_signal, control_->reader_waiting, has_data);
}

std::error_code ShmRing::read(void* out, size_t size) {
  auto* to = static_cast<uint8_t*>(out);
  while (size > 0) {
    uint64_t head = 0;
    if (auto ec = wait_for_data(1, head)) return ec;
    size_t n = std::min<size_t>(head - position_, size);
    std::memcpy(to, data_ + position_ % capacity_, n);
    to += n;
    size -= n;
    release(n);
  }
  return {};
}

const uint8_t* ShmRing::borrow(size_t size, std::error_code& ec) {
  ec.clear();
  // The data area is page-aligned, so the offset decides. An odd-sized chunk
  // (a count of f16s, say) leaves the next one unaligned.
  if (size > capacity_ || position_ % kBorrowAlignment != 0) return nullptr;
  uint64_t head = 0;
  if ((ec = wait_for_data(size, head))) return nullptr;
  return data_ + position_ % capacity_;
}

void ShmRing::release(size_t size) {
  position_ += size;
  counter_published();
  control_->tail.store(position_);
  notify(control_->space_signal, control_->writer_waiting);
}

}  // namespace ferry::net
