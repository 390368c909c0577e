/* bridge/server/server.h - rk-bridge's parts and how they fit (rkb_ =
 * bridge internal; not installed).
 *
 * One struct per role:
 *   rkb_port   the client-facing ROUTER socket: binding (endpoint.c),
 *              reading a request's frames and sending a reply's (port.c),
 *              its socket monitor, signals and start/stop (watch.c), and
 *              the status endpoint beside it (--status-bind, statusep.c);
 *   rkb_loop   a request loop: decode, answer or admit into its runtime
 *              actor, turn runtime replies into protocol replies (loop.c,
 *              reply.c, admin.c, pool.c); it talks to the port directly
 *              (--io-threads 1) or through two rings (a worker);
 *   rkb_front  the frontend (--io-threads > 1): owns the port, moves
 *              frames between it and the workers' rings (frontend.c);
 *   rkb_shared what all of them share: config, runtime, stop state, and
 *              a deploy's (SIGHUP, deploy.c).
 * Every message's frames are moved (struct copy of zmq_msg_t), never
 * copied, from the socket to the entry that holds them until the reply. */
#ifndef RKB_SERVER_H
#define RKB_SERVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <rk/rk.h>
#include <zmq.h>

#include "codec.h"
#include "config.h"
#include "cpus.h"
#include "log.h"
#include "spsc.h"

/* ---- counters -------------------------------------------------------------
 * Each thread keeps its own (one writer: relaxed atomic stores); `status`
 * sums them with relaxed loads. Every name is also a status counter. */
#define RKB_THREAD_COUNTERS(X)                                                 \
    X(requests) X(replies) X(errors) X(busy) X(too_large) X(malformed)         \
    X(shutting_down) X(device_fault) X(internal) X(permission_denied)          \
    X(queued_total) X(dropped_replies) X(unroutable) X(accepted)               \
    X(disconnects) X(accept_failures) X(listen_pauses) X(connections_shed)

typedef struct rkb_counters {
#define RKB__TC_FIELD(name) uint64_t name;
    RKB_THREAD_COUNTERS(RKB__TC_FIELD)
#undef RKB__TC_FIELD
} rkb_counters;

#define RKB_INC(n, f) __atomic_store_n(&(n)->f, (n)->f + 1, __ATOMIC_RELAXED)
#define RKB_ADD(n, f, v) __atomic_store_n(&(n)->f, (n)->f + (v), __ATOMIC_RELAXED)
#define RKB_SET(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define RKB_LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

int64_t rkb_now_ns(void);

/* ---- envelopes ------------------------------------------------------------
 * The routing envelope of one message: the routing id, then every frame up
 * to and including the first empty frame that is not the last (REQ's
 * delimiter; ZeroMQ proxies add one routing id per hop in front). The
 * first RKB_ENV_INLINE frames live in the struct, the rest (deep proxy
 * chains) in a heap array. At most RKB_ENV_MAX frames. */
#define RKB_ENV_INLINE 4
#define RKB_ENV_MAX 255

typedef struct rkb_env {
    zmq_msg_t in[RKB_ENV_INLINE];
    zmq_msg_t *more; /* frames RKB_ENV_INLINE..n-1, or NULL */
    uint8_t n;
} rkb_env;

static inline zmq_msg_t *rkb_env_at(rkb_env *e, int k)
{
    return k < RKB_ENV_INLINE ? &e->in[k] : &e->more[k - RKB_ENV_INLINE];
}

/* Moves src's frames into dst (src no longer owns them). Copies only the
 * inline frames in use: between threads every cache line counts (a whole
 * rkb_env is 5 lines, a DEALER client's envelope uses 2). */
static inline void rkb_env_move(rkb_env *dst, const rkb_env *src)
{
    const int n = src->n;
    for (int k = 0; k < n && k < RKB_ENV_INLINE; k++)
        dst->in[k] = src->in[k];
    dst->more = src->more;
    dst->n = src->n;
}
/* Closes every frame still held and frees the spill array (pool.h). */

