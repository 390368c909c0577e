/* bridge/rk_client.c - rk-client: talk to rk-bridge from the command line. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client.h"

static void usage(FILE *f)
{
    fprintf(f,
"usage: rk-client [options] COMMAND [ARGS]\n"
"Commands\n"
"  ping                   round trip without the runtime; prints the backend\n"
"  echo [TEXT]            echo TEXT (or --size random bytes) and check the bytes\n"
"  vadd                   add two random float32 vectors of --n elements and\n"
"                         check c against a local computation (bit for bit)\n"
"  status                 print the bridge's status map\n"
"  launch                 relaunch the ring kernel with --grid/--block/--smem\n"
"Options\n"
"  -e, --endpoint E       bridge endpoint (default tcp://127.0.0.1:5555)\n"
"  -c, --count N          repeat N times and print latency percentiles (default 1)\n"
"  -s, --size BYTES       echo payload size when no TEXT (default 64)\n"
"  -n, --n N              vadd elements (default 1024)\n"
"      --grid N, --block N, --smem BYTES   for launch\n"
"  -t, --timeout MS       per request (default 5000)\n"
"      --req              use a REQ socket instead of DEALER\n"
"      --server-key FILE  CURVE: the bridge's public key file (Z85)\n"
"      --secret-key FILE  CURVE: this client's secret key file (Z85)\n"
"  -q, --quiet            print only the summary line\n"
"  -h, --help\n"
"Exit status: 0 when every reply was ok and correct, 1 otherwise.\n");
}

static int read_key(const char *path, char out[41])
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "rk-client: %s: %s\n", path, strerror(errno));
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

static void print_obj(const msgpack_object *o)
{
    msgpack_object_print(stdout, *o);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

int main(int argc, char **argv)
{
    enum { O_GRID = 256, O_BLOCK, O_SMEM, O_REQ, O_SKEY, O_CKEY };
    static const struct option opts[] = {
        {"endpoint", required_argument, 0, 'e'}, {"count", required_argument, 0, 'c'},
        {"size", required_argument, 0, 's'},     {"n", required_argument, 0, 'n'},
        {"grid", required_argument, 0, O_GRID},  {"block", required_argument, 0, O_BLOCK},
        {"smem", required_argument, 0, O_SMEM},  {"timeout", required_argument, 0, 't'},
        {"req", no_argument, 0, O_REQ},          {"server-key", required_argument, 0, O_SKEY},
        {"secret-key", required_argument, 0, O_CKEY}, {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'},           {0, 0, 0, 0},
    };
    const char *endpoint = "tcp://127.0.0.1:5555", *skey = NULL, *ckey = NULL;
    long count = 1, size = 64, n = 1024, timeout = 5000;
    uint32_t grid = 0, block = 256, smem = 0;
    int quiet = 0, ch;
    rkc_options o = {0};
    while ((ch = getopt_long(argc, argv, "e:c:s:n:t:qh", opts, NULL)) != -1) {
        switch (ch) {
        case 'e': endpoint = optarg; break;
        case 'c': count = strtol(optarg, NULL, 0); break;
        case 's': size = strtol(optarg, NULL, 0); break;
        case 'n': n = strtol(optarg, NULL, 0); break;
        case 't': timeout = strtol(optarg, NULL, 0); break;
        case O_GRID: grid = (uint32_t)strtoul(optarg, NULL, 0); break;
        case O_BLOCK: block = (uint32_t)strtoul(optarg, NULL, 0); break;
        case O_SMEM: smem = (uint32_t)strtoul(optarg, NULL, 0); break;
        case O_REQ: o.socket_type = RKC_REQ; break;
        case O_SKEY: skey = optarg; break;
        case O_CKEY: ckey = optarg; break;
        case 'q': quiet = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 1;
        }
    }
    if (optind >= argc || count < 1 || size < 0 || n < 1) {
        usage(stderr);
        return 1;
    }
    const char *cmd = argv[optind];
    char skey_z[41], ckey_z[41];
    if (skey || ckey) {
        if (!skey || !ckey || read_key(skey, skey_z) || read_key(ckey, ckey_z)) {
            fprintf(stderr, "rk-client: CURVE needs both --server-key and --secret-key\n");
            return 1;
        }
        o.server_public_key = skey_z;
        o.secret_key = ckey_z;
    }
    rkc_request rq = {0};
    uint8_t *buf = NULL;
    float *a = NULL, *b = NULL, *want = NULL;
    if (!strcmp(cmd, "ping")) {
        rq.op = RKC_PING;
    } else if (!strcmp(cmd, "status")) {
        rq.op = RKC_STATUS;
    } else if (!strcmp(cmd, "launch")) {
        rq.op = RKC_LAUNCH;
        rq.grid = grid, rq.block = block, rq.smem = smem;
    } else if (!strcmp(cmd, "echo")) {
        rq.op = RKC_ECHO;
        if (optind + 1 < argc) {
            rq.data = argv[optind + 1];
            rq.len = strlen(argv[optind + 1]);
        } else {
            buf = malloc((size_t)size + 1);
            for (long i = 0; i < size; i++)
                buf[i] = (uint8_t)rnd();
            rq.data = buf;
            rq.len = (size_t)size;
        }
    } else if (!strcmp(cmd, "vadd")) {
        rq.op = RKC_VADD;
        a = malloc((size_t)n * 4);
        b = malloc((size_t)n * 4);
        want = malloc((size_t)n * 4);
        for (long i = 0; i < n; i++) {
            a[i] = (float)((int32_t)rnd() % 100000) / 64.0f;
            b[i] = (float)((int32_t)rnd() % 100000) / 1024.0f;
            want[i] = a[i] + b[i];
        }
        rq.a = a, rq.b = b, rq.n = (size_t)n;
    } else {
        fprintf(stderr, "rk-client: unknown command %s\n", cmd);
        usage(stderr);
        return 1;
    }

    rkc *c;
    if (rkc_connect(&c, endpoint, &o))
        return 1;
    double *lat = calloc((size_t)count, sizeof *lat);
    int bad = 0;
    for (long i = 0; i < count && !bad; i++) {
        rkc_reply r;
        int rc = rkc_call(c, &rq, &r, (int)timeout);
        if (rc) {
            fprintf(stderr, "rk-client: %s %s: %s\n", cmd, endpoint, rkc_errmsg(c));
            bad = 1;
            break;
        }
        lat[i] = r.rtt_us;
        if (!r.ok) {
            printf("%s: error %s: %s\n", cmd, r.code, r.message);
            bad = 1;
        } else if (rq.op == RKC_ECHO) {
            if (r.len != rq.len || (r.len && memcmp(r.data, rq.data, r.len))) {
                printf("echo: MISMATCH: %zu bytes back for %zu sent\n", r.len, rq.len);
                bad = 1;
            } else if (!quiet && i == 0) {
                if (optind + 1 < argc)
                    printf("echo: \"%.*s\" (%zu B) back intact in %.1f us\n", (int)r.len,
                           (const char *)r.data, r.len, r.rtt_us);
                else
                    printf("echo: %zu random bytes back intact in %.1f us\n", r.len, r.rtt_us);
            }
        } else if (rq.op == RKC_VADD) {
            size_t wrong = 0;
            if (r.len != (size_t)n * 4)
                wrong = (size_t)n;
            else
                for (long k = 0; k < n; k++) {
                    float got;
                    memcpy(&got, r.data + 4 * k, 4);
                    if (memcmp(&got, &want[k], 4))
                        wrong++;
                }
            if (wrong) {
                printf("vadd: MISMATCH: %zu of %ld elements differ from the local sum\n", wrong, n);
                bad = 1;
            } else if (!quiet && i == 0) {
                float c0, cl;
                memcpy(&c0, r.data, 4);
                memcpy(&cl, r.data + 4 * (n - 1), 4);
                printf("vadd: %ld float32 elements, c[0] = %g + %g = %g ... c[%ld] = %g; all equal "
                       "to the local sum, in %.1f us\n", n, a[0], b[0], c0, n - 1, cl, r.rtt_us);
            }
        } else if (!quiet && i == 0) {
            if (rq.op == RKC_PING) {
                printf("ping: backend %s, %.1f us\n", r.backend, r.rtt_us);
            } else {
                printf("%s (%.1f us): ", cmd, r.rtt_us);
                print_obj(r.root);
                printf("\n");
            }
        }
        rkc_reply_free(&r);
    }
    if (!bad && count > 1) {
        qsort(lat, (size_t)count, sizeof *lat, cmp_d);
        printf("%s x %ld: round trip p50 %.1f us, p90 %.1f us, p99 %.1f us, max %.1f us\n", cmd,
               count, lat[count / 2], lat[count * 9 / 10], lat[count * 99 / 100], lat[count - 1]);
    } else if (!bad && quiet) {
        printf("%s: ok, %.1f us\n", cmd, lat[0]);
    }
    free(lat);
    free(buf);
    free(a);
    free(b);
    free(want);
    rkc_close(c);
    return bad;
}
