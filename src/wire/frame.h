// Control frames: a fixed 12-byte header (magic, protocol version, message
// type, payload length) and a payload of at most the connection's limit.
// The header is checked in full before a single payload byte is allocated.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/error.h"

namespace ferry::wire {

inline constexpr uint32_t kFrameMagic = 0x31595246;  // "FRY1" on the wire
// 2: link_hello/link_welcome offer shared memory. 3: hello.silent_link_ms, topology_vote.optimize,
// probe_round/probe_done/probe_hello (link probes). 4: hello.other_hosts, ring_member.other_hosts,
// collective_pending. 5: hello.resume_* (a member reconnecting to a master started again).
// 6: topology_vote.min_world/hold_ms (ferry_wait_for_world). 7: call_refused (calls out of order),
// collective_begin.root and kinds barrier/broadcast. 8: going_away (a master stopped on purpose),
// collective_result.pending. 9: hello.dial_out_only, topology.receiver_dials, link_hello.receiver_dials
// (a link dialed from whichever end can); peer_label (a peer's status label, ferry_comm_set_label).
// 10: LinkDial::both in topology.receiver_dials and link_hello.receiver_dials (a punched link).
// 11: sync_begin.connections, sync_plan.holder_dials/serve_dials, fetch_hello.dial (a shared-state
// fetch opened by whichever end can: the holder, or both punching); probe_round.target_dials/
// dial_sources, probe_hello.target_dialed (a probe of a dial-out-only peer, dialed by it).
// 12: LinkDial::relay, topology.relays, hello.relay_port, ring_member.relay_port, relay_hello
// (a ring link neither end can dial nor punch, joined by a relay).
inline constexpr uint16_t kProtocolVersion = 12;
inline constexpr size_t kFrameHeaderBytes = 12;
// Control payloads are small; the largest is a ring listing. 4 MiB holds a
// ring of tens of thousands of peers and still bounds what a stranger can make us allocate.
inline constexpr uint32_t kMaxControlPayload = 4u << 20;
// Before a connection's handshake is done (its hello accepted, its secret
// proved) nothing it announces may cost more than this: the largest hello is
// under 500 bytes, and a stranger must not make a listener allocate megabytes.
inline constexpr uint32_t kMaxHandshakePayload = 4u << 10;

struct FrameHeader {
  uint16_t version = kProtocolVersion;
  uint16_t type = 0;
  uint32_t length = 0;
};

std::array<uint8_t, kFrameHeaderBytes> encode_frame_header(const FrameHeader& header);

// Checks magic, version and length (<= max_payload). Types are checked by the
// message decoder, which knows them.
Status decode_frame_header(std::span<const uint8_t, kFrameHeaderBytes> bytes, uint32_t max_payload,
                           FrameHeader& out);

}  // namespace ferry::wire
