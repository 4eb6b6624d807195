/* ferry_comm_abort from another thread ends a blocked ferry_connect and a
   blocked ferry_allreduce within a second (their deadline is 60 s), with
   FERRY_ERR_INVALID_USAGE; the other member's next all-reduce fails with
   FERRY_ERR_PEER_LOST at once; a second abort and a NULL are harmless. */
#define _POSIX_C_SOURCE 200809L
#include <ferry/ferry.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define WITHIN_S 5.0 /* the promise is milliseconds; generous for a loaded machine */

static char address[64];

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void pause_ms(long ms) {
  struct timespec t;
  t.tv_sec = ms / 1000;
  t.tv_nsec = (ms % 1000) * 1000000L;
  nanosleep(&t, NULL);
}

static ferry_comm* make_peer(void) {
  ferry_comm_params params;
  ferry_comm* comm = NULL;
  ferry_comm_params_init(&params);
  params.master_address = address;
  params.p2p_listen_host = "127.0.0.1";
  params.timeout_ms = 60000;
  if (ferry_comm_create(&params, &comm) != FERRY_OK) return NULL;
  return comm;
}

/* A call on its own thread: which, on which communicator, and what it returned when. */
typedef struct blocked_call {
  int which; /* 0: ferry_connect, 1: ferry_connect then ferry_wait_for_world(2), 2: ferry_allreduce */
  ferry_comm* comm;
  ferry_result result;
  double returned_at;
} blocked_call;

static float data[2][1024];

static void* run_call(void* arg) {
  blocked_call* call = (blocked_call*)arg;
  ferry_allreduce_desc desc;
  switch (call->which) {
    case 0:
      call->result = ferry_connect(call->comm);
      break;
    case 1:
      call->result = ferry_connect(call->comm);
      if (call->result == FERRY_OK) call->result = ferry_wait_for_world(call->comm, 2, 30000);
      break;
    default:
      ferry_allreduce_desc_init(&desc);
      call->result = ferry_allreduce(call->comm, data[0], data[0], 1024, &desc, NULL);
  }
  call->returned_at = now_s();
  return NULL;
}

static int fail(const char* what, ferry_result got) {
  fprintf(stderr, "comm_abort: %s (got %s: %s)\n", what, ferry_strerror(got), ferry_last_error());
  return 1;
}

/* B blocks in `call` while the thread that never calls keeps still; main aborts B. */
static int abort_blocked(blocked_call* call, const char* what) {
  pthread_t thread;
  double aborted_at;
  ferry_result r;
  pthread_create(&thread, NULL, run_call, call);
  pause_ms(300); /* into the call */
  aborted_at = now_s();
  if ((r = ferry_comm_abort(call->comm)) != FERRY_OK) return fail("abort failed", r);
  pthread_join(thread, NULL);
  if (call->result != FERRY_ERR_INVALID_USAGE) return fail(what, call->result);
  if (call->returned_at - aborted_at > WITHIN_S) {
    fprintf(stderr, "comm_abort: %s returned %.1f s after the abort\n", what, call->returned_at - aborted_at);
    return 1;
  }
  if ((r = ferry_comm_abort(call->comm)) != FERRY_OK) return fail("a second abort failed", r);
  return 0;
}

int main(void) {
  ferry_master* master = NULL;
  uint16_t port = 0;
  ferry_comm *a, *b;
  blocked_call join_a, join_b, blocked;
  pthread_t ta, tb;
  ferry_allreduce_desc desc;
  ferry_result r;
  double start;
  if (ferry_comm_abort(NULL) != FERRY_ERR_INVALID_ARGUMENT) return fail("abort(NULL)", FERRY_OK);
  if (ferry_master_create("127.0.0.1:0", &master) != FERRY_OK || ferry_master_port(master, &port) != FERRY_OK ||
      ferry_master_run(master) != FERRY_OK)
    return 1;
  snprintf(address, sizeof address, "127.0.0.1:%u", (unsigned)port);

  /* A connect the group's only member never votes in. */
  if (!(a = make_peer()) || !(b = make_peer())) return 1;
  if ((r = ferry_connect(a)) != FERRY_OK) return fail("connect", r);
  memset(&blocked, 0, sizeof blocked);
  blocked.which = 0;
  blocked.comm = b;
  if (abort_blocked(&blocked, "the aborted connect")) return 1;
  ferry_comm_destroy(b);
  ferry_comm_destroy(a);

  /* An all-reduce the other member never calls. */
  if (!(a = make_peer()) || !(b = make_peer())) return 1;
  memset(&join_a, 0, sizeof join_a);
  memset(&join_b, 0, sizeof join_b);
  join_a.which = join_b.which = 1;
  join_a.comm = a;
  join_b.comm = b;
  pthread_create(&ta, NULL, run_call, &join_a);
  pthread_create(&tb, NULL, run_call, &join_b);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  if (join_a.result != FERRY_OK) return fail("join a", join_a.result);
  if (join_b.result != FERRY_OK) return fail("join b", join_b.result);
  memset(&blocked, 0, sizeof blocked);
  blocked.which = 2;
  blocked.comm = b;
  if (abort_blocked(&blocked, "the aborted all-reduce")) return 1;
  /* The master dropped b on its goodbye: a's all-reduce fails at once, not at its deadline. */
  start = now_s();
  ferry_allreduce_desc_init(&desc);
  r = ferry_allreduce(a, data[1], data[1], 1024, &desc, NULL);
  if (r != FERRY_ERR_PEER_LOST) return fail("the survivor's all-reduce", r);
  if (now_s() - start > WITHIN_S) {
    fprintf(stderr, "comm_abort: the survivor waited %.1f s\n", now_s() - start);
    return 1;
  }
  ferry_comm_destroy(b);
  ferry_comm_destroy(a);
  ferry_master_destroy(master);
  puts("comm abort: ok");
  return 0;
}