/* ---- the port: the client ROUTER ---------------------------------------- */

struct rkb_shared;

/* An endpoint as bound, and its listening state (endpoint.c, watch.c). */
typedef struct rkb_endpoint {
    void *sock;           /* the ROUTER it is bound on (the main one, or the status one) */
    const char *asked;    /* as given to --bind or --status-bind */
    char bound[256];      /* as ZeroMQ reports it (tcp://HOST:* -> the port) */
    bool ipc_file;        /* an ipc:// path this bridge created */
    bool hidden;          /* ... renamed to PATH.paused during a pause (listener.c) */
    char path[200];       /* ... its file */
    uint64_t dev, ino;    /* ... which must still be this file to be removed */
    int lfd;              /* ZeroMQ's descriptor of its listening socket, or -1 */
    int real_fd;          /* ... and ours of the same socket (listener.c) */
    bool listening;       /* false while paused after accept failures */
    bool shed;            /* ... and connections wait to be shed */
    int64_t resume_at;    /* ... until then */
    int64_t backoff_ns;
    int64_t last_failure;
} rkb_endpoint;

typedef struct rkb_zap rkb_zap;

/* --status-bind (statusep.c): a second ROUTER that serves only `status`.
 * The port's thread reads it on every pass, at most RKB_STATUS_BURST
 * requests, whatever the queue bound: an operator's `status` is answered
 * while the main socket is left unread (back-pressure, a stalled runtime).
 * Same options, CURVE key and ZAP allow-list as the main ROUTER; its
 * endpoint is one of the port's eps (pauses, ipc files); its connections
 * and requests count in the port's counters. */
#define RKB_STATUS_BURST 8
/* its transport cap (or 4 x the message limit, when smaller): a status
 * request is a few dozen bytes, so a flood of large frames costs little */
#define RKB_STATUS_CAP ((int64_t)64 << 10)

typedef struct rkb_statusep {
    void *router;         /* NULL: no --status-bind */
    void *monitor;        /* PAIR receiving its socket events */
    rkb_endpoint *ep;     /* its entry in the port's eps */
    rkb_limits lim;       /* status_only */
    rkb_decode_state dec;
    rkb_encoder enc;
    rk_info info;
    bool ready;           /* dec and enc initialised */
} rkb_statusep;

typedef struct rkb_port {
    struct rkb_shared *sh;
    void *router;
    rkb_zap *zap;         /* CURVE's ZAP handler, or NULL */
    void *monitor;        /* PAIR receiving the ROUTER's socket events */
    int sfd;              /* signalfd for SIGINT/SIGTERM */
    bool stop_seen;       /* ... one came: SIGHUP deploys no more (watch.c) */
    int spare_fd;         /* kept open for shedding connections (listener.c) */
    int decoy_fd;         /* ... a listener nobody reaches, for pauses */
    int backlog;          /* ZMQ_BACKLOG */
    uint64_t base_fds;    /* descriptors open at start-up (before any client) */
    rkb_endpoint eps[RKB_MAX_BINDS + 1]; /* every --bind, then the status endpoint */
    int n_eps;
    rkb_statusep st;
    rkb_counters *n;      /* the owning thread's counters */
    int64_t next_watch;   /* rkb_port_watch: next look at signals and events */
    int64_t next_flush;   /* ... and at the log's summaries */
    int *conn_fds;        /* open connections' descriptors (monitor events),
                             for rkb_port_settle */
    int n_conn, cap_conn;
} rkb_port;

/* port.c: binds every endpoint, CURVE, socket options, the monitor.
 * Returns 0 or an exit status (message printed). */
