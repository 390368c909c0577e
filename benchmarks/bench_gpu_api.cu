/* bench_gpu_api.cu - `rk-bench gpu` through the runtime's public API (a
 * CUDA runtime opened with rk_runtime_open, one actor):
 *
 *   ring_echo_64           64 B echo round trip (rk_actor_call), kernel in a worker
 *   ring_echo_64_inprocess the same with the kernel in this process
 *   throughput_echo_64_api pipelined 64 B echoes (rk_actor_send_batch/recv_batch:
 *                          batches of 32, window 256)
 *   throughput_echo_64_api_inprocess  the same in this process
 *   vadd_16777216_api      vadd of 2^24 float32 by rk_actor_call (operands copied in)
 *   vadd_16777216_buf_api  the same with the operands written in place (rk_actor_buf_*)
 *   idle_cpu               host CPU of the idle runtime over --idle seconds */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_gpu_internal.h"

int api_echo_lat(rk_actor *a, uint64_t *smp, long count)
{
    uint8_t msg[64];
    for (int i = 0; i < 64; i++)
        msg[i] = (uint8_t)i;
    const long warm = 20000;
    for (long i = 0; i < warm + count; i++) {
        rk_reply r;
        uint64_t t0 = bench_now_ns();
        int rc = rk_actor_call(a, RK_OP_ECHO, msg, 64, 0, &r, 5000);
        uint64_t t1 = bench_now_ns();
        if (rc || r.status || r.len != 64) {
            fprintf(stderr, "rk-bench gpu: echo: %s status %d\n", rk_err_name(rc), rc ? 0 : r.status);
            return 1;
        }
        rk_reply_release(a, &r);
        if (i >= warm)
            smp[i - warm] = t1 - t0;
    }
    return 0;
}

/* pipelined through the batch API: one actor, a window of 256, requests
 * posted in batches of up to 32 (one ring reservation and doorbell each),
 * replies reaped up to 32 per call; about `seconds` long; returns messages
 * per second (0 on failure) */
static double api_pipelined(rk_actor *a, double seconds, uint64_t *count)
{
    enum { BATCH = 32, WINDOW = 256 };
    uint8_t msg[64];
    for (int i = 0; i < 64; i++)
        msg[i] = (uint8_t)i;
    rk_send_req q[BATCH];
    for (int i = 0; i < BATCH; i++) {
        memset(&q[i], 0, sizeof q[i]);
        q[i].type = RK_OP_ECHO;
        q[i].data = msg;
        q[i].len = 64;
    }
    uint64_t sent = 0, got = 0, t0 = bench_now_ns(), end = t0 + (uint64_t)(seconds * 1e9), t1;
    uint64_t next_check = 1024;
    rk_reply r[BATCH];
    for (;;) {
        while (sent - got < WINDOW) {
            uint64_t room = WINDOW - (sent - got);
            int k = rk_actor_send_batch(a, q, room < BATCH ? (int)room : BATCH, NULL, 1000);
            if (k == -RK_EBUSY)
                break;
            if (k < 0)
                return 0;
            sent += (uint64_t)k;
        }
        int k = rk_actor_recv_batch(a, r, BATCH, 5000);
        if (k < 0)
            return 0;
        rk_reply_release_batch(a, r, k);
        got += (uint64_t)k;
        if (got >= next_check) {
            next_check = got + 1024;
            if (bench_now_ns() > end)
                break;
        }
    }
    t1 = bench_now_ns();
    while (got < sent) {
        int k = rk_actor_recv_batch(a, r, BATCH, 5000);
        if (k < 0)
            return 0;
        rk_reply_release_batch(a, r, k);
        got += (uint64_t)k;
    }
    *count += got;
    return (double)got / ((double)(t1 - t0) * 1e-9);
}

/* vadd 2^24 by rk_actor_call, the operands copied into the arena on the
 * host: vadd_16777216_api */
static int api_vadd_copy(bench_report *rep, rk_actor *a)
{
    float *v = (float *)malloc(2 * VN * 4);
    for (size_t i = 0; i < 2 * VN; i++)
        v[i] = (float)(i % 1000) * 0.5f;
    double t[6];
    const int R = 6;
    for (int k = 0; k < R + 1; k++) {
        rk_reply r;
        uint64_t t0 = bench_now_ns();
        CKRK(rk_actor_call(a, RK_OP_VADD, v, 2 * VN * 4, 0, &r, 30000));
        uint64_t t1 = bench_now_ns();
        if (r.status || r.len != VN * 4) {
            fprintf(stderr, "rk-bench gpu: vadd api: status %d\n", r.status);
            return 1;
        }
        rk_reply_release(a, &r);
        if (k)
            t[k - 1] = (double)(t1 - t0);
    }
    add_vadd(rep, "vadd_16777216_api",
             "rk_actor_call: includes copying the 128 MiB operands into the arena on the host", t, R);
    free(v);
    return 0;
}

/* vadd 2^24 through the zero-copy API: the operands are produced in place
 * in the arena (untimed, as a producer would write them); timed:
 * rk_actor_buf_send -> GPU reads a, b and writes c over the link -> reply
 * received: vadd_16777216_buf_api */
