// What the master shows the people watching a run (run_view.h, status_json.h,
// master_metrics.h), fed message by message like its other unit tests.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "master/master_metrics.h"
#include "master/status_json.h"
#include "master_fixture.h"

using namespace ferry;
using namespace ferry::master;
using namespace ferry::master::testing;
using nlohmann::json;

namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

}  // namespace

TEST_CASE("master status: the view names the ring, the joiners and whom a collective waits for in each phase",
          "[master][status]") {
  Fixture f;
  f.ring_of(3);
  const std::vector<PeerId> ring = f.state.ring(0);
  const PeerId joiner = f.join(4);
  const uint64_t epoch = f.state.epoch(0);

  f.state.advance_clock(1000);
  f.state.on_message(1, begin(epoch, 0));
  f.state.on_message(2, begin(epoch, 0));
  f.step();
  RunView view = f.state.view();
  REQUIRE(view.groups.size() == 1);
  const GroupView& g = view.groups[0];
  CHECK(g.ring == ring);
  CHECK(g.waiting == std::vector<uint64_t>{joiner});
  REQUIRE(g.in_flight.size() == 1);
  CHECK_FALSE(g.in_flight[0].transferring);
  CHECK(g.in_flight[0].waiting_for == std::vector<uint64_t>{ring[2]});  // the member that has not begun
  CHECK(g.in_flight[0].bytes == 10 * 4);                                // count 10 of f32

  f.state.advance_clock(1250);
  f.state.on_message(3, begin(epoch, 0));  // the go
  f.state.advance_clock(3250);
  f.state.on_message(1, CollectiveEnd{epoch, 0, 0, ""});
  f.state.on_message(3, CollectiveEnd{epoch, 0, 0, ""});
  f.step();
  view = f.state.view();
  REQUIRE(view.groups[0].in_flight.size() == 1);
  CHECK(view.groups[0].in_flight[0].transferring);
  CHECK(view.groups[0].in_flight[0].waiting_for == std::vector<uint64_t>{ring[1]});  // the member that has not ended

  f.state.on_message(2, CollectiveEnd{epoch, 0, 0, ""});
  f.step();
  view = f.state.view();
  CHECK(view.groups[0].in_flight.empty());
  for (const PeerView& p : view.peers) {
    CAPTURE(p.id);
    if (p.id == joiner) {
      CHECK_FALSE(p.member);
      CHECK_FALSE(p.rank);
      CHECK(p.collectives_ok == 0);
    } else {
      CHECK(p.member);
      REQUIRE(p.rank);
      CHECK(ring[*p.rank] == p.id);
      CHECK(p.collectives_ok == 1);
      CHECK(p.address == "10.0.0." + std::to_string(p.id == ring[0] ? 1 : p.id == ring[1] ? 2 : 3) + ":" +
                             std::to_string(5000 + (p.id == ring[0] ? 1 : p.id == ring[1] ? 2 : 3)));
    }
  }
  const CollectiveRecord& record = f.state.journal().collectives().back();
  CHECK(record.result == Errc::ok);
  CHECK(record.start_ms == 250);
  CHECK(record.transfer_ms == 2000);
  CHECK(record.commit_ms == 0);
}

