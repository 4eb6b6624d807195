#include "master/status_json.h"

#include <nlohmann/json.hpp>

#include "master/collective_names.h"
#include "wire/frame.h"

namespace ferry::master {

namespace {

using nlohmann::json;

template <class T>
json optional_value(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

}  // namespace

std::string status_json(const RunView& view, const MasterStats& stats, const RunJournal& journal,
                        const StatusContext& context) {
  // State-clock ms to wall-clock seconds, and ages in seconds.
  auto unix_at = [&](uint64_t at_ms) {
    return context.now_unix - static_cast<double>(view.now_ms - std::min(at_ms, view.now_ms)) / 1000;
  };
  auto age_s = [&](uint64_t at_ms) { return static_cast<double>(view.now_ms - std::min(at_ms, view.now_ms)) / 1000; };

  json doc;
  doc["version"] = 1;
  doc["master"] = {{"listen", context.listen},
                   {"uptime_s", age_s(context.started_ms)},
                   {"now_unix", context.now_unix},
                   {"protocol", wire::kProtocolVersion},
                   {"peers", view.peers.size()},
                   {"connections", view.connections}};
  doc["totals"] = {{"committed", stats.committed},
                   {"aborted", stats.aborted()},
                   {"bytes_reduced", stats.bytes_reduced},
                   {"syncs_committed", stats.syncs_committed},
                   {"sync_bytes_fetched", stats.sync_bytes_fetched},
                   {"joins", stats.joins},
                   {"resumes", stats.resumes},
                   {"left", stats.left},
                   {"lost", stats.lost},
                   {"kicked", stats.kicked}};
  json groups = json::array();
  for (const GroupView& g : view.groups) {
    json in_flight = json::array();
    for (const InFlightView& f : g.in_flight)
      in_flight.push_back({{"seq", f.seq},
                           {"kind", collective_kind_name(f.kind)},
                           {"tag", f.tag},
                           {"bytes", f.bytes},
                           {"phase", f.transferring ? "transfer" : "start"},
                           {"age_s", age_s(f.started_ms)},
                           {"waiting_for", f.waiting_for}});
    json links = json::array();
    // Neither an unreachable pair nor a shared-memory one has figures: the matrix's stand-ins
    // for them (link_matrix.h: 1e12 B/s, RTT 0) would read as measurements.
    for (const LinkView& l : g.links) {
      const bool figures = !l.unreachable && !l.shared_memory;
      links.push_back({{"from", l.from},
                       {"to", l.to},
                       {"bandwidth_Bps", figures ? json(l.bandwidth_Bps) : json(nullptr)},
                       {"rtt_s", figures ? json(l.rtt_s) : json(nullptr)},
                       {"age_s", static_cast<double>(l.age_ms) / 1000},
                       {"unreachable", l.unreachable},
                       {"shared_memory", l.shared_memory}});
    }
    json relayed = json::array();
    for (const auto& hop : g.relayed_hops) relayed.push_back({{"from", hop.from}, {"to", hop.to}, {"relay", hop.relay}});
    groups.push_back({{"id", g.id},
                      {"epoch", g.epoch},
                      {"broken", g.broken},
                      {"shared_revision", optional_value(g.shared_revision)},
                      {"ring", g.ring},
                      {"relayed_hops", std::move(relayed)},
                      {"ring_bottleneck_Bps", optional_value(g.ring_bottleneck_Bps)},
                      {"arrival_bottleneck_Bps", optional_value(g.arrival_bottleneck_Bps)},
                      {"waiting", g.waiting},
                      {"voting", g.voting},
                      {"in_flight", std::move(in_flight)},
                      {"links", std::move(links)}});
  }
  doc["groups"] = std::move(groups);
  json peers = json::array();
  for (const PeerView& p : view.peers)
    peers.push_back({{"id", p.id},
                     {"group", p.group},
                     {"rank", optional_value(p.rank)},
                     {"address", p.address},
                     {"host", p.host},
                     {"state", p.member ? "member" : "joining"},
                     {"joined_unix", unix_at(p.joined_ms)},
                     {"heartbeat_age_s", age_s(p.heard_ms)},
                     {"ring_position", optional_value(p.rank)},
                     {"collectives_ok", p.collectives_ok},
                     {"collectives_failed", p.collectives_failed},
                     {"label", p.label.empty() ? json(nullptr) : json(p.label)}});
  doc["peers"] = std::move(peers);
  json history = json::array();
  for (const CollectiveRecord& r : journal.collectives())
    history.push_back({{"t_unix", unix_at(r.at_ms)},
                       {"group", r.group},
                       {"kind", collective_kind_name(r.kind)},
                       {"result", r.result == Errc::ok ? std::string("ok") : std::string(errc_name(r.result))},
                       {"bytes", r.bytes},
                       {"seconds", static_cast<double>(r.start_ms + r.transfer_ms + r.commit_ms) / 1000}});
  doc["history"] = std::move(history);
  json events = json::array();
  for (const RunEvent& e : journal.events())
    events.push_back({{"t_unix", unix_at(e.at_ms)},
                      {"kind", e.kind},
                      {"group", optional_value(e.group)},
                      {"peer", optional_value(e.peer)},
                      {"text", e.text}});
  doc["events"] = std::move(events);
  // Texts come from the network (kick reasons): replace bytes that are not UTF-8 rather than throw.
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace ferry::master
