/* bridge/client/rk_client.c - rk-client: talk to rk-bridge from the command
 * line. Exit status: 0 every reply ok and correct, 1 a failure (no reply,
 * an error reply, a wrong result: said on stderr), 2 a bad command line. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "endpoint.h" /* bridge/protocol: the endpoint check librkc and rk-bridge use */
#include "json.h"
#include "rk/client.h"

static const char rkc__usage[] =
"usage: rk-client [options] COMMAND [ARGS]\n"
"Commands\n"
"  ping                   round trip without the runtime; prints the backend\n"
"  echo [TEXT]            echo TEXT (or --size random bytes) and check the bytes\n"
"  vadd                   add two random float32 vectors of --n elements and\n"
"                         check c against a local computation (bit for bit)\n"
"  status                 print the bridge's status map, as JSON after the round\n"
"                         trip (--json: the JSON alone)\n"
"  launch                 relaunch the ring kernel with --grid/--block/--smem\n"
"                         (an admin operation)\n"
"  call ACTOR [FIELD=VALUE ...]\n"
"                         call any actor (or operation) by name; each VALUE is\n"
"                         TEXT (its bytes), @FILE (the file's bytes; @- stdin),\n"
"                         hex:0a1b.., f32:1,2.5,-3 (little-endian float32),\n"
"                         text:TEXT, str:TEXT (a msgpack str), uint:N (a msgpack\n"
"                         uint); prints every field of the reply\n"
"  actors                 the actors the bridge serves: inputs -> outputs\n"
"Options\n"
"  -e, --endpoint E       bridge endpoint (default tcp://127.0.0.1:5555)\n"
"  -c, --count N          repeat N times and print latency percentiles (default 1)\n"
"  -s, --size BYTES       echo payload size when no TEXT (default 64)\n"
"  -n, --n N              vadd elements (default 1024)\n"
"      --grid N, --block N, --smem BYTES   for launch (default 0 each: the\n"
"                         bridge's choice, as rk-bridge's own --grid/--block)\n"
"  -t, --timeout MS       per request (default 5000)\n"
"      --req              use a REQ socket instead of DEALER\n"
"      --server-key FILE  CURVE: the bridge's public key file (Z85)\n"
"      --secret-key FILE  CURVE: this client's secret key file (Z85)\n"
"      --json             status, launch: print the reply alone, as JSON (the\n"
"                         --count or --quiet summary line goes to stderr)\n"
"  -f, --format FMT       call: print bin fields as auto (text when printable,\n"
"                         else hex), hex, f32 or text\n"
"  -o, --output FIELD=FILE  call: write that reply field's bytes to FILE (- is\n"
"                         stdout); repeatable\n"
"      --full             call: print long fields whole (default: the first 256 B)\n"
"  -q, --quiet            print only the summary line\n"
"  -V, --version          print the version and exit\n"
"  -h, --help\n"
"A request larger than the bridge's transport cap (4 x its --max-message-bytes,\n"
"which it would not answer) is refused before it is sent.\n"
"Exit status: 0 when every reply was ok and correct, 1 when something failed\n"
"(the reason goes to stderr), 2 for a bad command line (also a value no request\n"
"carries: --size or an @FILE over 4 GiB, a field given twice).\n";

#define RKC_HINT "(see rk-client --help)"
#define RKC_COMMANDS "ping, echo, vadd, status, launch, call or actors"

typedef struct rkc__args {
    const char *endpoint, *skey, *ckey, *cmd, *text;
    char **words; /* call: ACTOR FIELD=VALUE ... */
    int n_words;
    rkc__call call;
    long count, size, n, timeout;
    uint32_t grid, block, smem;
    bool quiet, json, help, version;
    rkc_options o;
} rkc__args;

