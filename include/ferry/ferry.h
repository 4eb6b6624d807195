/*
 * ferry.h — the C99 API of ferry, a peer-to-peer training runtime for the WAN.
 *
 * A run has one master (a small coordinator: `ferry-master`, or embedded with
 * ferry_master_*) and any number of peers (training processes). Peers join and
 * leave while the run goes on; the master admits newcomers when the accepted
 * peers agree (ferry_update_topology), fixes a ring per peer group, and turns a
 * death into a clean error on every survivor. Bulk data flows peer to peer.
 *
 * Guarantees
 *   - Every peer ends every successful all-reduce and all-gather with
 *     bit-identical results.
 *   - An operation either succeeds on every peer of its world or fails on every
 *     surviving peer (the master commits or aborts it for all of them).
 *   - Every blocking call has a deadline; nothing waits forever.
 *
 * Conventions
 *   - Every call returns a ferry_result, except these, which report no
 *     failure: ferry_version, ferry_version_number, ferry_strerror,
 *     ferry_last_error, ferry_result_is_retryable, ferry_dtype_size (0 for
 *     an invalid dtype), ferry_quant_name ("unknown" for an invalid value),
 *     ferry_sparse_k_for_density (0 out of range), the eight *_init
 *     functions (ferry_master_params_init, ferry_comm_params_init,
 *     ferry_allreduce_desc_init, ferry_allreduce_job_init,
 *     ferry_all_gather_desc_init, ferry_sparse_spec_init, ferry_tensor_init,
 *     ferry_shared_state_init) with their *_init_sized forms, and the
 *     destroy functions (ferry_master_destroy, ferry_comm_destroy,
 *     ferry_gathered_destroy).
 *     On a failed ferry_result, ferry_last_error() gives the precise message
 *     for the calling thread.
 *   - Handles are opaque and typed. Destroy functions accept NULL.
 *   - Parameter structs start with `struct_size` and are filled by their
 *     *_init function; fields added later keep old callers working. Each
 *     ferry_X_init(p) is a macro (added in 0.4) for ferry_X_init_sized(p,
 *     sizeof *p), so the library writes only the bytes the caller's struct
 *     has: a newer library never writes past an older program's struct, and
 *     the bytes a newer program's struct has beyond the library's are zeroed
 *     (and ignored). The plain ferry_X_init symbols stay for programs built
 *     against 0.4.0's header or older, which pass no size: they write the
 *     struct as 0.4.0 had it. A NULL pointer, or a size under 4 bytes,
 *     writes nothing.
 *   - Errors come in two families. "The world changed, try again":
 *     FERRY_ERR_TIMEOUT, FERRY_ERR_PEER_LOST (recover with
 *     ferry_update_topology and retry). "You called it wrong":
 *     FERRY_ERR_INVALID_ARGUMENT, FERRY_ERR_INVALID_USAGE (fix the caller).
 *     ferry_result_is_retryable() tells them apart.
 *
 * Threads
 *   - ferry_strerror, ferry_last_error, ferry_version*, ferry_quant_name:
 *     any thread.
 *   - A ferry_master may be used from any thread; its calls are serialized
 *     internally. It serves on one library thread of its own.
 *   - A ferry_comm may be used from several threads; calls are serialized
 *     where they must be. Collective calls (ferry_connect,
 *     ferry_update_topology, ferry_optimize_topology, ferry_wait_for_world,
 *     ferry_peers_pending, the all-reduces (ferry_allreduce,
 *     ferry_allreduce_async, ferry_allreduce_multiple_with_retry),
 *     ferry_barrier, ferry_broadcast, the all-gathers (ferry_all_gather,
 *     ferry_all_gather_async) and ferry_sync_shared_state) must be
 *     issued in the same order on every peer of a group, as with MPI; the
 *     master checks this and fails mismatches with FERRY_ERR_MISMATCH: an
 *     all-reduce whose parameters differ (the message names the fields,
 *     e.g. "dtype f32 vs f64"), and calls out of order (a peer in
 *     ferry_update_topology, ferry_optimize_topology, ferry_wait_for_world
 *     or ferry_peers_pending where another began a collective: both calls
 *     fail at once, naming what each called). After a failed collective the check rests until
 *     the next vote, as peers may then have issued different numbers.
 *     The communicator runs its network I/O and reductions on its own
 *     threads (ferry_comm_params.io_threads). ferry_connect,
 *     ferry_update_topology, ferry_optimize_topology, ferry_wait_for_world
 *     and ferry_peers_pending run one at a time on a communicator: one
 *     called while another thread's is in progress waits for it first, and
 *     the bounds given for each do not count that wait.
 *     ferry_comm_set_label is no collective: any thread, any time, on its
 *     own schedule per peer.
 *   - No call may race with the destroy of the handle it uses. To end calls
 *     blocked on a communicator from another thread (Ctrl-C), use
 *     ferry_comm_abort, then destroy it once they have returned.
 */
#ifndef FERRY_FERRY_H
#define FERRY_FERRY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(FERRY_BUILDING_LIBRARY) && defined(__GNUC__)
#define FERRY_API __attribute__((visibility("default")))
#else
#define FERRY_API
#endif

/* ------------------------------------------------------------------------ */
/* Version                                                                   */
/* ------------------------------------------------------------------------ */

#define FERRY_VERSION_MAJOR 0
#define FERRY_VERSION_MINOR 4
#define FERRY_VERSION_PATCH 0
#define FERRY_VERSION_NUMBER \
  (FERRY_VERSION_MAJOR * 10000 + FERRY_VERSION_MINOR * 100 + FERRY_VERSION_PATCH)

/* The library's version as "MAJOR.MINOR.PATCH"; static storage. */
FERRY_API const char* ferry_version(void);
/* The library's FERRY_VERSION_NUMBER, to compare with the header's. */
FERRY_API uint32_t ferry_version_number(void);

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

/* Stable numbers: append only. */
typedef enum ferry_result {
  FERRY_OK = 0,
  /* You called it wrong: a NULL pointer, an out-of-range enum or count, a
     malformed address. Nothing was changed. */
  FERRY_ERR_INVALID_ARGUMENT = 1,
  /* You called it at the wrong time: e.g. an all-reduce before
     ferry_connect, ferry_update_topology with operations in flight. */
  FERRY_ERR_INVALID_USAGE = 2,
  /* A deadline passed: peers did not answer, a transfer made no progress.
     The world may have changed: call ferry_update_topology, then retry. */
  FERRY_ERR_TIMEOUT = 3,
  /* A peer of this operation's world died, left, or was kicked. Call
     ferry_update_topology, then retry in the smaller world. */
  FERRY_ERR_PEER_LOST = 4,
  /* The master is gone: the connection broke or the master stopped
     answering, and it did not come back within master_reconnect_timeout_ms
     (or the window is 0, or this peer was not admitted yet). The
     communicator is unusable; destroy it. While the window is open a lost
     master costs a retryable FERRY_ERR_PEER_LOST instead (see
     ferry_comm_params.master_reconnect_timeout_ms). */
  FERRY_ERR_MASTER_LOST = 5,
  /* Could not reach or bind an address (master down, port in use). */
  FERRY_ERR_CONNECT = 6,
  /* Peers issued different collectives at the same position (tag, count,
     dtype, op or kind differ). The operation failed on every peer. */
  FERRY_ERR_MISMATCH = 7,
  /* The master removed this peer (protocol violation, silence, or a
     conflict); ferry_last_error() says which. A peer that was stopped or
     suspended past heartbeat_timeout_ms reads this when it resumes, not
     FERRY_ERR_MASTER_LOST. The communicator is unusable; destroy it and
     create a new one to rejoin as a newcomer. */
  FERRY_ERR_KICKED = 8,
  /* A malformed or unexpected message arrived from the network. */
  FERRY_ERR_PROTOCOL = 9,
  /* Authentication failed (wrong or missing run secret). */
  FERRY_ERR_AUTH = 10,
  /* An operating-system resource failed: memory, threads, sockets. */
  FERRY_ERR_SYSTEM = 11,
  /* A bug in ferry. Please report it with ferry_last_error(). */
  FERRY_ERR_INTERNAL = 12
} ferry_result;

/* A short static description of a result code ("peer lost"). Never NULL. */
FERRY_API const char* ferry_strerror(ferry_result result);

/* The message of the last failed ferry call on this thread ("" if none).
   Valid until the next ferry call on this thread. Never NULL. */
FERRY_API const char* ferry_last_error(void);

/* 1 for FERRY_ERR_TIMEOUT and FERRY_ERR_PEER_LOST (the world changed; recover
   with ferry_update_topology and retry), 0 otherwise. */
FERRY_API int ferry_result_is_retryable(ferry_result result);

/* ------------------------------------------------------------------------ */
/* Data types and operators                                                  */
/* ------------------------------------------------------------------------ */

/* Stable numbers: append only. f16 is IEEE binary16; bf16 is bfloat16. */
typedef enum ferry_dtype {
  FERRY_U8 = 0, FERRY_I8 = 1, FERRY_U16 = 2, FERRY_I16 = 3,
  FERRY_U32 = 4, FERRY_I32 = 5, FERRY_U64 = 6, FERRY_I64 = 7,
  FERRY_F16 = 8, FERRY_BF16 = 9, FERRY_F32 = 10, FERRY_F64 = 11
} ferry_dtype;

