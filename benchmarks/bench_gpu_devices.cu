/* bench_gpu_devices.cu - several GPUs behind one runtime (rk-bench gpu
 * --devices N, rk_config.n_devices): the same rows on device 0 alone and
 * on devices 0..N-1, in one run, so that the ratios compare like with like:
 *   ring_echo_64_<d>gpu        64 B echo round trip (rk_actor_call), one actor
 *   throughput_echo_64_api_<t>t_<d>gpu  t host threads, an actor each, placed
 *                              by the runtime (fewest outstanding requests)
 *   throughput_vadd_1m_api_<t>t_<d>gpu  the same threads pipelining vadds
 *                              of 2 x 2^17 float32 (1 MiB in, 512 KiB out)
 *   vadd_16777216_split_<d>gpu one vadd of 2^24 float32 split over the devices
 *                              (rk_split_call; operands sent from the caller's
 *                              buffer) */
#include <stdio.h>
#include <stdlib.h>

#include "bench_gpu_internal.h"

enum { SPLIT_N = 1 << 24, SPLIT_R = 6 };

static int open_devices(rk_runtime **rt, int n)
{
    rk_config cfg;
    rk_config_init(&cfg);
    cfg.backend = RK_BACKEND_CUDA;
    cfg.n_devices = n > 1 ? n : 0; /* 1: `device` (0) alone */
    for (int i = 0; i < n && i < RK_MAX_DEVICES; i++)
        cfg.devices[i] = i;
    CKRK(rk_runtime_open(rt, &cfg));
    return 0;
}

/* pipelined vadds: PV_N elements a request, PV_WINDOW in flight per actor
 * (so 8 actors on one device hold 96 MiB of the 256 MiB arena); the
 * operands are one buffer every thread sends from (in the host's cache:
 * these rows are the devices' and the runtime's pace, the split's row the
 * host memory's) */
enum { PV_N = 1 << 17, PV_WINDOW = 8 };
static float *pv_in;

static double vadd_pipelined(rk_actor *a, double seconds, uint64_t *count)
{
    uint64_t sent = 0, got = 0, got_t = 0, t0 = bench_now_ns(), end = t0 + (uint64_t)(seconds * 1e9), t1 = 0;
    for (;;) {
        for (; !t1 && sent - got < PV_WINDOW; sent++)
            if (rk_actor_send(a, RK_OP_VADD, pv_in, 2 * PV_N * 4, 0, NULL, 5000))
                return 0;
        if (got == sent)
            break;
        rk_reply r;
        if (rk_actor_recv(a, &r, 5000))
            return 0;
        const size_t k = got % PV_N; /* one element checked a reply */
        const bool ok = r.status == 0 && r.len == PV_N * 4 && ((const float *)r.data)[k] == pv_in[k] + pv_in[PV_N + k];
        rk_reply_release(a, &r);
        if (!ok) {
            fprintf(stderr, "rk-bench gpu: pipelined vadd: reply %llu is wrong\n", (unsigned long long)got);
            return 0;
        }
        got++;
        if (!t1 && (got & 15) == 0) {
            const uint64_t now = bench_now_ns();
            if (now > end)
                t1 = now, got_t = got; /* the rate's; what is in flight is still taken */
        }
    }
    *count += got;
    return (double)got_t / ((double)(t1 - t0) * 1e-9);
}

static int vadd_threads_on(bench_report *rep, rk_runtime *rt, int threads, double seconds, const char *suffix)
{
    char name[64];
    snprintf(name, sizeof name, "throughput_vadd_1m_api_%dt%s", threads, suffix);
    bench_result *b = api_threads_row(rep, name, rt, threads, seconds, vadd_pipelined, "pipelined vadd");
    if (!b)
        return 1;
    b->gb_per_s = b->msgs_per_s * 3.0 * PV_N * 4 / 1e9;
    snprintf(b->extra, sizeof b->extra,
             "\"path\": \"rk_actor_send/recv, an actor per thread, vadd of 2 x %d float32, window %d each, "
             "worker process\", \"threads\": %d, \"devices\": %d", PV_N, PV_WINDOW, threads,
             rk_runtime_device_count(rt));
    printf("  %-32s %.1f GB/s (%.0f k requests/s)\n", name, b->gb_per_s, b->msgs_per_s / 1e3);
    return 0;
}

/* vadd_16777216_split_<d>gpu: SPLIT_R timed calls after one untimed */
static int split_vadd(bench_report *rep, rk_runtime *rt, const char *name)
{
    rk_split *sp;
    CKRK(rk_split_open(rt, &sp));
    float *v = (float *)malloc(2 * (size_t)SPLIT_N * 4), *c = (float *)malloc((size_t)SPLIT_N * 4);
    for (size_t i = 0; i < 2 * (size_t)SPLIT_N; i++)
        v[i] = (float)(i % 1000) * 0.5f;
    double t[SPLIT_R];
    int rc = 0;
    for (int k = 0; k < SPLIT_R + 1 && !rc; k++) {
        size_t len = 0;
        uint64_t t0 = bench_now_ns();
        rc = rk_split_call(sp, RK_OP_VADD, v, 2 * (size_t)SPLIT_N * 4, c, (size_t)SPLIT_N * 4, &len, 30000);
        uint64_t t1 = bench_now_ns();
        if (rc || len != (size_t)SPLIT_N * 4 || c[SPLIT_N - 1] != v[SPLIT_N - 1] + v[2 * (size_t)SPLIT_N - 1]) {
            fprintf(stderr, "rk-bench gpu: %s: %s (%zu B): %s\n", name, rk_err_name(rc), len, rk_last_detail());
            rc = rc ? rc : 1;
        } else if (k) {
            t[k - 1] = (double)(t1 - t0);
        }
    }
    if (!rc)
        add_vadd(rep, name, "rk_split_call: the operands sent from the caller's buffer, a share per device", t,
                 SPLIT_R);
    free(v);
    free(c);
    rk_split_close(sp);
    return rc ? 1 : 0;
}