static int rkc__num(const char *opt, const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    /* decimal, digits first, as rk-bridge's: base 0 read "--block 010" as
     * 8 and took 0x10; strtol takes " 5" and "+5" */
    long v = *s >= '0' && *s <= '9' ? strtol(s, &end, 10) : -1;
    if (v < 0 || errno || end == s || *end || v < min || v > max) {
        fprintf(stderr, "rk-client: %s %s: expected a whole number from %ld to %ld " RKC_HINT "\n",
                opt, s, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

enum { O_GRID = 256, O_BLOCK, O_SMEM, O_REQ, O_SKEY, O_CKEY, O_JSON, O_FULL };

static const struct option rkc__opts[] = {
    {"endpoint", required_argument, 0, 'e'}, {"count", required_argument, 0, 'c'},
    {"size", required_argument, 0, 's'},     {"n", required_argument, 0, 'n'},
    {"grid", required_argument, 0, O_GRID},  {"block", required_argument, 0, O_BLOCK},
    {"smem", required_argument, 0, O_SMEM},  {"timeout", required_argument, 0, 't'},
    {"req", no_argument, 0, O_REQ},          {"server-key", required_argument, 0, O_SKEY},
    {"secret-key", required_argument, 0, O_CKEY}, {"quiet", no_argument, 0, 'q'},
    {"json", no_argument, 0, O_JSON},        {"version", no_argument, 0, 'V'},
    {"format", required_argument, 0, 'f'},   {"output", required_argument, 0, 'o'},
    {"full", no_argument, 0, O_FULL},
    {"help", no_argument, 0, 'h'},           {0, 0, 0, 0},
};

static int rkc__option(rkc__args *a, int ch, const char *arg)
{
    long v;
    switch (ch) {
    case 'e': a->endpoint = arg; return 0;
    case 'c': return rkc__num("--count", arg, 1, 100000000, &a->count);
    /* a msgpack bin carries at most UINT32_MAX bytes */
    case 's': return rkc__num("--size", arg, 0, UINT32_MAX, &a->size);
    case 'n': return rkc__num("--n", arg, 1, UINT32_MAX / 4, &a->n);
    case 't': return rkc__num("--timeout", arg, 1, 86400000, &a->timeout);
    case O_GRID: if (rkc__num("--grid", arg, 0, UINT32_MAX, &v)) return -1; a->grid = (uint32_t)v; return 0;
    case O_BLOCK: if (rkc__num("--block", arg, 0, UINT32_MAX, &v)) return -1; a->block = (uint32_t)v; return 0;
    case O_SMEM: if (rkc__num("--smem", arg, 0, UINT32_MAX, &v)) return -1; a->smem = (uint32_t)v; return 0;
    case O_REQ: a->o.socket_type = RKC_REQ; return 0;
    case O_SKEY: a->skey = arg; return 0;
    case O_CKEY: a->ckey = arg; return 0;
    case O_JSON: a->json = true; return 0;
    case 'f': return rkc__call_format(&a->call, arg);
    case 'o': return rkc__call_output(&a->call, arg);
    case O_FULL: a->call.full = true; return 0;
    case 'q': a->quiet = true; return 0;
    case 'V': a->version = true; return 0;
    case 'h': a->help = true; return 0;
    default: return -1;
    }
}

static int rkc__parse(rkc__args *a, int argc, char **argv)
{
    int ch;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":e:c:s:n:t:f:o:qhV", rkc__opts, NULL)) != -1) {
        if (ch == ':') {
            fprintf(stderr, "rk-client: option %s needs a value " RKC_HINT "\n", argv[optind - 1]);
            return -1;
        }
        if (ch == '?') {
            if (optopt && optopt < 256)
                fprintf(stderr, "rk-client: unknown option -%c " RKC_HINT "\n", optopt);
            else
                fprintf(stderr, "rk-client: unknown option %s " RKC_HINT "\n", argv[optind - 1]);
            return -1;
        }
        if (rkc__option(a, ch, optarg))
            return -1;
    }
    if (a->help || a->version)
        return 0;
    if (optind >= argc) {
        fprintf(stderr, "rk-client: no command: " RKC_COMMANDS " " RKC_HINT "\n");
        return -1;
    }
    a->cmd = argv[optind];
    if (!strcmp(a->cmd, "call")) {
        a->words = argv + optind + 1;
        a->n_words = argc - optind - 1;
        if (!a->n_words) {
            fprintf(stderr, "rk-client: call needs an actor name: call ACTOR [FIELD=VALUE ...] " RKC_HINT "\n");
            return -1;
        }
    }
    a->text = optind + 1 < argc && !a->words ? argv[optind + 1] : NULL;
    if ((optind + 2 < argc && !a->words) || (a->text && strcmp(a->cmd, "echo"))) {
        fprintf(stderr, "rk-client: unexpected argument %s " RKC_HINT "\n", argv[argc - 1]);
        return -1;
    }
    if (!!a->skey != !!a->ckey) {
        fprintf(stderr, "rk-client: CURVE needs both --server-key and --secret-key " RKC_HINT "\n");
        return -1;
    }
    char why[256];
    if (rkb_endpoint_problem(a->endpoint, false, why, sizeof why)) {
        fprintf(stderr, "rk-client: --endpoint %s: %s " RKC_HINT "\n", a->endpoint, why);
        return -1;
    }
    return 0;
}

