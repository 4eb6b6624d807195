// Shared-state fetches between peers that accept no connection
// (dial_out_only): a holder that accepts nothing dials its fetcher; where
// neither end accepts, the two punch through (net/punch.h); a fetcher that
// accepts nothing dials an open holder. Every peer ends with the same bytes.
#include <catch2/catch.hpp>

#include "harness.h"
#include "shared_state_calls.h"

using namespace ferry::test;

TEST_CASE("shared state: fetched from and by peers that accept no connection, the bytes exact",
          "[shared_state][dial_out_only][punch][tls]") {
  const Wire wire = GENERATE(Wire::plain, Wire::tls);
  CAPTURE(wire_name(wire));
  WireScope scope(wire);
  EmbeddedMaster master;
  // Peers 0 and 2 accept nothing, peer 1 is open.
  //  - First sync: 0 alone holds the state (send-only). 1 fetches from it over connections
  //    0 dials; 2 over connections the two punch.
  //  - Second sync: 1 alone holds the next revision; 0 and 2 dial it.
  const size_t peers = 3;
  std::vector<State> states(peers);
  std::vector<SyncResult> first(peers), second(peers);
  auto outcome = run_peers(peers, [&](size_t i) {
    PeerSettings settings;
    settings.connections = 3;
    settings.dial_out_only = i != 1;
    ferry_comm* comm = create_peer(master.address(), settings);
    grow_group(comm, static_cast<int64_t>(peers));
    State& st = states[i];
    st.fill("model.weight", (9u << 20) / sizeof(float), i == 0 ? 1.0f : 0.0f);  // 9 MiB: three fetch chunks
    st.fill("model.bias", 1000, i == 0 ? 2.0f : 0.0f);
    st.revision = 4;
    first[i] = must_sync(comm, st, i == 0 ? FERRY_SYNC_SEND_ONLY : FERRY_SYNC_RECEIVE_ONLY);
    if (i == 1) st.fill("model.weight", (9u << 20) / sizeof(float), 7.0f);
    st.revision = i == 1 ? 5 : 4;
    second[i] = must_sync(comm, st, i == 1 ? FERRY_SYNC_SEND_ONLY : FERRY_SYNC_RECEIVE_ONLY);
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(outcome) == "");
  for (size_t i = 0; i < peers; ++i) {
    INFO("peer " << i);
    CHECK(states[i].revision == 5);
    CHECK(states[i].tensors["model.weight"] == states[1].tensors["model.weight"]);
    CHECK(states[i].tensors["model.weight"][3] == 10.0f);  // 7 + 3: the second sync's bytes
    CHECK(states[i].tensors["model.bias"][3] == 5.0f);     // 2 + 3: the first sync's bytes
    CHECK(first[i].changed["model.weight"] == (i == 0 ? 0 : 1));
    CHECK(second[i].changed["model.weight"] == (i == 1 ? 0 : 1));
  }
  CHECK(first[0].info.bytes_sent >= 2 * (9u << 20));  // it served both fetchers
  CHECK(first[1].info.bytes_received >= 9u << 20);
  CHECK(first[2].info.bytes_received >= 9u << 20);
  CHECK(second[1].info.bytes_sent >= 2 * (9u << 20));
}
