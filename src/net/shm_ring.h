// A one-way byte ring in shared memory between two processes on one host:
// the fast path of a ring link whose peers share a machine. Over loopback TCP
// every byte is copied twice by the kernel and pays for socket buffers and
// wakeups; here the writer copies once into the ring and the reader may
// combine straight from it (borrow), so the copy the kernel made is gone.
//
// The segment is a memfd sealed against resizing (F_SEAL_SHRINK|GROW|SEAL).
// The writer names it to the reader over the link's authenticated TCP
// connection as "memfd:<pid>:<fd>:<inode>"; the reader opens
// /proc/<pid>/fd/<fd>, checks the inode and the seals (an unsealed file is
// refused: the lane stays on TCP), maps it and closes its descriptor; the
// writer closes its own once the reader has answered (unlink()). Nothing is
// left in /dev/shm, even by a crash.
// Sealed rather than SIGBUS-guarded: a seal binds every opener, even a stranger
// reaching the file through /proc, and readers reduce straight out of borrowed
// spans in code far from here, which no per-copy guard could cover.
//
// Its data area is mapped twice back to back, so any span of up to `capacity`
// bytes starting anywhere is contiguous: reads and writes never split at the
// wrap and a borrowed chunk is one pointer.
//
// Neither side trusts the other's counters: a head or tail that would put
// more than `capacity` bytes in flight is a protocol error, never an
// out-of-bounds access. The far side's death is seen through `alive`, which
// the waits poll (the link's TCP connection closes with its process).
//
// Threading: one writer thread and one reader thread (which may be in
// different processes); close() and the destructor from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <system_error>

namespace ferry::net {

class ShmRing {
 public:
  enum class Role { writer, reader };
  // Polled while a wait has slept this long without news; false: the far side is gone.
  using Alive = std::function<bool()>;
  static constexpr std::chrono::milliseconds kLivenessPoll{50};

  // Writer: creates a fresh sealed segment with `capacity` data bytes (rounded
  // up to whole pages). Throws Error(Errc::system) when shared memory is unavailable.
  static std::unique_ptr<ShmRing> create(size_t capacity);
  // Reader: maps the segment the writer named. Errc::protocol when it is not
  // a ring (a malformed name, another file, not sealed against shrinking, wrong
  // size or header), Errc::system when it cannot be opened.
  static std::unique_ptr<ShmRing> attach(const std::string& name);
  ~ShmRing();
  ShmRing(const ShmRing&) = delete;
  ShmRing& operator=(const ShmRing&) = delete;

  const std::string& name() const { return name_; }
  size_t capacity() const { return capacity_; }
  Role role() const { return role_; }
  // Closes the descriptor the name points at (the mappings stay), so no
  // process reaches the segment through it any more. Idempotent; the writer
  // calls it once the reader has mapped the ring or refused it.
  void unlink();
  void set_alive(Alive alive) { alive_ = std::move(alive); }

  // --- writer ---
  // Copies all of `data` in, waiting for space as the reader drains.
  std::error_code write(const void* data, size_t size);
  // --- reader ---
  std::error_code read(void* out, size_t size);
  // Waits until `size` (<= capacity) bytes are in and returns them in place;
  // they stay valid and unchanged until release(size). Lends only spans that
  // start kBorrowAlignment-aligned, since the borrower reads them as typed
  // elements (f64 included): otherwise, and for spans larger than the ring,
  // nullptr with no error, at once; read() them instead.
  static constexpr size_t kBorrowAlignment = 8;
  const uint8_t* borrow(size_t size, std::error_code& ec);
  void release(size_t size);

  // Both sides' waits fail from now on (this side's at once, the far side's
  // when it next looks). Any thread; idempotent.
  void close();

 private:
  struct Control;
  ShmRing(Role role, std::string name, int fd, size_t capacity);
  std::error_code map();
  void close_descriptor();
  // Blocks until `ready()` holds; `signal`/`waiting` are the futex word and
  // flag the far side checks after it moves its counter.
  template <class Ready>
  std::error_code wait_until(std::atomic<uint32_t>& signal, std::atomic<uint32_t>& waiting, Ready ready);
  void notify(std::atomic<uint32_t>& signal, std::atomic<uint32_t>& waiting);
  std::error_code wait_for_data(size_t size, uint64_t& head);

  const Role role_;
  std::string name_;
  int fd_ = -1;  // the segment's descriptor until mapped and, for the writer, named to the reader
  size_t capacity_ = 0;
  void* mapping_ = nullptr;  // header page + the data area twice
  size_t mapping_bytes_ = 0;
  Control* control_ = nullptr;
  uint8_t* data_ = nullptr;
  uint64_t position_ = 0;  // this side's own counter (head for the writer, tail for the reader)
  std::atomic<bool> closed_{false};
  Alive alive_;
};

}  // namespace ferry::net