int rkb_port_open(rkb_port *p, struct rkb_shared *sh, rkb_counters *n);
/* Waits, up to deadline_ns (rkb_now_ns), until the clients have read
 * every reply already written to their connections: closing a connection
 * with unread bytes in it makes libzmq drop them at a client whose receive
 * queue is full. Returns true when they did, false when the wait ran out.
 * Called once the request loops have stopped. */
bool rkb_port_settle(rkb_port *p, int64_t deadline_ns);
/* Stops the monitor, waits up to linger_ms for queued replies to leave,
 * closes the socket, removes ipc files. Safe on a port never opened. */
void rkb_port_close(rkb_port *p, int linger_ms);

/* Reads one message from sock (the port's router, or the status
 * endpoint's) without waiting: its envelope into *env, its first body
 * frame into *body, the number of body frames into *n_body (further ones
 * are closed). Returns 1 (a message), 0 (none ready) or -1 (a message read
 * and dropped, counted in unroutable: its envelope is deeper than
 * RKB_ENV_MAX). Counts requests. */
int rkb_port_recv_on(rkb_port *p, void *sock, rkb_env *env, zmq_msg_t *body, uint32_t *n_body);
/* Sends env's frames then *body on sock (ZMQ_DONTWAIT): every frame is
 * moved into ZeroMQ or closed, env->more freed. Counts replies, or why it
 * was dropped. */
void rkb_port_send_on(rkb_port *p, void *sock, rkb_env *env, zmq_msg_t *body);
static inline int rkb_port_recv(rkb_port *p, rkb_env *env, zmq_msg_t *body, uint32_t *n_body)
{
    return rkb_port_recv_on(p, p->router, env, body, n_body);
}
static inline void rkb_port_send(rkb_port *p, rkb_env *env, zmq_msg_t *body)
{
    rkb_port_send_on(p, p->router, env, body);
}
/* A ROUTER with the port's options and the transport cap `cap` (port.c). */
void *rkb_port_router(rkb_port *p, int64_t cap);
/* Its socket monitor, read by rkb_port_watch, into *out (via inproc ep). */
int rkb_port_monitor(rkb_port *p, void *sock, const char *ep, void **out);

/* watch.c: every millisecond or so while busy, and after every poll:
 * reads the signalfd (returns 1 when a stop signal arrived now), the
 * socket monitor (accept failures pause an endpoint, see RKB_PAUSE_*),
 * resumes paused endpoints, flushes the log's summaries. */
int rkb_port_watch(rkb_port *p, int64_t now);
/* Poll items for the port's signalfd and monitor, and for the status
 * endpoint's ROUTER and monitor when there is one: returns how many (at
 * most RKB_PORT_POLL_MAX). */
#define RKB_PORT_POLL_MAX 4
int rkb_port_poll_items(rkb_port *p, zmq_pollitem_t *it);
/* When the next paused endpoint wants to listen again (ms, -1 none). */
long rkb_port_timeout(const rkb_port *p, int64_t now);

/* endpoint.c */
/* Refuses (RKB_EXIT_USAGE, message printed) a bind beyond loopback without
 * CURVE unless allowed; appends a warning to sh when allowed. */
int rkb_endpoints_check(struct rkb_shared *sh);
/* Binds e (first time or again after a pause): ipc paths are checked and
 * get their mode. Returns 0 or -1 with msg filled. */
int rkb_endpoint_bind(rkb_port *p, rkb_endpoint *e, char *msg, size_t cap);
/* Removes the ipc file e created, if it is still that file. */
void rkb_endpoint_remove_file(rkb_endpoint *e);
/* The host of a tcp:// endpoint, without IPv6 brackets, into host (cap
 * bytes); returns where its ":PORT" starts (the end of ep when it has
 * none), or NULL for another transport or a host too long. */
const char *rkb_tcp_host(const char *ep, char *host, size_t cap);
/* Raises the soft file descriptor limit to the hard one; returns it. */
uint64_t rkb_raise_fd_limit(void);

