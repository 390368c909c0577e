/* bench_bridge_peers.c - the raw echo server and the broker hop that
 * rk-bench bridge runs beside its clients (see bench_bridge_peers.h). */
#include "bench_bridge_peers.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <zmq.h>

/* ---- sockets --------------------------------------------------------- */

/* A socket whose queues never make the benchmark's own side say busy. */
void *bb_socket(void *ctx, int type)
{
    void *s = zmq_socket(ctx, type);
    int hwm = 100000;
    zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm);
    return s;
}

/* Binds s at endpoint and writes back the address it got (tcp port "*"). */
int bb_bind(void *s, char *endpoint, size_t cap, const char *what)
{
    if (zmq_bind(s, endpoint) != 0) {
        fprintf(stderr, "rk-bench bridge: cannot bind the %s on %s: %s\n", what, endpoint, zmq_strerror(errno));
        return -1;
    }
    size_t sz = cap;
    zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, endpoint, &sz);
    return 0;
}

/* ---- the raw echo server --------------------------------------------- */

static void *bb_raw_main(void *arg)
{
    bb_raw *s = arg;
    zmq_msg_t m;
    zmq_msg_init(&m);
    for (;;) {
        if (zmq_msg_recv(&m, s->sock, 0) < 0) {
            if (errno == EINTR)
                continue;
            break; /* ETERM */
        }
        int more = zmq_msg_more(&m);
        zmq_msg_send(&m, s->sock, more ? ZMQ_SNDMORE : 0);
    }
    zmq_msg_close(&m);
    zmq_close(s->sock);
    return NULL;
}

/* The sibling endpoint: tcp on the same host with an ephemeral port, ipc
 * beside the bridge's path, inproc is not reachable from here. */
int bb_sibling(const char *ep, const char *tag, char *out, size_t cap)
{
    if (!strncmp(ep, "tcp://", 6)) {
        const char *colon = strrchr(ep + 6, ':');
        if (!colon)
            return -1;
        snprintf(out, cap, "%.*s:*", (int)(colon - ep), ep);
    } else if (!strncmp(ep, "ipc://", 6)) {
        snprintf(out, cap, "%s.%s-%d", ep, tag, (int)getpid());
    } else {
        return -1;
    }
    return 0;
}

int bb_raw_start(bb_raw *s, char *endpoint, size_t cap, int io_threads)
{
    s->ctx = zmq_ctx_new();
    if (zmq_ctx_set(s->ctx, ZMQ_IO_THREADS, io_threads) != 0) {
        fprintf(stderr, "rk-bench bridge: raw echo server: ZMQ_IO_THREADS %d: %s\n", io_threads,
                zmq_strerror(errno));
        zmq_ctx_term(s->ctx);
        return -1;
    }
    s->sock = bb_socket(s->ctx, ZMQ_ROUTER);
    if (bb_bind(s->sock, endpoint, cap, "raw echo server")) {
        zmq_close(s->sock);
        zmq_ctx_term(s->ctx);
        return -1;
    }
    pthread_create(&s->thread, NULL, bb_raw_main, s);
    return 0;
}

void bb_raw_stop(bb_raw *s)
{
    zmq_ctx_shutdown(s->ctx);
    pthread_join(s->thread, NULL);
    zmq_ctx_term(s->ctx);
}

/* ---- the broker hop (samples/broker.c, in this process) --------------- */

static void *bb_broker_main(void *arg)
{
    bb_broker *b = arg;
    zmq_proxy_steerable(b->front, b->back, NULL, b->ctl);
    zmq_close(b->front);
    zmq_close(b->back);
    zmq_close(b->ctl);
    return NULL;
}

/* ROUTER at `front` (filled in), DEALER (ZMQ_IMMEDIATE) to the bridge. */
int bb_broker_start(bb_broker *b, const char *bridge, char *front, size_t cap)
{
    int one = 1;
    b->ctx = zmq_ctx_new();
    b->front = bb_socket(b->ctx, ZMQ_ROUTER);
    b->back = bb_socket(b->ctx, ZMQ_DEALER);
    zmq_setsockopt(b->back, ZMQ_IMMEDIATE, &one, sizeof one);
    b->ctl = zmq_socket(b->ctx, ZMQ_PAIR);
    b->ctl_peer = zmq_socket(b->ctx, ZMQ_PAIR);
    bool wired = zmq_bind(b->ctl, "inproc://bb-broker-ctl") == 0 &&
                 zmq_connect(b->ctl_peer, "inproc://bb-broker-ctl") == 0 && zmq_connect(b->back, bridge) == 0;
    if (!wired)
        fprintf(stderr, "rk-bench bridge: cannot start a broker to %s: %s\n", bridge, zmq_strerror(errno));
    if (!wired || bb_bind(b->front, front, cap, "broker")) {
        void *all[4] = {b->front, b->back, b->ctl, b->ctl_peer};
        for (int i = 0; i < 4; i++)
            zmq_close(all[i]);
        zmq_ctx_term(b->ctx);
        return -1;
    }
    pthread_create(&b->thread, NULL, bb_broker_main, b);
    return 0;
}

void bb_broker_stop(bb_broker *b)
{
    zmq_send(b->ctl_peer, "TERMINATE", 9, 0);
    pthread_join(b->thread, NULL);
    zmq_close(b->ctl_peer);
    zmq_ctx_term(b->ctx);
}
