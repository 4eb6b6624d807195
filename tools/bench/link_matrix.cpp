#include "link_matrix.h"

#include "peer_session.h"

namespace ferry::bench {

using tooling::json_field;
using tooling::json_number;
using tooling::JsonValue;
using tooling::JsonWriter;

namespace {

ferry_link_info blank_info() {
  ferry_link_info info{};
  info.struct_size = sizeof info;
  return info;
}

template <class Value>
void value_or_null(JsonWriter& json, const char* key, bool known, const Value& value) {
  json.key(key);
  if (known) {
    json.value(value);
  } else {
    json.null();
  }
}

void write_end(JsonWriter& json, const char* key, const LinkEnd& end) {
  json.key(key).begin_object();
  value_or_null(json, "rank", end.rank >= 0, end.rank);
  value_or_null(json, "peer_index", end.peer_index >= 0, end.peer_index);
  json.key("peer_id").value(end.peer_id);
  value_or_null(json, "host", !end.host.empty(), end.host);
  json.end_object();
}

// The same keys in the peer's line and in the record.
void write_figures(JsonWriter& json, const LinkMeasurement& link) {
  json.key("goodput_bytes_per_s").value(link.goodput_Bps);
  json.key("delivery_rate_bytes_per_s").value(link.delivery_rate_Bps);
  json.key("rtt_ms").value(link.rtt_ms);
  json.key("retransmit_ratio").value(link.retransmit_ratio);
  json.key("bytes").value(link.bytes);
  json.key("shared_memory").value(link.shared_memory);
  json.key("age_s").value(link.age_s);
  json.key("connections").value(link.connections);
}

}  // namespace

std::vector<LinkMeasurement> query_link_matrix(ferry_comm* comm) {
  // The matrix may grow between the two calls (a report landing); the second
  // call's count is what the master held then, and we keep what fitted.
  std::size_t count = 0;
  must(ferry_comm_link_matrix(comm, nullptr, 0, &count), "ferry_comm_link_matrix");
  std::vector<ferry_link_info> infos(count, blank_info());
  if (count > 0) must(ferry_comm_link_matrix(comm, infos.data(), infos.size(), &count), "ferry_comm_link_matrix");
  if (count < infos.size()) infos.resize(count);
  std::vector<LinkMeasurement> links;
  for (const ferry_link_info& info : infos) {
    LinkMeasurement link;
    link.from.peer_id = info.from_peer;
    link.to.peer_id = info.to_peer;
    link.shared_memory = info.shared_memory != 0;
    link.goodput_Bps = info.goodput_bytes_per_s;
    link.delivery_rate_Bps = info.delivery_rate_bytes_per_s;
    link.rtt_ms = info.rtt_ms;
    link.retransmit_ratio = info.retransmit_ratio;
    link.bytes = info.bytes;
    link.age_s = info.age_s;
    link.connections = info.connections;
    links.push_back(link);
  }
  return links;
}

std::string link_matrix_line(const std::vector<LinkMeasurement>& links) {
  JsonWriter json;
  json.begin_object();
  json.key("link_matrix").begin_array();
  for (const LinkMeasurement& link : links) {
    json.begin_object();
    json.key("from_peer").value(link.from.peer_id);
    json.key("to_peer").value(link.to.peer_id);
    write_figures(json, link);
    json.end_object();
  }
  json.end_array();
  json.end_object();
  return json.str();
}

std::optional<std::vector<LinkMeasurement>> parse_link_matrix_line(const JsonValue& line) {
  const JsonValue* entries = line.find("link_matrix");
  if (entries == nullptr) return std::nullopt;
  if (entries->kind != JsonValue::Kind::array) throw tooling::JsonFieldError("'link_matrix' is not a list");
  std::vector<LinkMeasurement> links;
  for (const JsonValue& entry : entries->items) {
    LinkMeasurement link;
    link.from.peer_id = static_cast<std::uint64_t>(json_number(entry, "from_peer"));
    link.to.peer_id = static_cast<std::uint64_t>(json_number(entry, "to_peer"));
    link.shared_memory = json_field(entry, "shared_memory", JsonValue::Kind::boolean).boolean;
    link.goodput_Bps = json_number(entry, "goodput_bytes_per_s");
    link.delivery_rate_Bps = json_number(entry, "delivery_rate_bytes_per_s");
    link.rtt_ms = json_number(entry, "rtt_ms");
    link.retransmit_ratio = json_number(entry, "retransmit_ratio");
    link.bytes = static_cast<std::uint64_t>(json_number(entry, "bytes"));
    link.age_s = json_number(entry, "age_s");
    link.connections = static_cast<std::uint32_t>(json_number(entry, "connections"));
    links.push_back(link);
  }
  return links;
}

void name_link_ends(std::vector<LinkMeasurement>& links, const LinkEndsById& ends) {
  for (LinkMeasurement& link : links) {
    for (LinkEnd* end : {&link.from, &link.to}) {
      if (const auto known = ends.find(end->peer_id); known != ends.end()) *end = known->second;
    }
  }
}

void write_link_matrix(JsonWriter& json, const std::vector<LinkMeasurement>& links) {
  json.key("link_matrix").begin_array();
  for (const LinkMeasurement& link : links) {
    json.newline(4).begin_object();
    write_end(json, "from", link.from);
    write_end(json, "to", link.to);
    write_figures(json, link);
    json.end_object();
  }
  json.end_array();
}

}  // namespace ferry::bench