/* Reduction operators. Integers wrap modulo 2^bits for sum, avg and prod.
   avg sums, then divides once by the world size (integers truncate toward
   zero). f16/bf16 are combined in f32 and rounded to nearest-even at each
   hop. min/max propagate NaN. */
typedef enum ferry_reduce_op {
  FERRY_OP_SUM = 0, FERRY_OP_AVG = 1, FERRY_OP_PROD = 2,
  FERRY_OP_MIN = 3, FERRY_OP_MAX = 4
} ferry_reduce_op;

/* Size in bytes of one element; 0 for an invalid dtype. */
FERRY_API size_t ferry_dtype_size(ferry_dtype dtype);

/* ------------------------------------------------------------------------ */
/* Master                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct ferry_master ferry_master;

typedef struct ferry_master_params {
  uint32_t struct_size;       /* sizeof(ferry_master_params); set by _init */
  /* "HOST:PORT" to listen on. HOST is an IPv4/IPv6 literal or a name;
     PORT 0 picks a free port (see ferry_master_port). Default
     "[::]:48148": IPv6 and IPv4 (changed in 0.2 from "0.0.0.0:48148").
     Borrowed during ferry_master_create_with only. */
  const char* listen_address;
  /* A peer silent for this long is removed (its heartbeats stopped: killed,
     stopped, cut off). A peer may ask for a longer deadline when it joins.
     Default 10000. */
  uint32_t peer_timeout_ms;
  /* Path of the run secret (at least 16 bytes; one trailing newline is
     dropped). Every peer must prove it holds the same secret (HMAC-SHA256
     challenge-response; the secret never crosses the wire), and the master
     proves it back. NULL: $FERRY_SECRET_FILE if set, else no authentication.
     Borrowed during ferry_master_create_with only. */
  const char* secret_file;
  /* TLS (added in 0.1; see docs/security.md). With tls_cert_file and
     tls_key_file set, every connection to the master is TLS 1.3 and this
     certificate (PEM, leaf first; unencrypted PEM key) is what peers verify
     against their tls_ca_file. tls_ca_file (PEM) set: peers must present a
     certificate that CA signed (mutual TLS); NULL: the master asks for no
     certificate and membership rests on the run secret. All NULL (default):
     plain TCP. A plain peer meeting a TLS master, or a TLS peer meeting a
     plain one, fails ferry_connect with FERRY_ERR_CONNECT (a plain peer
     within about 10 s, the master's handshake deadline). Files are read and
     checked in ferry_master_create_with (FERRY_ERR_INVALID_ARGUMENT names the
     file and the reason). Borrowed during ferry_master_create_with only. */
  const char* tls_cert_file;
  const char* tls_key_file;
  const char* tls_ca_file;
  /* How long a link measurement stays in the master's matrix without being
     refreshed (added in 0.2; see ferry_comm_link_matrix). Peers refresh the
     links they use after their collectives, at most once a second each.
     1000..86400000, default 600000 (10 min). */
  uint32_t link_max_age_ms;
  /* "HOST:PORT" of a read-only HTTP endpoint for the people watching the
     run (added in 0.3; docs/operating.md, "Watching a run"): /metrics
     (Prometheus), /status (JSON) and / (a live dashboard page). A port
     alone ("9100") binds to loopback; PORT 0 picks a free port
     (ferry_master_http_port). It never shows the run secret, keys or
     tensor contents; a slow or hostile HTTP client cannot delay the run's
     coordination. NULL (default): none. Borrowed during
     ferry_master_create_with only. */
  const char* http_address;
  /* 1 (default): two peers that can neither dial the other (dial-out-only,
     or their dials failed) connect to each other at once from agreed ports
     (a TCP simultaneous open) before a third member relays their link
     (ferry_comm_params.refuse_relay). 0: straight to a relay, for networks
     known to drop both ends' SYNs, where each punch costs the proposal its
     10 s connect timeout (added in 0.4). 0..1. */
  uint32_t punch;
} ferry_master_params;

FERRY_API void ferry_master_params_init_sized(ferry_master_params* params, uint32_t struct_size);
FERRY_API void(ferry_master_params_init)(ferry_master_params* params);
#define ferry_master_params_init(params) ferry_master_params_init_sized((params), (uint32_t)sizeof *(params))

/* Creates a master and binds its listening socket (so a port conflict fails
   here, with FERRY_ERR_CONNECT). It does not serve until ferry_master_run.
   On success *out owns the master; release it with ferry_master_destroy.
   Errors: FERRY_ERR_INVALID_ARGUMENT (NULL, malformed address, unreadable
   or short secret file), FERRY_ERR_CONNECT (cannot bind), FERRY_ERR_SYSTEM. */
FERRY_API ferry_result ferry_master_create(const char* listen_address, ferry_master** out);
FERRY_API ferry_result ferry_master_create_with(const ferry_master_params* params,
                                                ferry_master** out);

/* Starts serving on a library thread and returns at once.
   Errors: FERRY_ERR_INVALID_ARGUMENT (NULL), FERRY_ERR_INVALID_USAGE
   (already running or stopped), FERRY_ERR_SYSTEM. */
FERRY_API ferry_result ferry_master_run(ferry_master* master);

/* The port the master listens on (useful after asking for port 0).
   Errors: FERRY_ERR_INVALID_ARGUMENT (NULL). */
FERRY_API ferry_result ferry_master_port(const ferry_master* master, uint16_t* port);

/* The port of the HTTP endpoint (ferry_master_params.http_address).
   Errors: FERRY_ERR_INVALID_ARGUMENT (NULL), FERRY_ERR_INVALID_USAGE (the
   master has no HTTP endpoint). */
FERRY_API ferry_result ferry_master_http_port(const ferry_master* master, uint16_t* port);

/* Stops serving for good: tells every peer the master is going away, closes
   every connection and joins the serving thread. The peers fail at once with
   FERRY_ERR_MASTER_LOST, their reconnect window (master_reconnect_timeout_ms)
   notwithstanding: this master will not come back. The first time after
   ferry_master_run, it logs the run's summary at info (collectives by result,
   bytes, joins and leaves: docs/operating.md, "The master's logs").
   Blocks at most ~2 s. Idempotent.
   Errors: FERRY_ERR_INVALID_ARGUMENT (NULL). */
FERRY_API ferry_result ferry_master_stop(ferry_master* master);

/* Stops serving as ferry_master_stop does, but without telling the peers: to
   them the master is lost as if it had crashed, and those with a reconnect
   window dial this address again and resume with the master started next on
   it (docs/design.md, "Outliving the master"). For replacing a master
   without ending the run. Idempotent; after ferry_master_stop it does nothing.
   Errors: FERRY_ERR_INVALID_ARGUMENT (NULL). */
FERRY_API ferry_result ferry_master_stop_for_restart(ferry_master* master);

/* Stops (if running, as ferry_master_stop: the peers are told) and frees the
   master. NULL is allowed. */
FERRY_API void ferry_master_destroy(ferry_master* master);

/* ------------------------------------------------------------------------ */
/* Communicator                                                              */
/* ------------------------------------------------------------------------ */

typedef struct ferry_comm ferry_comm;

