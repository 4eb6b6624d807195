/* The public header as a C99 program sees it (-std=c99 -pedantic -Werror),
   and a world-of-one run through it: create, connect, all-reduce, destroy. */
#include <ferry/ferry.h>

#include <stdio.h>
#include <string.h>

#define EXPECT(cond)                                                  \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__,   \
              #cond, ferry_last_error());                             \
      return 1;                                                       \
    }                                                                 \
  } while (0)

int main(void) {
  ferry_master* master = NULL;
  ferry_comm* comm = NULL;
  ferry_comm_params params;
  ferry_allreduce_desc desc;
  ferry_op_info info;
  char address[64];
  uint16_t port = 0;
  int64_t world = 0;
  float data[5] = {1, 2, 3, 4, 5};
  float out[5];

  EXPECT(ferry_version_number() == FERRY_VERSION_NUMBER);
  EXPECT(strlen(ferry_strerror(FERRY_ERR_PEER_LOST)) > 0);
  EXPECT(ferry_master_create("127.0.0.1:0", &master) == FERRY_OK);
  EXPECT(ferry_master_port(master, &port) == FERRY_OK);
  EXPECT(ferry_master_run(master) == FERRY_OK);
  snprintf(address, sizeof address, "127.0.0.1:%u", (unsigned)port);

  ferry_comm_params_init(&params);
  params.master_address = address;
  params.p2p_listen_host = "127.0.0.1";
  EXPECT(ferry_comm_create(&params, &comm) == FERRY_OK);
  EXPECT(ferry_connect(comm) == FERRY_OK);
  EXPECT(ferry_comm_get_attribute(comm, FERRY_ATTR_GROUP_WORLD_SIZE, &world) == FERRY_OK && world == 1);

  ferry_allreduce_desc_init(&desc);
  desc.dtype = FERRY_F32;
  desc.op = FERRY_OP_AVG;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  EXPECT(ferry_allreduce(comm, data, out, 5, &desc, &info) == FERRY_OK);
  EXPECT(memcmp(data, out, sizeof data) == 0 && info.world_size == 1);
  EXPECT(ferry_allreduce(comm, NULL, out, 5, &desc, NULL) == FERRY_ERR_INVALID_ARGUMENT);
  EXPECT(strstr(ferry_last_error(), "send") != NULL);

  ferry_comm_destroy(comm);
  ferry_master_destroy(master);
  ferry_comm_destroy(NULL);
  ferry_master_destroy(NULL);
  puts("c99 header: ok");
  return 0;
}
