/* ferry_comm_set_label against a master with its HTTP endpoint: a label set
   before ferry_connect reaches /status once the master welcomes the peer, a
   change replaces it, "" clears it (null); a bad label (NULL, too long, a
   byte outside printable ASCII) fails at the call with
   FERRY_ERR_INVALID_ARGUMENT and a message naming why; the peer stays a
   member and its collectives run as before. */
#define _POSIX_C_SOURCE 200809L
#include <ferry/ferry.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int failures = 0;
#define CHECK(cond)                                              \
  do {                                                           \
    if (!(cond)) {                                               \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                \
    }                                                            \
  } while (0)

static char status_doc[1 << 16];

/* GET /status over HTTP/1.0 (the master closes after its reply) into status_doc; 0 when it came. */
static int get_status(uint16_t port) {
  struct sockaddr_in addr;
  const char request[] = "GET /status HTTP/1.0\r\n\r\n";
  size_t got = 0;
  ssize_t n;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  status_doc[0] = '\0';
  if (fd < 0) return -1;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr*)&addr, sizeof addr) != 0 ||
      send(fd, request, sizeof request - 1, 0) != (ssize_t)(sizeof request - 1)) {
    close(fd);
    return -1;
  }
  while (got + 1 < sizeof status_doc && (n = recv(fd, status_doc + got, sizeof status_doc - 1 - got, 0)) > 0)
    got += (size_t)n;
  status_doc[got] = '\0';
  close(fd);
  return strstr(status_doc, "\r\n\r\n") ? 0 : -1;
}

/* Polls /status for up to 10 s until it holds `text` (the JSON is compact: "label":"..."). */
static int status_shows(uint16_t port, const char* text) {
  int i;
  struct timespec pause = {0, 50 * 1000000L};
  for (i = 0; i < 200; ++i) {
    if (get_status(port) == 0 && strstr(status_doc, text)) return 1;
    nanosleep(&pause, NULL);
  }
  fprintf(stderr, "/status never showed %s; last:\n%s\n", text, status_doc);
  return 0;
}

static int error_mentions(const char* text) { return strstr(ferry_last_error(), text) != NULL; }

int main(void) {
  ferry_master_params mp;
  ferry_master* master = NULL;
  ferry_comm_params cp;
  ferry_comm* comm = NULL;
  uint16_t port = 0, http = 0;
  char address[64], longest[129], too_long[130];
  const char* work = "outer 1: 5 steps, 0 samples, share 100% of 1";

  ferry_master_params_init(&mp);
  mp.listen_address = "127.0.0.1:0";
  mp.http_address = "127.0.0.1:0";
  if (ferry_master_create_with(&mp, &master) != FERRY_OK || ferry_master_run(master) != FERRY_OK ||
      ferry_master_port(master, &port) != FERRY_OK || ferry_master_http_port(master, &http) != FERRY_OK) {
    fprintf(stderr, "master: %s\n", ferry_last_error());
    return 1;
  }
  snprintf(address, sizeof address, "127.0.0.1:%u", (unsigned)port);
  ferry_comm_params_init(&cp);
  cp.master_address = address;
  cp.p2p_listen_host = "127.0.0.1";
  if (ferry_comm_create(&cp, &comm) != FERRY_OK) {
    fprintf(stderr, "comm: %s\n", ferry_last_error());
    return 1;
  }

  CHECK(ferry_comm_set_label(comm, "warming up") == FERRY_OK); /* before connect: sent after the welcome */
  CHECK(ferry_comm_set_label(NULL, "x") == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(ferry_comm_set_label(comm, NULL) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("label"));
  memset(too_long, 'x', 129);
  too_long[129] = '\0';
  CHECK(ferry_comm_set_label(comm, too_long) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("at most 128 bytes, got 129"));
  CHECK(ferry_comm_set_label(comm, "two\nlines") == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("printable ASCII") && error_mentions("0x0a"));
  CHECK(ferry_comm_set_label(comm, "caf\xc3\xa9") == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("0xc3"));
  memset(longest, '~', 128);
  longest[128] = '\0';
  CHECK(ferry_comm_set_label(comm, longest) == FERRY_OK);
  CHECK(ferry_comm_set_label(comm, "warming up") == FERRY_OK);

  if (ferry_connect(comm) != FERRY_OK) {
    fprintf(stderr, "connect: %s\n", ferry_last_error());
    return 1;
  }
  CHECK(status_shows(http, "\"label\":\"warming up\""));
  CHECK(ferry_comm_set_label(comm, work) == FERRY_OK);
  CHECK(status_shows(http, "\"label\":\"outer 1: 5 steps, 0 samples, share 100% of 1\""));
  CHECK(ferry_comm_set_label(comm, "") == FERRY_OK);
  CHECK(status_shows(http, "\"label\":null"));
  /* Display only: still a member, and a collective runs as before. */
  CHECK(status_shows(http, "\"state\":\"member\""));
  CHECK(ferry_barrier(comm) == FERRY_OK);

  ferry_comm_destroy(comm);
  ferry_master_destroy(master);
  if (failures) fprintf(stderr, "%d checks failed\n", failures);
  return failures ? 1 : 0;
}
