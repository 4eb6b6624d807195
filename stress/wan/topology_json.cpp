// The JSON form of a Topology (nlohmann/json, Debian's nlohmann-json3-dev).
//
//   {
//     "comment": "anything; every object may carry \"comment\" and \"source\" (ignored)",
//     "cc": "cubic", "seed": 1, "gso": true,                     optional, as in the spec
//     "defaults": {"rtt": "50ms", "loss": "0", "uplink": "200mbit", "downlink": "none"},
//     "hosts":   [{"name": "use1-a", "region": "us-east", "uplink": "200mbit", "downlink": "200mbit",
//                  "ip": "both", "inbound": "stateful"}],
//     "regions": [{"between": ["us-east", "eu-west"], "rtt": "80ms", "loss": "0.05%"}],
//     "links":   [{"between": ["a", "b"], "rate": "20mbit"}, {"from": "a", "to": "b", "delay": "30ms"}],
//     "blocked": [{"from": "a", "to": "b"}, {"between": ["c", "d"]}]
//   }
//
// A pair's figures come from "defaults", then the "regions" entry of its two regions (the
// same region twice for intra-region pairs), then its "links" entries, each overriding only
// the keys it sets; later entries override earlier ones. "between" sets both directions, rtt
// is split evenly; "from"/"to" one direction, with "delay" (one way). "rate" caps a pair.
// Values take the spec's units (80ms, 0.1%, 200mbit); a bare number is ms for rtt/delay and
// a fraction for loss. A host's "ip" is "v4" (the default), "v6" or "both": the families its
// address(es) are in. A host's "inbound" is "open" (the default), "closed" or "stateful":
// which connections from other hosts it admits (topology.h, InboundPolicy). Unknown keys are refused, so a typo cannot silently mean a default.
#include <nlohmann/json.hpp>

#include <fstream>
#include <initializer_list>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "topology.h"
#include "wan_units.h"

namespace ferry::wan {
namespace {

using nlohmann::json;

class Reader {
 public:
  explicit Reader(std::string source) : where_("topology " + std::move(source) + ": ") {}

  [[noreturn]] void fail(const std::string& what) const { throw std::invalid_argument(where_ + what); }

  void only_keys(const json& obj, const std::string& what, std::initializer_list<const char*> keys) const {
    if (!obj.is_object()) fail(what + " must be an object");
    for (const auto& [key, value] : obj.items()) {
      bool known = key == "comment" || key == "source";
      for (const char* k : keys) known = known || key == k;
      if (known) continue;
      std::string list;
      for (const char* k : keys) list += std::string(list.empty() ? "" : ", ") + k;
      fail(what + ": unknown key '" + key + "' (keys: " + list + ", comment, source)");
    }
  }

  // The value's text for the unit parsers: strings as they are, numbers as JSON prints them.
  std::string text(const json& v, const std::string& what) const {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_number()) return v.dump();
    fail(what + " must be a string with a unit (like 80ms, 0.1%, 200mbit) or a number");
  }

  // Runs a unit parser and names the place on failure.
  template <typename F>
  auto unit(const json& obj, const char* key, const std::string& what, F parse) const {
    try {
      return parse(key, text(obj.at(key), what + "." + key));
    } catch (const std::invalid_argument& e) {
      fail(what + ": " + e.what());
    }
  }

  std::string name(const json& v, const std::string& what) const {
    if (!v.is_string() || v.get<std::string>().empty()) fail(what + " must be a non-empty string");
    return v.get<std::string>();
  }

  // One of a few named values: `what must be "a", "b" or "c", got <the JSON>` otherwise.
  template <typename E>
  E choice(const json& v, const std::string& what, std::initializer_list<std::pair<const char*, E>> options) const {
    std::string list;
    size_t i = 0;
    for (const auto& [name, value] : options) {
      if (v == name) return value;
      const char* sep = i == 0 ? "" : i + 1 == options.size() ? " or " : ", ";
      list += std::string(sep) + "\"" + name + "\"";
      ++i;
    }
    fail(what + " must be " + list + ", got " + v.dump());
  }

