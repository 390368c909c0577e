/* rk-bench: latency and throughput of ringkernel's paths.
 *
 *   rk-bench ring   [--backend cpu|cuda|auto] [--count N] [--window W] [--json F]
 *   rk-bench gpu    ...   (all GPU paths side by side; see bench_gpu.h)
 *   rk-bench bridge --endpoint E ...   (against a running rk-bridge)
 *
 * A benchmark is a program, not a test: it prints a table for people and,
 * with --json, the record described in benchmarks/results/README.md. The
 * table and the record hold only what the run measured; Ctrl-C prints (and
 * writes) the rows measured so far and exits 130. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rk/rk.h>

#include "bench.h"
#ifndef RK_BENCH_VERSION
#define RK_BENCH_VERSION "unknown"
#endif
#ifndef RK_BENCH_COMMIT
#define RK_BENCH_COMMIT "unknown"
#endif
#ifdef RK_BENCH_GPU
#include "bench_gpu.h"
#endif
#ifdef RK_BENCH_BRIDGE
#include "bench_bridge.h"
#endif

static void usage(FILE *f)
{
    fprintf(f,
            "usage: rk-bench MODE [options]\n"
            "modes:\n"
            "  ring     in-process round trips through a runtime's rings (ring_echo_64,\n"
            "           throughput_echo_64, throughput_echo_64_batch: the batch API, 32 per\n"
            "           call, idle_cpu)\n"
            "  gpu      every GPU path side by side (floor, ring, launch, graph, memcpy, vadd)%s\n"
            "  bridge   round trips through a running rk-bridge%s\n"
            "ring options:\n"
            "  -b, --backend B     auto, cpu or cuda (default cpu)\n"
            "  -n, --count N       round trips to time (default 1000000, at most 100000000)\n"
            "  -w, --window W      requests in flight for the throughput run (default 64,\n"
            "                      at most 32768)\n"
            "  -m, --messages N    messages for the throughput run (default 2000000)\n"
            "  -i, --idle-seconds S  measure CPU use of an idle runtime for S s (default 5;\n"
            "                      0 skips; at most 3600)\n"
            "every mode:\n"
            "  -j, --json FILE     write the JSON record to FILE\n"
            "  -s, --samples       include raw latency samples in the JSON (for CDF plots;\n"
            "                      on by default in gpu mode)\n"
            "  -h, --help          this help (after a mode name: that mode's options)\n"
            "  -V, --version       the version and commit of rk-bench\n"
            "Ctrl-C prints the rows measured so far (and writes them with --json,\n"
            "marked \"interrupted\": true) and exits 130.\n",
#ifdef RK_BENCH_GPU
            "",
#else
            " [not built: no CUDA]",
#endif
#ifdef RK_BENCH_BRIDGE
            ""
#else
            " [not built]"
#endif
    );
}

static int die_rk(const char *what, int rc)
{
    fprintf(stderr, "rk-bench: %s: %s (%s): %s\n", what, rk_strerror(rc), rk_err_name(rc),
            rk_last_detail());
    return 1;
}

/* --count's most: its samples' 800 MB, and as much again to sort them */
#define RING_MAX_COUNT 100000000L

/* ring mode's options */
typedef struct ring_opts {
    rk_config cfg;
    long count, window, messages;
    double idle_s;
} ring_opts;