typedef struct ferry_comm_params {
  uint32_t struct_size;       /* sizeof(ferry_comm_params); set by _init */
  /* "HOST:PORT" of the master ("[V6ADDR]:PORT" for IPv6). NULL (default):
     $FERRY_MASTER_ADDR; FERRY_ERR_INVALID_ARGUMENT at ferry_comm_create when
     that is unset too. */
  const char* master_address;
  /* Peers with different groups form separate rings under one master and
     never exchange data. Default 0. */
  uint32_t peer_group;
  /* Parallel TCP connections to each ring neighbour; one operation is
     striped over all of them. 0 (default since 0.2): adapted per link: each
     link starts with 4 and, on a long or lossy path, doubles them while its
     delivered rate rises by 10 % or more, up to 64, then keeps the best count
     (docs/design.md, "Connections per link"); on loopback or a LAN it
     stays at 4. 1..64 pins the count (the group uses the smallest any
     member pins). The count never changes the results' bits. */
  uint32_t p2p_connections;
  /* Address the peer-to-peer listener binds. Default "::": IPv6 and IPv4
     on one socket (IPV6_V6ONLY off; "0.0.0.0" where the system has no
     IPv6). Changed in 0.2 from "0.0.0.0". */
  const char* p2p_listen_host;
  /* Port range for the peer-to-peer listener, inclusive; the first free
     port is taken. 0/0 (default) lets the system choose. */
  uint16_t p2p_port_min;
  uint16_t p2p_port_max;
  /* Address other peers should dial to reach this one (NAT, proxies).
     NULL (default): p2p_listen_host when that is one address (not "::" or
     "0.0.0.0"), else the address the master sees this peer connect from.
     In the last case neighbours that cannot reach that address (it is in a
     family they lack) dial this host's interface addresses of the other
     family next. ferry_connect fails with FERRY_ERR_INVALID_ARGUMENT when
     that address is IPv6 and the listener takes IPv4 only ("0.0.0.0"):
     neighbours could not dial it. */
  const char* advertised_host;
  /* Port other peers should dial. 0 (default): the bound port. */
  uint16_t advertised_port;
  /* Longest wait for other peers: admission in ferry_connect, the votes of
     ferry_update_topology and ferry_peers_pending, the start and the
     commit of a collective. Default 60000. A member that has done its part
     waits longer for the commit while the master says the others still run
     (behind a slow link they may end minutes later; each of them fails on
     its own progress_timeout_ms if its transfer stalls). */
  uint32_t timeout_ms;
  /* A collective whose transfer makes no progress for this long fails with
     FERRY_ERR_TIMEOUT on every peer. Default 20000. */
  uint32_t progress_timeout_ms;
  /* The master removes this peer after this much silence (SIGSTOP, a cut
     link); the peer treats the same silence from the master as
     FERRY_ERR_MASTER_LOST. Default 10000. */
  uint32_t heartbeat_timeout_ms;
  /* Threads that run this communicator's network I/O and reductions.
     1..64, default 2. */
  uint32_t io_threads;
  /* Largest pipelining unit of an all-reduce, in bytes. Default 256 KiB
     (measured: a chunk that stays in cache between the kernel's copy, the
     checksum and the reduction costs the least CPU); 4 KiB..64 MiB. */
  uint32_t max_chunk_bytes;
  /* TCP congestion control for this peer's p2p connections ("bbr",
     "cubic", ...), or NULL (default) for the system's. On a lossy long link
     bbr keeps its rate where cubic collapses. Unusable names are refused at
     ferry_comm_create. */
  const char* congestion_control;
  /* Path of the run secret (see ferry_master_params.secret_file): proves
     this peer to the master and to other peers, and checks theirs. NULL:
     $FERRY_SECRET_FILE if set, else none. With a secret, this peer refuses
     a master or peer that cannot prove the same secret (FERRY_ERR_AUTH). */
  const char* secret_file;
  /* TLS (added in 0.1): all three set, or all NULL (default). All NULL:
     $FERRY_TLS_CERT_FILE, $FERRY_TLS_KEY_FILE and $FERRY_TLS_CA_FILE when
     any of them is set (the same rules then apply to them), else plain TCP.
     With them, the master connection and every p2p connection of this peer is
     TLS 1.3: this peer presents tls_cert_file (PEM, leaf first; its key
     tls_key_file, unencrypted PEM) and accepts only a master and peers whose
     certificate tls_ca_file (PEM) signed, in both directions (mutual TLS on
     p2p links). Host names are not checked: the CA is the trust anchor.
     The certificate must carry serverAuth and clientAuth (a peer both dials
     and accepts); tools/gen-test-certs makes such a set for trying it out.
     Errors: FERRY_ERR_INVALID_ARGUMENT at ferry_comm_create (only some of the
     three set, a file unreadable or malformed, key and certificate do not
     match, the certificate does not verify against the CA); at
     ferry_connect, FERRY_ERR_AUTH (a certificate was refused, either way)
     and FERRY_ERR_CONNECT (the master speaks plain TCP, or is a TLS master
     while this peer is plain). Copied by ferry_comm_create. */
  const char* tls_cert_file;
  const char* tls_key_file;
  const char* tls_ca_file;
  /* Same-host links (added in 0.2). 1 (default): a ring connection to a
     peer on this machine, in this network and mount namespace, carries its
     bytes through a shared-memory ring (a memfd of 1..16 MiB per
     connection, sealed so that no process can shrink it under a mapping,
     which the other side opens through /proc/<pid>/fd; each side closes its
     descriptor once both mapped it); the TCP or
     TLS connection stays open beside it to authenticate the two sides and to
     notice either one's death. Over loopback TCP the kernel copies every
     byte twice; here it is copied once, and reduced straight out of the
     ring. Where shared memory cannot be made or mapped (other user, out of
     memory, an unsealed ring) the connection silently stays on TCP: see
     FERRY_ATTR_SHARED_MEMORY_LANES. 0: always TCP (a proxy or fault
     injector between peers on one host must see the bytes). With TLS, bytes
     in shared memory are not encrypted: they never leave the machine. */
  uint32_t shared_memory;
  /* How long an admitted peer keeps dialing a master it lost (added in
     0.3), in ms: default 300000 (5 minutes); 0: a lost master is
     FERRY_ERR_MASTER_LOST at once, as before. Meanwhile the peer keeps its
     tensors, id and ring place: collectives in flight fail with
     FERRY_ERR_PEER_LOST (retryable), except those that had ended here and
     waited for the master's verdict, which wait for the next master (it
     commits them when some member saw them committed, else aborts them);
     new collectives fail at once with FERRY_ERR_PEER_LOST, and so does
     ferry_comm_link_matrix; ferry_update_topology, ferry_optimize_topology,
     ferry_wait_for_world and ferry_peers_pending wait for the master. A
     master started again on the same address (same secret, certificates)
     rebuilds the groups from what their members tell it, keeps the ring
     that was last committed, and the next ferry_update_topology re-forms
     its links: ferry_allreduce_multiple_with_retry and a loop that retries
     on retryable results carry on by themselves. A peer the new master
     cannot take back (the group committed a new ring without it, or it
     came after the group settled: master_state.h) gets FERRY_ERR_KICKED and
     rejoins as a newcomer; a master that never comes back in the window
     ends in FERRY_ERR_MASTER_LOST. 0..86400000. */
  uint32_t master_reconnect_timeout_ms;
  /* How long ferry_connect keeps dialing a master that does not answer yet
     (added in 0.3), in ms: default 60000; 0: one dial, as before. A
     launcher (torchrun, Slurm, a shell loop) may start the peers a moment
     before their master: a dial unanswered is tried again with back-off
     (50 ms, doubling to 1 s) until then. A dial refused or unreachable at
     once is tried 10 times (about 5.5 s: a master started alongside its
     peers binds within that; refused longer, the address is wrong), and a
     name that does not resolve once (the resolver already retried): both
     fail within seconds naming the address. The first failure is logged at
     warning level. A master that answers and refuses (TLS on one side only,
     another certificate authority) fails the call at once. 0..86400000. */
  uint32_t master_connect_timeout_ms;
  /* 1: this peer accepts no connection (added in 0.3): it sits behind NAT, a
     cloud security group or a firewall that admits nothing inbound, but can
     dial out. It opens no peer-to-peer listener (p2p_listen_host and the
     port and advertised fields are then unused), and the master has every
     ring link with it dialed from its side: its previous ring neighbour's
     link to it is dialed by this peer, the receiver. Two such peers are ring
     neighbours only when no ring avoids it: they then connect to each other
     at once from agreed ports (a TCP simultaneous open, which passes stateful
     firewalls and port-keeping NATs), and where that fails too, a third
     member both can dial relays their link (refuse_relay). A link dialed by
     its receiver stays on TCP (no shared memory) at its first lane count (it
     does not grow), and probes to this peer are dialed by it. 0 (default): it listens; a neighbour whose dial to it fails has
     that link dialed the other way at the next proposal, and nobody is
     evicted for it while the other way works. 0..1. */
  uint32_t dial_out_only;
  /* 1: this peer relays no ring link for others (added in 0.4). 0 (default):
     when two members of its group can neither dial nor punch through to each
     other, the master may have this peer forward that link's bytes between
     them: it listens on a second port for that (any free port; plain TCP,
     since the two ends run TLS end to end through it and it holds no key) and
     carries the hop on its own up- and downlink. A dial-out-only peer never
     relays. 0..1. */
  uint32_t refuse_relay;
} ferry_comm_params;

FERRY_API void ferry_comm_params_init_sized(ferry_comm_params* params, uint32_t struct_size);
FERRY_API void(ferry_comm_params_init)(ferry_comm_params* params);
#define ferry_comm_params_init(params) ferry_comm_params_init_sized((params), (uint32_t)sizeof *(params))

/* Creates a communicator and binds its peer-to-peer listener. It does not
   talk to the master until ferry_connect. String fields of params are
   copied. On success *out owns the communicator (ferry_comm_destroy).
   Errors: FERRY_ERR_INVALID_ARGUMENT (NULL, bad address, out-of-range
   field, unreadable or short secret file), FERRY_ERR_CONNECT (no free port
   in the range), FERRY_ERR_SYSTEM. */
FERRY_API ferry_result ferry_comm_create(const ferry_comm_params* params, ferry_comm** out);

/* Connects to the master and waits until this peer is admitted: at once if
   its group is empty, otherwise when the group's accepted peers next call
   ferry_update_topology. Blocks up to master_connect_timeout_ms (timeout_ms
   when that is 0) to reach the master (resolve, TCP connect, TLS handshake;
   dialing again while nobody answers; a refused dial gets 10 tries, about
   5.5 s, an unresolvable name one), then up to timeout_ms to be admitted.
   A call after FERRY_ERR_TIMEOUT for admission only waits again:
   at most timeout_ms.
   Errors: FERRY_ERR_INVALID_ARGUMENT (NULL), FERRY_ERR_INVALID_USAGE
   (already connected), FERRY_ERR_CONNECT (no master answered within
   master_connect_timeout_ms, the address refused 10 dials or its name did not
   resolve, or the master that answered refused the transport), FERRY_ERR_TIMEOUT (the last dial found no answer before its
   deadline, and a later call dials again; or this peer was not admitted in time, and the
   communicator stays pending for a later call to wait on), FERRY_ERR_AUTH (the master
   and this peer do not share the run secret), FERRY_ERR_MASTER_LOST,
   FERRY_ERR_KICKED, FERRY_ERR_PROTOCOL. */
