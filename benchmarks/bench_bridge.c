/* bench_bridge.c - rk-bench bridge: the bridge against raw ZeroMQ on the
 * same transport, and the in-process ring, in one run (see bench_bridge.h). */
#include "bench_bridge.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <msgpack.h>
#include <rk/rk.h>
#include <zmq.h>

#include "bench_bridge_peers.h"
#include "rk/client.h" /* rkc_map_get */

#define BB_MAX_PAYLOAD 4096

typedef struct bb_opts {
    const char *endpoint;
    char raw_endpoint[512];
    long count, messages, warmup;
    int threads, window;
    int raw_io_threads; /* the raw echo server's ZMQ_IO_THREADS */
    size_t size;
    bool ring, latency, broker;
    double timeout_s; /* for the bridge's first answer */
} bb_opts;

/* ---- frames ---------------------------------------------------------- */

/* A protocol v1 echo request with a fixed-width id (0xcf + 8 bytes BE at
 * BB_ID_OFF) so each request only patches the id. */
#define BB_ID_OFF 8
static size_t bb_request(uint8_t *buf, const uint8_t *payload, size_t n)
{
    size_t o = 0;
    buf[o++] = 0x84;
    buf[o++] = 0xa1, buf[o++] = 'v', buf[o++] = 0x01;
    buf[o++] = 0xa2, buf[o++] = 'i', buf[o++] = 'd';
    buf[o++] = 0xcf;
    memset(buf + o, 0, 8);
    o += 8;
    buf[o++] = 0xa2, buf[o++] = 'o', buf[o++] = 'p';
    buf[o++] = 0xa4, memcpy(buf + o, "echo", 4), o += 4;
    buf[o++] = 0xa4, memcpy(buf + o, "data", 4), o += 4;
    if (n < 256) {
        buf[o++] = 0xc4, buf[o++] = (uint8_t)n;
    } else {
        buf[o++] = 0xc5, buf[o++] = (uint8_t)(n >> 8), buf[o++] = (uint8_t)n;
    }
    memcpy(buf + o, payload, n);
    return o + n;
}

static void bb_set_id(uint8_t *buf, uint64_t id)
{
    for (int i = 0; i < 8; i++)
        buf[BB_ID_OFF + i] = (uint8_t)(id >> (56 - 8 * i));
}

/* Checks a bridge echo reply cheaply: `ok` true and the payload at the end. */
static bool bb_reply_ok(const uint8_t *r, size_t len, const uint8_t *payload, size_t n)
{
    if (len < n + 8 || memcmp(r + len - n, payload, n))
        return false;
    for (size_t i = 0; i + 3 < len - n; i++)
        if (r[i] == 0xa2 && r[i + 1] == 'o' && r[i + 2] == 'k')
            return r[i + 3] == 0xc3;
    return false;
}

/* ---- clients --------------------------------------------------------- */

