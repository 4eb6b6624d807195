/* hello.c: the smallest complete ferry program. Join a run, wait until PEERS
   peers are in the ring, sum-all-reduce a vector ROUNDS times, check the sum,
   print a hash of the result (equal on every peer: results are bit-identical),
   and leave.

   usage: ferry-hello MASTER_HOST:PORT [PEERS=1] [ROUNDS=3] [FLOATS=1048576]
          ferry-hello --help | --version
   Exit status: 0 done, 1 a ferry call failed or a result was wrong, 2 a bad argument. */
#include <ferry/ferry.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char* const usage = "usage: %s MASTER_HOST:PORT [PEERS=1] [ROUNDS=3] [FLOATS=1048576]\n";

/* argv[index] as a whole positive number, or `fallback` when absent; 0 when it is not one. */
static long positive(int argc, char** argv, int index, long fallback) {
  char* end;
  long value;
  if (index >= argc) return fallback;
  value = strtol(argv[index], &end, 10);
  return *argv[index] != '\0' && *end == '\0' && value > 0 ? value : 0;
}

static int check(ferry_result r, const char* what) {
  if (r != FERRY_OK) fprintf(stderr, "%s: %s: %s\n", what, ferry_strerror(r), ferry_last_error());
  return r == FERRY_OK;
}

int main(int argc, char** argv) {
  ferry_comm_params params;
  ferry_comm* comm = NULL;
  ferry_allreduce_desc desc;
  int64_t world = 0, rank = 0;
  long peers = positive(argc, argv, 2, 1), rounds = positive(argc, argv, 3, 3);
  long floats = positive(argc, argv, 4, 1 << 20);
  size_t n = (size_t)floats, i;
  int r;
  float* data;
  if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    printf(usage, argv[0]);
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "--version") == 0) {
    printf("ferry-hello %s\n", ferry_version());
    return 0;
  }
  /* An option it does not know is a mistake, not a master's address. */
  if (argc < 2 || argc > 5 || argv[1][0] == '-' || peers == 0 || rounds == 0 || floats == 0) {
    fprintf(stderr, usage, argv[0]);
    return 2;
  }
  data = malloc(n * sizeof *data);
  ferry_comm_params_init(&params);
  params.master_address = argv[1];
  if (!data || !check(ferry_comm_create(&params, &comm), "create") || !check(ferry_connect(comm), "connect"))
    return 1;
  /* Peers started together meet before the first all-reduce: the master holds the group's
     vote until PEERS of them are there (none of them reduces alone). */
  if (!check(ferry_wait_for_world(comm, (uint32_t)peers, 0), "wait_for_world")) return 1;
  ferry_comm_get_attribute(comm, FERRY_ATTR_GROUP_WORLD_SIZE, &world);
  ferry_comm_get_attribute(comm, FERRY_ATTR_RANK, &rank);

  ferry_allreduce_desc_init(&desc); /* f32 sum */
  for (r = 0; r < rounds; ++r) {
    ferry_op_info info = {sizeof(ferry_op_info), 0, 0, 0, 0};
    unsigned long long hash = 1469598103934665603ULL; /* FNV-1a over the result bytes */
    for (i = 0; i < n; ++i) data[i] = (float)(rank + 1) * (float)(i % 100) + (float)r;
    if (!check(ferry_allreduce(comm, data, data, n, &desc, &info), "allreduce")) return 1;
    for (i = 0; i < n; ++i) { /* every element: sum over ranks of (rank+1)*(i%100) + r */
      float want = (float)(world * (world + 1) / 2) * (float)(i % 100) + (float)(world * r);
      if (data[i] != want) {
        fprintf(stderr, "round %d: element %zu is %g, want %g\n", r, i, data[i], want);
        return 1;
      }
    }
    for (i = 0; i < n * sizeof *data; ++i) hash = (hash ^ ((unsigned char*)data)[i]) * 1099511628211ULL;
    printf("peer %lld: round %d: world %u, %.1f MB sent, %.1f ms, result hash %016llx\n", (long long)rank, r,
           info.world_size, info.bytes_sent / 1e6, info.duration_s * 1e3, hash);
    fflush(stdout);
  }
  ferry_comm_destroy(comm);
  free(data);
  return 0;
}