FERRY_API ferry_result ferry_connect(ferry_comm* comm);

/* Collective over the group's accepted peers: admits pending peers, drops
   lost ones, and rebuilds the ring; returns once every member has its
   links and the pairs nobody measured were probed (ferry_link_info: up to
   8 rounds of at most ~3.5 s each; 0.1 s each on a LAN). Must not be
   called with operations in flight. Blocks at most timeout_ms per attempt.
   That bound ignores a lost master being dialed again
   (master_reconnect_timeout_ms): the call first waits for it, up to the
   rest of that window, and a vote the master's loss cut short starts
   again with the master that comes back.
   Errors: FERRY_ERR_INVALID_ARGUMENT (NULL), FERRY_ERR_INVALID_USAGE (not
   connected, operations in flight), FERRY_ERR_TIMEOUT, FERRY_ERR_PEER_LOST
   (a member died during the vote; call again), FERRY_ERR_MISMATCH (another
   member began a collective instead: see "Threads"), FERRY_ERR_MASTER_LOST,
   FERRY_ERR_KICKED. */
FERRY_API ferry_result ferry_update_topology(ferry_comm* comm);

/* Waits until this peer's group holds at least min_peers members (added in
   0.3): what peers started together call once after ferry_connect, so that
   none of them runs its first collective in a world of one. A group already
   that large returns FERRY_OK at once, without a vote (so a newcomer whose
   admission made it that large returns at once too). Otherwise it is a
   collective over the group's accepted peers, each passing the same
   min_peers: a topology vote that the master holds until the members and
   the newcomers waiting number min_peers (no polling: one vote per
   admission), then admits them as ferry_update_topology does.
   Blocks at most timeout_ms (0: the communicator's timeout_ms), plus the
   admission's own bound (timeout_ms of ferry_comm_params) once the
   newcomers are there. The master's hold ends by that deadline; the
   communicator stays usable after FERRY_ERR_TIMEOUT (call it again to keep
   waiting). That bound ignores a lost master being dialed again
   (master_reconnect_timeout_ms): the call waits for it, up to the rest of
   that window, before it looks at its deadline. Must not be called with
   operations in flight.
   Errors: FERRY_ERR_INVALID_ARGUMENT (NULL, min_peers 0, timeout_ms above
   86400000), FERRY_ERR_INVALID_USAGE (not connected, operations in flight),
   FERRY_ERR_TIMEOUT (the group is still smaller; the message says how
   large), FERRY_ERR_PEER_LOST, FERRY_ERR_MISMATCH (another member began a
   collective instead, e.g. peers started with different min_peers),
   FERRY_ERR_MASTER_LOST, FERRY_ERR_KICKED. */
FERRY_API ferry_result ferry_wait_for_world(ferry_comm* comm, uint32_t min_peers, uint32_t timeout_ms);

/* ferry_update_topology that also re-measures: the master forgets the
   group's link matrix, probes every pair once the links are up (up to 8
   rounds; see ferry_link_info), and proposes the ring order that maximises
   the bottleneck bandwidth, then least total RTT, whenever it beats the
   current one at all (a plain vote reorders only for a ring at least 25 %
   faster). Collective over the group's accepted peers; if any member calls
   this while the others call ferry_update_topology, the vote re-measures.
   Same errors and bounds as ferry_update_topology (added in 0.2). */
FERRY_API ferry_result ferry_optimize_topology(ferry_comm* comm);

/* Collective over the group's accepted peers: how many peers wait to be
   admitted. Every caller gets the same answer, so all of them can decide
   alike whether to call ferry_update_topology. Unlike ferry_update_topology
   it is not refused with operations in flight: they go on running. A member
   the master removes meanwhile is not waited for. Blocks at most timeout_ms;
   that bound ignores a lost master being dialed again
   (master_reconnect_timeout_ms): the call first waits for it, up to the
   rest of that window, and a question the master's loss left unanswered
   is asked again, for another timeout_ms, of the master that comes back.
   Errors: FERRY_ERR_INVALID_ARGUMENT (NULL), FERRY_ERR_INVALID_USAGE (not
   connected), FERRY_ERR_TIMEOUT (a member did not ask in time),
   FERRY_ERR_MISMATCH (another member began a collective instead),
   FERRY_ERR_MASTER_LOST, FERRY_ERR_KICKED. */
FERRY_API ferry_result ferry_peers_pending(ferry_comm* comm, uint32_t* pending);

typedef enum ferry_attribute {
  FERRY_ATTR_GLOBAL_WORLD_SIZE = 0,  /* accepted peers of all groups */
  FERRY_ATTR_GROUP_WORLD_SIZE = 1,   /* peers in this peer's ring */
  FERRY_ATTR_NUM_GROUPS = 2,         /* groups with at least one accepted peer */
  FERRY_ATTR_LARGEST_GROUP_SIZE = 3, /* the largest group's world size */
  FERRY_ATTR_RANK = 4,               /* this peer's position in its ring */
  FERRY_ATTR_PEER_GROUP = 5,         /* this peer's group id */
  FERRY_ATTR_PEER_ID = 6,            /* this peer's id, assigned by the master (unique in the run) */
  FERRY_ATTR_EPOCH = 7,              /* the ring's epoch: changes with every topology vote */
  /* How many of this peer's ring connections (out to the next peer plus in
     from the previous one, 0..2*p2p_connections) carry their bytes through
     shared memory (see ferry_comm_params.shared_memory); 0 before the first
     ring is built. */
  FERRY_ATTR_SHARED_MEMORY_LANES = 8,
  /* The peer id of the member that relays this peer's ring link to its next
     peer (ferry_comm_params.refuse_relay), 0 when the link is direct (added
     in 0.4). */
  FERRY_ATTR_NEXT_LINK_RELAY = 9,
  /* Bytes this peer forwarded as a relay for other members' ring links,
     both directions, since it was created; counted as each relayed lane
     closes (added in 0.4). */
  FERRY_ATTR_RELAYED_BYTES = 10
} ferry_attribute;

/* Reads an attribute as of the last topology this peer joined. Does not
   block. Errors: FERRY_ERR_INVALID_ARGUMENT (NULL, unknown attribute),
   FERRY_ERR_INVALID_USAGE (not connected yet). */
FERRY_API ferry_result ferry_comm_get_attribute(const ferry_comm* comm, ferry_attribute attribute,
                                                int64_t* value);

/* The ids (FERRY_ATTR_PEER_ID) of the ring's members in ring order, as of the
   last topology this peer joined: who a collective runs with. Writes at most
   `capacity` ids to `ids` (may be NULL when capacity is 0) and the ring's
   size to *count. Does not block.
   Errors: FERRY_ERR_INVALID_ARGUMENT (NULL comm or count, NULL ids with
   capacity > 0), FERRY_ERR_INVALID_USAGE (not connected yet). */
FERRY_API ferry_result ferry_comm_ring(const ferry_comm* comm, uint64_t* ids, size_t capacity, size_t* count);

/* What one peer measured of its link to another (added in 0.2). Each peer
   measures its ring link to the next peer passively: from the all-reduces
   that commit over it, and from its connections' TCP_INFO; it reports to the
   master after a collective, at most once a second. Pairs nobody measured
   (a newcomer's, or entries aged out) are probed when the master admits
   peers, before ferry_connect / ferry_update_topology return: 8 connections
   of the probe's own, for 16 RTTs (0.25 to 3 s), no collective running.
   The master keeps one matrix per group, members only, and drops an entry
   unrefreshed for ferry_master_params.link_max_age_ms. A pair nobody
   measured has no entry; one that could not connect has none either. */
typedef struct ferry_link_info {
  uint32_t struct_size;       /* set by the caller: sizeof(ferry_link_info) */
  uint32_t shared_memory;     /* 1: its bytes go through shared memory (the
                                 TCP figures below are then 0) */
  uint64_t from_peer;         /* the sender (FERRY_ATTR_PEER_ID) */
  uint64_t to_peer;           /* the receiver */
  /* Bytes/s the collectives achieved: payload bytes over transfer time
     (the master's go to this peer's last chunk out), over the all-reduces of
     at least 1 MiB since the previous report. A ring moves at its slowest
     link, so this is at most the slowest link's rate. 0: none yet.
     Probed: the best rate over any 2 RTTs of the probe. */
  double goodput_bytes_per_s;
  /* The sum of the link's connections' latest TCP delivery rates, bytes/s. */
  double delivery_rate_bytes_per_s;
  double rtt_ms;              /* mean smoothed TCP RTT of its connections
                                 (probed: the smallest RTT they saw) */
  /* Retransmitted segments per segment sent, over the connections' lives:
     a loss estimate, 0..1. */
  double retransmit_ratio;
  uint64_t bytes;             /* payload bytes the collectives (or the probe) sent over it */
  double age_s;               /* how old the measurement is */
  /* TCP connections carrying its chunks when it was measured (added in
     0.2): with p2p_connections 0 (the default) the count adapts to the
     link (see ferry_comm_params.p2p_connections); a probe's 8; 0 for a
     probed pair on one host (shared memory). */
  uint32_t connections;
} ferry_link_info;