/* listener.c: an endpoint's listening socket when descriptors run out
 * (the port's thread only). find: sets e->lfd and e->real_fd (-1 and a
 * warning when it cannot). pause: ZeroMQ stops accepting there and no new
 * connection reaches the accept queue (0, or -1 logged). shed: accepts and
 * closes what waits there while paused; returns how many. resume: undoes
 * pause (also before the ROUTER closes). open/close: the spare descriptor
 * and the decoy pausing needs; close also closes each real_fd. count:
 * the descriptors open now (at start-up, for rkb_port_watch). */
void rkb_listener_find(rkb_port *p, rkb_endpoint *e);
int rkb_listener_pause(rkb_port *p, rkb_endpoint *e);
void rkb_listener_resume(rkb_port *p, rkb_endpoint *e);
uint64_t rkb_listener_shed(rkb_port *p, rkb_endpoint *e);
void rkb_listener_open(rkb_port *p);
void rkb_listener_close(rkb_port *p);
uint64_t rkb_listener_count(void);

/* statusep.c: the status endpoint (rkb_statusep). open: its ROUTER and
 * codec (before CURVE is set up, which covers it too); bind: its endpoint
 * and monitor, after the main ones. Each returns 0 or an exit status
 * (message printed); both are no-ops without --status-bind. serve: reads
 * and answers up to RKB_STATUS_BURST requests; returns how many it read.
 * close: its monitor and socket (linger_ms for replies queued); safe when
 * never opened. */
int rkb_statusep_open(rkb_port *p);
int rkb_statusep_bind(rkb_port *p);
int rkb_statusep_serve(rkb_port *p);
void rkb_statusep_close(rkb_port *p, int linger_ms);

/* ---- the request pool (pool.c) --------------------------------------------
 * A request lives in an entry from the moment it is read until its reply is
 * sent: envelope and body frame. Entries in flight are found by the
 * runtime's request id (an open addressing table); entries waiting for
 * admission form a FIFO. Memory: window + queue entries per loop; the
 * bridge holds at most queue entries and queue_bytes of waiting frames
 * (plus the frame that reaches the bound), in all its loops together. */
/* STAGED: read and admitted, waiting in the loop's batch (rkb_loop.adm)
 * to be posted at the end of the read burst */
enum { RKB_FREE = 0, RKB_PARKED = 1, RKB_INFLIGHT = 2, RKB_STAGED = 3 };

typedef struct rkb_entry {
    rkb_env env;
    zmq_msg_t body;
    rkb_request req;
    int64_t deadline;
    uint64_t parked_len;  /* the body's bytes while parked */
    uint64_t rk_id;
    int32_t next;
    uint8_t state;
    bool body_open;
} rkb_entry;

typedef struct rkb_pool {
    rkb_entry *e;
    uint32_t n;
    int32_t free_head;
    uint32_t n_free;
    int32_t park_head, park_tail;
    uint32_t n_parked;       /* atomic for status */
    uint64_t parked_bytes;   /* atomic for status */
    uint32_t n_inflight;     /* atomic for status */
    uint64_t *map_key;       /* runtime id -> entry index + 1 (0 = empty) */
    uint32_t *map_val;
    uint32_t map_mask;
} rkb_pool;

int rkb_pool_init(rkb_pool *p, uint32_t entries, uint32_t window);
void rkb_pool_fini(rkb_pool *p);
/* pool.h, inline: rkb_pool_take (the free entry at free_head, whose frames
 * the caller filled), rkb_pool_put (closes an entry's frames and frees it),
 * rkb_pool_map_put, rkb_pool_map_take (the runtime id -> entry map). */
void rkb_pool_park(rkb_pool *p, int32_t idx, int64_t deadline);
int32_t rkb_pool_unpark(rkb_pool *p);

/* ---- hand-off between the frontend and the workers (handoff.c) ------------ */

/* What goes through a worker's rings, one message each way. The frames are
 * MOVED in and out by struct copy, never copied: the side that takes an
 * item out owns its frames. */