static void *bb_dealer(void *ctx, const char *ep)
{
    void *s = bb_socket(ctx, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_connect(s, ep);
    return s;
}

/* One latency client: a DEALER with one request in flight. raw: the
 * payload itself is the frame; else a protocol v1 echo. */
typedef struct bb_lat {
    void *ctx, *s;
    bool raw, delim; /* delim: the empty delimiter frame first (behind a broker) */
    size_t size, rlen;
    uint64_t next_id;
    uint8_t payload[BB_MAX_PAYLOAD], req[BB_MAX_PAYLOAD + 64], rep[BB_MAX_PAYLOAD + 256];
} bb_lat;

static void bb_lat_open(bb_lat *l, const char *ep, bool raw, bool delim, size_t size)
{
    l->raw = raw;
    l->delim = delim;
    l->size = size;
    l->next_id = 1;
    for (size_t i = 0; i < size; i++)
        l->payload[i] = (uint8_t)(i * 7 + 1);
    l->rlen = raw ? size : bb_request(l->req, l->payload, size);
    if (raw)
        memcpy(l->req, l->payload, size);
    l->ctx = zmq_ctx_new();
    l->s = bb_dealer(l->ctx, ep);
    int tmo = 5000;
    zmq_setsockopt(l->s, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
}

static void bb_lat_close(bb_lat *l)
{
    zmq_close(l->s);
    zmq_ctx_term(l->ctx);
}

/* n round trips; their times go to out (when not NULL). 0 or 1 (an error). */
static int bb_lat_run(bb_lat *l, const char *ep, long n, uint64_t *out)
{
    for (long i = 0; i < n; i++) {
        if (!l->raw)
            bb_set_id(l->req, l->next_id++);
        uint64_t t0 = bench_now_ns();
        if (l->delim)
            zmq_send(l->s, "", 0, ZMQ_SNDMORE);
        zmq_send(l->s, l->req, l->rlen, 0);
        int k = l->delim ? zmq_recv(l->s, l->rep, sizeof l->rep, 0) : 0;
        if (k == 0)
            k = zmq_recv(l->s, l->rep, sizeof l->rep, 0);
        uint64_t t1 = bench_now_ns();
        if (k < 0) {
            if (!bench_interrupted()) /* Ctrl-C: the reporter prints the table */
                fprintf(stderr, "rk-bench bridge: no reply from %s within 5 s (%s)\n", ep,
                        zmq_strerror(errno));
            return 1;
        }
        bool ok = l->raw ? ((size_t)k == l->size && !memcmp(l->rep, l->payload, l->size))
                         : bb_reply_ok(l->rep, (size_t)k, l->payload, l->size);
        if (!ok) {
            fprintf(stderr, "rk-bench bridge: wrong reply (%d B) from %s\n", k, ep);
            return 1;
        }
        if (out)
            out[i] = t1 - t0;
    }
    return 0;
}

/* Round-trip latency of the raw server and of the bridge, in interleaved
 * blocks (raw, bridge, bridge, raw, ...) so that drift of the host (other
 * load, clock frequency) falls on both alike. */
#define BB_BLOCKS 10
/* One side of an interleaved latency comparison. */
typedef struct bb_leg {
    const char *name, *backend, *ep;
    bool raw, delim;
} bb_leg;

/* Adds a row for each leg (after measuring both, so that a row is whole
 * when it appears) with `extra`; their p50s in p50[0..1]. */
static int bb_latency_legs(const bb_opts *o, bench_report *rep, const bb_leg leg[2], const char *extra,
                           double p50[2])
{
    bb_lat *l = calloc(2, sizeof *l);
    uint64_t *smp[2];
    long per = o->count / BB_BLOCKS, total = per * BB_BLOCKS;
    int rc = 0;
    for (int k = 0; k < 2; k++) {
        bb_lat_open(&l[k], leg[k].ep, leg[k].raw, leg[k].delim, o->size);
        smp[k] = malloc((size_t)total * sizeof *smp[k]);
        rc |= bb_lat_run(&l[k], leg[k].ep, o->warmup, NULL);
    }
    for (int blk = 0; blk < BB_BLOCKS && !rc; blk++)
        for (int j = 0; j < 2 && !rc; j++) {
            int k = (blk & 1) ? 1 - j : j;
            rc |= bb_lat_run(&l[k], leg[k].ep, per, smp[k] + (long)blk * per);
        }
    for (int k = 0; k < 2 && !rc; k++) {
        bench_result *r = bench_add(rep, leg[k].name, leg[k].backend);
        snprintf(r->extra, sizeof r->extra, "%s, \"interleaved_blocks\": %d", extra, BB_BLOCKS);
        bench_latency_stats(r, smp[k], (size_t)total);
        p50[k] = r->p50_ns;
    }
    for (int k = 0; k < 2; k++) {
        free(smp[k]);
        bb_lat_close(&l[k]);
    }
    free(l);
    return rc;
}

/* zmq_raw_echo_64 and bridge_echo_64. */
static int bb_latency_pair(const bb_opts *o, bench_report *rep, const char *backend,
                           const char *extra, double p50[2])
{
    const bb_leg leg[2] = {{"zmq_raw_echo_64", "zmq", o->raw_endpoint, true, false},
                           {"bridge_echo_64", backend, o->endpoint, false, false}};
    return bb_latency_legs(o, rep, leg, extra, p50);
}

typedef struct bb_tp {
    const bb_opts *o;
    const char *ep;
    bool raw, delim;
    long n;
    long bad;
    pthread_barrier_t *start;
} bb_tp;

static void *bb_tp_main(void *arg)
{
    bb_tp *t = arg;
    const bb_opts *o = t->o;
    uint8_t payload[BB_MAX_PAYLOAD], req[BB_MAX_PAYLOAD + 64], rep[BB_MAX_PAYLOAD + 256];
    for (size_t i = 0; i < o->size; i++)
        payload[i] = (uint8_t)(i * 7 + 1);
    size_t rlen = t->raw ? o->size : bb_request(req, payload, o->size);
    if (t->raw)
        memcpy(req, payload, o->size);
    void *ctx = zmq_ctx_new();
    void *s = bb_dealer(ctx, t->ep);
    int tmo = 10000;
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    /* one round trip first: connected before the clock starts */
    if (t->delim)
        zmq_send(s, "", 0, ZMQ_SNDMORE);
    zmq_send(s, req, rlen, 0);
    if (t->delim)
        zmq_recv(s, rep, sizeof rep, 0);
    zmq_recv(s, rep, sizeof rep, 0);
    pthread_barrier_wait(t->start);
    long sent = 0, got = 0;
    while (got < t->n) {
        while (sent < t->n && sent - got < o->window) {
            if (!t->raw)
                bb_set_id(req, (uint64_t)sent + 2);
            if (t->delim && zmq_send(s, "", 0, ZMQ_DONTWAIT | ZMQ_SNDMORE) < 0)
                break;
            if (zmq_send(s, req, rlen, t->delim ? 0 : ZMQ_DONTWAIT) < 0)
                break;
            sent++;
        }
        int n = zmq_recv(s, rep, sizeof rep, 0);
        if (n == 0 && t->delim) /* the delimiter; the reply follows */
            n = zmq_recv(s, rep, sizeof rep, 0);
        if (n < 0 && errno == EINTR && !bench_interrupted())
            continue;
        if (n < 0) {
            t->bad += t->n - got;
            break;
        }
        got++;
        if (t->raw ? (size_t)n != o->size : !bb_reply_ok(rep, (size_t)n, payload, o->size))
            t->bad++;
    }
    zmq_close(s);
    zmq_ctx_term(ctx);
    return NULL;
}

/* Pipelined echo with o->threads clients x o->window in flight; adds the
 * row `name` after the run, returned in *out. 0, or 1 (replies missing). */
static int bb_throughput(const bb_opts *o, const char *ep, bool raw, bool delim, bench_report *rep,
                         const char *name, const char *backend, bench_result **out)
{
    int T = o->threads;
    bb_tp *t = calloc((size_t)T, sizeof *t);
    pthread_t *th = calloc((size_t)T, sizeof *th);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)T + 1);
    for (int i = 0; i < T; i++) {
        t[i] = (bb_tp){o, ep, raw, delim, o->messages / T, 0, &start};
        pthread_create(&th[i], NULL, bb_tp_main, &t[i]);
    }
    pthread_barrier_wait(&start);
    uint64_t t0 = bench_now_ns();
    long bad = 0, total = 0;
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        bad += t[i].bad;
        total += t[i].n;
    }
    uint64_t t1 = bench_now_ns();
    pthread_barrier_destroy(&start);
    free(t);
    free(th);
    bench_result *res = *out = bench_add(rep, name, backend);
    res->count = (uint64_t)total;
    res->msgs_per_s = (double)total / ((double)(t1 - t0) / 1e9);
    snprintf(res->extra, sizeof res->extra, "\"threads\": %d, \"window\": %d, \"bad\": %ld", T,
             o->window, bad);
    if (bad && !bench_interrupted())
        fprintf(stderr, "rk-bench bridge: %ld of %ld replies missing or wrong on %s\n", bad, total, ep);
    return bad ? 1 : 0;
}

