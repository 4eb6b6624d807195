/* Regression: waiting an op after its communicator was destroyed crashed
   (the op held the last reference to ring links whose sockets outlived the
   communicator's event loop). The header says such ops must still be waited. */
#include <ferry/ferry.h>

#include <pthread.h>
#include <stdio.h>

#define COUNT (1 << 20)
static char address[64];
static float data[2][COUNT];
static int next_buffer = 0;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void* peer(void* arg) {
  ferry_comm_params params;
  ferry_allreduce_desc desc;
  ferry_comm* comm = NULL;
  ferry_op* op = NULL;
  int64_t world = 0;
  float* buffer;
  (void)arg;
  pthread_mutex_lock(&lock);
  buffer = data[next_buffer++];
  pthread_mutex_unlock(&lock);
  ferry_comm_params_init(&params);
  params.master_address = address;
  params.p2p_listen_host = "127.0.0.1";
  if (ferry_comm_create(&params, &comm) != FERRY_OK || ferry_connect(comm) != FERRY_OK) return (void*)1;
  while (ferry_comm_get_attribute(comm, FERRY_ATTR_GROUP_WORLD_SIZE, &world) == FERRY_OK && world < 2)
    if (ferry_update_topology(comm) != FERRY_OK) return (void*)1;
  ferry_allreduce_desc_init(&desc);
  if (ferry_allreduce_async(comm, buffer, buffer, COUNT, &desc, &op) != FERRY_OK) return (void*)1;
  ferry_comm_destroy(comm);
  ferry_op_wait(op, NULL); /* whatever it returns, it must return */
  return NULL;
}

int main(void) {
  ferry_master* master = NULL;
  uint16_t port = 0;
  pthread_t a, b;
  void *ra, *rb;
  if (ferry_master_create("127.0.0.1:0", &master) != FERRY_OK || ferry_master_port(master, &port) != FERRY_OK ||
      ferry_master_run(master) != FERRY_OK)
    return 1;
  snprintf(address, sizeof address, "127.0.0.1:%u", (unsigned)port);
  pthread_create(&a, NULL, peer, NULL);
  pthread_create(&b, NULL, peer, NULL);
  pthread_join(a, &ra);
  pthread_join(b, &rb);
  ferry_master_destroy(master);
  if (ra || rb) return 1;
  puts("op wait after destroy: ok");
  return 0;
}