/* The group's link matrix as the master holds it: one entry per measured
   ordered pair of members, ordered by (from_peer, to_peer). Unreported
   measurements of this peer's own link are sent first, so they are in the
   answer. Writes at most `capacity` entries to `links` (an array whose
   stride is links[0].struct_size, at least 8; it may be NULL when capacity
   is 0) and the number of entries the master holds to *count. Every peer of
   a group gets the same entries (ages aside) while nothing new is reported.
   Blocks for one round trip to the master, at most timeout_ms; while a
   lost master is being dialed again (master_reconnect_timeout_ms) it does
   not wait for it but fails at once with FERRY_ERR_PEER_LOST. Any thread.
   Errors: FERRY_ERR_INVALID_ARGUMENT (NULL comm or count, NULL links with
   capacity > 0, links[0].struct_size unset), FERRY_ERR_INVALID_USAGE (not
   connected yet), FERRY_ERR_TIMEOUT (the master did not answer in time),
   FERRY_ERR_PEER_LOST (the master is being dialed again),
   FERRY_ERR_MASTER_LOST, FERRY_ERR_KICKED. */
FERRY_API ferry_result ferry_comm_link_matrix(ferry_comm* comm, ferry_link_info* links, size_t capacity,
                                              size_t* count);

/* Sets the line the master shows beside this peer in /status ("label" of
   its entry in "peers") and on the dashboard (added in 0.3): what the peer
   wants its operator to see, say its work per outer step (ferry.diloco's
   time-boxed mode reports its inner steps and share). Optional, and display
   only: nothing the master or any peer decides reads it, no call waits for
   it, and no collective or vote carries it. `label` is a NUL-terminated
   string of at most 128 bytes of printable ASCII (0x20..0x7E: one line of
   a table cell); "" clears it. The library copies it: the caller keeps
   ownership of `label`, which need outlive the call only. May be called
   from any thread, before ferry_connect too (the label goes out once the
   master welcomes this peer) and as often as the caller likes: each change
   queues one small frame to the master, fire and forget; a master dialed
   again, or started again, gets the current label after its welcome. Does
   not block. A failed communicator keeps the label and sends it nowhere.
   Errors: FERRY_ERR_INVALID_ARGUMENT (NULL comm or label, longer than 128
   bytes, a byte outside 0x20..0x7E; ferry_last_error() names it). */
FERRY_API ferry_result ferry_comm_set_label(ferry_comm* comm, const char* label);

/* Ends this peer's membership now, from any thread, while other threads may
   be blocked in calls on the same communicator (added in 0.3): what a Ctrl-C
   handler or a watchdog calls to get a blocked ferry_connect, vote,
   all-reduce, barrier, broadcast, ferry_op_wait or shared-state sync back at
   once, without waiting for its deadline. Every call blocked on comm returns
   FERRY_ERR_INVALID_USAGE ("the communicator was aborted ...") within
   milliseconds, ops in flight fail with it (they must still be waited), and
   so do later collectives and votes on comm. The master hears the goodbye
   ferry_comm_destroy would send and drops this peer at once: the other
   members' collective in progress, or their next one, fails with
   FERRY_ERR_PEER_LOST (call ferry_update_topology). One exception: a dial of
   a master that does not answer, in flight inside ferry_connect, ends by its
   own deadline (a refused dial at once). Does not free anything: once the blocked calls have
   returned, destroy the communicator as usual (ferry_comm_destroy must still
   not race with any call). Calling it again, or on a communicator already
   failed, does no harm. Does not block beyond stopping the ring's lane
   threads (milliseconds). Not async-signal-safe: call it from a thread, not
   from a signal handler. Errors: FERRY_ERR_INVALID_ARGUMENT (NULL). */
FERRY_API ferry_result ferry_comm_abort(ferry_comm* comm);

/* Leaves the run cleanly (the master drops this peer at once; the others'
   next collective reports FERRY_ERR_PEER_LOST until they call
   ferry_update_topology) and frees the communicator. Operations in flight
   fail. Blocks at most 2.5 s (plus the end of a chunk already being
   reduced): up to 2 s for those operations to release their buffers and the
   master to take the goodbye, then up to 0.5 s for the library's threads to
   finish their work before they are stopped; while a lost master is being
   dialed again, up to 2 s more for the dial in flight. On return no library
   thread touches any operation's buffers. NULL is allowed. */
FERRY_API void ferry_comm_destroy(ferry_comm* comm);

/* ------------------------------------------------------------------------ */
/* All-reduce                                                                */
/* ------------------------------------------------------------------------ */

/* What crosses the wire (stable numbers, append only). Quantization is for
   float data (f32, f64; and f16/bf16 with the 8- and 4-bit codes), is lossy,
   and keeps every peer's result bit-identical.

   Per-hop codecs (u8, i8, u4, f16, bf16; any op): each segment is encoded
   once by its owner and every peer, the owner included, decodes those bytes.
   Reduce-scatter hops decode, accumulate in f32 (f64 for f64 data) and
   re-encode. u8/i8/u4: affine min-max per block of quant_block elements
   (scale and minimum in the accumulation type), rounding half to even; with
   the default block of 256, u8 sends 25.8% and u4 13.3% of f32's bytes.
   f16/bf16: IEEE half / bfloat16 values (f32 or f64 data only).
   Non-finite values: a u8/i8/u4 block holding a NaN or an infinity decodes
   to all NaN (never to a wrong finite value); f16/bf16 keep NaN and turn
   overflow into infinity, as IEEE does. Their error grows with every hop:
   up to N(N+1)/2 * R / (2L) for N peers, R a block's widest input range,
   L = 255 (u8/i8) or 15 (u4).

   Integer-domain modes (i8h, i4h; FERRY_OP_SUM and FERRY_OP_AVG only): the
   peers first agree a scale per block of quant_block elements (the max of
   every peer's block |x|, A, in N-1 small ring steps of one value per block
   each: 1/256 of f32's bytes per step at the default block; chunk by chunk,
   so a chunk's ring starts as soon as its scales are agreed while later
   chunks' agreement overlaps it), each peer encodes its input once as
   integers q in [-L, L] (L = 127 for i8h, 7 for i4h) of step s = A / L, the
   ring adds the integers, packed at 8 (4) + ceil(log2 k) bits for a sum of k,
   and every peer decodes the exact sum once. The result depends only on the
   inputs and the op, not on the ring order, the connections or the chunking.
   Error bound per element (f32 data; f64: 2^-52 for 2^-23):
     round to nearest (i8h, i4h):  |y - sum| <= N * s * (1/2 + 2^-14) + 2^-23 |y|
     stochastic (i8h-sr, i4h-sr):  |y - sum| <= N * s * (1 + 2^-14) + 2^-23 |y|
   (avg: divided by N), growing as N, not N^2. Stochastic rounding rounds up
   with probability equal to the remainder, from a seed every peer derives
   from the op, so each element's error has mean 0 (DiLoCo's
   pseudo-gradients over many outer steps). A block holding NaN or an
   infinity decodes to NaN. Groups of up to 65536 peers (larger ones are
   refused with FERRY_ERR_INVALID_ARGUMENT). Bytes against f32 at the default
   block, 8 peers: i8h 34.4% (u8: 25.8%), i4h 21.9% (u4: 13.3%), the scale
   agreement included (4.5% of i8h's). */
typedef enum ferry_quant {
  FERRY_QUANT_NONE = 0, FERRY_QUANT_U8 = 1, FERRY_QUANT_I8 = 2,
  FERRY_QUANT_F16 = 3, FERRY_QUANT_BF16 = 4, FERRY_QUANT_U4 = 5,
  FERRY_QUANT_I8H = 6, FERRY_QUANT_I4H = 7, FERRY_QUANT_I8H_SR = 8, FERRY_QUANT_I4H_SR = 9
} ferry_quant;

/* The name of a quantization: "none", "u8", "i8", "f16", "bf16", "u4",
   "i8h", "i4h", "i8h-sr" or "i4h-sr"
   (the spelling of ferry's tools and Python package). Static storage, never
   NULL; "unknown" for a value that is not a ferry_quant. Does not block;
   any thread. */
FERRY_API const char* ferry_quant_name(ferry_quant quant);

/* Where a tensor's memory lives. FERRY_DEVICE_CUDA needs a libferry built
   with CUDA (FERRY_CUDA, the default when a CUDA compiler is found) and a
   CUDA device at run time; otherwise such a tensor is refused with
   FERRY_ERR_INVALID_ARGUMENT and ferry_last_error() says "this libferry was
   built without CUDA" or "no CUDA device: <CUDA's error>", and nothing is
   read or written. Device tensors are staged through pinned host memory
   (below); the shared-state content hash of a device tensor is computed on
   the device (the same value as the CPU's). */
typedef enum ferry_device { FERRY_DEVICE_CPU = 0, FERRY_DEVICE_CUDA = 1 } ferry_device;