static int api_vadd_buf(bench_report *rep, rk_actor *a)
{
    double t[6];
    const int R = 6;
    for (int k = 0; k < R + 1; k++) {
        rk_buf buf;
        CKRK(rk_actor_buf_alloc(a, RK_OP_VADD, 2 * VN * 4, 0, &buf, 30000));
        float *x = (float *)buf.data;
        for (size_t i = 0; i < 2 * VN; i++)
            x[i] = (float)(i % 1000) * 0.5f;
        rk_reply r;
        uint64_t t0 = bench_now_ns();
        CKRK(rk_actor_buf_send(a, &buf, NULL, 30000));
        CKRK(rk_actor_recv(a, &r, 30000));
        uint64_t t1 = bench_now_ns();
        const float *c = (const float *)r.data;
        if (r.status || r.len != VN * 4 || c[7] != x[7] + x[VN + 7] || c[VN - 1] != x[VN - 1] + x[2 * VN - 1]) {
            fprintf(stderr, "rk-bench gpu: vadd buf api: status %d or wrong result\n", r.status);
            return 1;
        }
        rk_reply_release(a, &r);
        if (k)
            t[k - 1] = (double)(t1 - t0);
    }
    add_vadd(rep, "vadd_16777216_buf_api",
             "rk_actor_buf_alloc (operands written in place) + buf_send + recv", t, R);
    return 0;
}

/* host CPU of the idle runtime over idle_s seconds: idle_cpu */
static void api_idle(bench_report *rep, double idle_s)
{
    uint64_t c0 = bench_cpu_ns(), t0 = bench_now_ns();
    usleep((useconds_t)(idle_s * 1e6));
    uint64_t c1 = bench_cpu_ns(), t1 = bench_now_ns();
    double pct = 100.0 * (double)(c1 - c0) / (double)(t1 - t0);
    bench_result *b = bench_add(rep, "idle_cpu", "cuda");
    b->cpu_percent = pct;
    snprintf(b->extra, sizeof b->extra, "\"seconds\": %.1f", idle_s);
    printf("  %-24s %.3f %% of a core over %.1f s\n", "idle_cpu", pct, idle_s);
}

static int open_cuda(rk_runtime **rt, int device, rk_isolation iso)
{
    rk_config cfg;
    rk_config_init(&cfg);
    cfg.backend = RK_BACKEND_CUDA;
    cfg.device = device;
    cfg.isolation = iso;
    CKRK(rk_runtime_open(rt, &cfg));
    rk_info in;
    rk_runtime_info(*rt, &in);
    printf("  runtime: %s\n", in.why);
    return 0;
}

/* The hot path in the default, isolated mode (a worker process runs the
 * kernel) and in-process, alternating A B A B in halves so that drift of
 * the machine falls on both alike: ring_echo_64 and throughput_echo_64_api,
 * ring_echo_64_inprocess and throughput_echo_64_api_inprocess. */
static int api_isolation_pair(bench_report *rep, int device, long count, double seconds)
{
    const long half = count / 2;
    uint64_t *s[2] = {(uint64_t *)malloc(sizeof(uint64_t) * (size_t)half * 2),
                      (uint64_t *)malloc(sizeof(uint64_t) * (size_t)half * 2)};
    double rate[2] = {0, 0};
    uint64_t n[2] = {0, 0};
    for (int round = 0; round < 4; round++) {
        const int m = round & 1; /* 0 isolated, 1 in-process */
        rk_runtime *rt;
        if (open_cuda(&rt, device, m ? RK_ISOLATION_NONE : RK_ISOLATION_AUTO))
            return 1;
        rk_actor *a;
        CKRK(rk_actor_open(rt, &a));
        if (api_echo_lat(a, s[m] + (round >> 1) * half, half))
            return 1;
        double r = api_pipelined(a, seconds / 2, &n[m]);
        if (r == 0) {
            fprintf(stderr, "rk-bench gpu: pipelined echo failed: %s\n", rk_last_detail());
            return 1;
        }
        rate[m] += r / 2;
        rk_actor_close(a);
        rk_runtime_close(rt);
    }
    latency_row(rep, "ring_echo_64", "cuda", s[0], (size_t)half * 2,
                "\"path\": \"rk_actor_call, kernel in a worker process (default)\"");
    latency_row(rep, "ring_echo_64_inprocess", "cuda", s[1], (size_t)half * 2,
                "\"path\": \"rk_actor_call, kernel in this process (isolation none)\"");
    static const char *const names[2] = {"throughput_echo_64_api", "throughput_echo_64_api_inprocess"};
    for (int m = 0; m < 2; m++) {
        bench_result *b = bench_add(rep, names[m], "cuda");
        b->msgs_per_s = rate[m];
        b->count = n[m];
        snprintf(b->extra, sizeof b->extra, "\"path\": \"rk_actor_send_batch/recv_batch, 1 actor, batches of 32, window 256, %s\"",
                 m ? "in-process" : "worker process");
        printf("  %-32s %.2f M msg/s\n", names[m], rate[m] / 1e6);
    }
    free(s[0]);
    free(s[1]);
    return 0;
}

int runtime_section(bench_report *rep, int device, long count, double seconds, double idle_s)
{
    if (api_isolation_pair(rep, device, count, seconds))
        return 1;
    rk_runtime *rt;
    if (open_cuda(&rt, device, RK_ISOLATION_AUTO))
        return 1;
    rk_actor *a;
    CKRK(rk_actor_open(rt, &a));
    if (api_vadd_copy(rep, a) || api_vadd_buf(rep, a))
        return 1;
    rk_actor_close(a);
    api_idle(rep, idle_s);
    rk_runtime_close(rt);
    return 0;
}
