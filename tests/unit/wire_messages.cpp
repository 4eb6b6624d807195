// The wire format: round trips, golden bytes, and every way a frame can be wrong.
#include <catch2/catch.hpp>

#include <span>

#include "wire/chunk_header.h"
#include "wire/frame.h"
#include "wire/messages.h"

using namespace ferry;
using namespace ferry::wire;

namespace {

// Decodes a whole frame the way a connection does: header first, then payload.
DecodedMessage decode_frame(const std::vector<uint8_t>& frame) {
  DecodedMessage out;
  if (frame.size() < kFrameHeaderBytes) {
    out.status = Status::failure(Errc::protocol, "short");
    return out;
  }
  FrameHeader h;
  out.status = decode_frame_header(std::span<const uint8_t, kFrameHeaderBytes>(frame.data(), kFrameHeaderBytes),
                                   kMaxControlPayload, h);
  if (!out.status.ok()) return out;
  if (frame.size() - kFrameHeaderBytes != h.length) {
    out.status = Status::failure(Errc::protocol, "length");
    return out;
  }
  return decode_message(h.type, std::span<const uint8_t>(frame).subspan(kFrameHeaderBytes));
}

std::vector<Message> one_of_each() {
  Topology topology;
  topology.epoch = 9;
  topology.peer_group = 3;
  topology.p2p_connections = 4;
  topology.ring = {{1, "10.0.0.1", 5000, {}}, {2, "fe80::1", 5001, {"10.0.0.2", "2001:db8::2"}}};
  return {AuthChallenge{std::string(32, 'n'), 1},
          Hello{7, "example.org", 4000, 4, 10000, std::string(32, 'x'), std::string(32, 'p'), 15000, {"192.0.2.9"}, 9, 8, {9, 4}, 6, {{1, 2}}, {{3, 1}, {7, 2}}},
          Welcome{42, "192.0.2.1", std::string(32, 'q')},
          TopologyVote{1, 1, 3, 4000},
          topology,
          TopologyReady{9, 6, 2, "refused"},
          TopologyDone{9, 5, 2, 3},
          PendingQuery{},
          PendingCount{2},
          CollectiveBegin{9, 17, 1, 0xABCDEF, 1u << 20, 10, 1},
          CollectiveGo{9, 17},
          CollectiveEnd{9, 17, 4, "peer lost"},
          CollectiveResult{9, 17, 0, "", 3},
          Kick{9, "bad frame"},
          Heartbeat{},
          Leave{},
          LinkChallenge{std::string(32, 'c'), 0},
          LinkHello{1, 2, 9, 3, 4, "n", "p", "boot/net/mnt", "/ferry-0123"},
          LinkWelcome{0, "", "", 1},
          SyncBegin{9, 3, 11, 1, {{"w", 10, 100, 0xABC, 0}, {"b", 10, 1, 0xDEF, 1}}, 4},
          SyncPlan{9, 3, 11, {{1, 0xABC, {2, 3}}}, {5}, {{2, "10.0.0.2", 7000, {}}}, {1}, {{{6, "10.0.0.6", 7006, {}}, 2, 4}}},
          FetchHello{1, 2, 9, 3, "n", "p", 1},
          LinkReport{{{1, 2, 0, 25'000'000, 24'000'000, 50'000, 1000, 1u << 26, 3}}},
          LinkMatrixQuery{7},
          LinkMatrix{7, {{1, 2, 0, 25'000'000, 24'000'000, 50'000, 1000, 1u << 26, 3}, {2, 1, 1, 9, 0, 0, 0, 5, 0}}},
          ProbeRound{7, 1, {{2, "10.0.0.2", 7000, {"fd00::2"}}}, {3}, {1}, {{3, "10.0.0.3", 7003, {}}}},
          ProbeDone{7, 1, {{1, 2, 0, 25'000'000, 24'000'000, 50'000, 1000, 1u << 26, 0, 8}}, {4}},
          ProbeHello{1, 2, 7, 1, "n", "p", "boot/net/mnt", 1},
          CollectivePending{9, 17, {2, 3}}, CallRefused{7, "out of order"},
          GoingAway{"the master was stopped"}, PeerLabel{"outer 12: 97 steps, share 24%"},
          GatherGo{9, 17, {0, 1, 1u << 20}}};
}

}  // namespace

TEST_CASE("wire: every message survives a round trip", "[wire]") {
  for (const Message& m : one_of_each()) {
    auto frame = encode_message(m);
    auto decoded = decode_frame(frame);
    INFO(message_type_name(static_cast<uint16_t>(message_type(m))));
    REQUIRE(decoded.status.ok());
    REQUIRE(decoded.message.has_value());
    CHECK(encode_message(*decoded.message) == frame);  // same bytes back: same fields back
  }
}

TEST_CASE("wire: golden bytes pin the format", "[wire][golden]") {
  // Changing these bytes breaks compatibility with every deployed peer: bump kProtocolVersion instead.
  std::vector<uint8_t> hello = {
      0x46, 0x52, 0x59, 0x31,  // magic "FRY1"
      0x0C, 0x00,              // version 12
      0x01, 0x00,              // type hello
      0x4C, 0x00, 0x00, 0x00,  // payload length 76
      0x07, 0x00, 0x00, 0x00,  // peer_group 7
      0x03, 0x00, 0x00, 0x00, 'a', 'b', 'c',  // advertised_host "abc"
      0xA0, 0x0F,              // advertised_port 4000
      0x04, 0x00, 0x00, 0x00,  // p2p_connections 4
      0x10, 0x27, 0x00, 0x00,  // heartbeat_timeout_ms 10000
      0x00, 0x00, 0x00, 0x00,  // nonce ""
      0x00, 0x00, 0x00, 0x00,  // proof ""
      0x98, 0x3A, 0x00, 0x00,  // silent_link_ms 15000
      0x00, 0x00, 0x00, 0x00,  // other_hosts []
      0, 0, 0, 0, 0, 0, 0, 0,  // resume_peer_id 0: a newcomer
      0, 0, 0, 0, 0, 0, 0, 0,  // resume_epoch
      0x00, 0x00, 0x00, 0x00,  // resume_ring []
      0, 0, 0, 0, 0, 0, 0, 0,  // resume_revision
      0x00, 0x00, 0x00, 0x00,  // resume_committed []
      0x00, 0x00, 0x00, 0x00,  // resume_awaiting []
      0x00,                    // dial_out_only 0
      0x00, 0x00,              // relay_port 0: relays nothing
  };
  CHECK(encode_message(Hello{7, "abc", 4000, 4, 10000, "", "", 15000, {}, 0, 0, {}, 0, {}, {}, 0}) == hello);

  std::array<uint8_t, kChunkHeaderBytes> chunk = {
      0x43, 0x48, 0x4E, 0x4B,  // "CHNK"
      0x05, 0x00, 0x00, 0x00,  // seq 5
      0x09, 0x00, 0x00, 0x00,  // unit 9
      0x00, 0x10, 0x00, 0x00,  // length 4096
      0xAA, 0xE5, 0x77, 0xA5, 0xA2, 0x0F, 0x37, 0xFF,  // checksum 0x0102030405060708 ^ the header's tag
  };
  CHECK(encode_chunk_header({5, 9, 4096, 0x0102030405060708ULL}) == chunk);
  ChunkHeader back;
  REQUIRE(decode_chunk_header(chunk.data(), back));
  CHECK(back.seq == 5);
  CHECK(back.unit == 9);
  CHECK(back.length == 4096);
  CHECK(back.checksum == 0x0102030405060708ULL);
  chunk[0] ^= 1;
  CHECK_FALSE(decode_chunk_header(chunk.data(), back));
}

// Found by ferry-chaos's corrupt fault: the checksum covered only the payload,
// so a flipped bit in seq or unit sent an intact payload to another collective
// or unit, where it passed its checksum. Every header bit must now be covered.
TEST_CASE("wire: a flipped bit anywhere in a chunk header is caught", "[wire]") {
  const ChunkHeader sent{5, 9, 4096, 0x0102030405060708ULL};
  const auto intact = encode_chunk_header(sent);
  for (size_t byte = 0; byte < kChunkHeaderBytes; ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      auto bytes = intact;
      bytes[byte] = static_cast<uint8_t>(bytes[byte] ^ (1u << bit));
      ChunkHeader got;
      INFO("byte " << byte << ", bit " << bit);
      // Either the header is refused, or the payload's checksum can no longer match.
      if (decode_chunk_header(bytes.data(), got)) CHECK(got.checksum != sent.checksum);
    }
  }
}

TEST_CASE("wire: every truncation and every extension of a valid frame is rejected", "[wire]") {
  for (const Message& m : one_of_each()) {
    auto frame = encode_message(m);
    INFO(message_type_name(static_cast<uint16_t>(message_type(m))));
    // A payload cut short, with the header's length adjusted to match: the field decoder must notice.
    for (size_t cut = kFrameHeaderBytes; cut < frame.size(); ++cut) {
      auto payload = std::span<const uint8_t>(frame).subspan(kFrameHeaderBytes, cut - kFrameHeaderBytes);
      auto decoded = decode_message(static_cast<uint16_t>(message_type(m)), payload);
      CHECK_FALSE(decoded.status.ok());
      CHECK(decoded.status.code == Errc::protocol);
    }
    auto longer = std::vector<uint8_t>(frame.begin() + kFrameHeaderBytes, frame.end());
    longer.push_back(0);
    CHECK_FALSE(decode_message(static_cast<uint16_t>(message_type(m)), longer).status.ok());
  }
}

TEST_CASE("wire: frame headers are checked before anything is allocated", "[wire]") {
  auto frame = encode_message(Heartbeat{});
  std::array<uint8_t, kFrameHeaderBytes> h;
  std::copy_n(frame.begin(), kFrameHeaderBytes, h.begin());
  FrameHeader out;
  CHECK(decode_frame_header(h, kMaxControlPayload, out).ok());

  auto bad = h;
  bad[0] = 'X';
  CHECK(decode_frame_header(bad, kMaxControlPayload, out).message.find("magic") != std::string::npos);
  bad = h;
  bad[4] = 1;  // a build before shared-memory links
  CHECK(decode_frame_header(bad, kMaxControlPayload, out).message.find("version") != std::string::npos);
  bad = h;
  bad[11] = 0x7F;  // length ~2 GiB
  CHECK(decode_frame_header(bad, kMaxControlPayload, out).message.find("limit") != std::string::npos);
  CHECK(decode_message(4242, {}).status.message.find("unknown message type") != std::string::npos);
}

TEST_CASE("wire: counts and lengths that lie are rejected without allocating", "[wire]") {
  // A topology claiming 4 billion members in a 16-byte payload.
  std::vector<uint8_t> payload;
  ByteWriter w(payload);
  w(uint64_t{1});
  w(uint32_t{0});
  w(uint32_t{4});
  w(uint32_t{0xFFFFFFFF});
  auto decoded = decode_message(static_cast<uint16_t>(MessageType::topology), payload);
  CHECK_FALSE(decoded.status.ok());
  CHECK(decoded.status.message.find("limit") != std::string::npos);

  // A host name longer than any host.
  Hello h;
  h.advertised_host = std::string(kMaxHostLength + 1, 'a');
  auto frame = encode_message(h);
  auto bad = decode_frame(frame);
  CHECK_FALSE(bad.status.ok());
  CHECK(bad.status.message.find("exceeds its limit") != std::string::npos);
}

TEST_CASE("wire: collective numbers fold into ranges and are found in them", "[wire]") {
  CHECK(seq_ranges({}).empty());
  CHECK(seq_ranges({3, 4, 5, 9, 11, 12}) == std::vector<SeqRange>{{3, 3}, {9, 1}, {11, 2}});
  for (uint32_t seq : {3u, 5u, 9u, 11u, 12u}) CHECK(in_seq_ranges(seq_ranges({3, 4, 5, 9, 11, 12}), seq));
  for (uint32_t seq : {2u, 6u, 10u, 13u}) CHECK_FALSE(in_seq_ranges(seq_ranges({3, 4, 5, 9, 11, 12}), seq));
  CHECK(in_seq_ranges({{0xFFFFFFFEu, 2}}, 0xFFFFFFFFu));
  CHECK_FALSE(in_seq_ranges({{0xFFFFFFFEu, 2}}, 0));
}

TEST_CASE("wire: the largest resume record a peer sends fits the hello a stranger may send", "[wire]") {
  // What a dual-stack peer says at most: 8 IPv6 literals, its nonce and proof, the record's limits.
  Hello h;
  h.advertised_host = std::string(39, 'a');
  h.other_hosts.assign(kMaxOtherHosts, std::string(39, 'b'));
  h.nonce = std::string(kMaxAuthField, 'n');
  h.proof = std::string(kMaxAuthField, 'p');
  h.resume_peer_id = ~uint64_t{0};
  h.resume_ring.assign(kMaxResumeRing, ~uint64_t{0});
  h.resume_committed.assign(kMaxResumeRanges, {1, 1});
  h.resume_awaiting.assign(kMaxResumeRanges, {1, 1});
  const auto frame = encode_message(h);
  CHECK(frame.size() - kFrameHeaderBytes <= kMaxHandshakePayload);
  CHECK(decode_message(static_cast<uint16_t>(MessageType::hello),
                       std::span<const uint8_t>(frame).subspan(kFrameHeaderBytes))
            .status.ok());
}

TEST_CASE("wire: a peer label is printable ASCII of at most kMaxPeerLabel bytes", "[wire]") {
  CHECK(label_problem("").empty());
  CHECK(label_problem("outer 12: 97 steps, share 24% ~").empty());
  CHECK(label_problem(std::string(kMaxPeerLabel, 'x')).empty());
  CHECK(label_problem(std::string(kMaxPeerLabel + 1, 'x')).find("at most 128 bytes, got 129") != std::string::npos);
  CHECK(label_problem("tab\there").find("byte 3 is 0x09") != std::string::npos);
  CHECK(label_problem("caf\xc3\xa9").find("byte 3 is 0xc3") != std::string::npos);
  CHECK(label_problem(std::string("nul\0", 4)).find("byte 3 is 0x00") != std::string::npos);
  // The decoder holds the length too: a longer label never reaches the master's state.
  const auto frame = encode_message(PeerLabel{std::string(kMaxPeerLabel + 1, 'x')});
  CHECK_FALSE(decode_message(static_cast<uint16_t>(MessageType::peer_label),
                             std::span<const uint8_t>(frame).subspan(kFrameHeaderBytes))
                  .status.ok());
}
