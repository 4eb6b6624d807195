/* An _init writes only the caller's struct: a program built against an older
 * (smaller) struct gets no byte written past it, a newer (bigger) one gets the
 * library's defaults, a zeroed tail and struct_size = the library's sizeof, and
 * the plain symbols write the struct as 0.4.0 had it (what programs built before
 * the _sized calls allocated). */
#include <stdio.h>
#include <string.h>

#include "ferry/ferry.h"

#define PAD 64
#define FILL 0xAB

static int failures = 0;

static void expect(int ok, const char* what, const char* type, unsigned size) {
  if (ok) return;
  fprintf(stderr, "FAIL %s: %s (size %u)\n", type, what, size);
  ++failures;
}

static int all_bytes(const unsigned char* p, size_t n, unsigned char value) {
  size_t i;
  for (i = 0; i < n; ++i)
    if (p[i] != value) return 0;
  return 1;
}

static uint32_t size_field(const unsigned char* p) {
  uint32_t size;
  memcpy(&size, p, sizeof size);
  return size;
}

/* Checks ferry_T_init_sized at an older size, the exact size and a newer size, the
 * macro, the plain symbol (frozen at `size_in_040` bytes) and the sizes that write nothing. */
#define CHECK_INIT(T, size_in_040)                                                                  \
  do {                                                                                              \
    unsigned char full[sizeof(ferry_##T) + PAD], buf[sizeof(ferry_##T) + PAD];                      \
    const unsigned older = (unsigned)sizeof(ferry_##T) / 2, newer = (unsigned)sizeof(ferry_##T) + 24; \
    memset(full, FILL, sizeof full);                                                                \
    ferry_##T##_init_sized((ferry_##T*)(void*)full, (uint32_t)sizeof(ferry_##T));                   \
    expect(size_field(full) == sizeof(ferry_##T), "struct_size is the caller's", #T, 0);           \
    expect(all_bytes(full + sizeof(ferry_##T), PAD, FILL), "nothing past the struct", #T, 0);      \
                                                                                                    \
    memset(buf, FILL, sizeof buf);                                                                  \
    ferry_##T##_init((ferry_##T*)(void*)buf);                                                       \
    expect(memcmp(buf, full, sizeof buf) == 0, "the macro passes sizeof", #T, 0);                  \
                                                                                                    \
    memset(buf, FILL, sizeof buf);                                                                  \
    ferry_##T##_init_sized((ferry_##T*)(void*)buf, older);                                          \
    expect(size_field(buf) == older, "an older struct keeps its size", #T, older);                 \
    expect(memcmp(buf + 4, full + 4, older - 4) == 0, "an older struct gets the defaults", #T, older); \
    expect(all_bytes(buf + older, sizeof buf - older, FILL), "no byte past an older struct", #T, older); \
                                                                                                    \
    memset(buf, FILL, sizeof buf);                                                                  \
    ferry_##T##_init_sized((ferry_##T*)(void*)buf, newer);                                          \
    expect(size_field(buf) == sizeof(ferry_##T), "a newer struct gets the library's size", #T, newer); \
    expect(memcmp(buf + 4, full + 4, sizeof(ferry_##T) - 4) == 0, "a newer struct gets the defaults", #T, newer); \
    expect(all_bytes(buf + sizeof(ferry_##T), 24, 0), "a newer struct's tail is zeroed", #T, newer); \
    expect(all_bytes(buf + newer, sizeof buf - newer, FILL), "no byte past a newer struct", #T, newer); \
                                                                                                    \
    memset(buf, FILL, sizeof buf);                                                                  \
    (ferry_##T##_init)((ferry_##T*)(void*)buf);                                                     \
    expect(size_field(buf) == (size_in_040), "the plain symbol writes 0.4.0's size", #T, size_in_040); \
    expect(all_bytes(buf + (size_in_040), sizeof buf - (size_in_040), FILL),                        \
           "the plain symbol writes nothing past 0.4.0's struct", #T, size_in_040);                 \
                                                                                                    \
    memset(buf, FILL, sizeof buf);                                                                  \
    ferry_##T##_init_sized((ferry_##T*)(void*)buf, 3);                                              \
    expect(all_bytes(buf, sizeof buf, FILL), "a size under 4 writes nothing", #T, 3);              \
    ferry_##T##_init_sized(NULL, (uint32_t)sizeof(ferry_##T));                                      \
  } while (0)

int main(void) {
  CHECK_INIT(master_params, 72);
  CHECK_INIT(comm_params, 128);
  CHECK_INIT(allreduce_desc, 48);
  CHECK_INIT(all_gather_desc, 16);
  CHECK_INIT(sparse_spec, 16);
  CHECK_INIT(allreduce_job, 80);
  CHECK_INIT(tensor, 56);
  CHECK_INIT(shared_state, 48);
  if (failures) return 1;
  printf("every _init wrote only its caller's struct\n");
  return 0;
}
