/* bench_bridge.c - rk-bench bridge: the bridge against raw ZeroMQ on the
 * same transport, and the in-process ring, in one run (see bench_bridge.h). */
#include "bench_bridge.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rk/rk.h>
#include <zmq.h>

#include "bench_bridge_peers.h"

#define BB_MAX_PAYLOAD 4096
/* Each throughput round's rate goes into its row's extra JSON members, 256
 * bytes (bench.h) shared with the row's other members: 10 fit. */
#define BB_MAX_ROUNDS 10
/* --count's most (its samples' 800 MB a side) and --threads' (each a
 * ZeroMQ context of its own: threads and descriptors) */
#define BB_MAX_COUNT 100000000L
#define BB_MAX_THREADS 1024

typedef struct bb_opts {
    const char *endpoint;
    char raw_endpoint[512];
    long count, messages, warmup;
    int threads, window;
    int rounds; /* throughput rounds per side, alternating */
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
/* One side of an interleaved comparison. */
typedef struct bb_leg {
    const char *name, *backend, *ep; /* name: its rows' stem (bb_row_name) */
    bool raw, delim;
    bool cpu; /* throughput: read the bridge's CPU time around each round */
} bb_leg;

/* A leg's row name: its stem and the payload's size (bridge_echo_64 at the
 * default --size; a run of 4096 B was named for 64 B as well). */
static const char *bb_row_name(char *buf, size_t cap, const bb_leg *leg, const bb_opts *o)
{
    snprintf(buf, cap, "%s_%zu", leg->name, o->size);
    return buf;
}

/* Adds a row for each leg (after measuring both, so that a row is whole
 * when it appears) with `extra`; their p50s in p50[0..1]. */
static int bb_latency_legs(const bb_opts *o, bench_report *rep, const bb_leg leg[2], const char *extra,
                           double p50[2])
{
    long per = o->count / BB_BLOCKS, total = per * BB_BLOCKS;
    bb_lat *l = calloc(2, sizeof *l);
    uint64_t *smp[2] = {malloc((size_t)total * sizeof *smp[0]), malloc((size_t)total * sizeof *smp[1])};
    if (!l || !smp[0] || !smp[1]) {
        fprintf(stderr, "rk-bench bridge: no memory for %ld round trips' times a side (--count)\n", total);
        free(l), free(smp[0]), free(smp[1]);
        return 1;
    }
    int rc = 0;
    for (int k = 0; k < 2; k++) {
        bb_lat_open(&l[k], leg[k].ep, leg[k].raw, leg[k].delim, o->size);
        rc |= bb_lat_run(&l[k], leg[k].ep, o->warmup, NULL);
    }
    for (int blk = 0; blk < BB_BLOCKS && !rc; blk++)
        for (int j = 0; j < 2 && !rc; j++) {
            int k = (blk & 1) ? 1 - j : j;
            rc |= bb_lat_run(&l[k], leg[k].ep, per, smp[k] + (long)blk * per);
        }
    for (int k = 0; k < 2 && !rc; k++) {
        char name[64];
        bench_result *r = bench_add(rep, bb_row_name(name, sizeof name, &leg[k], o), leg[k].backend);
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
    const bb_leg leg[2] = {{"zmq_raw_echo", "zmq", o->raw_endpoint, true, false, false},
                           {"bridge_echo", backend, o->endpoint, false, false, false}};
    return bb_latency_legs(o, rep, leg, extra, p50);
}

typedef struct bb_tp {
    const bb_opts *o;
    const char *ep;
    bool raw, delim;
    long n;
    long bad;
    bb_gate *start;
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
    if (bb_gate_wait(t->start)) /* the round is off: a thread did not start */
        t->n = 0;
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

/* One round of pipelined echo on leg: o->threads clients x o->window in
 * flight, o->messages in all. Its messages, missing or wrong replies and
 * seconds in *msgs, *bad, *s. 0, or 1 (replies missing, or a client
 * thread that could not start: the round is called off). */
static int bb_tp_round(const bb_opts *o, const bb_leg *leg, long *msgs, long *bad, double *s)
{
    int T = o->threads, made = 0, e = ENOMEM;
    bb_tp *t = calloc((size_t)T, sizeof *t);
    pthread_t *th = calloc((size_t)T, sizeof *th);
    bb_gate start;
    bb_gate_init(&start);
    for (; t && th && made < T; made++) {
        t[made] = (bb_tp){o, leg->ep, leg->raw, leg->delim, o->messages / T, 0, &start};
        if ((e = pthread_create(&th[made], NULL, bb_tp_main, &t[made])))
            break;
    }
    bb_gate_open(&start, made, made == T);
    uint64_t t0 = bench_now_ns();
    *bad = *msgs = 0;
    for (int i = 0; i < made; i++) {
        pthread_join(th[i], NULL);
        *bad += t[i].bad;
        *msgs += t[i].n;
    }
    *s = (double)(bench_now_ns() - t0) / 1e9;
    bb_gate_destroy(&start);
    free(t);
    free(th);
    if (made < T) {
        fprintf(stderr, "rk-bench bridge: cannot start client thread %d of %d (--threads) on %s: %s\n",
                made + 1, T, leg->ep, strerror(e));
        return 1;
    }
    if (*bad && !bench_interrupted())
        fprintf(stderr, "rk-bench bridge: %ld of %ld replies missing or wrong on %s\n", *bad, *msgs,
                leg->ep);
    return *bad ? 1 : 0;
}

void bench_bridge_usage(FILE *f)
{
    fprintf(f,
"usage: rk-bench bridge --endpoint E [options]   (against a running rk-bridge)\n"
"  -e, --endpoint E       the bridge (default tcp://127.0.0.1:5555)\n"
"  -r, --raw-endpoint R   where the raw ROUTER echo server binds (default: a\n"
"                         sibling of E on the same transport)\n"
"  -n, --count N          round trips per latency run (default 20000, 10 to\n"
"                         100000000; raw and bridge alternate in 10 blocks)\n"
"  -m, --messages M       messages per throughput round (default 400000, at\n"
"                         least --threads: each thread sends M / T)\n"
"      --rounds R         throughput rounds of each side (default 3, 1 to 10):\n"
"                         raw and bridge alternate (raw, bridge, raw, ...); a\n"
"                         row is all its rounds' messages over all their time,\n"
"                         each round's msg/s in its \"rounds\"\n"
"  -t, --threads T        client threads for throughput (default 4, at most 1024)\n"
"  -w, --window W         requests in flight per client thread (default 64, at\n"
"                         most 100000)\n"
"      --size B           payload bytes (default 64, 0 to 4096)\n"
"      --raw-io-threads N the raw echo server's ZeroMQ I/O threads (default 1, 1 to 64,\n"
"                         ZeroMQ's own default; the bridge's: its --zmq-io-threads)\n"
"      --no-ring          leave out the ring reference (the bridge's start-up\n"
"                         measurement of its own ring, from its status)\n"
"      --no-latency       skip the latency runs (and the ring): throughput only\n"
"      --broker           also through a ZeroMQ broker (samples/broker.c's zmq_proxy, in\n"
"                         this process) in front of the bridge: what the hop costs\n"
"      --timeout S        seconds to wait for the bridge's first answer (its\n"
"                         status) before giving up (default 3, 0.001 to 3600)\n"
"The bridge throughput result also reports the bridge's CPU time per message\n"
"(bridge_cpu_us_per_msg: its whole process, from its status counters read\n"
"around each of its rounds).\n"
"For many cores: start the bridge with --io-threads N --zmq-io-threads M and\n"
"give enough client threads (-t) to load it.\n");
}

/* 0, or 2 (bad options, said on stderr) */
static int bb_parse(int argc, char **argv, bb_opts *o)
{
    enum { O_SIZE = 256, O_NORING, O_NOLAT, O_TIMEOUT, O_BROKER, O_RAWIO, O_ROUNDS };
    static const struct option opts[] = {
        {"endpoint", required_argument, 0, 'e'}, {"raw-endpoint", required_argument, 0, 'r'},
        {"count", required_argument, 0, 'n'},    {"messages", required_argument, 0, 'm'},
        {"threads", required_argument, 0, 't'},  {"window", required_argument, 0, 'w'},
        {"size", required_argument, 0, O_SIZE},  {"no-ring", no_argument, 0, O_NORING},
        {"no-latency", no_argument, 0, O_NOLAT}, {"timeout", required_argument, 0, O_TIMEOUT},
        {"broker", no_argument, 0, O_BROKER},    {"help", no_argument, 0, 'h'},
        {"raw-io-threads", required_argument, 0, O_RAWIO}, {"rounds", required_argument, 0, O_ROUNDS},
        {0, 0, 0, 0},
    };
    *o = (bb_opts){.endpoint = "tcp://127.0.0.1:5555", .count = 20000, .messages = 400000,
                   .warmup = 2000, .threads = 4, .window = 64, .size = 64, .ring = true,
                   .latency = true, .timeout_s = 3, .raw_io_threads = 1, .rounds = 3};
    const char *raw_ep = NULL;
    int ch, bad = 0;
    long v = 0;
    optind = 1;
    opterr = 0; /* bench_bad_option says it in one line */
    /* each number whole and in range, refused as given ("x" is not 0):
     * --count under BB_BLOCKS timed nothing, a larger one's samples take 8 B
     * each; a client thread is a ZeroMQ context, --window at most its HWM */
    while ((ch = getopt_long(argc, argv, ":e:r:n:m:t:w:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'e': o->endpoint = optarg; break;
        case 'r': raw_ep = optarg; break;
        case 'n': bad = bench_num("bridge", "--count", optarg, BB_BLOCKS, BB_MAX_COUNT, &o->count); break;
        case 'm': bad = bench_num("bridge", "--messages", optarg, 1, LONG_MAX, &o->messages); break;
        case 't':
            bad = bench_num("bridge", "--threads", optarg, 1, BB_MAX_THREADS, &v), o->threads = (int)v;
            break;
        case 'w': bad = bench_num("bridge", "--window", optarg, 1, BB_HWM, &v), o->window = (int)v; break;
        case O_SIZE:
            bad = bench_num("bridge", "--size", optarg, 0, BB_MAX_PAYLOAD, &v), o->size = (size_t)v;
            break;
        case O_NORING: o->ring = false; break;
        case O_NOLAT: o->latency = false, o->ring = false; break;
        case O_TIMEOUT: bad = bench_real("bridge", "--timeout", optarg, 0.001, 3600, &o->timeout_s); break;
        case O_BROKER: o->broker = true; break;
        case O_RAWIO:
            bad = bench_num("bridge", "--raw-io-threads", optarg, 1, 64, &v), o->raw_io_threads = (int)v;
            break;
        case O_ROUNDS:
            bad = bench_num("bridge", "--rounds", optarg, 1, BB_MAX_ROUNDS, &v), o->rounds = (int)v;
            break;
        case 'h': bench_bridge_usage(stdout); exit(0);
        default: return bench_bad_option("bridge", ch, argv);
        }
        if (bad)
            return bad;
    }
    if (optind < argc)
        return bench_bad_argument("bridge", argv[optind]);
    if (o->messages < o->threads) { /* each client thread sends messages / threads */
        fprintf(stderr, "rk-bench bridge: --messages %ld: give at least --threads (%d)\n", o->messages,
                o->threads);
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

/* Appends a formatted member to r's extra JSON members (", " between). One
 * that does not fit is left out whole, and said: a cut one breaks the JSON. */
__attribute__((format(printf, 2, 3))) static void bb_extra_add(bench_result *r, const char *fmt, ...)
{
    size_t el0 = strlen(r->extra), el = el0;
    if (el)
        el += (size_t)snprintf(r->extra + el, sizeof r->extra - el, ", ");
    va_list ap;
    va_start(ap, fmt);
    int n = el < sizeof r->extra ? vsnprintf(r->extra + el, sizeof r->extra - el, fmt, ap) : -1;
    va_end(ap);
    if (n < 0 || el + (size_t)n >= sizeof r->extra) {
        fprintf(stderr, "rk-bench bridge: row %s: a member past its %zu bytes of extra JSON, left out: %s\n",
                r->name, sizeof r->extra - 1, r->extra + el0);
        r->extra[el0] = '\0';
    }
}

/* One side of an alternating throughput comparison, summed over its rounds. */
typedef struct bb_side {
    char members[128]; /* its row's own extra members (may be empty) */
    size_t row;       /* its row's index in the report, once it has one */
    int rounds;
    long msgs, bad;
    double s, rate[BB_MAX_ROUNDS];
    double cpu_us, requests; /* leg cpu: the bridge's status growth; requests -1: not known */
} bb_side;

/* v[0..n) as "a, b, c" with prec decimals, into buf (cap bytes). */
static const char *bb_list(char *buf, size_t cap, const double *v, int n, int prec)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%.*f", i ? ", " : "", prec, v[i]);
    return buf;
}

/* Messages over seconds, all of a side's rounds together. */
static double bb_side_rate(const bb_side *sd)
{
    return (double)sd->msgs / sd->s;
}

/* One round of leg, added to sd. With leg->cpu, the bridge's status before
 * and after it: the growth of its CPU time and of its request count, which
 * counts the connecting round trips and the closing status request too (the
 * opening one was counted before it answered). 0, or 1. */
static int bb_side_round(const bb_opts *o, const bb_leg *leg, bb_side *sd)
{
    bb_status s0, s1;
    int st = leg->cpu ? bb_bridge_status(o->endpoint, 5000, &s0) : 0;
    long msgs, bad;
    double s;
    int rc = bb_tp_round(o, leg, &msgs, &bad, &s);
    if (leg->cpu)
        st |= bb_bridge_status(o->endpoint, 5000, &s1);
    sd->bad += bad;
    if (rc)
        return rc;
    if (leg->cpu && (st || s1.requests <= s0.requests || sd->requests < 0)) {
        sd->requests = -1; /* one round unknown: no CPU per message */
    } else if (leg->cpu) {
        sd->cpu_us += s1.cpu_us - s0.cpu_us;
        sd->requests += s1.requests - s0.requests;
    }
    sd->rate[sd->rounds++] = (double)msgs / s;
    sd->msgs += msgs;
    sd->s += s;
    return 0;
}

/* Writes sd's sums into its row under the rows' lock (the Ctrl-C reporter
 * may print the row at any moment). */
static void bb_side_fill(const bb_opts *o, bench_report *rep, const bb_side *sd, const char *extra)
{
    char list[BB_MAX_ROUNDS * 24];
    bb_list(list, sizeof list, sd->rate, sd->rounds, 0);
    bench_rows_lock();
    bench_result *r = &rep->results[sd->row];
    r->count = (uint64_t)sd->msgs;
    r->msgs_per_s = bb_side_rate(sd);
    r->extra[0] = '\0';
    bb_extra_add(r, "\"threads\": %d, \"window\": %d, \"bad\": %ld", o->threads, o->window, sd->bad);
    if (sd->members[0])
        bb_extra_add(r, "%s", sd->members);
    bb_extra_add(r, "%s, \"rounds\": [%s]", extra, list);
    if (sd->requests > 0)
        bb_extra_add(r, "\"bridge_cpu_us_per_msg\": %.3f", sd->cpu_us / sd->requests);
    bench_rows_unlock();
}

/* Pipelined echo on both legs in o->rounds rounds each, alternating (leg 0,
 * leg 1, leg 0, ...) so that drift of the host falls on both alike. The
 * rows appear after the first pair of rounds and are refreshed after each
 * pair; a failed or interrupted round ends the alternation, the rows
 * keeping the pairs before it. 0, or 1. */
static int bb_throughput_legs(const bb_opts *o, bench_report *rep, const bb_leg leg[2], const char *extra,
                              bb_side sd[2])
{
    for (int i = 0; i < o->rounds; i++) {
        for (int k = 0; k < 2; k++)
            if (bench_interrupted() || bb_side_round(o, &leg[k], &sd[k]))
                return 1;
        for (int k = 0; k < 2; k++) {
            char name[64];
            if (i == 0) {
                bb_row_name(name, sizeof name, &leg[k], o);
                sd[k].row = (size_t)(bench_add(rep, name, leg[k].backend) - rep->results);
            }
            bb_side_fill(o, rep, &sd[k], extra);
        }
    }
    return 0;
}

/* Issue 13's bound, bridge / raw >= 0.85, over all rounds, and beside it
 * each round's bridge / raw and the worst of them: the spread. */
static void bb_ratio_claim(const bb_side sd[2])
{
    char each[BB_MAX_ROUNDS * 24];
    double q[BB_MAX_ROUNDS], worst = 0;
    for (int i = 0; i < sd[1].rounds; i++) {
        q[i] = sd[1].rate[i] / sd[0].rate[i];
        worst = i == 0 || q[i] < worst ? q[i] : worst;
    }
    bb_list(each, sizeof each, q, sd[1].rounds, 3);
    double agg = bb_side_rate(&sd[1]) / bb_side_rate(&sd[0]);
    fprintf(stderr, "rk-bench bridge: throughput bridge %.0f vs raw ZeroMQ %.0f msg/s over %d rounds "
            "each: %.3f x (>= 0.85: %s); rounds %s x, worst %.3f x\n", bb_side_rate(&sd[1]),
            bb_side_rate(&sd[0]), sd[1].rounds, agg, agg >= 0.85 ? "met" : "UNDER", each, worst);
}

/* zmq_raw_throughput_echo_64 and bridge_throughput_echo_64, alternating,
 * with the bridge's CPU time per message over its rounds (from its status
 * counters), then the bound. */
static int bb_throughput_pair(const bb_opts *o, bench_report *rep, const bb_status *st0, const char *extra)
{
    const bb_leg leg[2] = {{"zmq_raw_throughput_echo", "zmq", o->raw_endpoint, true, false, false},
                           {"bridge_throughput_echo", st0->backend, o->endpoint, false, false, true}};
    bb_side sd[2];
    memset(sd, 0, sizeof sd);
    snprintf(sd[0].members, sizeof sd[0].members, "\"zmq_io_threads\": %d", o->raw_io_threads);
    if (st0->io_threads > 0 && st0->zmq_io_threads > 0)
        snprintf(sd[1].members, sizeof sd[1].members,
                 "\"io_threads\": %.0f, \"zmq_io_threads\": %.0f, \"allocator\": \"%s\"", st0->io_threads,
                 st0->zmq_io_threads, st0->allocator);
    if (bb_throughput_legs(o, rep, leg, extra, sd))
        return 1;
    if (sd[1].requests > 0)
        fprintf(stderr, "rk-bench bridge: bridge CPU %.3f us per request over its %d throughput rounds "
                "(%.0f requests: the messages, and each round's %d connecting round trips and status "
                "read)\n", sd[1].cpu_us / sd[1].requests, sd[1].rounds, sd[1].requests, o->threads);
    else if (st0->cpu_us >= 0 && st0->requests >= 0)
        fprintf(stderr, "rk-bench bridge: no bridge_cpu_us_per_msg: a status read around a round failed\n");
    bb_ratio_claim(sd);
    if (!strcmp(st0->allocator, "libc"))
        fprintf(stderr, "rk-bench bridge: this rk-bridge was built with glibc's malloc, not jemalloc (what a "
                "default build links where libjemalloc-dev is found): not the default build's throughput "
                "(bridge/NOTES.md, \"Its allocator\")\n");
    return 0;
}

/* ---- a broker hop (samples/broker.c, in this process) ----------------- */

/* The same echo straight to the bridge and through the broker, both with
 * the delimiter frame a client behind a broker sends: latency interleaved,
 * then throughput in alternating rounds. */
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
    const bb_leg leg[2] = {{"bridge_delim_echo", backend, o->endpoint, false, true, false},
                           {"broker_bridge_echo", backend, front, false, true, false}};
    int rc = o->latency ? bb_latency_legs(o, rep, leg, extra, p50) : 0;
    const bb_leg tl[2] = {{"bridge_delim_throughput_echo", backend, o->endpoint, false, true, false},
                          {"broker_bridge_throughput_echo", backend, front, false, true, false}};
    bb_side sd[2];
    memset(sd, 0, sizeof sd);
    rc |= bb_throughput_legs(o, rep, tl, extra, sd);
    bb_broker_stop(&b);
    if (!rc)
        fprintf(stderr, "rk-bench bridge: the broker hop: p50 %.0f ns vs %.0f ns direct (+%.0f ns); "
                "throughput %.0f vs %.0f msg/s direct (%.2fx)\n", p50[1], p50[0], p50[1] - p50[0],
                bb_side_rate(&sd[1]), bb_side_rate(&sd[0]), bb_side_rate(&sd[1]) / bb_side_rate(&sd[0]));
    return rc;
}

int bench_bridge_run(int argc, char **argv, bench_report *rep)
{
    bb_opts o;
    int rc = bb_parse(argc, argv, &o);
    if (rc)
        return rc;
    if (bb_fd_room(o.threads))
        return 2;
    bb_status st0;
    if (bb_probe(&o, &st0))
        return 1;
    bb_raw raw;
    if (bb_raw_start(&raw, o.raw_endpoint, sizeof o.raw_endpoint, o.raw_io_threads))
        return 1;
    const char *backend = st0.backend;
    if (st0.device[0]) /* the record names the bridge's GPU (plot_cdf.py's title) */
        bench_set_device(rep, st0.device, st0.cc, (long)st0.sm_count, "the bridge's status");
    const char *transport = !strncmp(o.endpoint, "ipc://", 6) ? "ipc" : "tcp";
    char extra[96];
    snprintf(extra, sizeof extra, "\"transport\": \"%s\", \"size\": %zu", transport, o.size);
    fprintf(stderr, "rk-bench bridge: bridge %s (backend %s, allocator %s), raw echo server %s\n",
            o.endpoint, backend, st0.allocator, o.raw_endpoint);

    double p50[2] = {0, 0}, ring_p50 = 0; /* raw, bridge */
    if (o.latency)
        rc |= bb_latency_pair(&o, rep, backend, extra, p50);
    if (o.ring)
        ring_p50 = bb_ring_row(&st0, rep);
    rc |= bb_throughput_pair(&o, rep, &st0, extra);
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