  const json& array(const json& doc, const char* key) const {
    static const json kEmpty = json::array();
    if (!doc.contains(key)) return kEmpty;
    if (!doc[key].is_array()) fail(std::string("'") + key + "' must be an array of objects");
    return doc[key];
  }

 private:
  std::string where_;
};

// The keys a pair's figures may set. Returns what the entry says, applied on top of `l`.
// `both_ways`: rtt is allowed (split evenly) and delay means each way.
void apply_figures(const Reader& r, const json& e, const std::string& what, bool both_ways, TopologyLink& l) {
  if (e.contains("rtt") && e.contains("delay")) r.fail(what + ": give rtt or delay, not both");
  if (e.contains("rtt")) {
    if (!both_ways) r.fail(what + ": a one-way entry (from/to) takes delay, not rtt");
    l.delay_ms = r.unit(e, "rtt", what, parse_duration_ms) / 2.0;
  }
  if (e.contains("delay")) l.delay_ms = r.unit(e, "delay", what, parse_duration_ms);
  if (e.contains("loss")) l.loss = r.unit(e, "loss", what, parse_loss);
  if (e.contains("rate")) l.rate_bps = r.unit(e, "rate", what, parse_rate_bps);
}

struct Ends {
  std::string a, b;
  bool both_ways = true;
};

Ends ends(const Reader& r, const json& e, const std::string& what) {
  if (e.contains("between")) {
    if (e.contains("from") || e.contains("to")) r.fail(what + ": give between or from/to, not both");
    const json& b = e["between"];
    if (!b.is_array() || b.size() != 2) r.fail(what + ".between must be a list of two names");
    return {r.name(b[0], what + ".between[0]"), r.name(b[1], what + ".between[1]"), true};
  }
  if (!e.contains("from") || !e.contains("to")) r.fail(what + " needs between: [a, b] or from and to");
  return {r.name(e["from"], what + ".from"), r.name(e["to"], what + ".to"), false};
}

Topology from_document(const json& doc, const std::string& source) {
  const Reader r(source);
  r.only_keys(doc, "the document", {"cc", "seed", "gso", "defaults", "hosts", "regions", "links", "blocked"});
  Topology t;
  t.source = source;
  auto setting = [&](const char* key, auto parse) {
    try {
      return parse(key, r.text(doc[key], key));
    } catch (const std::invalid_argument& e) {
      r.fail(e.what());
    }
  };
  if (doc.contains("cc")) t.base.cc = lower(r.name(doc["cc"], "cc"));
  if (doc.contains("seed")) t.base.seed = setting("seed", parse_uint);
  if (doc.contains("gso")) {
    if (!doc["gso"].is_boolean()) r.fail("gso must be true or false");
    t.base.gso = doc["gso"].get<bool>();
  }

  TopologyLink default_link{t.base.rtt_ms / 2.0, t.base.loss, 0, false};
  uint64_t default_down = 0;
  if (doc.contains("defaults")) {
    const json& d = doc["defaults"];
    r.only_keys(d, "defaults", {"rtt", "delay", "loss", "uplink", "downlink"});
    apply_figures(r, d, "defaults", true, default_link);
    if (d.contains("uplink")) t.base.rate_bps = r.unit(d, "uplink", "defaults", parse_rate_bps);
    if (d.contains("downlink")) default_down = r.unit(d, "downlink", "defaults", parse_rate_bps);
    t.base.rtt_ms = default_link.delay_ms * 2.0;
    t.base.loss = default_link.loss;
  }

  const json& hosts = r.array(doc, "hosts");
  if (hosts.empty()) r.fail("'hosts' must list at least one host");
  if (hosts.size() > 254) r.fail("at most 254 hosts (one /24), got " + std::to_string(hosts.size()));
  for (size_t i = 0; i < hosts.size(); ++i) {
    const json& h = hosts[i];
    std::string what = "hosts[" + std::to_string(i) + "]";
    r.only_keys(h, what, {"name", "region", "uplink", "downlink", "ip", "inbound"});
    if (!h.contains("name")) r.fail(what + " has no name");
    TopologyHost host{r.name(h["name"], what + ".name"), "", t.base.rate_bps, default_down};
    what += " ('" + host.name + "')";
    if (t.host_index(host.name) >= 0) r.fail(what + ": two hosts are named '" + host.name + "'");
    if (!h.contains("region")) r.fail(what + " has no region");
    host.region = r.name(h["region"], what + ".region");
    if (h.contains("uplink")) host.uplink_bps = r.unit(h, "uplink", what, parse_rate_bps);
    if (h.contains("downlink")) host.downlink_bps = r.unit(h, "downlink", what, parse_rate_bps);
    if (h.contains("ip"))
      host.ip = r.choice<IpFamilies>(h["ip"], what + ".ip",
                                     {{"v4", IpFamilies::v4}, {"v6", IpFamilies::v6}, {"both", IpFamilies::both}});
    if (h.contains("inbound"))
      host.inbound = r.choice<InboundPolicy>(
          h["inbound"], what + ".inbound",
          {{"open", InboundPolicy::open}, {"closed", InboundPolicy::closed}, {"stateful", InboundPolicy::stateful}});
    t.hosts.push_back(std::move(host));
  }
  const int n = t.size();
  t.links.assign(static_cast<size_t>(n) * static_cast<size_t>(n), default_link);
  t.base.hosts = n;

  const json& regions = r.array(doc, "regions");
  for (size_t i = 0; i < regions.size(); ++i) {
    std::string what = "regions[" + std::to_string(i) + "]";
    r.only_keys(regions[i], what, {"between", "rtt", "delay", "loss", "rate"});
    const Ends e = ends(r, regions[i], what);
    if (!e.both_ways) r.fail(what + ": regions take between: [a, b]");
    what += " (" + e.a + " <-> " + e.b + ")";
    bool seen_a = false, seen_b = false;
    for (const TopologyHost& h : t.hosts) {
      seen_a = seen_a || h.region == e.a;
      seen_b = seen_b || h.region == e.b;
    }
    if (!seen_a || !seen_b) r.fail(what + ": no host is in region '" + (seen_a ? e.b : e.a) + "'");
    for (int s = 0; s < n; ++s)
      for (int d = 0; d < n; ++d) {
        const std::string& rs = t.hosts[s].region;
        const std::string& rd = t.hosts[d].region;
        if (s != d && ((rs == e.a && rd == e.b) || (rs == e.b && rd == e.a)))
          apply_figures(r, regions[i], what, true, t.link(s, d));
      }
  }

  auto pair = [&](const json& entry, std::string what, std::initializer_list<const char*> keys, auto apply) {
    r.only_keys(entry, what, keys);
    const Ends e = ends(r, entry, what);
    what += " (" + e.a + (e.both_ways ? " <-> " : " -> ") + e.b + ")";
    const int a = t.host_index(e.a);
    const int b = t.host_index(e.b);
    if (a < 0 || b < 0) r.fail(what + ": no host is named '" + (a < 0 ? e.a : e.b) + "'");
    if (a == b) r.fail(what + ": a host is not a pair with itself");
    apply(what, e.both_ways, t.link(a, b));
    if (e.both_ways) apply(what, true, t.link(b, a));
  };
  const json& links = r.array(doc, "links");
  for (size_t i = 0; i < links.size(); ++i)
    pair(links[i], "links[" + std::to_string(i) + "]", {"between", "from", "to", "rtt", "delay", "loss", "rate"},
         [&](const std::string& what, bool both, TopologyLink& l) { apply_figures(r, links[i], what, both, l); });
  const json& blocked = r.array(doc, "blocked");
  for (size_t i = 0; i < blocked.size(); ++i)
    pair(blocked[i], "blocked[" + std::to_string(i) + "]", {"between", "from", "to"},
         [](const std::string&, bool, TopologyLink& l) { l.blocked = true; });

  t.validate();
  return t;
}

}  // namespace

Topology Topology::parse_json(std::string_view text, const std::string& source) {
  json doc;
  try {
    doc = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    // e.what() reads "[json.exception.parse_error.101] parse error at line 3, column 5: ..."
    throw std::invalid_argument("topology " + source + ": not valid JSON: " + e.what());
  }
  return from_document(doc, source);
}

Topology Topology::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("topology " + path + ": cannot be read");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_json(ss.str(), path);
}

}  // namespace ferry::wan
