/* bench_bridge_peers.c - the raw echo server and the broker hop that
 * rk-bench bridge runs beside its clients, and its read of the bridge's
 * status (see bench_bridge_peers.h). */
#include "bench_bridge_peers.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <msgpack.h>
#include <zmq.h>

#include "rk/client.h" /* rkc_map_get */

/* ---- sockets --------------------------------------------------------- */

/* A socket whose queues never make the benchmark's own side say busy. */
void *bb_socket(void *ctx, int type)
{
    void *s = zmq_socket(ctx, type);
    int hwm = BB_HWM;
    zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm);
    return s;
}

/* A DEALER to ep that never lingers at close. */
void *bb_dealer(void *ctx, const char *ep)
{
    void *s = bb_socket(ctx, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_connect(s, ep);
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

/* Each client thread holds a ZeroMQ context (its I/O thread's and
 * reaper's pollers and mailboxes), a socket and a connection, and the raw
 * echo server the other end: 8 descriptors (7.9 measured at 50 and 100),
 * and a margin for the rest. ZeroMQ aborts the process when it runs out. */
#define BB_FDS_PER_THREAD 8
#define BB_FDS_MORE 64

int bb_fd_room(int threads)
{
    rlim_t need = (rlim_t)threads * BB_FDS_PER_THREAD + BB_FDS_MORE;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
        return 0;
    if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need) { /* the soft limit may rise to the hard */
        rl.rlim_cur = need;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
            return 0;
    }
    fprintf(stderr, "rk-bench bridge: --threads %d needs about %llu file descriptors, more than the %llu this "
            "process may open (ulimit -n)\n", threads, (unsigned long long)need,
            (unsigned long long)(rl.rlim_max == RLIM_INFINITY ? rl.rlim_cur : rl.rlim_max));
    return -1;
}

/* ---- the gate a round's client threads start at ---------------------- */

void bb_gate_init(bb_gate *g)
{
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->ready = g->state = 0;
}

void bb_gate_destroy(bb_gate *g)
{
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
}

int bb_gate_wait(bb_gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->ready++;
    pthread_cond_broadcast(&g->cv);
    while (!g->state)
        pthread_cond_wait(&g->cv, &g->mu);
    int st = g->state;
    pthread_mutex_unlock(&g->mu);
    return st > 0 ? 0 : -1;
}

void bb_gate_open(bb_gate *g, int n, int go)
{
    pthread_mutex_lock(&g->mu);
    while (g->ready < n)
        pthread_cond_wait(&g->cv, &g->mu);
    g->state = go ? 1 : -1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
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
    int e = pthread_create(&s->thread, NULL, bb_raw_main, s);
    if (e) {
        fprintf(stderr, "rk-bench bridge: cannot start the raw echo server's thread: %s\n", strerror(e));
        zmq_close(s->sock);
        zmq_ctx_term(s->ctx);
        return -1;
    }
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
    int e = 0;
    if (!wired || bb_bind(b->front, front, cap, "broker") ||
        (e = pthread_create(&b->thread, NULL, bb_broker_main, b))) {
        if (e)
            fprintf(stderr, "rk-bench bridge: cannot start the broker's thread: %s\n", strerror(e));
        void *all[4] = {b->front, b->back, b->ctl, b->ctl_peer};
        for (int i = 0; i < 4; i++)
            zmq_close(all[i]);
        zmq_ctx_term(b->ctx);
        return -1;
    }
    return 0;
}

void bb_broker_stop(bb_broker *b)
{
    zmq_send(b->ctl_peer, "TERMINATE", 9, 0);
    pthread_join(b->thread, NULL);
    zmq_close(b->ctl_peer);
    zmq_ctx_term(b->ctx);
}

/* ---- the bridge's status -------------------------------------------- */

static double bb_map_uint(const msgpack_object *m, const char *key)
{
    const msgpack_object *v = rkc_map_get(m, key);
    return v && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (double)v->via.u64 : -1;
}

/* A str field of map m into out (cap bytes), when it is one. */
static void bb_map_str(const msgpack_object *m, const char *key, char *out, size_t cap)
{
    const msgpack_object *v = rkc_map_get(m, key);
    if (v && v->type == MSGPACK_OBJECT_STR)
        snprintf(out, cap, "%.*s", (int)v->via.str.size, v->via.str.ptr);
}

int bb_bridge_status(const char *ep, int tmo_ms, bb_status *st)
{
    *st = (bb_status){-1, -1, -1, -1, -1, -1, -1, "unknown", "unknown", "", "", -1};
    void *ctx = zmq_ctx_new();
    void *s = bb_dealer(ctx, ep);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &tmo_ms, sizeof tmo_ms);
    zmq_setsockopt(s, ZMQ_SNDTIMEO, &tmo_ms, sizeof tmo_ms);
    static const uint8_t rq[] = {0x83, 0xa1, 'v', 1, 0xa2, 'i', 'd', 0, 0xa2, 'o', 'p',
                                 0xa6, 's', 't', 'a', 't', 'u', 's'};
    static uint8_t rep[65536];
    int n = zmq_send(s, rq, sizeof rq, 0) < 0 ? -1 : zmq_recv(s, rep, sizeof rep, 0);
    int err = errno;
    if (n > 0 && n <= (int)sizeof rep) {
        msgpack_unpacked up;
        msgpack_unpacked_init(&up);
        size_t off = 0;
        if (msgpack_unpack_next(&up, (const char *)rep, (size_t)n, &off) == MSGPACK_UNPACK_SUCCESS) {
            const msgpack_object *c = rkc_map_get(&up.data, "counters"), *r = rkc_map_get(&up.data, "ring");
            double u = bb_map_uint(c, "cpu_user_us"), sy = bb_map_uint(c, "cpu_sys_us");
            st->cpu_us = u >= 0 && sy >= 0 ? u + sy : -1;
            st->requests = bb_map_uint(c, "requests");
            st->ring_p50_ns = bb_map_uint(r, "p50_ns");
            st->ring_p99_ns = bb_map_uint(r, "p99_ns");
            st->ring_count = bb_map_uint(r, "count");
            st->io_threads = bb_map_uint(c, "io_threads");
            st->zmq_io_threads = bb_map_uint(c, "zmq_io_threads");
            const msgpack_object *be = rkc_map_get(&up.data, "backend");
            if (be && be->type == MSGPACK_OBJECT_STR)
                snprintf(st->backend, sizeof st->backend, "%.*s", (int)be->via.str.size, be->via.str.ptr);
            const msgpack_object *dev = rkc_map_get(&up.data, "device"); /* nil on the CPU backend */
            bb_map_str(dev, "name", st->device, sizeof st->device);
            bb_map_str(dev, "cc", st->cc, sizeof st->cc);
            st->sm_count = bb_map_uint(dev, "sm_count");
            const msgpack_object *al = rkc_map_get(&up.data, "allocator");
            if (al && al->type == MSGPACK_OBJECT_STR)
                snprintf(st->allocator, sizeof st->allocator, "%.*s", (int)al->via.str.size, al->via.str.ptr);
        }
        msgpack_unpacked_destroy(&up);
    }
    zmq_close(s);
    zmq_ctx_term(ctx);
    errno = err;
    if (n < 0)
        return -1;
    return st->cpu_us >= 0 && st->requests >= 0 ? 0 : -2;
}