static int rkc__read_key(const char *path, char out[41])
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "rk-client: cannot read key file %s: %s\n", path, strerror(errno));
        return -1;
    }
    char line[128] = "";
    int ok = fgets(line, sizeof line, f) && strcspn(line, " \t\r\n") == 40;
    fclose(f);
    if (!ok) {
        fprintf(stderr, "rk-client: %s does not start with a 40-character Z85 key\n", path);
        return -1;
    }
    memcpy(out, line, 40);
    out[40] = 0;
    return 0;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* The request and what its reply must be. */
typedef struct rkc__work {
    rkc_request rq;
    uint8_t *buf;
    float *a, *b, *want;
} rkc__work;

static int rkc__build(rkc__args *a, rkc__work *w)
{
    if (!strcmp(a->cmd, "actors"))
        return 0;
    if (a->words) { /* call ACTOR FIELD=VALUE ... */
        w->rq.name = a->words[0];
        int rc = rkc__call_build(&a->call, a->words + 1, a->n_words - 1);
        w->rq.fields = a->call.fields;
        w->rq.n_fields = a->call.n;
        return rc;
    }
    static const struct { const char *name; rkc_op op; } cmds[] = {
        {"ping", RKC_PING}, {"echo", RKC_ECHO}, {"vadd", RKC_VADD},
        {"status", RKC_STATUS}, {"launch", RKC_LAUNCH},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++)
        if (!strcmp(a->cmd, cmds[i].name))
            w->rq.op = cmds[i].op;
    if (!w->rq.op) {
        fprintf(stderr, "rk-client: unknown command %s: expected " RKC_COMMANDS " " RKC_HINT "\n", a->cmd);
        return -1;
    }
    w->rq.grid = a->grid, w->rq.block = a->block, w->rq.smem = a->smem;
    if (w->rq.op == RKC_ECHO && a->text) {
        w->rq.data = a->text;
        w->rq.len = strlen(a->text);
    }
    return 0;
}

/* The random echo payload and the vadd operands (after the cap check:
 * they may be large). 0, or -2 out of memory (said). */
static int rkc__fill(const rkc__args *a, rkc__work *w)
{
    if (w->rq.op == RKC_ECHO && !a->text) {
        w->buf = malloc((size_t)a->size + 1);
        for (long i = 0; w->buf && i < a->size; i++)
            w->buf[i] = (uint8_t)rnd();
        w->rq.data = w->buf;
        w->rq.len = (size_t)a->size;
    } else if (w->rq.op == RKC_VADD) {
        w->a = malloc((size_t)a->n * 4);
        w->b = malloc((size_t)a->n * 4);
        w->want = malloc((size_t)a->n * 4);
        for (long i = 0; w->want && w->a && w->b && i < a->n; i++) {
            w->a[i] = (float)((int32_t)rnd() % 100000) / 64.0f;
            w->b[i] = (float)((int32_t)rnd() % 100000) / 1024.0f;
            w->want[i] = w->a[i] + w->b[i];
        }
        w->rq.a = w->a, w->rq.b = w->b, w->rq.n = (size_t)a->n;
    }
    if ((w->rq.op == RKC_ECHO && !a->text && !w->buf) || (w->rq.op == RKC_VADD && (!w->a || !w->b || !w->want))) {
        fprintf(stderr, "rk-client: out of memory for the request\n");
        return -2;
    }
    return 0;
}

static void rkc__no_reply(const rkc__args *a, rkc *c, int rc)
{
    if (rc == -EINVAL || rc == -E2BIG) { /* librkc refused the request before sending: the command line's */
        fprintf(stderr, "rk-client: %s: %s " RKC_HINT "\n", a->cmd, rkc_errmsg(c));
        return;
    }
    fprintf(stderr, "rk-client: %s %s: %s%s\n", a->cmd, a->endpoint, rkc_errmsg(c),
            rc == -ETIMEDOUT ? " (is rk-bridge running there? With CURVE on, a client "
                               "whose key is not allowed gets no reply either)" : "");
}

