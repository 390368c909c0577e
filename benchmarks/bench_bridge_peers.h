/* bench_bridge_peers.h - the ZeroMQ peers rk-bench bridge runs in its own
 * process: the raw ROUTER echo server it measures the bridge against, and
 * the broker hop (samples/broker.c's zmq_proxy) for --broker. Each runs on
 * a thread of its own with a context of its own; start and stop are called
 * from one thread. */
#ifndef RK_BENCH_BRIDGE_PEERS_H
#define RK_BENCH_BRIDGE_PEERS_H

#include <pthread.h>
#include <stddef.h>

/* A socket of `type` whose queues never make the benchmark's side busy. */
void *bb_socket(void *ctx, int type);
/* Binds s at endpoint (cap bytes) and writes back the address it got (tcp
 * port "*"). 0, or -1 with a message naming `what` on stderr. */
int bb_bind(void *s, char *endpoint, size_t cap, const char *what);
/* A sibling endpoint of ep for the bench's own sockets: tcp on the same
 * host with an ephemeral port, ipc beside ep's path (tag and pid in the
 * name). 0, or -1 for other transports. */
int bb_sibling(const char *ep, const char *tag, char *out, size_t cap);

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

#endif