typedef struct ferry_allreduce_desc {
  uint32_t struct_size;       /* sizeof(ferry_allreduce_desc); set by _init */
  ferry_dtype dtype;          /* default FERRY_F32 */
  ferry_reduce_op op;         /* default FERRY_OP_SUM */
  /* Names the operation; must match on every peer at the same position in
     the collective order. Default 0. */
  uint64_t tag;
  ferry_quant quant;          /* default FERRY_QUANT_NONE; must match on every peer */
  /* Elements per scale block for u8/i8/u4/i8h/i4h; 0 (default) means 256.
     1..65536; must match on every peer. */
  uint32_t quant_block;
  /* Added for device tensors (a struct_size from an older header ends before these and
     keeps the defaults): where `send` and `recv` live. With
     FERRY_DEVICE_CUDA both are memory of CUDA device `device_index`,
     borrowed until the call returns (ferry_allreduce) or the op is waited
     (ferry_allreduce_async). Ordering: ferry records an event on
     `cuda_stream` at the call, so it reads `send` after the work the caller
     enqueued there before the call; it copies `send` on a stream of its own
     into a pinned host buffer (pooled, reused) and reduces there; on success
     it copies the result into `recv` on its own stream and makes
     `cuda_stream` wait on an event for that copy (at ferry_allreduce's
     return, or in ferry_op_wait for an async op), so `cuda_stream` never
     waits for the network, only for the copy back. On failure `recv` is not
     written. ferry_allreduce_multiple_with_retry takes host buffers only.
     Errors as ferry_allreduce, plus FERRY_ERR_INVALID_ARGUMENT for a device
     this build or process lacks (see ferry_device) or a buffer that is not
     on it, and FERRY_ERR_SYSTEM for a CUDA call that fails. */
  ferry_device device;        /* default FERRY_DEVICE_CPU */
  int device_index;           /* CUDA device ordinal; default 0 */
  void* cuda_stream;          /* a cudaStream_t; NULL (default): the legacy default stream */
} ferry_allreduce_desc;

FERRY_API void ferry_allreduce_desc_init_sized(ferry_allreduce_desc* desc, uint32_t struct_size);
FERRY_API void(ferry_allreduce_desc_init)(ferry_allreduce_desc* desc);
#define ferry_allreduce_desc_init(desc) ferry_allreduce_desc_init_sized((desc), (uint32_t)sizeof *(desc))

typedef struct ferry_op_info {
  uint32_t struct_size;       /* set by the caller: sizeof(ferry_op_info) */
  uint32_t world_size;        /* peers the operation ran with */
  uint64_t bytes_sent;        /* payload bytes this peer put on the wire */
  uint64_t bytes_received;
  double duration_s;          /* from the call to the master's commit */
  /* Where that time went, each against its deadline (a struct_size from an
     older header simply ends before these): */
  double start_s;             /* waiting for the master's go: <= timeout_ms */
  double longest_stall_s;     /* longest stretch of the transfer without
                                 progress: <= progress_timeout_ms */
  double commit_s;            /* from this peer's end to the master's verdict:
                                 <= 2 * timeout_ms (see ferry_allreduce) */
  /* The integer-domain modes (i8h, i4h, ...): from the master's go to this
     peer's first agreed chunk of scales, before which its ring cannot start
     (later chunks agree while earlier ones move). 0 otherwise. */
  double quant_agreement_s;
} ferry_op_info;

/* Collective: every accepted peer of the group reduces `count` elements of
   `send` element-wise and receives the result in `recv`, bit-identical on
   every peer. send == recv (in place) is allowed; otherwise the buffers must
   not overlap and `send` is never written. count 0 is a no-op that still
   checks the peers agree. A world of one copies send to recv.
   Buffers are borrowed until the call returns. `info` may be NULL.
   Blocks until the master commits or aborts the operation: at most
   timeout_ms to start (the FERRY_ERR_TIMEOUT then names the members that
   had not begun it, on every peer), progress_timeout_ms without progress, and
   2 * timeout_ms to commit (a peer whose verdict is late asks the master to
   abort and takes the verdict that answers it, so every peer gets the same
   one; a master silent for that second timeout_ms too leaves the peer to
   fail with FERRY_ERR_TIMEOUT on its own).
   The transfer itself has no overall limit: a slow link that keeps moving
   bytes is not a failure. `info` reports each phase's time.
   On failure `recv` holds unspecified values (possibly partial sums);
   `send` (if distinct) is intact, so the call can be retried.
   Errors: FERRY_ERR_INVALID_ARGUMENT (NULL buffer with count > 0, bad
   desc, a quantization the dtype cannot take), FERRY_ERR_INVALID_USAGE
   (not connected), FERRY_ERR_MISMATCH (parameters differ between peers,
   or another member called a vote here instead: see "Threads"),
   FERRY_ERR_PEER_LOST, FERRY_ERR_TIMEOUT, FERRY_ERR_MASTER_LOST,
   FERRY_ERR_KICKED, FERRY_ERR_PROTOCOL (a neighbour sent a malformed or
   corrupted chunk). */
FERRY_API ferry_result ferry_allreduce(ferry_comm* comm, const void* send, void* recv, size_t count,
                                       const ferry_allreduce_desc* desc, ferry_op_info* info);

/* ------------------------------------------------------------------------ */
/* Asynchronous all-reduce                                                   */
/* ------------------------------------------------------------------------ */

/* An all-reduce in flight. Owned by the caller from ferry_allreduce_async
   until ferry_op_wait, which releases it; every op must be waited exactly
   once (destroying the communicator fails the ops still in flight, but they
   must still be waited to free them). */
typedef struct ferry_op ferry_op;

/* Issues the all-reduce described for ferry_allreduce and returns at once;
   it progresses on the communicator's threads while the caller computes.
   Several may be in flight; the master matches the k-th collective of every
   peer, so issue them in the same order everywhere (tags are checked:
   FERRY_ERR_MISMATCH, never a hang). The library borrows `send` and `recv`
   until ferry_op_wait returns (or ferry_op_test reports done): do not touch
   them before. ferry_update_topology is refused while ops are in flight.
   Errors (immediate): FERRY_ERR_INVALID_ARGUMENT, FERRY_ERR_INVALID_USAGE,
   FERRY_ERR_MASTER_LOST, FERRY_ERR_KICKED. Everything else is reported by
   ferry_op_wait. */
FERRY_API ferry_result ferry_allreduce_async(ferry_comm* comm, const void* send, void* recv, size_t count,
                                             const ferry_allreduce_desc* desc, ferry_op** op);

/* Collective over the group's accepted peers (added in 0.3): returns once
   every member has called it, agreed through the master like an all-reduce
   (all-or-nothing, the same deadlines, a member that calls something else
   here is FERRY_ERR_MISMATCH on every peer). Thread-safety and ordering as
   ferry_allreduce. Errors: FERRY_ERR_INVALID_ARGUMENT (NULL),
   FERRY_ERR_INVALID_USAGE (not connected), FERRY_ERR_MISMATCH,
   FERRY_ERR_PEER_LOST, FERRY_ERR_TIMEOUT, FERRY_ERR_MASTER_LOST,
   FERRY_ERR_KICKED. */
FERRY_API ferry_result ferry_barrier(ferry_comm* comm);

/* Collective over the group's accepted peers (added in 0.3): the `bytes`
   bytes of `buffer` on the member of rank `root` (FERRY_ATTR_RANK) arrive
   in `buffer` on every member, bit for bit. Every member passes the same
   bytes and root (else FERRY_ERR_MISMATCH on every peer). It runs as an
   all-reduce (the same guarantees, deadlines and `info`; on the wire, about
   twice the bytes a tree broadcast would send): the others' buffers are
   zeroed at the call and summed with the root's as 8-bit integers, which
   is exact. On failure the root's buffer still holds its bytes; the
   others' hold unspecified values. `buffer` is borrowed until the call
   returns; `info` may be NULL. bytes 0 is a barrier.
   Errors: FERRY_ERR_INVALID_ARGUMENT (NULL comm, NULL buffer with bytes >
   0, root not a rank of the group), FERRY_ERR_INVALID_USAGE (not
   connected), FERRY_ERR_MISMATCH, FERRY_ERR_PEER_LOST, FERRY_ERR_TIMEOUT,
   FERRY_ERR_MASTER_LOST, FERRY_ERR_KICKED, FERRY_ERR_PROTOCOL. */
FERRY_API ferry_result ferry_broadcast(ferry_comm* comm, void* buffer, size_t bytes, uint32_t root,
                                       ferry_op_info* info);

/* Non-blocking: *done = 1 when the op has finished (its buffers are free
   again and ferry_op_wait will return at once), else 0. Any thread, several
   at once, but never at the same time as or after ferry_op_wait on the same
   op: that call frees the op, and a test of it would read freed memory.
   Errors: FERRY_ERR_INVALID_ARGUMENT (NULL). */
FERRY_API ferry_result ferry_op_test(ferry_op* op, int* done);

/* Blocks until the op finishes (bounded by the communicator's deadlines),
   fills `info` (may be NULL), releases the op and returns its result: the
   errors listed for ferry_allreduce. Ops may be waited in any order, from any
   thread, each exactly once. NULL `op`, or an `info` whose struct_size is
   unset, returns FERRY_ERR_INVALID_ARGUMENT and leaves the op unreleased. */
