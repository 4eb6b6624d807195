#include "wire/messages.h"

#include "wire/frame.h"

namespace ferry::wire {
namespace {

template <class M>
bool try_decode(uint16_t type, std::span<const uint8_t> payload, DecodedMessage& out) {
  if (type != static_cast<uint16_t>(M::kType)) return false;
  ByteReader reader(payload);
  M message;
  message.fields(reader);
  reader.expect_end();
  if (reader.ok())
    out.message = std::move(message);
  else
    out.status = Status::failure(Errc::protocol, std::string("malformed ") +
                                                     message_type_name(type) + ": " + reader.error());
  return true;
}

template <class... Ms>
DecodedMessage decode_any(std::variant<Ms...>*, uint16_t type, std::span<const uint8_t> payload) {
  DecodedMessage out;
  bool known = (try_decode<Ms>(type, payload, out) || ...);
  if (!known)
    out.status = Status::failure(Errc::protocol, "unknown message type " + std::to_string(type));
  return out;
}

}  // namespace

MessageType message_type(const Message& message) {
  return std::visit([](const auto& m) { return std::decay_t<decltype(m)>::kType; }, message);
}

std::string bounded_reason(std::string text) {
  if (text.size() <= kMaxReasonLength) return text;
  size_t cut = kMaxReasonLength - 3;
  while (cut > 0 && (static_cast<uint8_t>(text[cut]) & 0xC0) == 0x80) --cut;  // a continuation byte
  text.resize(cut);
  return text + "...";
}

const char* message_type_name(uint16_t type) {
  switch (static_cast<MessageType>(type)) {
    case MessageType::hello: return "hello";
    case MessageType::topology_vote: return "topology_vote";
    case MessageType::topology_ready: return "topology_ready";
    case MessageType::pending_query: return "pending_query";
    case MessageType::collective_begin: return "collective_begin";
    case MessageType::collective_end: return "collective_end";
    case MessageType::leave: return "leave";
    case MessageType::welcome: return "welcome";
    case MessageType::topology: return "topology";
    case MessageType::topology_done: return "topology_done";
    case MessageType::pending_count: return "pending_count";
    case MessageType::collective_go: return "collective_go";
    case MessageType::collective_result: return "collective_result";
    case MessageType::kick: return "kick";
    case MessageType::heartbeat: return "heartbeat";
    case MessageType::link_hello: return "link_hello";
    case MessageType::link_welcome: return "link_welcome";
    case MessageType::sync_begin: return "sync_begin";
    case MessageType::sync_plan: return "sync_plan";
    case MessageType::fetch_hello: return "fetch_hello";
    case MessageType::auth_challenge: return "auth_challenge";
    case MessageType::link_challenge: return "link_challenge";
    case MessageType::link_report: return "link_report";
    case MessageType::link_matrix_query: return "link_matrix_query";
    case MessageType::link_matrix: return "link_matrix";
    case MessageType::probe_round: return "probe_round";
    case MessageType::collective_pending: return "collective_pending";
    case MessageType::call_refused: return "call_refused";
    case MessageType::going_away: return "going_away";
    case MessageType::gather_go: return "gather_go";
    case MessageType::probe_done: return "probe_done";
    case MessageType::probe_hello: return "probe_hello";
    case MessageType::relay_hello: return "relay_hello";
    case MessageType::peer_label: return "peer_label";
  }
  return "unknown";
}

std::string label_problem(std::string_view label) {
  if (label.size() > kMaxPeerLabel)
    return "a peer label is at most " + std::to_string(kMaxPeerLabel) + " bytes, got " + std::to_string(label.size());
  for (size_t i = 0; i < label.size(); ++i) {
    const auto c = static_cast<unsigned char>(label[i]);
    if (c < 0x20 || c > 0x7E)
      return "a peer label holds printable ASCII only (0x20..0x7E); byte " + std::to_string(i) + " is 0x" +
             "0123456789abcdef"[c >> 4] + "0123456789abcdef"[c & 15];
  }
  return {};
}

std::vector<uint8_t> encode_message(const Message& message) {
  std::vector<uint8_t> frame(kFrameHeaderBytes);
  ByteWriter writer(frame);
  std::visit([&](const auto& m) { const_cast<std::decay_t<decltype(m)>&>(m).fields(writer); },
             message);
  FrameHeader header;
  header.type = static_cast<uint16_t>(message_type(message));
  header.length = static_cast<uint32_t>(frame.size() - kFrameHeaderBytes);
  auto head = encode_frame_header(header);
  std::copy(head.begin(), head.end(), frame.begin());
  return frame;
}

DecodedMessage decode_message(uint16_t type, std::span<const uint8_t> payload) {
  return decode_any(static_cast<Message*>(nullptr), type, payload);
}

std::vector<SeqRange> seq_ranges(const std::vector<uint32_t>& sorted) {
  std::vector<SeqRange> out;
  for (uint32_t seq : sorted) {
    if (!out.empty() && out.back().first + out.back().count == seq)
      ++out.back().count;
    else
      out.push_back({.first = seq, .count = 1});
  }
  return out;
}

bool in_seq_ranges(const std::vector<SeqRange>& ranges, uint32_t seq) {
  for (const SeqRange& r : ranges)
    if (seq >= r.first && seq - r.first < r.count) return true;
  return false;
}

}  // namespace ferry::wire