/* ring_echo_64_1gpu and _<devices>gpu: a runtime of each, opened in turn
 * LAT_ROUNDS times, a share of the round trips each time: a runtime's p50
 * moved 10-15 % from one start to the next (H200 x2, ae03ffb: 2.08-2.47
 * us), more than what is compared */
enum { LAT_ROUNDS = 4 };
static int devices_latency(bench_report *rep, int devices, long count)
{
    const long part = count / LAT_ROUNDS;
    uint64_t *smp[2];
    int rc = 0;
    for (int m = 0; m < 2; m++)
        smp[m] = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)part * LAT_ROUNDS);
    for (int r = 0; r < LAT_ROUNDS && !rc; r++)
        for (int m = 0; m < 2 && !rc; m++) {
            rk_runtime *rt;
            rk_actor *a = NULL;
            rc = open_devices(&rt, m ? devices : 1);
            if (rc)
                break;
            rc = rk_actor_open(rt, &a) ? 1 : api_echo_lat(a, smp[m] + r * part, part);
            rk_actor_close(a);
            rk_runtime_close(rt);
        }
    char name[64];
    for (int m = 0; m < 2 && !rc; m++) {
        snprintf(name, sizeof name, "ring_echo_64_%dgpu", m ? devices : 1);
        latency_row(rep, name, "cuda", smp[m], (size_t)part * LAT_ROUNDS,
                    "\"path\": \"rk_actor_call, one actor, the runtime's devices (runtimes opened in turn)\"");
    }
    for (int m = 0; m < 2; m++)
        free(smp[m]);
    return rc;
}

/* the throughput rows for d devices */
static int devices_rows(bench_report *rep, int d, double seconds, const int *threads, int n_threads)
{
    rk_runtime *rt;
    if (open_devices(&rt, d))
        return 1;
    char suffix[16], name[64];
    snprintf(suffix, sizeof suffix, "_%dgpu", d);
    printf("  %d device(s) behind one runtime\n", rk_runtime_device_count(rt));
    int rc = 0;
    for (int i = 0; i < n_threads && !rc; i++)
        rc = api_threads_on(rep, rt, threads[i], seconds, suffix);
    for (int i = 0; i < n_threads && !rc; i++)
        rc = vadd_threads_on(rep, rt, threads[i], seconds, suffix);
    snprintf(name, sizeof name, "vadd_16777216_split%s", suffix);
    if (!rc)
        rc = split_vadd(rep, rt, name);
    rk_runtime_close(rt);
    return rc;
}

int devices_section(bench_report *rep, int devices, long count, double seconds, const int *threads, int n_threads)
{
    if (devices < 2)
        return 0;
    pv_in = (float *)malloc(2 * PV_N * 4);
    for (int i = 0; i < 2 * PV_N; i++)
        pv_in[i] = (float)(i % 1000) * 0.25f;
    const int t8[] = {8};
    if (n_threads == 0) /* --api-threads 0: still one pipelined row */
        threads = t8, n_threads = 1;
    const int rc = devices_latency(rep, devices, count) || devices_rows(rep, 1, seconds, threads, n_threads) ||
                   devices_rows(rep, devices, seconds, threads, n_threads);
    free(pv_in);
    if (rc)
        return 1;
    /* the claims of issue 12, as ratios within this run */
    char a[64], b[64];
    printf("\n%d devices against 1 (this run):\n", devices);
    snprintf(a, sizeof a, "ring_echo_64_%dgpu", devices);
    const bench_result *l1 = find_row(rep, "ring_echo_64_1gpu"), *ln = find_row(rep, a);
    if (l1 && ln)
        printf("  echo p50 %.3f, p99 %.3f (p50 within 5 %%)\n", ln->p50_ns / l1->p50_ns, ln->p99_ns / l1->p99_ns);
    for (int i = 0; i < n_threads; i++) {
        snprintf(a, sizeof a, "throughput_echo_64_api_%dt_1gpu", threads[i]);
        snprintf(b, sizeof b, "throughput_echo_64_api_%dt_%dgpu", threads[i], devices);
        const bench_result *x = find_row(rep, a), *y = find_row(rep, b);
        if (x && y)
            printf("  pipelined echo, %d threads: %.2f -> %.2f M msg/s, %.2f x (>= 1.8)\n", threads[i],
                   x->msgs_per_s / 1e6, y->msgs_per_s / 1e6, y->msgs_per_s / x->msgs_per_s);
    }
    for (int i = 0; i < n_threads; i++) {
        snprintf(a, sizeof a, "throughput_vadd_1m_api_%dt_1gpu", threads[i]);
        snprintf(b, sizeof b, "throughput_vadd_1m_api_%dt_%dgpu", threads[i], devices);
        const bench_result *x = find_row(rep, a), *y = find_row(rep, b);
        if (x && y)
            printf("  pipelined vadd, %d threads: %.1f -> %.1f GB/s, %.2f x (>= 1.8)\n", threads[i], x->gb_per_s,
                   y->gb_per_s, y->gb_per_s / x->gb_per_s);
    }
    snprintf(b, sizeof b, "vadd_16777216_split_%dgpu", devices);
    const bench_result *v1 = find_row(rep, "vadd_16777216_split_1gpu"), *vn = find_row(rep, b);
    if (v1 && vn)
        printf("  vadd 2^24 split: %.1f -> %.1f GB/s, %.2f x (>= 1.8)\n", v1->gb_per_s, vn->gb_per_s,
               vn->gb_per_s / v1->gb_per_s);
    return 0;
}