/* What rk-bench reads of the bridge's status: its process CPU time (user +
 * sys, us), its request count, and its start-up ring calibration (`ring`);
 * -1 for what it does not report. */
typedef struct bb_status {
    double cpu_us, requests;
    double ring_p50_ns, ring_p99_ns, ring_count;
    double io_threads, zmq_io_threads; /* the bridge's request loops and ZeroMQ I/O threads */
    char backend[16]; /* "unknown" when not reported */
} bb_status;

static double bb_map_uint(const msgpack_object *m, const char *key)
{
    const msgpack_object *v = rkc_map_get(m, key);
    return v && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (double)v->via.u64 : -1;
}

/* Asks ep for its status, waiting up to tmo_ms. 0; -1 when nothing answers
 * (errno: why); -2 when the answer lacks the CPU time and request count. */
static int bb_bridge_status(const char *ep, int tmo_ms, bb_status *st)
{
    *st = (bb_status){-1, -1, -1, -1, -1, -1, -1, "unknown"};
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

void bench_bridge_usage(FILE *f)
{
    fprintf(f,
"usage: rk-bench bridge --endpoint E [options]   (against a running rk-bridge)\n"
"  -e, --endpoint E       the bridge (default tcp://127.0.0.1:5555)\n"
"  -r, --raw-endpoint R   where the raw ROUTER echo server binds (default: a\n"
"                         sibling of E on the same transport)\n"
"  -n, --count N          round trips per latency run (default 20000; raw and\n"
"                         bridge alternate in 10 blocks)\n"
"  -m, --messages M       messages per throughput run (default 400000)\n"
"  -t, --threads T        client threads for throughput (default 4)\n"
"  -w, --window W         requests in flight per client thread (default 64)\n"
"      --size B           payload bytes (default 64)\n"
"      --raw-io-threads N the raw echo server's ZeroMQ I/O threads (default 1,\n"
"                         ZeroMQ's own default; the bridge's: its --zmq-io-threads)\n"
"      --no-ring          leave out the ring reference (the bridge's start-up\n"
"                         measurement of its own ring, from its status)\n"
"      --no-latency       skip the latency runs (and the ring): throughput only\n"
"      --broker           also through a ZeroMQ broker (samples/broker.c's zmq_proxy, in\n"
"                         this process) in front of the bridge: what the hop costs\n"
"      --timeout S        seconds to wait for the bridge's first answer (its\n"
"                         status) before giving up (default 3)\n"
"The bridge throughput result also reports the bridge's CPU time per message\n"
"(bridge_cpu_us_per_msg: its whole process, from its status counters).\n"
"For many cores: start the bridge with --io-threads N --zmq-io-threads M and\n"
"give enough client threads (-t) to load it.\n");
}

/* 0, or 2 (bad options, said on stderr) */
static int bb_parse(int argc, char **argv, bb_opts *o)
{
    enum { O_SIZE = 256, O_NORING, O_NOLAT, O_TIMEOUT, O_BROKER, O_RAWIO };
    static const struct option opts[] = {
        {"endpoint", required_argument, 0, 'e'}, {"raw-endpoint", required_argument, 0, 'r'},
        {"count", required_argument, 0, 'n'},    {"messages", required_argument, 0, 'm'},
        {"threads", required_argument, 0, 't'},  {"window", required_argument, 0, 'w'},
        {"size", required_argument, 0, O_SIZE},  {"no-ring", no_argument, 0, O_NORING},
        {"no-latency", no_argument, 0, O_NOLAT}, {"timeout", required_argument, 0, O_TIMEOUT},
        {"broker", no_argument, 0, O_BROKER},    {"help", no_argument, 0, 'h'},
        {"raw-io-threads", required_argument, 0, O_RAWIO},
        {0, 0, 0, 0},
    };
    *o = (bb_opts){.endpoint = "tcp://127.0.0.1:5555", .count = 20000, .messages = 400000,
                   .warmup = 2000, .threads = 4, .window = 64, .size = 64, .ring = true,
                   .latency = true, .timeout_s = 3, .raw_io_threads = 1};
    const char *raw_ep = NULL;
    int ch;
    optind = 1;
    opterr = 0; /* bench_bad_option says it in one line */
    while ((ch = getopt_long(argc, argv, ":e:r:n:m:t:w:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'e': o->endpoint = optarg; break;
        case 'r': raw_ep = optarg; break;
        case 'n': o->count = strtol(optarg, NULL, 0); break;
        case 'm': o->messages = strtol(optarg, NULL, 0); break;
        case 't': o->threads = atoi(optarg); break;
        case 'w': o->window = atoi(optarg); break;
        case O_SIZE: o->size = (size_t)strtoul(optarg, NULL, 0); break;
        case O_NORING: o->ring = false; break;
        case O_NOLAT: o->latency = false, o->ring = false; break;
        case O_TIMEOUT: o->timeout_s = atof(optarg); break;
        case O_BROKER: o->broker = true; break;
        case O_RAWIO: o->raw_io_threads = atoi(optarg); break;
        case 'h': bench_bridge_usage(stdout); exit(0);
        default: return bench_bad_option("bridge", ch, argv);
        }
    }
    if (optind < argc)
        return bench_bad_argument("bridge", argv[optind]);
    if (o->raw_io_threads < 1 || o->raw_io_threads > 64) {
        fprintf(stderr, "rk-bench bridge: --raw-io-threads %d: give 1 to 64\n", o->raw_io_threads);
        return 2;
    }
    if (o->count < 1 || o->messages < 1 || o->threads < 1 || o->window < 1 || o->size > BB_MAX_PAYLOAD ||
        !(o->timeout_s > 0 && o->timeout_s <= 3600)) {
        fprintf(stderr, "rk-bench bridge: --count %ld, --messages %ld, --threads %d and --window %d must be >= 1, "
                "--size %zu at most %d, --timeout %g in (0, 3600] (see rk-bench bridge --help)\n", o->count,
                o->messages, o->threads, o->window, o->size, BB_MAX_PAYLOAD, o->timeout_s);
        return 2;
    }
    if (o->warmup > o->count / 5 + 100)
        o->warmup = o->count / 5 + 100;
    if (raw_ep)
        snprintf(o->raw_endpoint, sizeof o->raw_endpoint, "%s", raw_ep);
    else if (bb_sibling(o->endpoint, "raw", o->raw_endpoint, sizeof o->raw_endpoint)) {
        fprintf(stderr, "rk-bench bridge: give --raw-endpoint for %s (tcp:// and ipc:// have a "
                "default sibling)\n", o->endpoint);
        return 2;
    }
    return 0;
}

/* A run against no bridge ends here, within --timeout, naming the endpoint. */
static int bb_probe(const bb_opts *o, bb_status *st)
{
    int rc = bb_bridge_status(o->endpoint, (int)(o->timeout_s * 1000), st);
    if (rc == -1) {
        fprintf(stderr,
                "rk-bench bridge: no bridge answers at %s: no status reply within %.1f s (%s).\n"
                "  Start one (rk-bridge --bind %s), or point --endpoint at it; a bridge with CURVE\n"
                "  on is not reachable from rk-bench.\n",
                o->endpoint, o->timeout_s, errno == EAGAIN ? "timed out" : zmq_strerror(errno),
                o->endpoint);
        return 1;
    }
    if (rc == -2)
        fprintf(stderr, "rk-bench bridge: %s answers, but its status has no CPU time or request "
                "count: no bridge_cpu_us_per_msg\n", o->endpoint);
    return 0;
}

/* The bridge's own ring (its backend, its runtime), measured by the bridge
 * at start-up: rk-bench cannot open a second CUDA runtime beside the
 * bridge's persistent kernel. Its p50 (or 0 when the bridge reports none). */
static double bb_ring_row(const bb_status *st, bench_report *rep)
{
    if (st->ring_count <= 0) {
        fprintf(stderr, "rk-bench bridge: the bridge reports no ring round trip (status ring); no bound\n");
        return 0;
    }
    bench_result *r = bench_add(rep, "ring_echo_64", st->backend);
    r->count = (uint64_t)st->ring_count;
    if (st->ring_p50_ns >= 0)
        r->p50_ns = st->ring_p50_ns;
    if (st->ring_p99_ns >= 0)
        r->p99_ns = st->ring_p99_ns;
    snprintf(r->extra, sizeof r->extra,
             "\"in_process\": true, \"source\": \"the bridge's start-up calibration (status ring)\"");
    return st->ring_p50_ns > 0 ? st->ring_p50_ns : 0;
}

/* Appends a formatted member to r's extra JSON members (", " between). */
__attribute__((format(printf, 2, 3))) static void bb_extra_add(bench_result *r, const char *fmt, ...)
{
    size_t el = strlen(r->extra);
    if (el && el + 2 < sizeof r->extra)
        el += (size_t)snprintf(r->extra + el, sizeof r->extra - el, ", ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->extra + el, sizeof r->extra - el, fmt, ap);
    va_end(ap);
}

/* zmq_raw_throughput_echo_64, then bridge_throughput_echo_64 with the
 * bridge's CPU time per message over its run (from its status counters). */
static int bb_throughput_pair(const bb_opts *o, bench_report *rep, const char *backend, const char *extra)
{
    bench_result *r;
    int rc = bb_throughput(o, o->raw_endpoint, true, false, rep, "zmq_raw_throughput_echo_64", "zmq", &r);
    bb_extra_add(r, "\"zmq_io_threads\": %d, %s", o->raw_io_threads, extra);
    bb_status s0, s1;
    int cpu_ok = bb_bridge_status(o->endpoint, 5000, &s0);
    rc |= bb_throughput(o, o->endpoint, false, false, rep, "bridge_throughput_echo_64", backend, &r);
    cpu_ok |= bb_bridge_status(o->endpoint, 5000, &s1);
    bb_extra_add(r, "%s", extra);
    if (s0.io_threads > 0 && s0.zmq_io_threads > 0)
        bb_extra_add(r, "\"io_threads\": %.0f, \"zmq_io_threads\": %.0f", s0.io_threads,
                     s0.zmq_io_threads);
    if (cpu_ok == 0 && s1.requests > s0.requests) {
        /* the status request itself is one of the (rq1 - rq0) */
        double per = (s1.cpu_us - s0.cpu_us) / (s1.requests - s0.requests);
        bb_extra_add(r, "\"bridge_cpu_us_per_msg\": %.3f", per);
        fprintf(stderr, "rk-bench bridge: bridge CPU %.3f us per message during the throughput "
                "run (%.0f messages)\n", per, s1.requests - s0.requests);
    }
    return rc;
}

/* ---- a broker hop (samples/broker.c, in this process) ----------------- */

/* The same echo straight to the bridge and through the broker, both with
 * the delimiter frame a client behind a broker sends: latency interleaved,
 * then throughput of each. */
static int bb_broker_rows(const bb_opts *o, bench_report *rep, const char *backend, const char *extra)
{
    char front[512];
    if (bb_sibling(o->endpoint, "broker", front, sizeof front))
        return 1;
    bb_broker b;
    if (bb_broker_start(&b, o->endpoint, front, sizeof front))
        return 1;
    fprintf(stderr, "rk-bench bridge: broker %s -> %s\n", front, o->endpoint);
    double p50[2] = {0, 0};
    const bb_leg leg[2] = {{"bridge_delim_echo_64", backend, o->endpoint, false, true},
                           {"broker_bridge_echo_64", backend, front, false, true}};
    int rc = o->latency ? bb_latency_legs(o, rep, leg, extra, p50) : 0;
    bench_result *direct, *via;
    rc |= bb_throughput(o, o->endpoint, false, true, rep, "bridge_delim_throughput_echo_64", backend, &direct);
    rc |= bb_throughput(o, front, false, true, rep, "broker_bridge_throughput_echo_64", backend, &via);
    bb_broker_stop(&b);
    if (!rc)
        fprintf(stderr, "rk-bench bridge: the broker hop: p50 %.0f ns vs %.0f ns direct (+%.0f ns); "
                "throughput %.0f vs %.0f msg/s direct (%.2fx)\n", p50[1], p50[0], p50[1] - p50[0],
                via->msgs_per_s, direct->msgs_per_s, via->msgs_per_s / direct->msgs_per_s);
    return rc;
}

int bench_bridge_run(int argc, char **argv, bench_report *rep)
{
    bb_opts o;
    int rc = bb_parse(argc, argv, &o);
    if (rc)
        return rc;
    bb_status st0;
    if (bb_probe(&o, &st0))
        return 1;
    bb_raw raw;
    if (bb_raw_start(&raw, o.raw_endpoint, sizeof o.raw_endpoint, o.raw_io_threads))
        return 1;
    const char *backend = st0.backend;
    const char *transport = !strncmp(o.endpoint, "ipc://", 6) ? "ipc" : "tcp";
    char extra[96];
    snprintf(extra, sizeof extra, "\"transport\": \"%s\", \"size\": %zu", transport, o.size);
    fprintf(stderr, "rk-bench bridge: bridge %s (backend %s), raw echo server %s\n", o.endpoint,
            backend, o.raw_endpoint);

    double p50[2] = {0, 0}, ring_p50 = 0; /* raw, bridge */
    if (o.latency)
        rc |= bb_latency_pair(&o, rep, backend, extra, p50);
    if (o.ring)
        ring_p50 = bb_ring_row(&st0, rep);
    rc |= bb_throughput_pair(&o, rep, backend, extra);
    bb_raw_stop(&raw);
    if (o.broker && !rc)
        rc |= bb_broker_rows(&o, rep, backend, extra);
    if (ring_p50 > 0 && o.latency && !rc)
        fprintf(stderr,
                "rk-bench bridge: bridge p50 %.0f ns vs raw ZeroMQ p50 %.0f ns + 1.2 x ring p50 "
                "%.0f ns (%s, the bridge's own) = %.0f ns: %s\n",
                p50[1], p50[0], ring_p50, backend, p50[0] + 1.2 * ring_p50,
                p50[1] <= p50[0] + 1.2 * ring_p50 ? "within" : "OVER");
    return rc;
}