typedef struct rkb_item {
    zmq_msg_t body;   /* the first body frame; valid when n_body > 0 */
    rkb_env env;
    uint32_t n_body;  /* body frames the message had (replies: 1) */
} rkb_item;

#define RKB_REQ_RING 1024
#define RKB_REP_RING 2048
/* A burst through a ring publishes its index at least this often (and at
 * its end), so that the other side starts on it while it goes on. */
#define RKB_PUBLISH_EVERY 16

/* One thread that may block on its eventfd (a worker, or the frontend), on
 * a line of its own: producers read `sleeping` after every burst. */
typedef struct rkb_waker {
    _Alignas(RKB_SPSC_ALIGN) int sleeping; /* 1: the owner is in, or about to enter, poll */
    int efd;                               /* eventfd (EFD_NONBLOCK), -1 when unused */
} rkb_waker;

int rkb_waker_init(rkb_waker *w);
void rkb_waker_fini(rkb_waker *w);
void rkb_sleep_prepare(rkb_waker *w);
void rkb_sleep_end(rkb_waker *w, bool readable);
void rkb_wake(rkb_waker *w);
void rkb_wake_after_fence(rkb_waker *w);
/* Writes w's eventfd whether or not it sleeps (a stop). */
void rkb_wake_always(rkb_waker *w);
rkb_spsc *rkb_ring_new(uint32_t entries);
/* Closes the frames of every item left in q (its only user now); returns
 * how many there were. */
uint32_t rkb_ring_discard(rkb_spsc *q);
static inline void rkb_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* ---- the request loop ---------------------------------------------------- */

/* Requests posted per rk_actor_send_batch, replies reaped per
 * rk_actor_recv_batch */
#define RKB_ADMIT_BATCH 64
/* iovs of one request: a module actor's table head, fields and paddings */
#define RKB_REQ_IOV (1 + 2 * RK_FIELDS_MAX)

typedef struct rkb_loop {
    rkb_waker wk;           /* first: on its own line (a worker's eventfd) */
    struct rkb_shared *sh;
    const rkb_config *cfg;
    int index;
    pthread_t thread;
    rkb_port *port;         /* --io-threads 1: the socket; NULL in a worker */
    rkb_spsc *reqq, *repq;  /* a worker: fed by and replying to the frontend */
    uint64_t taken_bytes, taken_n; /* a worker: body bytes and requests it popped from reqq */
    bool owe_wake;          /* a worker pushed replies since it last woke the frontend */
    rk_actor *act;
    rk_info info;
    rkb_pool pool;
    rkb_decode_state dec;
    rkb_limits lim;
    rkb_actor *actors; /* the runtime's module actors, for lim.actors */
    rkb_encoder enc;
    rkb_counters n;
    bool stopping;
    int64_t stop_at;
    uint32_t quiet_gen;     /* atomic: the deploy (rkb_shared.deploy_gen) it holds nothing for */
    int32_t adm[RKB_ADMIT_BATCH]; /* entries a read burst admitted, posted together */
    int n_adm;
    size_t adm_bytes;             /* their bodies' bytes: they wait too, until the flush */
    /* A worker's part of the bound on waiting requests (--queue-bytes,
     * --queue): body bytes and requests the frontend pushed into reqq, and
     * how many of them wait no longer (answered, or in the runtime); each
     * only grows, and pushed - left is what waits in reqq, staged or
     * parked. pushed: the frontend's alone, on a line of its own. */
    _Alignas(RKB_SPSC_ALIGN) uint64_t pushed_bytes, pushed_n;
    /* left: the worker's, stored once per pass (rkb__publish_left, relaxed),
     * read by the frontend; last in the struct, so the line is its own */
    _Alignas(RKB_SPSC_ALIGN) uint64_t left_bytes, left_n;
} rkb_loop;

