// Topology files: the shipped examples say what the issue asks of them, the spec is the
// uniform special case, and a malformed file is refused naming the place at fault.
#include <catch2/catch.hpp>
#include <stdexcept>
#include <string>

#include "topology.h"

using ferry::wan::Topology;
using ferry::wan::WanConfig;
using ferry::wan::InboundPolicy;
using ferry::wan::IpFamilies;

namespace {

std::string shipped(const char* name) { return std::string(FERRY_WAN_TOPOLOGY_DIR) + "/" + name; }

// The message a malformed document is refused with.
std::string refusal(const std::string& text) {
  try {
    Topology::parse_json(text, "t.json");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  FAIL("accepted: " << text);
  return "";
}

const char* kHosts = R"("hosts": [{"name": "a", "region": "x"}, {"name": "b", "region": "x"}, {"name": "c", "region": "y"}])";

}  // namespace

TEST_CASE("a spec is the uniform topology", "[wan][topology]") {
  const WanConfig c = WanConfig::parse("hosts=3,rtt=40ms,loss=0.1%,rate=100mbit");
  const Topology t = Topology::uniform(c);
  REQUIRE(t.size() == 3);
  for (int s = 0; s < 3; ++s)
    for (int d = 0; d < 3; ++d)
      if (s != d) {
        CHECK(t.rtt_ms(s, d) == 40.0);
        CHECK(t.link(s, d).loss == Approx(0.001));
        CHECK(t.link(s, d).rate_bps == 0u);
        CHECK_FALSE(t.link(s, d).blocked);
      }
  CHECK(t.hosts[2].uplink_bps == 100'000'000u);
  CHECK(t.hosts[2].downlink_bps == 0u);
  // Same tbf and packet store as the spec had before topologies existed.
  CHECK(t.uplink_limit_bytes(0) == c.tbf_limit_bytes());
  CHECK(t.uplink_burst_bytes(0) == c.tbf_burst_bytes());
  CHECK(t.packet_store_bytes() == static_cast<uint64_t>(2.0 * 3 * 100e6 / 8 * 0.020 + 4.0 * 1024 * 1024));
}

TEST_CASE("three-regions has two hosts per region and public-cloud RTTs", "[wan][topology]") {
  const Topology t = Topology::load(shipped("three-regions.json"));
  REQUIRE(t.size() == 6);
  auto rtt = [&](const char* a, const char* b) { return t.rtt_ms(t.host_index(a), t.host_index(b)); };
  CHECK(rtt("use1-a", "use1-b") == Approx(2.0));
  CHECK(rtt("use1-a", "euw1-a") == Approx(80.0));
  CHECK(rtt("euw1-b", "apse1-a") == Approx(155.0));
  CHECK(rtt("apse1-b", "use1-b") == Approx(230.0));
  for (int s = 0; s < 6; ++s)
    for (int d = 0; d < 6; ++d)
      if (s != d) {
        CHECK(t.link(s, d).loss >= 0.0001);
        CHECK(t.link(s, d).loss <= 0.001);
      }
  CHECK(t.hosts[t.host_index("use1-a")].uplink_bps == 200'000'000u);
  CHECK(t.hosts[t.host_index("apse1-b")].uplink_bps == 100'000'000u);
}

TEST_CASE("one-slow-pair caps one pair and firewalled blocks one direction", "[wan][topology]") {
  const Topology slow = Topology::load(shipped("one-slow-pair.json"));
  REQUIRE(slow.size() == 4);
  int capped = 0;
  for (int s = 0; s < 4; ++s)
    for (int d = 0; d < 4; ++d)
      if (s != d && slow.link(s, d).rate_bps != 0) {
        ++capped;
        CHECK(slow.link(s, d).rate_bps == 20'000'000u);
      }
  CHECK(capped == 2);  // one pair, both directions
  for (const auto& h : slow.hosts) CHECK(h.uplink_bps == 200'000'000u);

  const Topology fw = Topology::load(shipped("firewalled.json"));
  REQUIRE(fw.size() == 4);
  int blocked = 0;
  for (int s = 0; s < 4; ++s)
    for (int d = 0; d < 4; ++d) blocked += s != d && fw.link(s, d).blocked;
  CHECK(blocked == 1);
}

TEST_CASE("mixed-families gives each host its families, and the v4-only and v6-only pair none in common",
          "[wan][topology]") {
  const Topology t = Topology::load(shipped("mixed-families.json"));
  REQUIRE(t.size() == 4);
  const int dual_a = t.host_index("dual-a"), v4 = t.host_index("v4-only"), v6 = t.host_index("v6-only");
  CHECK(t.hosts[dual_a].ip == IpFamilies::both);
  CHECK(t.hosts[v4].ip == IpFamilies::v4);
  CHECK(t.hosts[v6].ip == IpFamilies::v6);
  CHECK_FALSE(t.can_address(v4, v6));
  CHECK_FALSE(t.can_address(v6, v4));
  CHECK(t.can_address(v4, dual_a));
  CHECK(t.can_address(dual_a, v6));
  CHECK(t.describe().find("v4-only <-> v6-only: rtt 20 ms, loss 0% / 0%, no address family in common") !=
        std::string::npos);
  // Without "ip", a host is IPv4 only, as before.
  for (const auto& h : Topology::load(shipped("one-slow-pair.json")).hosts) CHECK(h.ip == IpFamilies::v4);
}

TEST_CASE("a host's inbound policy is open unless the file says closed or stateful", "[wan][topology]") {
  const Topology t = Topology::parse_json(R"({"hosts": [
      {"name": "a", "region": "x"}, {"name": "b", "region": "x", "inbound": "closed"},
      {"name": "c", "region": "x", "inbound": "stateful"}, {"name": "d", "region": "x", "inbound": "open"}]})",
                                          "t.json");
  CHECK(t.hosts[0].inbound == InboundPolicy::open);
  CHECK(t.hosts[1].inbound == InboundPolicy::closed);
  CHECK(t.hosts[2].inbound == InboundPolicy::stateful);
  CHECK(t.hosts[3].inbound == InboundPolicy::open);
  CHECK(t.count_inbound(InboundPolicy::open) == 2);
  const std::string text = t.describe();
  CHECK_THAT(text, Catch::StartsWith("topology t.json: 4 hosts (1 closed, 1 stateful), cc cubic\n"));
  CHECK_THAT(text, Catch::Contains("b ") && Catch::Contains("inbound closed\n") && Catch::Contains("inbound stateful\n"));
  CHECK_THAT(text, !Catch::Contains("inbound open"));
  // A spec's hosts, and those of every file without the key, are open.
  for (const auto& h : Topology::uniform(WanConfig::parse("hosts=3")).hosts) CHECK(h.inbound == InboundPolicy::open);
  CHECK_THAT(Topology::uniform(WanConfig::parse("hosts=3")).describe(), !Catch::Contains("closed"));
  for (const auto& h : Topology::load(shipped("firewalled.json")).hosts) CHECK(h.inbound == InboundPolicy::open);
}

