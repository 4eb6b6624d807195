// Golden bytes of the sparse contribution format (core/sparse_codec.h): a
// fixed input whose encoding is pinned, worked by hand below for 2 bits, so a
// change to the layout, the selection order, the tie rule or the value
// rounding fails loudly. A deliberate change bumps kSparseFormatVersion.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "hex_text.h"
#include "sparse_codec_fixture.h"

using namespace ferry;
using namespace ferry::sparse_test;

namespace {

// Chunks of 8, 8 and 4; k = 3.
const std::vector<float> kInput = {0.5f, -2.0f, 0.25f, 1.0f, -1.0f, 0.0f, 3.0f,  -0.75f,  //
                                   1.5f, 1.5f,  -1.5f, 0.125f, -0.0f, 1.5f, 0.5f, 2.5f,   //
                                   -4.0f, 0.0f, 8.0f, 0.0f};

}  // namespace

TEST_CASE("sparse golden bytes, 2-bit values", "[core][sparse]") {
  // header: 'F' 'S', version 1, bits 2, dtype f32 (10), 0 0 0, chunk 8, k 3, count 20.
  // Rice parameter r = floor(log2(8 / 3)) = 1: a gap g is g >> 1 ones, a zero, g & 1.
  // chunk 0: 3, -2, then 1 and -1 tie: index 3 wins. lo 1, step (3 - 1) / 1 = 2;
  //   indices 1, 3, 6: gaps 1, 1, 2 -> bits 0 1 | 0 1 | 1 0 0 = 0x1a;
  //   codes -2: sign, m = round(0.5) = 0 -> 0b10; 1 -> 0; 3 -> 1: 0b01'00'10 = 0x12.
  // chunk 1: 2.5, then the 1.5 at 0 and 1 (of four); lo 1.5, step 1;
  //   indices 0, 1, 7: gaps 0, 0, 5 -> 0 0 | 0 0 | 1 1 0 1 = 0xb0; codes 0, 0, 1.
  // chunk 2 (4 elements): 8, -4, then the 0 at index 1; lo 0, step 8;
  //   indices 0, 1, 2: gaps 0, 0, 0 -> 0x00; codes 0b10, 0, 1.
  const std::string expected =
      "465301020a000000080000000300000014000000"
      "00000000"
      "0000803f" "00000040" "1a" "12"
      "0000c03f" "0000803f" "b0" "10"
      "00000000" "00000041" "00" "12";
  std::vector<float> residual;
  REQUIRE(test::to_hex(encode({8, 3, 2}, kInput, &residual)) == expected);
  // What was not sent, plus the quantization error of what was.
  const std::vector<float> expected_residual = {0.5f, -1.0f, 0.25f, 0.0f, -1.0f, 0.0f, 0.0f, -0.75f,
                                                0.0f, 0.0f, -1.5f, 0.125f, -0.0f, 1.5f, 0.5f, 0.0f,
                                                -4.0f, 0.0f, 0.0f, 0.0f};
  REQUIRE(same_bits(residual, expected_residual));
}

TEST_CASE("sparse golden bytes, 4-bit values", "[core][sparse]") {
  // Same selection; step = 2 / 7 (0x3e924925), and -2 gives m = 3: (2 - 1) / step
  // rounds to 3.4999998 in f32, not to the tie 3.5.
  const std::string expected =
      "465301040a000000080000000300000014000000"
      "00000000"
      "0000803f" "2549923e" "1a" "0b07"
      "0000c03f" "2549123e" "b0" "0007"
      "00000000" "2549923f" "00" "0b07";
  REQUIRE(test::to_hex(encode({8, 3, 4}, kInput)) == expected);
}
