/* rk-bench: latency and throughput of ringkernel's paths.
 *
 *   rk-bench ring   [--backend cpu|cuda|auto] [--count N] [--window W] [--json F]
 *   rk-bench gpu    ...   (all GPU paths side by side; see bench_gpu.h)
 *   rk-bench bridge --endpoint E ...   (against a running rk-bridge)
 *
 * A benchmark is a program, not a test: it prints a table for people and,
 * with --json, the record of ../shared/design/benchmarks.md. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rk/rk.h>

#include "bench.h"
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
            "           throughput_echo_64, idle_cpu)\n"
            "  gpu      every GPU path side by side (floor, ring, launch, graph, memcpy, vadd)%s\n"
            "  bridge   round trips through a running rk-bridge%s\n"
            "ring options:\n"
            "  -b, --backend B     auto, cpu or cuda (default cpu)\n"
            "  -n, --count N       round trips to time (default 1000000)\n"
            "  -w, --window W      requests in flight for the throughput run (default 64)\n"
            "  -m, --messages N    messages for the throughput run (default 2000000)\n"
            "  -i, --idle-seconds S  measure CPU use of an idle runtime for S s (default 5; 0 skips)\n"
            "every mode:\n"
            "  -h, --help          this text (also after a mode name)\n"
            "      --version       rk-bench's and librk's versions\n"
            "  -j, --json FILE     write the JSON record to FILE\n"
            "  -s, --samples       include raw latency samples in the JSON (for CDF plots;\n"
            "                      on by default in gpu mode)\n",
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

static int ring_mode(int argc, char **argv, bench_report *rep)
{
    static const struct option opts[] = {
        {"backend", required_argument, 0, 'b'}, {"count", required_argument, 0, 'n'},
        {"window", required_argument, 0, 'w'},  {"messages", required_argument, 0, 'm'},
        {"idle-seconds", required_argument, 0, 'i'}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    rk_config cfg;
    rk_config_init(&cfg);
    cfg.backend = RK_BACKEND_CPU;
    long count = 1000000, window = 64, messages = 2000000;
    double idle_s = 5;
    int c;
    while ((c = getopt_long(argc, argv, "b:n:w:m:i:h", opts, NULL)) != -1) {
        switch (c) {
        case 'b':
            if (rk_backend_parse(optarg, &cfg.backend)) {
                fprintf(stderr, "rk-bench: %s\n", rk_last_detail());
                return 2;
            }
            break;
        case 'n': count = atol(optarg); break;
        case 'w': window = atol(optarg); break;
        case 'm': messages = atol(optarg); break;
        case 'i': idle_s = atof(optarg); break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return 2;
        }
    }
    if (count < 1 || window < 1 || window > 32768 || messages < 1) {
        fprintf(stderr, "rk-bench: --count, --messages must be >= 1 and --window in 1..32768\n");
        return 2;
    }
    cfg.actor_window = (uint32_t)window;
    rk_runtime *rt;
    int rc = rk_runtime_open(&rt, &cfg);
    if (rc)
        return die_rk("opening the runtime", rc);
    rk_info info;
    rk_runtime_info(rt, &info);
    printf("backend %s (%s)\n", info.backend_name, info.why);
    rk_actor *a;
    if ((rc = rk_actor_open(rt, &a)))
        return die_rk("opening an actor", rc);

    uint8_t msg[64];
    for (int i = 0; i < 64; i++)
        msg[i] = (uint8_t)(i * 7 + 1);
    rk_reply r;
    /* warm-up: page in the slots, let the worker reach its spin loop */
    for (int i = 0; i < 20000; i++) {
        if ((rc = rk_actor_call(a, RK_OP_ECHO, msg, sizeof msg, 0, &r, 5000)))
            return die_rk("warm-up echo", rc);
        rk_reply_release(a, &r);
    }
    uint64_t *lat = malloc((size_t)count * sizeof *lat);
    if (!lat)
        return 1;
    for (long i = 0; i < count; i++) {
        uint64_t t0 = bench_now_ns();
        rc = rk_actor_call(a, RK_OP_ECHO, msg, sizeof msg, 0, &r, 5000);
        uint64_t t1 = bench_now_ns();
        if (rc || r.status || r.len != sizeof msg || memcmp(r.data, msg, sizeof msg)) {
            fprintf(stderr, "rk-bench: echo %ld failed: rc %d status %d len %zu: %s\n", i, rc,
                    rc ? 0 : r.status, rc ? 0 : r.len, rk_last_detail());
            return 1;
        }
        rk_reply_release(a, &r);
        lat[i] = t1 - t0;
    }
    bench_result *res = bench_add(rep, "ring_echo_64", info.backend_name);
    bench_latency_stats(res, lat, (size_t)count);
    free(lat);

    /* pipelined: keep `window` echoes in flight */
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
    res = bench_add(rep, "throughput_echo_64", info.backend_name);
    res->msgs_per_s = (double)messages / secs;
    snprintf(res->extra, sizeof res->extra, "\"window\": %ld, \"messages\": %ld", window, messages);

    if (idle_s > 0) {
        /* CPU time of the whole process (worker + this thread) while the
         * runtime is open and no message moves */
        usleep(200000); /* let the worker's backoff reach its sleep */
        uint64_t c0 = bench_cpu_ns(), w0 = bench_now_ns();
        usleep((useconds_t)(idle_s * 1e6));
        uint64_t c1 = bench_cpu_ns(), w1 = bench_now_ns();
        double pct = 100.0 * (double)(c1 - c0) / (double)(w1 - w0);
        res = bench_add(rep, "idle_cpu", info.backend_name);
        snprintf(res->extra, sizeof res->extra, "\"cpu_percent_of_a_core\": %.3f, \"seconds\": %.1f", pct,
                 idle_s);
    }
    rk_actor_close(a);
    rk_runtime_close(rt);
    return 0;
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
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--version")) {
            printf("rk-bench %s (commit %s; librk %s)\n", RK_BENCH_VERSION, RK_BENCH_COMMIT,
                   rk_version());
            return 0;
        }
    }
    const char *mode = argv[1];
    bench_report rep = {0};
    /* --json FILE and --samples are common to every mode: take them out
     * here, and hand the mode the rest (argv[0] = the mode's name) */
    const char *json = NULL;
    int samples = !strcmp(mode, "gpu"), rc, n = 0;
    char **av = calloc((size_t)argc + 1, sizeof *av);
    if (!av)
        return 1;
    for (int i = 1; i < argc; i++) {
        if ((!strcmp(argv[i], "--json") || !strcmp(argv[i], "-j")) && i + 1 < argc)
            json = argv[++i];
        else if (!strncmp(argv[i], "--json=", 7))
            json = argv[i] + 7;
        else if (!strcmp(argv[i], "--samples") || !strcmp(argv[i], "-s"))
            samples = 1;
        else
            av[n++] = argv[i];
    }
    if (!strcmp(mode, "ring")) {
        rc = ring_mode(n, av, &rep);
#ifdef RK_BENCH_GPU
    } else if (!strcmp(mode, "gpu")) {
        rc = bench_gpu_run(n, av, &rep);
#endif
#ifdef RK_BENCH_BRIDGE
    } else if (!strcmp(mode, "bridge")) {
        rc = bench_bridge_run(n, av, &rep);
#endif
    } else {
        fprintf(stderr, "rk-bench: mode \"%s\" is not available in this build\n", mode);
        usage(stderr);
        return 2;
    }
    if (rc == 0) {
        bench_print_table(&rep, stdout);
        if (json && bench_write_json(&rep, json, mode, samples) != 0) {
            perror(json);
            rc = 1;
        }
    }
    bench_report_free(&rep);
    free(av);
    return rc;
}