/* Requests above this ask the bridge for its transport cap first: every
 * bridge takes a frame this large unless its --max-message-bytes is below
 * 16 KiB (the cap is 4 times it). */
#define RKC_CAP_ASK_BYTES ((size_t)64 << 10)

/* A frame above the bridge's transport cap is not answered: ZeroMQ closes
 * its connection (PROTOCOL.md, "Sizes"), and the client would wait out its
 * timeout and blame the bridge. So such a request is refused before it is
 * sent, with the cap `status` states. Returns 0 (send it), or 1 (said). */
static int rkc__cap_check(const rkc__args *a, const rkc__work *w, rkc *c)
{
    /* echo's and vadd's payloads are built after this check: their sizes */
    rkc_request rq = w->rq;
    if (!rq.name && rq.op == RKC_ECHO && !a->text)
        rq.len = (size_t)a->size;
    else if (!rq.name && rq.op == RKC_VADD)
        rq.n = (size_t)a->n;
    const size_t bytes = rkc_request_bytes(&rq);
    if (bytes <= RKC_CAP_ASK_BYTES)
        return 0;
    rkc_reply r;
    rkc_request sq = {.op = RKC_STATUS};
    int rc = rkc_call(c, &sq, &r, (int)a->timeout);
    if (rc) {
        rkc__no_reply(a, c, rc);
        return 1;
    }
    /* an error reply, or a bridge that does not state it: let it answer */
    const msgpack_object *cap = r.ok ? rkc_map_get(rkc_reply_get(&r, "counters"), "transport_cap_bytes") : NULL;
    int bad = cap && cap->type == MSGPACK_OBJECT_POSITIVE_INTEGER && bytes > cap->via.u64;
    if (bad)
        fprintf(stderr, "rk-client: %s: the request is %zu bytes, above the transport cap of the bridge at "
                "%s, %" PRIu64 " bytes (4 x its --max-message-bytes), which closes the connection of a "
                "larger frame without a reply: not sent\n", w->rq.name ? w->rq.name : a->cmd, bytes,
                a->endpoint, cap->via.u64);
    rkc_reply_free(&r);
    return bad;
}

/* A map's unsigned field, 0 where there is none (a bridge older than the
 * field). */
static uint64_t rkc__uint_at(const msgpack_object *map, const char *key)
{
    const msgpack_object *v = map ? rkc_map_get(map, key) : NULL;
    return v && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? v->via.u64 : 0;
}

/* Checks one reply; prints what the first one says. Returns 0 or 1. */
static int rkc__check(const rkc__args *a, const rkc__work *w, const rkc_reply *r, bool first)
{
    if (!r->ok) {
        fprintf(stderr, "rk-client: %s: %s: %s\n", w->rq.name ? w->rq.name : a->cmd, r->code, r->message);
        return 1;
    }
    bool show = first && !a->quiet;
    if (w->rq.name) { /* call */
        if (show)
            printf("%s: ok in %.1f us\n", w->rq.name, r->rtt_us);
        return first ? rkc__call_print(&a->call, r, show ? stdout : NULL) : 0;
    } else if (w->rq.op == RKC_ECHO) {
        if (r->len != w->rq.len || (r->len && memcmp(r->data, w->rq.data, r->len))) {
            fprintf(stderr, "rk-client: echo: MISMATCH: %zu bytes back for %zu sent\n", r->len, w->rq.len);
            return 1;
        }
        if (show && a->text)
            printf("echo: \"%.*s\" (%zu B) back intact in %.1f us\n", (int)r->len,
                   (const char *)r->data, r->len, r->rtt_us);
        else if (show)
            printf("echo: %zu random bytes back intact in %.1f us\n", r->len, r->rtt_us);
    } else if (w->rq.op == RKC_VADD) {
        size_t wrong = r->len != (size_t)a->n * 4 ? (size_t)a->n : 0;
        for (long k = 0; !wrong && k < a->n; k++)
            wrong += memcmp(r->data + 4 * k, &w->want[k], 4) != 0;
        if (wrong) {
            fprintf(stderr, "rk-client: vadd: MISMATCH: %zu of %ld elements differ from the local sum\n",
                    wrong, a->n);
            return 1;
        }
        if (show) {
            float c0, cl;
            memcpy(&c0, r->data, 4);
            memcpy(&cl, r->data + 4 * (a->n - 1), 4);
            printf("vadd: %ld float32 elements, c[0] = %g + %g = %g ... c[%ld] = %g; all equal "
                   "to the local sum, in %.1f us\n", a->n, w->a[0], w->b[0], c0, a->n - 1, cl, r->rtt_us);
        }
    } else if (show && w->rq.op == RKC_PING) {
        printf("ping: backend %s, %.1f us\n", r->backend, r->rtt_us);
    } else if (first && a->json) {
        rkc_print_json(stdout, r->root);
        printf("\n");
    } else if (show && w->rq.op == RKC_LAUNCH) {
        const msgpack_object *k = rkc_reply_get(r, "kernel");
        printf("launch: backend %s, kernel grid %" PRIu64 " block %" PRIu64 " smem %" PRIu64 " B, in %.1f us\n",
               r->backend, rkc__uint_at(k, "grid"), rkc__uint_at(k, "block"), rkc__uint_at(k, "smem"), r->rtt_us);
    } else if (show) { /* status and the rest: the reply map, as JSON */
        printf("%s (%.1f us): ", a->cmd, r->rtt_us);
        rkc_print_json(stdout, r->root);
        printf("\n");
    }
    return 0;
}