TEST_CASE("two-closed, three-closed and all-stateful are issue 37's networks", "[wan][topology]") {
  struct Expect {
    const char* file;
    int open, closed, stateful;
  };
  for (const Expect& e : {Expect{"two-closed.json", 2, 2, 0}, Expect{"three-closed.json", 2, 3, 0},
                          Expect{"all-stateful.json", 1, 0, 4}}) {
    INFO(e.file);
    const Topology t = Topology::load(shipped(e.file));
    CHECK(t.count_inbound(InboundPolicy::open) == e.open);
    CHECK(t.count_inbound(InboundPolicy::closed) == e.closed);
    CHECK(t.count_inbound(InboundPolicy::stateful) == e.stateful);
    CHECK(t.size() == e.open + e.closed + e.stateful);
    for (const auto& h : t.hosts) {
      CHECK(h.uplink_bps == 100'000'000u);
      CHECK(h.ip == IpFamilies::v4);
    }
    for (int s = 0; s < t.size(); ++s)
      for (int d = 0; d < t.size(); ++d)
        if (s != d) {
          CHECK(t.rtt_ms(s, d) == Approx(40.0));
          CHECK(t.link(s, d).loss == 0.0);
          CHECK_FALSE(t.link(s, d).blocked);  // the policies alone say who is reachable
        }
  }
}

TEST_CASE("pair figures come from defaults, then regions, then links", "[wan][topology]") {
  const Topology t = Topology::parse_json(std::string(R"({
      "defaults": {"rtt": "50ms", "loss": "0.1%", "uplink": "100mbit", "downlink": "50mbit"},)") +
                                              kHosts + R"(,
      "regions": [{"between": ["x", "x"], "rtt": 2}, {"between": ["x", "y"], "rtt": "80ms", "loss": 0}],
      "links": [{"from": "a", "to": "c", "delay": "30ms", "rate": "20mbit"}],
      "blocked": [{"between": ["b", "c"]}]})",
                                          "t.json");
  const int a = t.host_index("a"), b = t.host_index("b"), c = t.host_index("c");
  CHECK(t.rtt_ms(a, b) == 2.0);
  CHECK(t.link(a, b).loss == Approx(0.001));  // the region entry does not set loss
  CHECK(t.link(a, c).delay_ms == 30.0);
  CHECK(t.link(c, a).delay_ms == 40.0);
  CHECK(t.link(a, c).rate_bps == 20'000'000u);
  CHECK(t.link(c, a).rate_bps == 0u);
  CHECK(t.link(b, c).loss == 0.0);
  CHECK(t.link(b, c).blocked);
  CHECK(t.link(c, b).blocked);
  CHECK_FALSE(t.link(a, c).blocked);
  CHECK(t.hosts[c].uplink_bps == 100'000'000u);
  CHECK(t.hosts[c].downlink_bps == 50'000'000u);
}

