// HashedState::of takes block hashes computed elsewhere (a device tensor's,
// hashed on its device): the same content hash as hashing the bytes here, and
// a mismatched count of blocks is ferry's bug, never a wrong hash.
#include <catch2/catch.hpp>

#include <vector>

#include "core/content_hash.h"
#include "peer/shared_state_sync.h"

using ferry::peer::HashedState;
using ferry::peer::SyncSpec;

TEST_CASE("shared state: block hashes given for a tensor give the content hash of its bytes", "[shared_state][unit]") {
  std::vector<float> big((ferry::kContentHashBlock / sizeof(float)) + 11, 0.25f), small(7, -1.0f);
  big[3] = 2.0f;
  SyncSpec plain;
  plain.tensors.push_back({"a.big", big.data(), big.size(), ferry::DType::f32, false});
  plain.tensors.push_back({"b.small", small.data(), small.size(), ferry::DType::f32, false});
  HashedState here = HashedState::of(plain);

  SyncSpec given = plain;
  given.tensors[0].block_hashes = here.own_blocks[0];  // as the device would compute them
  REQUIRE(given.tensors[0].block_hashes->size() == 2);
  given.tensors[0].data = nullptr;  // never read when hashed elsewhere
  HashedState elsewhere = HashedState::of(given);
  CHECK(elsewhere.hashes == here.hashes);
  CHECK(elsewhere.own_blocks == here.own_blocks);
  CHECK(here.hashes[0] == ferry::content_hash(big.data(), big.size() * sizeof(float)));

  given.tensors[0].block_hashes->pop_back();
  CHECK_THROWS_WITH(HashedState::of(given), Catch::Contains("block hashes do not match its size"));
}
