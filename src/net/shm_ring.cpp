#include "net/shm_ring.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
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

// Seals every ring carries: nobody, not even a process that opens the file
// through /proc, can shrink it under a mapping (SIGBUS) or unseal it.
constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
// Older headers lack it; kernels before 6.3 refuse it (then we go without).
constexpr unsigned kNoExecSeal = 0x0008U;  // MFD_NOEXEC_SEAL
constexpr const char* kNamePrefix = "memfd:";

int make_memfd() {
  // Without an exec flag, kernels since 6.3 log a warning per process.
  int fd = ::memfd_create("ferry-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING | kNoExecSeal);
  if (fd < 0 && errno == EINVAL) fd = ::memfd_create("ferry-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  return fd;
}

// "memfd:<pid>:<fd>:<inode>", each a decimal number; false for anything else.
bool parse_name(const std::string& name, uint64_t& pid, uint64_t& fd, uint64_t& inode) {
  if (name.size() > 64 || name.rfind(kNamePrefix, 0) != 0) return false;
  uint64_t* fields[] = {&pid, &fd, &inode};
  size_t at = std::strlen(kNamePrefix);
  for (size_t i = 0; i < 3; ++i) {
    size_t digits = 0;
    *fields[i] = 0;
    for (; at < name.size() && name[at] >= '0' && name[at] <= '9' && digits < 19; ++at, ++digits)
      *fields[i] = *fields[i] * 10 + static_cast<uint64_t>(name[at] - '0');
    if (digits == 0) return false;
    if (i < 2 && (at == name.size() || name[at++] != ':')) return false;
  }
  return at == name.size() && pid > 0 && pid <= INT_MAX && fd <= INT_MAX;
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
  int fd = make_memfd();
  if (fd < 0) throw Error(Errc::system, std::string("memfd_create: ") + std::strerror(errno));
  std::unique_ptr<ShmRing> ring(new ShmRing(Role::writer, "", fd, capacity));
  const off_t total = static_cast<off_t>(kPage + capacity);
  // Reserve the pages now: running out of memory would otherwise kill us with
  // SIGBUS on first touch instead of failing here, where TCP can take over.
  if (int err = ::posix_fallocate(fd, 0, total); err != 0)
    throw Error(Errc::system, "reserving a " + std::to_string(capacity) + "-byte shared-memory ring: " +
                                  std::strerror(err));
  if (::fcntl(fd, F_ADD_SEALS, kSeals) != 0)
    throw Error(Errc::system, std::string("sealing a shared-memory ring: ") + std::strerror(errno));
  // Until the seals were on, another process could have resized it through /proc.
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error(Errc::system, std::string("fstat: ") + std::strerror(errno));
  if (st.st_size != total) throw Error(Errc::system, "a shared-memory ring was resized before it was sealed");
  ring->name_ = kNamePrefix + std::to_string(::getpid()) + ":" + std::to_string(fd) + ":" + std::to_string(st.st_ino);
  if (auto ec = ring->map()) throw Error(Errc::system, "mapping a shared-memory ring: " + ec.message());
  auto* c = new (ring->mapping_) Control{};
  c->magic = kMagic;
  c->capacity = capacity;
  ring->control_ = c;
  return ring;
}

std::unique_ptr<ShmRing> ShmRing::attach(const std::string& name) {
  uint64_t pid = 0, writer_fd = 0, inode = 0;
  if (!parse_name(name, pid, writer_fd, inode)) throw Error(Errc::protocol, "not a shared-memory ring name");
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(writer_fd);
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) throw Error(Errc::system, "opening shared-memory ring " + path + ": " + std::strerror(errno));
  std::unique_ptr<ShmRing> ring(new ShmRing(Role::reader, name, fd, 0));
  // The inode tells a recycled pid or descriptor from the ring that was named.
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error(Errc::system, std::string("fstat: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_ino) != inode)
    throw Error(Errc::protocol, "shared-memory ring " + name + " is another file");
  // Sealed first, measured second: once it cannot shrink, the size we map stays.
  int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & kSeals) != kSeals)
    throw Error(Errc::protocol, "shared-memory ring " + name + " is not sealed against shrinking");
  if (::fstat(fd, &st) != 0) throw Error(Errc::system, std::string("fstat: ") + std::strerror(errno));
  size_t total = static_cast<size_t>(st.st_size);
  if (total < 2 * kPage || total % kPage != 0 || total - kPage > kMaxCapacity)
    throw Error(Errc::protocol, "shared-memory ring " + name + " has the wrong size");
  ring->capacity_ = total - kPage;
  if (auto ec = ring->map()) throw Error(Errc::system, "mapping a shared-memory ring: " + ec.message());
  ring->close_descriptor();  // the mapping holds the segment; nobody need reach it through us
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
  if (mapping_) ::munmap(mapping_, mapping_bytes_);
  close_descriptor();
}

void ShmRing::unlink() { close_descriptor(); }

void ShmRing::close_descriptor() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
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
