// The bit patterns of float and double that the codecs write and test for.
// Internal to core/.
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>

namespace ferry {

template <class T>
using FloatBits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;

// The one NaN the codecs write (0x7fc00000 / 0x7ff8000000000000): quiet,
// positive, no payload, so a decoded NaN has the same bits on every peer.
template <class T>
T quiet_nan() {
  if constexpr (sizeof(T) == 4) {
    return std::bit_cast<T>(uint32_t{0x7fc00000});
  } else {
    return std::bit_cast<T>(uint64_t{0x7ff8000000000000});
  }
}

}  // namespace ferry