TEST_CASE("malformed topologies are refused naming the place at fault", "[wan][topology]") {
  const std::string h = kHosts;
  // A syntax error: the JSON library's line and column.
  CHECK_THAT(refusal("{\n  \"hosts\": [\n    {\"name\": \"a\",}\n  ]\n}"),
             Catch::Contains("t.json") && Catch::Contains("line 3"));
  CHECK_THAT(refusal("{\"hosts\": [{\"name\": \"a\", \"region\": \"x\", \"uplnk\": \"1mbit\"}]}"),
             Catch::Contains("hosts[0]") && Catch::Contains("unknown key 'uplnk'"));
  CHECK_THAT(refusal("{\"hosts\": [{\"name\": \"a\", \"region\": \"x\", \"uplink\": \"200mbps\"}]}"),
             Catch::Contains("hosts[0] ('a')") && Catch::Contains("uplink"));
  CHECK_THAT(refusal("{\"hosts\": [{\"name\": \"a\"}]}"), Catch::Contains("hosts[0] ('a') has no region"));
  CHECK_THAT(refusal("{\"hosts\": [{\"name\": \"a\", \"region\": \"x\", \"ip\": \"v5\"}]}"),
             Catch::Contains("hosts[0] ('a').ip must be \"v4\", \"v6\" or \"both\", got \"v5\""));
  CHECK_THAT(refusal("{\"hosts\": [{\"name\": \"a\", \"region\": \"x\", \"inbound\": \"nat\"}]}"),
             Catch::Contains("hosts[0] ('a').inbound must be \"open\", \"closed\" or \"stateful\", got \"nat\""));
  CHECK_THAT(refusal("{\"hosts\": [{\"name\": \"a\", \"region\": \"x\", \"inbound\": false}]}"),
             Catch::Contains("hosts[0] ('a').inbound must be") && Catch::Contains("got false"));
  CHECK_THAT(refusal("{\"hosts\": [{\"name\": \"a\", \"region\": \"x\", \"inbound\": \"Closed\"}]}"),
             Catch::Contains("got \"Closed\""));
  CHECK_THAT(refusal("{" + h + ", \"defaults\": {\"inbound\": \"closed\"}}"),
             Catch::Contains("defaults: unknown key 'inbound'"));
  CHECK_THAT(refusal("{\"hosts\": [{\"name\": \"a\", \"region\": \"x\"}, {\"name\": \"a\", \"region\": \"x\"}]}"),
             Catch::Contains("two hosts are named 'a'"));
  CHECK_THAT(refusal("{" + h + ", \"links\": [{\"from\": \"a\", \"to\": \"zz\", \"delay\": 5}]}"),
             Catch::Contains("links[0] (a -> zz)") && Catch::Contains("no host is named 'zz'"));
  CHECK_THAT(refusal("{" + h + ", \"links\": [{\"between\": [\"a\", \"b\"], \"loss\": \"5\"}]}"),
             Catch::Contains("links[0] (a <-> b)") && Catch::Contains("loss"));
  CHECK_THAT(refusal("{" + h + ", \"links\": [{\"from\": \"a\", \"to\": \"b\", \"rtt\": \"5ms\"}]}"),
             Catch::Contains("links[0] (a -> b)") && Catch::Contains("takes delay, not rtt"));
  CHECK_THAT(refusal("{" + h + ", \"regions\": [{\"between\": [\"x\", \"mars\"], \"rtt\": \"5ms\"}]}"),
             Catch::Contains("regions[0] (x <-> mars)") && Catch::Contains("no host is in region 'mars'"));
  CHECK_THAT(refusal("{" + h + ", \"blocked\": [{\"from\": \"a\", \"to\": \"a\"}]}"),
             Catch::Contains("blocked[0] (a -> a)"));
  CHECK_THAT(refusal("{" + h + ", \"defaults\": {\"rtt\": \"-3ms\"}}"), Catch::Contains("defaults") && Catch::Contains("rtt"));
  CHECK_THAT(refusal("{" + h + ", \"cc\": \"cu bic\"}"), Catch::Contains("cc"));
  CHECK_THAT(refusal("{\"hosts\": []}"), Catch::Contains("at least one host"));
  CHECK_THAT(refusal("[1, 2]"), Catch::Contains("the document must be an object"));
  CHECK_THAT(refusal("{" + h + ", \"link\": []}"), Catch::Contains("unknown key 'link'"));
  CHECK_THROWS_WITH(Topology::load("/nonexistent/t.json"), Catch::Contains("/nonexistent/t.json: cannot be read"));
}