FERRY_API ferry_result ferry_op_wait(ferry_op* op, ferry_op_info* info);

/* ------------------------------------------------------------------------ */
/* All-gather                                                                */
/* ------------------------------------------------------------------------ */

/* Added in 0.3. Every member contributes a byte buffer of its own length
   (zero allowed; the lengths may differ); every member receives every
   contribution, concatenated in rank order (FERRY_ATTR_RANK), the same bytes
   on every peer. The master agrees the call like any collective (the tags
   and the call must match; the lengths are exchanged through it, never
   required equal) and starts it with every member's length, so no peer needs
   to know the others' lengths in advance.
   On the wire: a ring of N-1 steps that forwards each rank's block to the
   next peer, pipelined in chunks over the link's connections (the
   all-reduce's striping, lane tuning, shared memory on one host and TLS).
   Each peer receives every other member's contribution once and sends all
   but its successor's: (N - 1) x the mean contribution received by each
   peer (sum of the others' lengths), about as many sent; no arithmetic.
   On failure (a member lost mid-way, a deadline, a mismatch) the op fails
   on every peer alike with the same result, retryable like an all-reduce
   (FERRY_ERR_PEER_LOST: ferry_update_topology, then call again); there is
   never a partial result. */
typedef struct ferry_all_gather_desc {
  uint32_t struct_size;       /* sizeof(ferry_all_gather_desc); set by _init */
  /* Names the operation; must match on every peer at the same position in
     the collective order (else FERRY_ERR_MISMATCH everywhere). Default 0. */
  uint64_t tag;
} ferry_all_gather_desc;

FERRY_API void ferry_all_gather_desc_init_sized(ferry_all_gather_desc* desc, uint32_t struct_size);
FERRY_API void(ferry_all_gather_desc_init)(ferry_all_gather_desc* desc);
#define ferry_all_gather_desc_init(desc) ferry_all_gather_desc_init_sized((desc), (uint32_t)sizeof *(desc))

/* An all-gather's result: every member's bytes in rank order. Owned by the
   caller from ferry_all_gather(_async) until ferry_gathered_destroy (NULL
   allowed), which may come at any time, even before the op is waited (the
   library keeps what it still writes alive itself). Its bytes are allocated
   by the library when the master starts the op (the sum of the lengths) and
   are readable only once the op succeeded; they stay valid, unchanged, until
   ferry_gathered_destroy. Reading from several threads at once is fine. */
typedef struct ferry_gathered ferry_gathered;

/* Collective: gathers `bytes` bytes of `send` from every member (see above).
   `send` is borrowed until the call returns (it is copied once, when the op
   starts). On success *result is a new ferry_gathered; on failure it is
   NULL. `info` may be NULL; its bytes_sent / bytes_received count payload.
   Blocks, deadlines and thread-safety as ferry_allreduce (the deadlines are
   the communicator's timeout_ms to start, progress_timeout_ms without
   progress, 2 * timeout_ms to commit).
   Errors: FERRY_ERR_INVALID_ARGUMENT (NULL comm, desc or result, NULL send
   with bytes > 0, desc not initialised, the lengths together more than this
   process can address), FERRY_ERR_INVALID_USAGE (not connected),
   FERRY_ERR_MISMATCH (another member called something else here, or another
   tag), FERRY_ERR_PEER_LOST, FERRY_ERR_TIMEOUT, FERRY_ERR_MASTER_LOST,
   FERRY_ERR_KICKED, FERRY_ERR_PROTOCOL (a neighbour sent a malformed or
   corrupted chunk), FERRY_ERR_SYSTEM (the result could not be allocated). */
FERRY_API ferry_result ferry_all_gather(ferry_comm* comm, const void* send, size_t bytes,
                                        const ferry_all_gather_desc* desc, ferry_gathered** result,
                                        ferry_op_info* info);

/* Issues the all-gather described for ferry_all_gather and returns at once,
   like ferry_allreduce_async (ordering, tags, concurrency with other
   collectives in flight: the same rules). *op is waited with ferry_op_wait
   (or polled with ferry_op_test) exactly once; *result is a new handle at
   once, whose bytes become readable when ferry_op_wait returns FERRY_OK.
   The library borrows `send` until ferry_op_wait returns.
   Errors (immediate; both outputs NULL then): FERRY_ERR_INVALID_ARGUMENT,
   FERRY_ERR_INVALID_USAGE, FERRY_ERR_MASTER_LOST, FERRY_ERR_KICKED.
   Everything else (as ferry_all_gather) is reported by ferry_op_wait. */
FERRY_API ferry_result ferry_all_gather_async(ferry_comm* comm, const void* send, size_t bytes,
                                              const ferry_all_gather_desc* desc, ferry_gathered** result,
                                              ferry_op** op);

/* The whole result: the members' count, the concatenated bytes (NULL when
   every length was 0) and their total. Any output may be NULL. Does not
   block; any thread.
   Errors: FERRY_ERR_INVALID_ARGUMENT (NULL gathered), FERRY_ERR_INVALID_USAGE
   (the op has not succeeded: not waited yet, or failed). */
FERRY_API ferry_result ferry_gathered_layout(const ferry_gathered* gathered, uint32_t* members,
                                             const void** data, size_t* total_bytes);

/* Rank `rank`'s contribution: a pointer into the result and its length.
   Either output may be NULL. Does not block; any thread.
   Errors: FERRY_ERR_INVALID_ARGUMENT (NULL gathered, rank not below the
   members' count), FERRY_ERR_INVALID_USAGE (the op has not succeeded). */
FERRY_API ferry_result ferry_gathered_part(const ferry_gathered* gathered, uint32_t rank, const void** data,
                                           size_t* bytes);

/* Frees a result (the pointers it gave out die with it). NULL is allowed. */
FERRY_API void ferry_gathered_destroy(ferry_gathered* gathered);

/* ------------------------------------------------------------------------ */
/* Sparse contributions (SparseLoCo's outer steps)                           */
/* ------------------------------------------------------------------------ */

/* Added in 0.3. A codec for pseudo-gradients sent as an all-gather: per
   chunk of `chunk` elements keep the `k` of largest magnitude (ties: the
   lower index), send their positions (Rice-coded gaps) and their values at
   `bits` bits (sign and magnitude on a per-chunk scale), and hand the caller
   what was not sent (the error-feedback residual). Every peer encodes the
   same bytes from the same input bits, and every peer that decodes the same
   contributions gets the same bits. Pure functions: no communicator, no
   state; any thread, concurrently on different buffers. The format
   (versioned, self-describing: each contribution names its own spec) and
   the selection and rounding rules: src/core/sparse_codec.h. Cost: chunk
   4096, k 82 (2 %), 2 bits: about 102 bytes a chunk of 16 KiB of f32. */
typedef struct ferry_sparse_spec {
  uint32_t struct_size; /* sizeof(ferry_sparse_spec); set by _init */
  uint32_t chunk;       /* elements a chunk, 1..65536; default 4096 */
  uint32_t k;           /* entries sent a chunk, 1..chunk; default 82 (2 %) */
  uint32_t bits;        /* bits a value: 2, 4 or 8; default 2 */
} ferry_sparse_spec;

FERRY_API void ferry_sparse_spec_init_sized(ferry_sparse_spec* spec, uint32_t struct_size);
FERRY_API void(ferry_sparse_spec_init)(ferry_sparse_spec* spec);
#define ferry_sparse_spec_init(spec) ferry_sparse_spec_init_sized((spec), (uint32_t)sizeof *(spec))

/* The k of a density in (0, 1] for chunks of `chunk` elements:
   round(density x chunk), at least 1; 0 when chunk or density is out of
   range. Never fails otherwise. */
FERRY_API uint32_t ferry_sparse_k_for_density(uint32_t chunk, double density);

/* *bytes = the most bytes the contribution of `count` elements can take:
   the capacity to give ferry_sparse_encode.
   Errors: FERRY_ERR_INVALID_ARGUMENT (NULL spec or bytes, spec not
   initialised or out of range, count above 2^40). */
FERRY_API ferry_result ferry_sparse_max_bytes(const ferry_sparse_spec* spec, size_t count, size_t* bytes);

/* Encodes x[0..count) (FERRY_F32, FERRY_BF16 or FERRY_F16) into out
   (`capacity` bytes, at least ferry_sparse_max_bytes; must not overlap x)
   and sets *written to the contribution's length. `residual`, when not
   NULL, receives count f32 values: x minus what ferry_sparse_decode_sum makes
   of this contribution alone. With FERRY_F32 it may be x itself: then only
   the sent entries change (an error-feedback accumulator updated in place).
   Errors: FERRY_ERR_INVALID_ARGUMENT (NULL spec, out or written, NULL x with
   count > 0, spec out of range, another dtype, capacity too small). */
FERRY_API ferry_result ferry_sparse_encode(const ferry_sparse_spec* spec, ferry_dtype dtype, const void* x,
                                           size_t count, void* out, size_t capacity, size_t* written,
                                           float* residual);

