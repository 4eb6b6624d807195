// The language fuzz_master_state reads its input in, shared with the seed
// generator that writes valid runs in it. A program is a flags byte, then
// operations until the input ends; every byte string is a program (missing
// arguments read as zero).
//
//   flags      bit 0: the master holds a run secret; bit 1: it checks newcomers'
//              listeners (MasterLimits::reachability_check_ms)
//   operation  opcode byte (mod kOpCount), then its arguments, one byte each
//              unless noted; `slot` picks one of kSlots connection slots
//
//   connect    slot                      a new connection in the slot (if it is free)
//   disconnect slot                      the connection closes (on_disconnected)
//   hello      slot group flags conns hb  group mod 3; flags bit 0: a valid proof
//                                        (with a secret), bit 1: port 0, bit 2: an
//                                        advertised host; hb 0: default, else hb*50 ms
//   vote       slot links_broken
//   ready      slot epoch code unreachable reason_len(u16)
//   pending    slot
//   begin      slot epoch seq kind tag count dtype op
//   end        slot epoch seq code reason_len(u16)
//   sync       slot epoch seq revision strategy n, then n x (name dtype count hash allow)
//   leave      slot
//   raw        slot type(u16) len payload[len]   any bytes, through wire::decode_message
//   reachable  slot answer               answers the oldest check the master asked for
//                                        (bit 0: reachable; none asked: for the slot's
//                                        peer, which the master must ignore)
//
// epoch 0 means "the right one": for ready, the last topology the master
// sent this connection; for begin/end/sync, its group's committed epoch.
// code < 200 means 0 (success); reason_len is taken mod 1200, then capped
// at the wire's limit of 1024 (or $FERRY_FUZZ_MAX_REASON).
#pragma once

#include <cstdint>
#include <vector>

namespace ferry::fuzz::master_program {

inline constexpr uint8_t kSlots = 6;

enum Op : uint8_t {
  kConnect = 0,
  kDisconnect,
  kHello,
  kVote,
  kReady,
  kPending,
  kBegin,
  kEnd,
  kSync,
  kLeave,
  kRaw,
  kReachable,
  kOpCount
};

// Builds programs (for the seed generator).
class Writer {
 public:
  explicit Writer(bool secret) { bytes_.push_back(secret ? 1 : 0); }
  Writer& op(Op code, std::initializer_list<unsigned> args) {
    bytes_.push_back(code);
    for (unsigned a : args) bytes_.push_back(static_cast<uint8_t>(a));
    return *this;
  }
  Writer& u16(unsigned v) {
    bytes_.push_back(static_cast<uint8_t>(v));
    bytes_.push_back(static_cast<uint8_t>(v >> 8));
    return *this;
  }
  Writer& raw(std::initializer_list<unsigned> bytes) {
    for (unsigned b : bytes) bytes_.push_back(static_cast<uint8_t>(b));
    return *this;
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

}  // namespace ferry::fuzz::master_program
