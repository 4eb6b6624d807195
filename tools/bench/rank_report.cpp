#include "rank_report.h"

#include <functional>
#include <stdexcept>

#include "json.h"  // tools/common

namespace ferry::bench {

using tooling::for_each_json_line;
using tooling::json_field;
using tooling::json_number;
using tooling::json_numbers;
using tooling::json_strings;
using tooling::JsonValue;
using tooling::JsonWriter;

namespace {

RankReport parse_ferry(const JsonValue& line) {
  RankReport report;
  report.peer_index = static_cast<int>(json_number(line, "peer_index"));
  report.rank = static_cast<int>(json_number(line, "rank"));
  report.peer_id = static_cast<std::uint64_t>(json_number(line, "peer_id"));
  report.world = static_cast<int>(json_number(line, "world"));
  report.bytes = static_cast<std::size_t>(json_number(line, "bytes"));
  report.times_s = json_numbers(line, "times_s");
  for (const double sent : json_numbers(line, "bytes_sent")) report.bytes_sent.push_back(static_cast<std::uint64_t>(sent));
  report.agreement_s = json_numbers(line, "agreement_s");
  report.cpu_s = json_number(line, "cpu_s");
  report.shared_memory_lanes = static_cast<int>(json_number(line, "shared_memory_lanes"));
  report.next_link_relay = static_cast<std::uint64_t>(json_number(line, "next_link_relay"));
  report.relayed_bytes = static_cast<std::uint64_t>(json_number(line, "relayed_bytes"));
  report.hashes = json_strings(line, "hashes");
  report.correct = json_field(line, "correct", JsonValue::Kind::boolean).boolean;
  return report;
}

RankReport parse_gloo(const JsonValue& line) {
  RankReport report;
  report.rank = static_cast<int>(json_number(line, "rank"));
  report.peer_index = report.rank;
  report.world = static_cast<int>(json_number(line, "world"));
  report.bytes = static_cast<std::size_t>(json_number(line, "bytes"));
  report.times_s = json_numbers(line, "times_s");
  report.hashes.push_back(json_field(line, "result_hash", JsonValue::Kind::string).string);
  report.correct = json_field(line, "correct", JsonValue::Kind::boolean).boolean;
  // Optional: older ferry-gloo-bench builds did not print it.
  if (const JsonValue* cpu = line.find("cpu_s"); cpu != nullptr && cpu->kind == JsonValue::Kind::number) {
    report.cpu_s = cpu->number;
  }
  return report;
}

std::vector<RankReport> parse_lines(const std::string& out, const std::string& who,
                                    const std::function<RankReport(const JsonValue&)>& parse_one) {
  std::vector<RankReport> reports;
  for_each_json_line(out, who, [&](const JsonValue& line) {
    if (line.find("link_matrix") == nullptr) reports.push_back(parse_one(line));
  });
  return reports;
}

}  // namespace

std::string ferry_report_line(const BenchArgs& args, const RankReport& report) {
  JsonWriter json;
  json.begin_object();
  json.key("impl").value("ferry");
  json.key("peer_index").value(report.peer_index);
  json.key("rank").value(report.rank);
  json.key("peer_id").value(report.peer_id);
  json.key("world").value(report.world);
  json.key("bytes").value(static_cast<std::uint64_t>(report.bytes));
  json.key("dtype").value(elem_type_name(args.dtype));
  json.key("op").value(reduce_kind_name(args.op));
  json.key("connections").value(args.connections);
  json.key("concurrent").value(args.concurrent);
  json.key("times_s").begin_array();
  for (const double t : report.times_s) json.value(t);
  json.end_array();
  json.key("bytes_sent").begin_array();
  for (const std::uint64_t sent : report.bytes_sent) json.value(sent);
  json.end_array();
  json.key("agreement_s").begin_array();
  for (const double s : report.agreement_s) json.value(s);
  json.end_array();
  json.key("cpu_s").value(report.cpu_s.value_or(0.0));
  json.key("shared_memory_lanes").value(report.shared_memory_lanes.value_or(0));
  json.key("next_link_relay").value(report.next_link_relay);
  json.key("relayed_bytes").value(report.relayed_bytes);
  json.key("hashes").begin_array();
  for (const std::string& hash : report.hashes) json.value(hash);
  json.end_array();
  json.key("correct").value(report.correct);
  json.end_object();
  return json.str();
}

std::vector<RankReport> parse_ferry_reports(const std::string& out, const std::string& who) {
  return parse_lines(out, who, parse_ferry);
}

std::vector<RankReport> parse_gloo_reports(const std::string& out, const std::string& who) {
  return parse_lines(out, who, parse_gloo);
}

}  // namespace ferry::bench