/* 0 or 2 (bad options, said on stderr) */
static int ring_parse(int argc, char **argv, ring_opts *o)
{
    static const struct option opts[] = {
        {"backend", required_argument, 0, 'b'}, {"count", required_argument, 0, 'n'},
        {"window", required_argument, 0, 'w'},  {"messages", required_argument, 0, 'm'},
        {"idle-seconds", required_argument, 0, 'i'}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    rk_config_init(&o->cfg);
    o->cfg.backend = RK_BACKEND_CPU;
    o->count = 1000000, o->window = 64, o->messages = 2000000;
    o->idle_s = 5;
    int c, bad = 0;
    opterr = 0; /* bench_bad_option says it in one line */
    while ((c = getopt_long(argc, argv, ":b:n:w:m:i:h", opts, NULL)) != -1) {
        switch (c) {
        case 'b':
            if (rk_backend_parse(optarg, &o->cfg.backend)) {
                fprintf(stderr, "rk-bench: %s\n", rk_last_detail());
                return 2;
            }
            break;
        /* each value whole and in range, refused as given: --count's
         * samples take 8 B each, and a count past SIZE_MAX / 8 wrapped
         * their buffer's size */
        case 'n': bad = bench_num("ring", "--count", optarg, 1, RING_MAX_COUNT, &o->count); break;
        case 'w': bad = bench_num("ring", "--window", optarg, 1, 32768, &o->window); break;
        case 'm': bad = bench_num("ring", "--messages", optarg, 1, LONG_MAX, &o->messages); break;
        case 'i': bad = bench_real("ring", "--idle-seconds", optarg, 0, 3600, &o->idle_s); break;
        case 'h': usage(stdout); exit(0);
        default: return bench_bad_option("ring", c, argv);
        }
        if (bad)
            return bad;
    }
    if (optind < argc)
        return bench_bad_argument("ring", argv[optind]);
    o->cfg.actor_window = (uint32_t)o->window;
    return 0;
}

/* count timed echo round trips after 20 000 untimed ones: ring_echo_64 */
static int ring_latency(rk_actor *a, const char *backend, long count, bench_report *rep)
{
    uint8_t msg[64];
    for (int i = 0; i < 64; i++)
        msg[i] = (uint8_t)(i * 7 + 1);
    rk_reply r;
    int rc;
    /* warm-up: page in the slots, let the worker reach its spin loop */
    for (int i = 0; i < 20000; i++) {
        if ((rc = rk_actor_call(a, RK_OP_ECHO, msg, sizeof msg, 0, &r, 5000)))
            return die_rk("warm-up echo", rc);
        rk_reply_release(a, &r);
    }
    uint64_t *lat = malloc((size_t)count * sizeof *lat);
    if (!lat) {
        fprintf(stderr, "rk-bench ring: no memory for %ld round trips' times (--count)\n", count);
        return 1;
    }
    for (long i = 0; i < count; i++) {
        uint64_t t0 = bench_now_ns();
        rc = rk_actor_call(a, RK_OP_ECHO, msg, sizeof msg, 0, &r, 5000);
        uint64_t t1 = bench_now_ns();
        if (rc || r.status || r.len != sizeof msg || memcmp(r.data, msg, sizeof msg)) {
            fprintf(stderr, "rk-bench: echo %ld failed: rc %d status %d len %zu: %s\n", i, rc,
                    rc ? 0 : r.status, rc ? 0 : r.len, rk_last_detail());
            free(lat);
            return 1;
        }
        rk_reply_release(a, &r);
        lat[i] = t1 - t0;
    }
    bench_result *res = bench_add(rep, "ring_echo_64", backend);
    bench_latency_stats(res, lat, (size_t)count);
    free(lat);
    return 0;
}

/* pipelined: keep `window` echoes in flight: throughput_echo_64 */
static int ring_throughput(rk_actor *a, const char *backend, long window, long messages,
                           bench_report *rep)
{
    uint8_t msg[64];
    for (int i = 0; i < 64; i++)
        msg[i] = (uint8_t)(i * 7 + 1);
    rk_reply r;
    int rc;
    long sent = 0, got = 0;
    uint64_t t0 = bench_now_ns();
    while (got < messages) {
        while (sent < messages && sent - got < window) {
            rc = rk_actor_send(a, RK_OP_ECHO, msg, sizeof msg, 0, NULL, 5000);
            if (rc)
                return die_rk("pipelined send", rc);
            sent++;
        }
        rc = rk_actor_recv(a, &r, 5000);
        if (rc || r.status || r.len != sizeof msg)
            return die_rk("pipelined recv", rc ? rc : r.status);
        rk_reply_release(a, &r);
        got++;
    }
    double secs = (double)(bench_now_ns() - t0) / 1e9;
    bench_result *res = bench_add(rep, "throughput_echo_64", backend);
    res->msgs_per_s = (double)messages / secs;
    res->count = (uint64_t)messages;
    snprintf(res->extra, sizeof res->extra, "\"window\": %ld, \"messages\": %ld", window, messages);
    return 0;
}

/* the same through the batch API: sends fill the window in batches of at
 * most `batch` (one ring reservation and doorbell each), replies are reaped
 * up to `batch` per call: throughput_echo_64_batch */
static int ring_throughput_batch(rk_actor *a, const char *backend, long window, long messages,
                                 int batch, bench_report *rep)
{
    uint8_t msg[64];
    for (int i = 0; i < 64; i++)
        msg[i] = (uint8_t)(i * 7 + 1);
    rk_send_req q[256];
    rk_reply r[256];
    batch = batch < 1 ? 1 : batch > 256 ? 256 : batch;
    for (int i = 0; i < batch; i++)
        q[i] = (rk_send_req){.type = RK_OP_ECHO, .data = msg, .len = sizeof msg};
    long sent = 0, got = 0;
    uint64_t t0 = bench_now_ns();
    while (got < messages) {
        long room = window - (sent - got), left = messages - sent;
        int n = (int)(room < left ? room : left);
        if (n > batch)
            n = batch;
        if (n > 0) {
            int k = rk_actor_send_batch(a, q, n, NULL, 5000);
            if (k < 0)
                return die_rk("pipelined send_batch", k);
            sent += k;
        }
        int k = rk_actor_recv_batch(a, r, batch, 5000);
        if (k < 0)
            return die_rk("pipelined recv_batch", k);
        for (int i = 0; i < k; i++)
            if (r[i].status || r[i].len != sizeof msg)
                return die_rk("pipelined recv_batch", r[i].status ? r[i].status : -RK_EPROTO);
        rk_reply_release_batch(a, r, k);
        got += k;
    }
    double secs = (double)(bench_now_ns() - t0) / 1e9;
    bench_result *res = bench_add(rep, "throughput_echo_64_batch", backend);
    res->msgs_per_s = (double)messages / secs;
    res->count = (uint64_t)messages;
    snprintf(res->extra, sizeof res->extra,
             "\"window\": %ld, \"batch\": %d, \"messages\": %ld, \"path\": \"rk_actor_send_batch/recv_batch\"",
             window, batch, messages);
    return 0;
}

/* CPU time of the whole process (worker + this thread) while the runtime is
 * open and no message moves, over idle_s seconds: idle_cpu */
static void ring_idle(const char *backend, double idle_s, bench_report *rep)
{
    usleep(200000); /* let the worker's backoff reach its sleep */
    uint64_t c0 = bench_cpu_ns(), w0 = bench_now_ns();
    usleep((useconds_t)(idle_s * 1e6));
    uint64_t c1 = bench_cpu_ns(), w1 = bench_now_ns();
    bench_result *res = bench_add(rep, "idle_cpu", backend);
    res->cpu_percent = 100.0 * (double)(c1 - c0) / (double)(w1 - w0);
    snprintf(res->extra, sizeof res->extra, "\"seconds\": %.1f", idle_s);
}

static int ring_mode(int argc, char **argv, bench_report *rep)
{
    ring_opts o;
    int rc = ring_parse(argc, argv, &o);
    if (rc)
        return rc;
    rk_runtime *rt;
    if ((rc = rk_runtime_open(&rt, &o.cfg)))
        return die_rk("opening the runtime", rc);
    rk_info info;
    rk_runtime_info(rt, &info);
    printf("backend %s (%s)\n", info.backend_name, info.why);
    if (info.has_device) { /* the record names the GPU (was "device": null on CUDA too) */
        char cc[24];
        snprintf(cc, sizeof cc, "%d.%d", info.cc_major, info.cc_minor);
        bench_set_device(rep, info.device_name, cc, info.sm_count, NULL);
    }
    rk_actor *a;
    if ((rc = rk_actor_open(rt, &a)))
        return die_rk("opening an actor", rc);
    rc = ring_latency(a, info.backend_name, o.count, rep);
    if (!rc)
        rc = ring_throughput(a, info.backend_name, o.window, o.messages, rep);
    if (!rc)
        rc = ring_throughput_batch(a, info.backend_name, o.window, o.messages, 32, rep);
    if (!rc && o.idle_s > 0)
        ring_idle(info.backend_name, o.idle_s, rep);
    rk_actor_close(a);
    rk_runtime_close(rt);
    return rc;
}

/* Prints the usage of `mode` (the general one for ring and unknown modes). */
static void mode_usage(const char *mode, FILE *f)
{
#ifdef RK_BENCH_GPU
    if (!strcmp(mode, "gpu")) {
        bench_gpu_usage(f);
        return;
    }
#endif
#ifdef RK_BENCH_BRIDGE
    if (!strcmp(mode, "bridge")) {
        bench_bridge_usage(f);
        return;
    }
#endif
    (void)mode;
    usage(f);
}

static int run_mode(const char *mode, int argc, char **argv, bench_report *rep)
{
    if (!strcmp(mode, "ring"))
        return ring_mode(argc, argv, rep);
#ifdef RK_BENCH_GPU
    if (!strcmp(mode, "gpu"))
        return bench_gpu_run(argc, argv, rep);
#endif
#ifdef RK_BENCH_BRIDGE
    if (!strcmp(mode, "bridge"))
        return bench_bridge_run(argc, argv, rep);
#endif
    if (!strcmp(mode, "gpu") || !strcmp(mode, "bridge"))
        fprintf(stderr, "rk-bench: mode %s is not available in this build (see rk-bench --help)\n", mode);
    else if (mode[0] == '-')
        fprintf(stderr, "rk-bench: unknown option %s; the mode comes first (see rk-bench --help)\n", mode);
    else
        fprintf(stderr, "rk-bench: unknown mode %s: ring, gpu or bridge (see rk-bench --help)\n", mode);
    return 2;
}

/* The commit as the JSON record names it: RK_BENCH_COMMIT from the
 * environment (a copy of the tree without git history), else the build's. */
static void version(void)
{
    const char *commit = getenv("RK_BENCH_COMMIT");
    printf("rk-bench %s (commit %s; librk %s)\n", RK_BENCH_VERSION, commit && *commit ? commit : RK_BENCH_COMMIT,
           rk_version());
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    for (int i = 1; i < argc; i++) { /* bridge mode has a --help of its own */
        if ((!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) &&
            (i == 1 || strcmp(argv[1], "bridge"))) {
            if (i == 1)
                usage(stdout);
            else
                mode_usage(argv[1], stdout); /* after a mode name: that mode's options */
            return 0;
        }
        if (!strcmp(argv[i], "--version")) { /* -V and --version say the same */
            version();
            return 0;
        }
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
        version();
        return 0;
    }
    const char *mode = argv[1];
    static bench_report rep;
    /* --json FILE, --samples, --help and --version are common to every mode:
     * take them out here, and hand the mode the rest (argv[0] = the mode) */
    static bench_output out;
    out.mode = mode;
    out.samples = !strcmp(mode, "gpu");
    int n = 0;
    char **av = calloc((size_t)argc + 1, sizeof *av);
    if (!av)
        return 1;
    for (int i = 1; i < argc; i++) {
        if ((!strcmp(argv[i], "--json") || !strcmp(argv[i], "-j")) && i + 1 >= argc) {
            fprintf(stderr, "rk-bench %s: option %s needs a value (see rk-bench %s --help)\n", mode, argv[i],
                    mode);
            free(av);
            return 2;
        }
        if (!strcmp(argv[i], "--json") || !strcmp(argv[i], "-j"))
            out.json = argv[++i];
        else if (!strncmp(argv[i], "--json=", 7))
            out.json = argv[i] + 7;
        else if (!strcmp(argv[i], "--samples") || !strcmp(argv[i], "-s"))
            out.samples = 1;
        else if (i > 1 && (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))) {
            mode_usage(mode, stdout);
            free(av);
            return 0;
        } else if (!strcmp(argv[i], "--version") || !strcmp(argv[i], "-V")) {
            version();
            free(av);
            return 0;
        } else
            av[n++] = argv[i];
    }
    if (out.json && bench_json_check(out.json) != 0) { /* before measuring, not after */
        fprintf(stderr, "rk-bench %s: cannot write --json %s: %s\n", mode, out.json, strerror(errno));
        free(av);
        return 2;
    }
    if (bench_finish_init(&rep, &out) != 0)
        perror("rk-bench: Ctrl-C reporter (a Ctrl-C will print no partial table)");
    int rc = run_mode(mode, n, av, &rep);
    rc = bench_finish(&rep, &out, rc);
    bench_report_free(&rep);
    free(av);
    return rc;
}