static int cmp_d(const void *x, const void *y)
{
    double p = *(const double *)x, q = *(const double *)y;
    return p < q ? -1 : p > q;
}

static int rkc__run(const rkc__args *a, rkc__work *w, rkc *c)
{
    double *lat = calloc((size_t)a->count, sizeof *lat);
    int bad = !lat;
    for (long i = 0; i < a->count && !bad; i++) {
        rkc_reply r;
        int rc = rkc_call(c, &w->rq, &r, (int)a->timeout);
        if (rc) {
            rkc__no_reply(a, c, rc);
            bad = rc == -EINVAL || rc == -E2BIG ? 2 : 1; /* refused before sending */
            break;
        }
        lat[i] = r.rtt_us;
        bad = rkc__check(a, w, &r, i == 0);
        rkc_reply_free(&r);
    }
    FILE *sum = a->json ? stderr : stdout; /* --json: stdout has the reply alone */
    if (!bad && a->count > 1) {
        long n = a->count;
        qsort(lat, (size_t)n, sizeof *lat, cmp_d);
        fprintf(sum, "%s x %ld: round trip p50 %.1f us, p90 %.1f us, p99 %.1f us, max %.1f us\n",
                w->rq.name ? w->rq.name : a->cmd,
                n, lat[n / 2], lat[n * 9 / 10], lat[n * 99 / 100], lat[n - 1]);
    } else if (!bad && a->quiet) {
        fprintf(sum, "%s: ok, %.1f us\n", w->rq.name ? w->rq.name : a->cmd, lat[0]);
    }
    free(lat);
    return bad;
}

int main(int argc, char **argv)
{
    /* launch's grid, block and smem: 0 unless given, the bridge's own
     * choice (PROTOCOL.md), as rk-bridge starts */
    rkc__args a = {.endpoint = "tcp://127.0.0.1:5555", .count = 1, .size = 64, .n = 1024,
                   .timeout = 5000};
    if (rkc__parse(&a, argc, argv))
        return 2;
    if (a.help) {
        fputs(rkc__usage, stdout);
        return 0;
    }
    if (a.version) {
        printf("rk-client %s (protocol v1.1)\n", RKB_VERSION);
        return 0;
    }
    rkc__work w = {0};
    char skey_z[41], ckey_z[41];
    int rc = rkc__build(&a, &w);
    rc = rc == -1 ? 2 : rc ? 1 : 0;
    if (!rc && a.skey) {
        rc = rkc__read_key(a.skey, skey_z) || rkc__read_key(a.ckey, ckey_z);
        a.o.server_public_key = skey_z;
        a.o.secret_key = ckey_z;
    }
    rkc *c = NULL;
    if (!rc && rkc_connect(&c, a.endpoint, &a.o)) {
        fprintf(stderr, "rk-client: %s\n", rkc_last_error());
        rc = 1;
    }
    if (!rc && !strcmp(a.cmd, "actors"))
        rc = rkc__actors(c, a.endpoint, (int)a.timeout);
    else if (!rc && !(rc = rkc__cap_check(&a, &w, c)))
        rc = rkc__fill(&a, &w) ? 1 : rkc__run(&a, &w, c);
    rkc_close(c);
    rkc__call_free(&a.call);
    free(w.buf);
    free(w.a);
    free(w.b);
    free(w.want);
    return rc;
}