TEST_CASE("master status: the JSON document has the totals, the history and the events of what happened",
          "[master][status]") {
  Fixture f;
  f.ring_of(3);
  const std::vector<PeerId> ring = f.state.ring(0);
  uint64_t epoch = f.state.epoch(0);
  f.all_begin(epoch, 0, 3);
  for (ConnId c = 1; c <= 3; ++c) f.state.on_message(c, CollectiveEnd{epoch, 0, 0, ""});
  f.step();
  // A collective in flight when a member is kicked: it aborts for the others.
  f.state.on_message(1, begin(epoch, 1));
  f.state.on_message(2, Hello{});  // a second hello: a protocol violation
  f.step();
  REQUIRE(f.closed(2));

  StatusContext context{"[::]:48148", 1'764'280'000.0, 0};
  const json doc = json::parse(status_json(f.state.view(), f.state.stats(), f.state.journal(), context));
  CHECK(doc["version"] == 1);
  CHECK(doc["master"]["listen"] == "[::]:48148");
  CHECK(doc["master"]["peers"] == 2);
  CHECK(doc["totals"]["committed"] == 1);
  CHECK(doc["totals"]["aborted"] == 1);
  CHECK(doc["totals"]["joins"] == 3);
  CHECK(doc["totals"]["kicked"] == 1);
  REQUIRE(doc["groups"].size() == 1);
  CHECK(doc["groups"][0]["ring"].size() == 2);
  CHECK(doc["groups"][0]["broken"] == true);
  CHECK(doc["groups"][0]["ring_bottleneck_Bps"].is_null());  // no link measured
  REQUIRE(doc["history"].size() == 2);
  CHECK(doc["history"][0]["kind"] == "all_reduce");
  CHECK(doc["history"][0]["result"] == "ok");
  CHECK(doc["history"][1]["result"] == errc_name(Errc::peer_lost));
  std::vector<std::string> kinds;
  bool kick_named = false;
  for (const json& e : doc["events"]) {
    kinds.push_back(e["kind"]);
    if (e["kind"] == "kick") {
      kick_named = e["peer"] == ring[1] && e["text"].get<std::string>().find("second hello") != std::string::npos;
    }
    CHECK(e["t_unix"].get<double>() <= context.now_unix);
  }
  CHECK(kick_named);
  CHECK(std::count(kinds.begin(), kinds.end(), "join") == 3);
  CHECK(std::count(kinds.begin(), kinds.end(), "epoch") >= 2);
  CHECK(std::count(kinds.begin(), kinds.end(), "abort") == 1);
  CHECK(std::count(kinds.begin(), kinds.end(), "kick") == 1);
}

TEST_CASE("master status: the metrics count collectives by group, kind and result, with phase histograms",
          "[master][status]") {
  Fixture f;
  f.ring_of(2);
  uint64_t epoch = f.state.epoch(0);
  f.state.advance_clock(10'000);
  f.all_begin(epoch, 0, 2);
  f.state.advance_clock(12'000);  // 2 s of transfer
  for (ConnId c = 1; c <= 2; ++c) f.state.on_message(c, CollectiveEnd{epoch, 0, 0, ""});
  f.all_begin(epoch, 1, 2);
  f.state.on_message(1, CollectiveEnd{epoch, 1, static_cast<uint32_t>(Errc::timeout), "stalled"});
  f.step();

  const std::string text = metrics_text(f.state.view(), f.state.stats());
  CAPTURE(text);
  CHECK(has_line(text, "# TYPE ferry_master_collectives_total counter"));
  CHECK(has_line(text, "ferry_master_collectives_total{group=\"0\",kind=\"all_reduce\",result=\"ok\"} 1"));
  CHECK(has_line(text, "ferry_master_collectives_total{group=\"0\",kind=\"all_reduce\",result=\"" +
                           std::string(errc_name(Errc::timeout)) + "\"} 1"));
  CHECK(has_line(text, "# TYPE ferry_master_collective_phase_seconds histogram"));
  CHECK(has_line(text, "ferry_master_collective_phase_seconds_count{phase=\"transfer\"} 1"));
  CHECK(has_line(text, "ferry_master_collective_phase_seconds_bucket{phase=\"transfer\",le=\"1\"} 0"));
  CHECK(has_line(text, "ferry_master_collective_phase_seconds_bucket{phase=\"transfer\",le=\"2.5\"} 1"));
  CHECK(has_line(text, "ferry_master_collective_phase_seconds_bucket{phase=\"transfer\",le=\"+Inf\"} 1"));
  CHECK(has_line(text, "ferry_master_peers{group=\"0\",state=\"member\"} 2"));
  CHECK(has_line(text, "ferry_master_bytes_reduced_total 40"));
  CHECK(has_line(text, "ferry_master_joins_total 2"));
  CHECK(text.find("process_resident_memory_bytes ") != std::string::npos);
}

TEST_CASE("master status: the journal keeps the last events and collectives only", "[master][status]") {
  RunJournal journal;
  for (uint64_t i = 0; i < 1000; ++i) {
    journal.event(i, "join", 0, i, std::string(2000, 'x'));
    journal.collective(CollectiveRecord{i});
  }
  REQUIRE(journal.events().size() == RunJournal::kMaxEvents);
  CHECK(journal.events().front().at_ms == 1000 - RunJournal::kMaxEvents);
  CHECK(journal.events().back().text.size() <= 512);
  REQUIRE(journal.collectives().size() == RunJournal::kMaxCollectives);
  CHECK(journal.collectives().back().at_ms == 999);
}

TEST_CASE("master status: the ring's bottleneck is its slowest measured hop, and shared memory never is one",
          "[master][status]") {
  Fixture f;
  f.ring_of(3);
  const std::vector<PeerId> ring = f.state.ring(0);
  auto report = [&](ConnId conn, PeerId from, PeerId to, uint64_t goodput, uint8_t shared_memory = 0) {
    LinkEntry e;
    e.from_peer = from;
    e.to_peer = to;
    e.goodput_bps = goodput;
    e.shared_memory = shared_memory;
    e.rtt_us = 2000;
    f.state.on_message(conn, LinkReport{{e}});
  };
  auto conn_of = [&](PeerId id) { return static_cast<ConnId>(std::find(ring.begin(), ring.end(), id) - ring.begin() + 1); };
  report(conn_of(ring[0]), ring[0], ring[1], 100'000'000);
  report(conn_of(ring[1]), ring[1], ring[2], 50'000'000);
  CHECK_FALSE(f.state.view().groups[0].ring_bottleneck_Bps);  // a hop not measured yet
  report(conn_of(ring[2]), ring[2], ring[0], 80'000'000);
  RunView view = f.state.view();
  REQUIRE(view.groups[0].ring_bottleneck_Bps);
  CHECK(*view.groups[0].ring_bottleneck_Bps == 50'000'000);
  REQUIRE(view.groups[0].links.size() == 3);
  CHECK(view.groups[0].links[0].rtt_s == Approx(0.002));

  report(conn_of(ring[1]), ring[1], ring[2], 0, /*shared_memory=*/1);
  view = f.state.view();
  REQUIRE(view.groups[0].ring_bottleneck_Bps);
  CHECK(*view.groups[0].ring_bottleneck_Bps == 80'000'000);
  const std::string text = metrics_text(view, f.state.stats());
  CHECK(has_line(text, "ferry_master_ring_bottleneck_bytes_per_second{group=\"0\",order=\"chosen\"} 80000000"));
  CHECK(text.find("ferry_master_link_shared_memory{from=\"" + std::to_string(ring[1])) != std::string::npos);
  // /status gives a shared-memory pair no figures: the matrix's stand-ins (1e12 B/s, RTT 0) are no measurements.
  const json doc = json::parse(status_json(view, f.state.stats(), f.state.journal(), StatusContext{}));
  size_t shared_links = 0;
  for (const json& l : doc["groups"][0]["links"]) {
    if (!l["shared_memory"].get<bool>()) continue;
    ++shared_links;
    CHECK(l["bandwidth_Bps"].is_null());
    CHECK(l["rtt_s"].is_null());
  }
  CHECK(shared_links == 1);
}

TEST_CASE("master status: a group's gauges drop to 0 when its last peer leaves, rather than vanish", "[master][status]") {
  Fixture f;
  f.ring_of(2);
  CHECK(has_line(metrics_text(f.state.view(), f.state.stats()), "ferry_master_peers{group=\"0\",state=\"member\"} 2"));
  for (ConnId c = 1; c <= 2; ++c) f.state.on_message(c, Leave{});
  f.step();
  REQUIRE(f.state.view().groups.empty());
  const std::string text = metrics_text(f.state.view(), f.state.stats());
  CHECK(has_line(text, "ferry_master_peers{group=\"0\",state=\"member\"} 0"));
  CHECK(has_line(text, "ferry_master_peers{group=\"0\",state=\"joining\"} 0"));
  CHECK(has_line(text, "ferry_master_ring_size{group=\"0\"} 0"));
  CHECK(has_line(text, "ferry_master_collectives_in_flight{group=\"0\"} 0"));
}

TEST_CASE("master status: a peer's label is shown beside it, changes nothing else, and a bad one is a violation",
          "[master][status]") {
  Fixture f;
  f.ring_of(2);
  const PeerId joiner = f.join(3);
  const uint64_t epoch = f.state.epoch(0);
  f.state.on_message(1, PeerLabel{"outer 4: 97 steps, share 26%"});
  f.state.on_message(3, PeerLabel{"waiting"});  // a joiner may label itself too
  f.step();
  CHECK(f.last.sends.empty());  // fire and forget: nothing answers a label
  CHECK(f.state.epoch(0) == epoch);
  json doc = json::parse(status_json(f.state.view(), f.state.stats(), f.state.journal(), StatusContext{}));
  std::map<uint64_t, json> labels;
  for (const json& p : doc["peers"]) labels[p["id"].get<uint64_t>()] = p["label"];
  REQUIRE(labels.size() == 3);
  size_t shown = 0, none = 0;
  for (const auto& [id, label] : labels) {
    if (label.is_null()) ++none;
    else if (label == "outer 4: 97 steps, share 26%" || (id == joiner && label == "waiting")) ++shown;
  }
  CHECK(shown == 2);
  CHECK(none == 1);

  f.state.on_message(1, PeerLabel{""});  // empty: no label again
  f.step();
  doc = json::parse(status_json(f.state.view(), f.state.stats(), f.state.journal(), StatusContext{}));
  size_t labelled = 0;
  for (const json& p : doc["peers"]) labelled += !p["label"].is_null();
  CHECK(labelled == 1);

  f.state.on_message(2, PeerLabel{"two\nlines"});
  f.step();
  REQUIRE(f.closed(2));
  CHECK(f.kick_of(2).reason.find("printable ASCII") != std::string::npos);
}
