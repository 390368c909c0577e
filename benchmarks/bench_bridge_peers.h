/* bench_bridge_peers.h - the ZeroMQ peers rk-bench bridge runs in its own
 * process: the raw ROUTER echo server it measures the bridge against, and
 * the broker hop (samples/broker.c's zmq_proxy) for --broker. Each runs on
 * a thread of its own with a context of its own; start and stop are called
 * from one thread. And what the bench reads of the bridge's status. */
#ifndef RK_BENCH_BRIDGE_PEERS_H
#define RK_BENCH_BRIDGE_PEERS_H

#include <pthread.h>
#include <stddef.h>

/* Its high-water marks (messages): a client's --window at most. */
#define BB_HWM 100000
/* A socket of `type` whose queues never make the benchmark's side busy. */
void *bb_socket(void *ctx, int type);
/* A DEALER to ep that never lingers at close. */
void *bb_dealer(void *ctx, const char *ep);
/* Binds s at endpoint (cap bytes) and writes back the address it got (tcp
 * port "*"). 0, or -1 with a message naming `what` on stderr. */
int bb_bind(void *s, char *endpoint, size_t cap, const char *what);
/* A sibling endpoint of ep for the bench's own sockets: tcp on the same
 * host with an ephemeral port, ipc beside ep's path (tag and pid in the
 * name). 0, or -1 for other transports. */
int bb_sibling(const char *ep, const char *tag, char *out, size_t cap);

/* Raises this process's soft descriptor limit to what `threads` client
 * threads need (the hard limit allows). 0, or -1 (said on stderr, naming
 * the need and the limit) when it cannot. */
int bb_fd_room(int threads);

/* Where a round's client threads wait until all of them are connected: a
 * barrier the starting thread may call off (a thread it could not create),
 * so that the threads started end instead of waiting for it forever. */
typedef struct bb_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int ready, state; /* state: 0 shut, 1 open, -1 called off */
} bb_gate;
void bb_gate_init(bb_gate *g);
void bb_gate_destroy(bb_gate *g);
/* A client thread: waits until the gate opens; 0 to go, -1 when called off. */
int bb_gate_wait(bb_gate *g);
/* The starting thread: waits until n threads wait in g, then lets them go
 * (go non-zero) or calls the round off. */
void bb_gate_open(bb_gate *g, int n, int go);

/* The raw echo server: a ROUTER that sends every frame back as it came. */
typedef struct bb_raw {
    void *ctx, *sock;
    pthread_t thread;
} bb_raw;

/* Binds at endpoint (written back) with io_threads ZeroMQ I/O threads. */
int bb_raw_start(bb_raw *s, char *endpoint, size_t cap, int io_threads);
void bb_raw_stop(bb_raw *s);

/* The broker: a ROUTER at `front` (written back), a DEALER (ZMQ_IMMEDIATE)
 * to the bridge, zmq_proxy_steerable between them. */
typedef struct bb_broker {
    void *ctx, *front, *back, *ctl, *ctl_peer;
    pthread_t thread;
} bb_broker;

int bb_broker_start(bb_broker *b, const char *bridge, char *front, size_t cap);
void bb_broker_stop(bb_broker *b);

/* What rk-bench reads of the bridge's status: its process CPU time (user +
 * sys, us), its request count, and its start-up ring calibration (`ring`);
 * -1 for what it does not report. */
typedef struct bb_status {
    double cpu_us, requests;
    double ring_p50_ns, ring_p99_ns, ring_count;
    double io_threads, zmq_io_threads; /* the bridge's request loops and ZeroMQ I/O threads */
    char backend[16]; /* "unknown" when not reported */
    char allocator[16]; /* rk-bridge's malloc ("jemalloc", "libc"); "unknown" when not reported */
    /* its GPU (status "device"): name ("" on the CPU backend), cc ("9.0"),
     * SM count */
    char device[128], cc[16];
    double sm_count;
} bb_status;

/* Asks ep for its status, waiting up to tmo_ms. 0; -1 when nothing answers
 * (errno: why); -2 when the answer lacks the CPU time and request count. */
int bb_bridge_status(const char *ep, int tmo_ms, bb_status *st);

#endif