int rkb_loop_init(rkb_loop *l);
void rkb_loop_fini(rkb_loop *l);
/* (Re)makes l->actors and l->lim's view of it from the runtime's module
 * actors (start-up, and after a deploy). 0, or -1 out of memory (then no
 * module actor is decoded). */
int rkb_loop_actors(rkb_loop *l);
/* Runs until the stop rules say so (see loop.c). */
void rkb_loop_run(rkb_loop *l);
void *rkb_worker_main(void *arg);

/* reply.c: sending replies for the request in entry e (its envelope moves
 * out with the reply; the caller then frees the entry). */
/* The reply in l->enc; rc: what the rkb_encode_* call that packed it
 * returned. Out of memory (rc != 0, or no frame for it) it is an INTERNAL
 * error instead, or, when not even that fits, no reply (logged). */
void rkb_answer_encoded(rkb_loop *l, rkb_entry *e, int rc);
void rkb_answer_error(rkb_loop *l, rkb_entry *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void rkb_answer_rk_error(rkb_loop *l, rkb_entry *e, int rc, const char *detail);
void rkb_answer_data(rkb_loop *l, rkb_entry *e, rk_reply *r); /* releases r */
/* The reply enc holds, as a frame to send (large ones take enc's buffer).
 * 0, or -1 out of memory: m is then an empty frame (it holds nothing;
 * never send it) and a large reply is gone from enc. */
int rkb_msg_encoded(rkb_encoder *enc, zmq_msg_t *m);
/* Counts an error reply of code in n (errors, and the code's own). */
void rkb_count_error(rkb_counters *n, int code);
/* A module actor's reply (its outputs, or ACTOR_FAILED). Releases r. */
void rkb_answer_actor(rkb_loop *l, rkb_entry *e, rk_reply *r);
/* The id a refused frame carries, if it can be read. */
void rkb_peek_into(rkb_request *req, const zmq_msg_t *body);

/* admin.c: status, launch, and who may use admin operations. */
void rkb_do_status(rkb_loop *l, rkb_entry *e);
/* The whole `status` reply into enc; self: the loop answering (its own
 * counts are read now), or NULL (the status endpoint); info: refreshed.
 * Returns 0 or RKB_E_INTERNAL (out of memory). Any thread. */
int rkb_status_encode(struct rkb_shared *sh, const rkb_loop *self, rk_info *info, rkb_encoder *enc,
                      bool has_id, uint64_t id);
void rkb_do_launch(rkb_loop *l, rkb_entry *e);
/* The operator's "try the GPU again" after a crash loop (admin). */
void rkb_do_retry_gpu(rkb_loop *l, rkb_entry *e);
bool rkb_is_admin(const rkb_loop *l, rkb_entry *e);
bool rkb_is_launch_error(int rc);

/* ---- the frontend (frontend.c) -------------------------------------------- */

typedef struct rkb_front {
    rkb_waker wk;           /* first: on its own line */
    struct rkb_shared *sh;
    uint64_t wake_mask;     /* workers that got requests in this burst */
    int fill;               /* the worker being filled */
    uint64_t share_bytes, share_n; /* a worker's share of --queue-bytes and --queue (rkb__slot) */
    rkb_encoder enc;        /* SHUTTING_DOWN replies after a stop signal */
    rkb_counters n;
    bool stopping;
} rkb_front;

void rkb_front_run(rkb_front *f);
/* A stop: the workers answer what they hold and leave. */
void rkb_stop_workers(struct rkb_shared *sh);

/* ---- what every thread shares ------------------------------------------ */

#define RKB_MAX_WARNINGS 8

typedef struct rkb_shared {
    const rkb_config *cfg;
    void *ctx;
    rk_runtime *rt;
    rkb_port port;
    rkb_loop **loops;       /* every request loop */
    int n_loops;
    int zmq_io_threads;     /* the context's, --zmq-io-threads resolved */
    long cpus;              /* rkb_cpus() at start: what auto counted */
    rkb_front *front;       /* --io-threads > 1; else NULL */
    int stopping;           /* atomic: a signal arrived (worker mode) */
    int64_t stop_at;        /* written before stopping is set (release) */
    int live;               /* atomic: workers still running */
    /* a deploy (deploy.c): odd while one runs; written by the port's
     * thread (release), read by the workers (acquire) */
    uint32_t deploy_gen;
    int64_t deploy_at;      /* when it was asked (the port's thread) */
    int64_t drain_at;       /* when its requests began to wait (the port's thread) */
    /* before that, rk_runtime_reload_prepare in a thread of its own while
     * every loop serves: preparing (the port's thread), its result
     * (written before prep_done's release), prep_done (atomic) */
    bool preparing;
    pthread_t prep_thread;
    int prep_rc, prep_done;
    char prep_detail[512];
    uint64_t deploys, deploy_failures; /* atomic, for status */
    int exit_code;
    uint64_t fd_limit;
    char endpoints[1024];
    char status_endpoint[256]; /* --status-bind as bound; "" without */
    /* the in-process ring's round trip (64-B echo), measured at start-up */
    uint64_t ring_p50_ns, ring_p99_ns, ring_count;
    char warning_text[RKB_MAX_WARNINGS][256];
    const char *warnings[RKB_MAX_WARNINGS + 1];
    int n_warnings;
} rkb_shared;

/* deploy.c: SIGHUP deploys --actors again into the running bridge.
 * ask: the signal (the port's thread): the new set is prepared in a
 * thread while the bridge serves, then the port stops reading until the
 * switch is done (rkb_deploying). step: the port's thread, every pass
 * while rkb_deploy_busy (own: its request loop with --io-threads 1, else
 * NULL): starts the switch once prepared, makes it once every loop holds
 * nothing, or gives up after --drain-ms; returns 1 when the switch ended
 * (the port may read again), else 0. cancel: a stop signal ends it.
 * hold: a worker, at the top of every pass: true while it must not touch
 * the runtime (it held nothing and a switch runs). */
static inline bool rkb_deploying(const struct rkb_shared *sh);
static inline bool rkb_deploy_busy(const struct rkb_shared *sh);
void rkb_deploy_ask(struct rkb_shared *sh, int64_t now);
int rkb_deploy_step(struct rkb_shared *sh, rkb_loop *own, int64_t now);
void rkb_deploy_cancel(struct rkb_shared *sh);
bool rkb_deploy_hold(rkb_loop *l);

/* A sentence for the operator: stderr now, and `status` `warnings`. */
void rkb_warn_operator(rkb_shared *sh, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* keys.c and curve.c */
/* Reads a Z85 key (first line, 40 characters). secret: refuse a file that
 * group or others may access, unless allow_insecure. 0 or -1 (printed). */
int rkb_key_read(const char *path, char z85[41], bool secret, bool allow_insecure);
/* Starts the ZAP handler: clients whose key is in allow_dir or admin_dir
 * may connect; those in admin_dir get the User-Id "admin". */
int rkb_zap_start(rkb_zap **out, void *ctx, const char *allow_dir, const char *admin_dir);
/* Call after zmq_ctx_shutdown. NULL is a no-op. */
void rkb_zap_stop(rkb_zap *z);
/* How many client keys (allowed and admin) it admits. */
size_t rkb_zap_keys(const rkb_zap *z);

/* notify.c: systemd's readiness protocol; a no-op without $NOTIFY_SOCKET. */
void rkb_notify(const char *state);

/* the port's thread: its own writes, no atomic needed */
static inline bool rkb_deploying(const rkb_shared *sh) { return sh->deploy_gen & 1u; }
static inline bool rkb_deploy_busy(const rkb_shared *sh) { return sh->preparing || rkb_deploying(sh); }

#include "pool.h"

#endif
