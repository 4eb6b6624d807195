/* ferry_quant_name: every ferry_quant has its own name, the one the tools and
   the Python package accept; anything else is "unknown", never NULL. */
#include <ferry/ferry.h>

#include <stdio.h>
#include <string.h>

#define EXPECT(cond)                                                      \
  do {                                                                    \
    if (!(cond)) {                                                        \
      fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #cond);   \
      return 1;                                                           \
    }                                                                     \
  } while (0)

int main(void) {
  static const struct {
    ferry_quant quant;
    const char* name;
  } expected[] = {{FERRY_QUANT_NONE, "none"}, {FERRY_QUANT_U8, "u8"},     {FERRY_QUANT_I8, "i8"},
                  {FERRY_QUANT_F16, "f16"},   {FERRY_QUANT_BF16, "bf16"}, {FERRY_QUANT_U4, "u4"},
                  {FERRY_QUANT_I8H, "i8h"},   {FERRY_QUANT_I4H, "i4h"},   {FERRY_QUANT_I8H_SR, "i8h-sr"},
                  {FERRY_QUANT_I4H_SR, "i4h-sr"}};
  const size_t n = sizeof expected / sizeof expected[0];
  size_t i, j;

  for (i = 0; i < n; ++i) {
    const char* name = ferry_quant_name(expected[i].quant);
    EXPECT(name != NULL);
    EXPECT(strcmp(name, expected[i].name) == 0);
    EXPECT(ferry_quant_name(expected[i].quant) == name); /* static storage */
    for (j = 0; j < i; ++j) EXPECT(strcmp(name, ferry_quant_name(expected[j].quant)) != 0);
  }
  /* One past the last code, and values C lets a caller pass in the enum. */
  EXPECT(strcmp(ferry_quant_name((ferry_quant)(FERRY_QUANT_I4H_SR + 1)), "unknown") == 0);
  EXPECT(strcmp(ferry_quant_name((ferry_quant)-1), "unknown") == 0);
  EXPECT(strcmp(ferry_quant_name((ferry_quant)1000), "unknown") == 0);
  printf("ferry_quant_name: %u names, out-of-range values are \"unknown\"\n", (unsigned)n);
  return 0;
}