/* out[0..count) = the sum of `members` contributions, parts[r] of sizes[r]
   bytes being rank r's, folded in rank order in f32 (round to nearest even,
   no FMA): the same bits on every peer that holds the same contributions,
   whatever order they arrived in. A part of 0 bytes sends nothing (a member
   with nothing to contribute). Every part is checked before out is written.
   Errors: FERRY_ERR_INVALID_ARGUMENT (NULL out with count > 0, NULL parts
   or sizes with members > 0, NULL parts[r] with sizes[r] > 0),
   FERRY_ERR_PROTOCOL (a malformed part, or one of another count: the
   message names its rank; out untouched). */
FERRY_API ferry_result ferry_sparse_decode_sum(const void* const* parts, const size_t* sizes, uint32_t members,
                                               float* out, size_t count);

/* ------------------------------------------------------------------------ */
/* Several all-reduces, retried through failures                             */
/* ------------------------------------------------------------------------ */

typedef struct ferry_allreduce_job {
  uint32_t struct_size;       /* sizeof(ferry_allreduce_job); set by _init */
  const void* send;           /* as for ferry_allreduce */
  void* recv;
  size_t count;
  ferry_allreduce_desc desc;  /* initialised by ferry_allreduce_job_init */
} ferry_allreduce_job;

FERRY_API void ferry_allreduce_job_init_sized(ferry_allreduce_job* job, uint32_t struct_size);
FERRY_API void(ferry_allreduce_job_init)(ferry_allreduce_job* job);
#define ferry_allreduce_job_init(job) ferry_allreduce_job_init_sized((job), (uint32_t)sizeof *(job))

/* Collective: runs `n` all-reduces with at most `max_in_flight` in flight
   (0 means 4), issued in array order. When a peer is lost (or a transfer
   times out), every surviving peer stops, votes a new topology together and
   issues the unfinished jobs again in the smaller (or grown) world, until
   all succeed. Use it as a unit on every peer, with the same jobs in the same
   order.
   In-place jobs (send == recv) have their input copied aside first and
   restored before each retry (memory for one copy of each in-place buffer);
   other jobs' `send` is never written.
   `jobs` is an array of `n` structs whose stride is jobs[0].struct_size (so
   callers built against an older header keep working). Buffers are borrowed
   until the call returns. `info` (may be NULL) sums bytes and time over every
   attempt; world_size is the final world; start_s, longest_stall_s,
   commit_s and quant_agreement_s are the longest any operation had.
   Blocks for as long as the operations and the votes take, each under the
   communicator's deadlines; gives up after 16 rounds.
   Errors: FERRY_ERR_INVALID_ARGUMENT (as ferry_allreduce, per job),
   FERRY_ERR_INVALID_USAGE (not connected, or operations already in flight),
   FERRY_ERR_PEER_LOST (the group shrank below two peers, or 16 rounds
   failed; a shrunk group is told once the vote that removed the lost peer
   ends: a peer that left or whose connection closed is seen at once, a
   silent one within heartbeat_timeout_ms or progress_timeout_ms, and the
   vote takes at most timeout_ms. A newcomer admitted with
   ferry_update_topology then lets the next call run), FERRY_ERR_TIMEOUT, FERRY_ERR_MISMATCH, FERRY_ERR_MASTER_LOST,
   FERRY_ERR_KICKED, FERRY_ERR_PROTOCOL. On failure, `recv` of unfinished
   jobs holds unspecified values. */
FERRY_API ferry_result ferry_allreduce_multiple_with_retry(ferry_comm* comm, const ferry_allreduce_job* jobs,
                                                           size_t n, uint32_t max_in_flight, ferry_op_info* info);

/* ------------------------------------------------------------------------ */
/* Shared state                                                              */
/* ------------------------------------------------------------------------ */

typedef enum ferry_sync_strategy {
  /* The most common bytes among the peers at the sync's revision win; this
     peer's bytes count (default). */
  FERRY_SYNC_ENFORCE_POPULAR = 0,
  /* This peer never sends and never counts; it ends with the winning bytes
     (a newcomer, typically). */
  FERRY_SYNC_RECEIVE_ONLY = 1,
  /* This peer's bytes must win; a second send-only peer whose bytes differ
     is kicked (and the sync fails with FERRY_ERR_PEER_LOST everywhere). */
  FERRY_SYNC_SEND_ONLY = 2
} ferry_sync_strategy;

typedef struct ferry_tensor {
  uint32_t struct_size;   /* sizeof(ferry_tensor); set by _init */
  const char* name;       /* 1..255 bytes, unique in the state; matched by name across peers */
  void* data;             /* count elements of dtype; borrowed during the call */
  size_t count;
  ferry_dtype dtype;
  ferry_device device;    /* default FERRY_DEVICE_CPU */
  /* Nonzero: this tensor may legitimately differ between peers (e.g. an RNG
     state); it is never compared or moved. Must be the same on every peer. */
  int allow_content_inequality;
  int changed;            /* out: 1 when the call overwrote this tensor's bytes */
  /* Added for device tensors: the CUDA device ordinal of `data` when device is
     FERRY_DEVICE_CUDA (default 0). Such a tensor is copied to pinned host
     memory on ferry's stream after the work enqueued on the state's
     cuda_stream before the call, and hashed on the device; when the sync
     overwrites it, the new bytes are copied back on ferry's stream and
     cuda_stream waits on an event for the copy. On failure it is not
     written. */
  int device_index;
} ferry_tensor;

FERRY_API void ferry_tensor_init_sized(ferry_tensor* tensor, uint32_t struct_size);
FERRY_API void(ferry_tensor_init)(ferry_tensor* tensor);
#define ferry_tensor_init(tensor) ferry_tensor_init_sized((tensor), (uint32_t)sizeof *(tensor))

typedef struct ferry_shared_state {
  uint32_t struct_size;   /* sizeof(ferry_shared_state); set by _init */
  /* In: this peer's revision. Out (on success): the group's revision, which
     every peer now shares. The revision rule: the highest revision offered
     by the peers that are not receive-only must be the group's previous
     revision + 1 (any value for the group's first sync, or once every
     member that held the previous revision has left: a state nobody holds
     is lost, and the master logs it); such peers with a lower revision are
     behind and receive, like receive-only peers. */
  uint64_t revision;
  ferry_tensor* tensors;  /* array of `count`; stride tensors[0].struct_size */
  size_t count;
  /* zstd level this peer asks holders to compress with when it fetches
     (0, the default: raw bytes; 1-3 pay on slow links, cost CPU on fast ones). */
  uint32_t compression_level;
  /* Added for device tensors: the cudaStream_t that orders this state's device tensors
     (see ferry_tensor.device_index); NULL (default): the legacy default stream. */
  void* cuda_stream;
} ferry_shared_state;

FERRY_API void ferry_shared_state_init_sized(ferry_shared_state* state, uint32_t struct_size);
FERRY_API void(ferry_shared_state_init)(ferry_shared_state* state);
#define ferry_shared_state_init(state) ferry_shared_state_init_sized((state), (uint32_t)sizeof *(state))

typedef struct ferry_sync_info {
  uint32_t struct_size;     /* set by the caller: sizeof(ferry_sync_info) */
  uint64_t bytes_sent;      /* served to other peers (wire bytes) */
  uint64_t bytes_received;  /* fetched from holders (wire bytes) */
  uint32_t tensors_changed; /* tensors this call overwrote */
  uint64_t revision;        /* the group's revision after the sync */
  double duration_s;
} ferry_sync_info;

/* Collective over the group: afterwards every peer holds the same bytes in
   every tensor that does not allow inequality. Each peer hashes its tensors;
   the master elects the winning content per tensor (see ferry_sync_strategy
   and the revision rule above); peers whose bytes differ fetch the winning
   bytes from the peers holding them, over several connections and from
   several holders at once, verify their hash, and only then return. Chunks
   from a holder whose connection breaks are fetched again from another
   holder. A member that dies during the sync does not fail it while every
   peer still fetching has another holder of what it fetches: the others
   finish and commit without it (the group's ring is then broken, as after
   any loss: the next collective asks for ferry_update_topology). Otherwise
   the sync fails on every peer with FERRY_ERR_PEER_LOST (all-or-nothing,
   like every collective), never a success with a torn tensor.
   Every peer of the group must call it (same tensor names, dtypes and
   counts; the order may differ). Tensors are borrowed until the call
   returns: holders serve from them while others fetch.
   On failure the fetched tensors hold unspecified bytes (possibly part old,
   part new) and `revision` is unchanged; call again after
   ferry_update_topology.
   Blocks at most timeout_ms waiting for the other peers, and
   progress_timeout_ms without a byte moving.
   Errors: FERRY_ERR_INVALID_ARGUMENT (NULL, bad tensor, duplicate name,
   device), FERRY_ERR_INVALID_USAGE (not connected; the revision rule; every
   peer receive-only), FERRY_ERR_MISMATCH (peers declare different tensors),
   FERRY_ERR_PEER_LOST, FERRY_ERR_TIMEOUT, FERRY_ERR_PROTOCOL (fetched bytes
   did not verify), FERRY_ERR_MASTER_LOST, FERRY_ERR_KICKED. */
FERRY_API ferry_result ferry_sync_shared_state(ferry_comm* comm, ferry_shared_state* state,
                                               ferry_sync_strategy strategy, ferry_sync_info* info);

#ifdef __cplusplus
}
#endif

#endif /* FERRY_FERRY_H */
