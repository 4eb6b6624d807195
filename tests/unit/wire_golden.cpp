// Golden bytes for every control message and both fetch frames. A round trip
// cannot see a change made to encoder and decoder alike (two fields swapped,
// an integer widened); a deployed peer would. Each golden is the whole frame
// as hex, one group per field, written down here and never regenerated:
// changing one breaks every deployed peer, so bump kProtocolVersion instead.
#include <catch2/catch.hpp>

#include <cctype>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "hex_text.h"
#include "wire/fetch_frames.h"
#include "wire/frame.h"
#include "wire/messages.h"

using namespace ferry;
using namespace ferry::wire;

namespace {

std::vector<uint8_t> from_hex(std::string_view hex) {
  std::vector<uint8_t> out;
  std::string digits;
  for (char c : hex)
    if (std::isxdigit(static_cast<unsigned char>(c))) digits += c;
  REQUIRE(digits.size() % 2 == 0);
  for (size_t i = 0; i < digits.size(); i += 2)
    out.push_back(static_cast<uint8_t>(std::stoul(digits.substr(i, 2), nullptr, 16)));
  return out;
}

// Renders a message's fields as text, in fields() order. Every field of a
// golden message holds a distinct value, so a decoder that puts bytes in the
// wrong member renders differently from the message that was encoded.
class FieldText {
 public:
  template <class T>
    requires std::is_integral_v<T>
  void operator()(const T& value) {
    text_ += std::to_string(+value) + ",";
  }
  void operator()(const std::string& s, Limit) { text_ += "'" + s + "',"; }
  template <class T>
  void operator()(const std::vector<T>& items, Limit) {
    text_ += "[";
    for (const T& item : items) {
      if constexpr (std::is_integral_v<T>)
        (*this)(item);
      else if constexpr (std::is_same_v<T, std::string>)
        (*this)(item, Limit{0});
      else
        const_cast<T&>(item).fields(*this);  // fields() only reads here
      text_ += ";";
    }
    text_ += "],";
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

std::string field_text(const Message& message) {
  FieldText v;
  std::visit([&](const auto& m) { const_cast<std::decay_t<decltype(m)>&>(m).fields(v); }, message);
  return v.text();
}

struct Golden {
  Message message;
  const char* hex;  // the whole frame: header | fields
};

// Header: magic "FRY1" | version 10 | type | payload length.
const std::vector<Golden>& goldens() {
  static const std::vector<Golden> all = [] {
    std::vector<Golden> v;
    auto add = [&](Message m, const char* hex) { v.push_back({std::move(m), hex}); };
    add(AuthChallenge{"nonce-A", 1},
        "46525931 0c00 4800 0c000000 | 07000000 6e6f6e63652d41 01");
    add(Hello{0x11223344, "host.example", 0xA1B2, 3, 15000, "nonce-H", "proof-H", 15000, {"fd00::7"}, 0x31, 0x32,
              {0x33}, 0x34, {{0x35, 0x37}}, {{0x36, 0x38}}, 0x39, 0x3A3B},
        "46525931 0c00 0100 86000000 | 44332211 0c000000 686f73742e6578616d706c65 b2a1 03000000 983a0000 "
        "07000000 6e6f6e63652d48 07000000 70726f6f662d48 983a0000 01000000 07000000 66643030 3a3a37 "
        "3100000000000000 3200000000000000 01000000 3300000000000000 3400000000000000 01000000 35000000 37000000 "
        "01000000 36000000 38000000 39 3b3a");
    add(Welcome{0x0102030405060708, "198.51.100.7", "proof-W"},
        "46525931 0c00 4000 23000000 | 0807060504030201 0c000000 3139382e35312e3130302e37 07000000 70726f6f662d57");
    add(TopologyVote{1, 1, 0x0A0B0C0D, 0x01020304},
        "46525931 0c00 0200 0a000000 | 01 01 0d0c0b0a 04030201");
    add(Topology{0x1122334455667788, 5, 2,
                 {{0x0A, "10.0.0.1", 5000, {}, 0x1F41}, {0x0B, "fe80::1", 5001, {"10.0.0.2"}, 0}},
                 {0x01, 0x03}, {0, 0x0C}},
        "46525931 0c00 4100 71000000 | 8877665544332211 05000000 02000000 02000000 "
        "0a00000000000000 08000000 31302e302e302e31 8813 00000000 411f "
        "0b00000000000000 07000000 666538303a3a31 8913 01000000 08000000 31302e302e302e32 0000 "
        "02000000 01 03 02000000 0000000000000000 0c00000000000000");
    add(TopologyReady{0x21, 6, 0x0B, "refused"},
        "46525931 0c00 0300 1f000000 | 2100000000000000 06000000 0b00000000000000 07000000 72656675736564");
    add(TopologyDone{0x22, 7, 2, 4},
        "46525931 0c00 4200 14000000 | 2200000000000000 07000000 02000000 04000000");
    add(PendingQuery{},
        "46525931 0c00 0400 00000000 |");
    add(PendingCount{3},
        "46525931 0c00 4300 04000000 | 03000000");
    add(CollectiveBegin{0x23, 0x1234, 1, 0xABCDEF0123, 0x100000, 10, 1, 5, 256, 0x2C},
        "46525931 0c00 0500 28000000 | 2300000000000000 34120000 01 2301efcdab000000 0000100000000000 0a 01 05 "
        "00010000 2c000000");
    add(CollectiveGo{0x24, 0x35},
        "46525931 0c00 4400 0c000000 | 2400000000000000 35000000");
    add(CollectiveEnd{0x25, 0x36, 4, "peer lost"},
        "46525931 0c00 0600 1d000000 | 2500000000000000 36000000 04000000 09000000 70656572206c6f7374");
    add(CollectiveResult{0x26, 0x37, 7, "mismatch", 2},
        "46525931 0c00 4500 20000000 | 2600000000000000 37000000 07000000 08000000 6d69736d61746368 02000000");
    add(Kick{9, "bad frame"},
        "46525931 0c00 4600 11000000 | 09000000 09000000 626164206672616d65");
    add(Heartbeat{},
        "46525931 0c00 6000 00000000 |");
    add(Leave{},
        "46525931 0c00 0700 00000000 |");
    add(LinkChallenge{"nonce-L", 1},
        "46525931 0c00 8300 0c000000 | 07000000 6e6f6e63652d4c 01");
    add(LinkHello{0x0A, 0x0B, 0x27, 1, 2, "n-LH", "p-LH", "hostkey", "/ferry-ring", 1},
        "46525931 0c00 8000 4b000000 | 0a00000000000000 0b00000000000000 2700000000000000 01000000 02000000 "
        "04000000 6e2d4c48 04000000 702d4c48 07000000 686f73746b6579 0b000000 2f66657272792d72696e67 01");
    add(LinkWelcome{3, "busy", "p-LW", 1},
        "46525931 0c00 8100 15000000 | 03000000 04000000 62757379 04000000 702d4c57 01");
    add(SyncBegin{0x28, 0x38, 0x99, 2, {{"w", 10, 100, 0x0123456789ABCDEF, 0}, {"b", 8, 3, 0xDEF, 1}}, 0x3D},
        "46525931 0c00 0800 4b000000 | 2800000000000000 38000000 9900000000000000 02 02000000 "
        "01000000 77 0a 6400000000000000 efcdab8967452301 00 "
        "01000000 62 08 0300000000000000 ef0d000000000000 01 3d000000");
    add(SyncPlan{0x29, 0x39, 0x9A, {{1, 0xFEDCBA9876543210, {0x0A, 0x0B}}}, {0x0C}, {{0x0A, "10.0.0.1", 7000, {}, 0}},
                 {2}, {{{0x0D, "h", 7001, {}, 0}, 1, 3}}},
        "46525931 0c00 4700 87000000 | 2900000000000000 39000000 9a00000000000000 "
        "01000000 01000000 1032547698badcfe 02000000 0a00000000000000 0b00000000000000 "
        "01000000 0c00000000000000 "
        "01000000 0a00000000000000 08000000 31302e302e302e31 581b 00000000 0000 "
        "01000000 02 "
        "01000000 0d00000000000000 01000000 68 591b 00000000 0000 01 03000000");
    add(FetchHello{0x0A, 0x0B, 0x2A, 0x3A, "n-FH", "p-FH", 2},
        "46525931 0c00 8200 2d000000 | 0a00000000000000 0b00000000000000 2a00000000000000 3a000000 "
        "04000000 6e2d4648 04000000 702d4648 02");
    add(LinkReport{{{0x0A, 0x0B, 0, 0x1122334455, 0x2233445566, 0x3344, 0x55, 0x66778899AA, 0x77, 0x20}}},
        "46525931 0c00 0900 3d000000 | 01000000 0a00000000000000 0b00000000000000 00 "
        "5544332211000000 6655443322000000 44330000 55000000 aa99887766000000 77000000 20000000");
    add(LinkMatrixQuery{0x3B},
        "46525931 0c00 0a00 08000000 | 3b00000000000000");
    add(LinkMatrix{0x3C, {{0x0A, 0x0B, 0, 0x1122334455, 0x2233445566, 0x3344, 0x55, 0x66778899AA, 0x77, 0x20},
                         {0x0B, 0x0A, 1, 0x0C, 0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x04}}},
        "46525931 0c00 4900 7e000000 | 3c00000000000000 02000000 0a00000000000000 0b00000000000000 00 "
        "5544332211000000 6655443322000000 44330000 55000000 aa99887766000000 77000000 20000000 "
        "0b00000000000000 0a00000000000000 01 0c00000000000000 0d00000000000000 0e000000 0f000000 "
        "1000000000000000 11000000 04000000");
    add(ProbeRound{0x3D, 2, {{0x0A, "h", 7000, {}, 0x0102}}, {0x0B}, {1}, {{0x0C, "g", 7002, {}, 0}}},
        "46525931 0c00 4a00 4f000000 | 3d00000000000000 02000000 "
        "01000000 0a00000000000000 01000000 68 581b 00000000 0201 01000000 0b00000000000000 "
        "01000000 01 01000000 0c00000000000000 01000000 67 5a1b 00000000 0000");
    add(ProbeDone{0x3E, 3, {{0x0A, 0x0B, 0, 1, 2, 3, 4, 5, 6, 7}}, {0x0C}},
        "46525931 0c00 0b00 55000000 | 3e00000000000000 03000000 01000000 0a00000000000000 0b00000000000000 00 "
        "0100000000000000 0200000000000000 03000000 04000000 0500000000000000 06000000 07000000 "
        "01000000 0c00000000000000");
    add(ProbeHello{0x0A, 0x0B, 0x2B, 4, "n", "p", "k", 1},
        "46525931 0c00 8400 2c000000 | 0a00000000000000 0b00000000000000 2b00000000000000 04000000 "
        "01000000 6e 01000000 70 01000000 6b 01");
    add(CollectivePending{0x27, 0x3F, {0x0A, 0x0B}},
        "46525931 0c00 4b00 20000000 | 2700000000000000 3f000000 02000000 0a00000000000000 0b00000000000000");
    add(CallRefused{7, "order"},
        "46525931 0c00 4c00 0d000000 | 07000000 05000000 6f72646572");
    add(GoingAway{"bye"},
        "46525931 0c00 4d00 07000000 | 03000000 627965");
    add(PeerLabel{"outer 3"},
        "46525931 0c00 0c00 0b000000 | 07000000 6f757465722033");
    add(RelayHello{0x0A, 0x0A, 0x0B, 0x2C, 2, 3, "n-RH", "p-RH"},
        "46525931 0c00 8500 38000000 | 0a00000000000000 0a00000000000000 0b00000000000000 2c00000000000000 "
        "02000000 03000000 04000000 6e2d5248 04000000 702d5248");
    add(GatherGo{0x28, 0x40, {0, 1, 0x0102}},
        "46525931 0c00 4e00 28000000 | 2800000000000000 40000000 03000000 0000000000000000 0100000000000000 "
        "0201000000000000");
    return v;
  }();
  return all;
}

}  // namespace

TEST_CASE("wire golden: every message type has a golden frame", "[wire][golden]") {
  // A message type added to the variant without a golden here fails this test.
  std::vector<int> goldens_per_alternative(std::variant_size_v<Message>, 0);
  for (const Golden& g : goldens()) ++goldens_per_alternative[g.message.index()];
  for (size_t i = 0; i < goldens_per_alternative.size(); ++i) {
    INFO("variant alternative " << i);
    CHECK(goldens_per_alternative[i] == 1);
  }
}

TEST_CASE("wire golden: each message encodes to its golden bytes and decodes back to its fields",
          "[wire][golden]") {
  for (const Golden& g : goldens()) {
    const auto type = static_cast<uint16_t>(message_type(g.message));
    INFO(message_type_name(type) << " (type " << type << ")");
    const std::vector<uint8_t> golden = from_hex(g.hex);
    const std::vector<uint8_t> encoded = encode_message(g.message);
    INFO("encoded: " << ferry::test::to_hex(encoded));
    CHECK(encoded == golden);

    REQUIRE(golden.size() >= kFrameHeaderBytes);
    FrameHeader header;
    REQUIRE(decode_frame_header(std::span<const uint8_t, kFrameHeaderBytes>(golden.data(), kFrameHeaderBytes),
                                kMaxControlPayload, header)
                .ok());
    CHECK(header.type == type);
    CHECK(header.length == golden.size() - kFrameHeaderBytes);
    DecodedMessage decoded = decode_message(header.type, std::span<const uint8_t>(golden).subspan(kFrameHeaderBytes));
    REQUIRE(decoded.status.ok());
    REQUIRE(decoded.message.has_value());
    CHECK(decoded.message->index() == g.message.index());
    CHECK(field_text(*decoded.message) == field_text(g.message));
  }
}

TEST_CASE("wire golden: fetch request and response frames", "[wire][golden]") {
  const FetchRequest request{0x11, 0x0102030405060708, 0x200000, 3};
  const auto request_golden = from_hex(
      "46524551 "            // magic "FREQ"
      "11000000 "            // tensor
      "0807060504030201 "    // offset
      "00002000 "            // length
      "03000000");           // compression
  REQUIRE(request_golden.size() == kFetchRequestBytes);
  const auto request_bytes = encode_fetch_request(request);
  CHECK(std::vector<uint8_t>(request_bytes.begin(), request_bytes.end()) == request_golden);
  FetchRequest request_back;
  REQUIRE(decode_fetch_request(request_golden.data(), request_back));
  CHECK(request_back.tensor == request.tensor);
  CHECK(request_back.offset == request.offset);
  CHECK(request_back.length == request.length);
  CHECK(request_back.compression == request.compression);

  const FetchResponse response{0x12, 0x1112131415161718, 0x300000, 0x2345, 1, 0xA1A2A3A4A5A6A7A8};
  const auto response_golden = from_hex(
      "46525350 "            // magic "FRSP"
      "12000000 "            // tensor
      "1817161514131211 "    // offset
      "00003000 "            // raw_length
      "45230000 "            // wire_length
      "01000000 "            // compressed
      "a8a7a6a5a4a3a2a1 "    // checksum
      "00000000");           // reserved
  REQUIRE(response_golden.size() == kFetchResponseBytes);
  const auto response_bytes = encode_fetch_response(response);
  CHECK(std::vector<uint8_t>(response_bytes.begin(), response_bytes.end()) == response_golden);
  FetchResponse response_back;
  REQUIRE(decode_fetch_response(response_golden.data(), response_back));
  CHECK(response_back.tensor == response.tensor);
  CHECK(response_back.offset == response.offset);
  CHECK(response_back.raw_length == response.raw_length);
  CHECK(response_back.wire_length == response.wire_length);
  CHECK(response_back.compressed == response.compressed);
  CHECK(response_back.checksum == response.checksum);
}
