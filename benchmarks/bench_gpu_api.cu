/* bench_gpu_api.cu - `rk-bench gpu` through the runtime's public API (a
 * CUDA runtime opened with rk_runtime_open, one actor per host thread):
 *
 *   ring_echo_64           64 B echo round trip (rk_actor_call), kernel in a worker
 *   ring_echo_64_inprocess the same with the kernel in this process
 *   throughput_echo_64_api pipelined 64 B echoes (rk_actor_send_batch/recv_batch:
 *                          batches of 32, window 256), 1 host thread; the median
 *                          of 4 rounds taken in turn with the in-process ones
 *   throughput_echo_64_api_inprocess  the same in this process
 *   throughput_echo_64_api_Nt  N host threads, an actor each (--api-threads)
 *   module_echo_64, user_actor_64, vadd_64_api  (--module M) echo, M's trivial
 *                          actor `copy` and a 64 B vadd through the same runtime,
 *                          taken in turn
 *   vadd_16777216_api      vadd of 2^24 float32 by rk_actor_call (operands copied in)
 *   vadd_16777216_buf_api  the same with the operands written in place (rk_actor_buf_*)
 *   idle_cpu               host CPU of the idle runtime over --idle seconds */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_gpu_internal.h"

/* count timed round trips of the request msg (len bytes) of `type` that
 * must be answered want (want_len bytes), after `warm` untimed */
static int api_lat_req(rk_actor *a, uint16_t type, const void *msg, size_t len, const void *want, size_t want_len,
                       uint64_t *smp, long count, long warm)
{
    for (long i = 0; i < warm + count; i++) {
        rk_reply r;
        uint64_t t0 = bench_now_ns();
        int rc = rk_actor_call(a, type, msg, len, 0, &r, 5000);
        uint64_t t1 = bench_now_ns();
        if (rc || r.status || r.len != want_len || memcmp(r.data, want, want_len)) {
            fprintf(stderr, "rk-bench gpu: type %u: %s status %d: %s\n", type, rk_err_name(rc),
                    rc ? 0 : r.status, rk_last_detail());
            return 1;
        }
        rk_reply_release(a, &r);
        if (i >= warm)
            smp[i - warm] = t1 - t0;
    }
    return 0;
}

/* ... of a 64 B request that comes back as it went (echo, or a user actor
 * that copies) */
static int api_lat(rk_actor *a, uint16_t type, uint64_t *smp, long count, long warm)
{
    uint8_t msg[64];
    for (int i = 0; i < 64; i++)
        msg[i] = (uint8_t)i;
    return api_lat_req(a, type, msg, 64, msg, 64, smp, count, warm);
}

/* ... of a vadd of two 8-float vectors (64 B in, 32 B out): a built-in the
 * kernel serves off its echo fast path, as it serves a user actor */
static int api_lat_vadd64(rk_actor *a, uint64_t *smp, long count, long warm)
{
    float v[16], c[8];
    for (int i = 0; i < 16; i++)
        v[i] = (float)i * 0.5f;
    for (int i = 0; i < 8; i++)
        c[i] = v[i] + v[8 + i];
    return api_lat_req(a, RK_OP_VADD, v, sizeof v, c, sizeof c, smp, count, warm);
}

int api_echo_lat(rk_actor *a, uint64_t *smp, long count) { return api_lat(a, RK_OP_ECHO, smp, count, 20000); }

/* pipelined through the batch API: one actor, a window of 256, requests
 * posted in batches of up to 32 (one ring reservation and doorbell each),
 * replies reaped up to 32 per call; about `seconds` long; returns messages
 * per second (0 on failure) */
double api_pipelined(rk_actor *a, double seconds, uint64_t *count)
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

uint32_t bench_reply_rings, bench_block, bench_ring_slots;

/* A CUDA runtime on device, in a worker (RK_ISOLATION_AUTO) or in this
 * process; module: a module to load, or NULL. */
static int open_cuda(rk_runtime **rt, int device, rk_isolation iso, const char *module)
{
    rk_config cfg;
    rk_config_init(&cfg);
    if (bench_reply_rings)
        cfg.reply_rings = bench_reply_rings;
    if (bench_block)
        cfg.block = bench_block;
    if (bench_ring_slots)
        cfg.ring_slots = bench_ring_slots;
    cfg.backend = RK_BACKEND_CUDA;
    cfg.device = device;
    cfg.isolation = iso;
    if (module) {
        cfg.modules = &module;
        cfg.n_modules = 1;
    }
    CKRK(rk_runtime_open(rt, &cfg));
    rk_info in;
    rk_runtime_info(*rt, &in);
    printf("  runtime: %s\n", in.why);
    return 0;
}

/* The hot path in the default mode (the kernel in a worker process) and
 * in-process, taken in turn, ROUNDS times each, so that drift of the
 * machine falls on both alike: ring_echo_64, ring_echo_64_inprocess,
 * throughput_echo_64_api, throughput_echo_64_api_inprocess. */
static int cmp_rate(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static int api_isolation_pair(bench_report *rep, int device, long count, double seconds)
{
    enum { MODES = 2, ROUNDS = 4 };
    static_assert(ROUNDS == 4, "the JSON lists the rounds' rates one by one");
    const long part = count / ROUNDS;
    uint64_t *s[MODES];
    for (int m = 0; m < MODES; m++)
        s[m] = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)part * ROUNDS);
    /* per round: one round's rate moved by up to 20 % with where the
     * threads ran (H100, 2026-11-24), so the rows are medians of them */
    double rates[MODES][ROUNDS], rate[MODES];
    uint64_t n[MODES] = {0, 0};
    for (int round = 0; round < MODES * ROUNDS; round++) {
        const int m = round % MODES;
        rk_runtime *rt;
        if (open_cuda(&rt, device, m ? RK_ISOLATION_NONE : RK_ISOLATION_AUTO, NULL))
            return 1;
        rk_actor *a;
        CKRK(rk_actor_open(rt, &a));
        if (api_lat(a, RK_OP_ECHO, s[m] + (round / MODES) * part, part, 20000))
            return 1;
        double r = api_pipelined(a, seconds / ROUNDS, &n[m]);
        if (r == 0) {
            fprintf(stderr, "rk-bench gpu: pipelined echo failed: %s\n", rk_last_detail());
            return 1;
        }
        rates[m][round / MODES] = r;
        rk_actor_close(a);
        rk_runtime_close(rt);
    }
    for (int m = 0; m < MODES; m++) { /* the median of the rounds (the middle two's mean) */
        double v[ROUNDS];
        memcpy(v, rates[m], sizeof v); /* (the JSON lists them in round order) */
        qsort(v, ROUNDS, sizeof v[0], cmp_rate);
        rate[m] = (v[(ROUNDS - 1) / 2] + v[ROUNDS / 2]) / 2;
    }
    static const char *const lat[MODES] = {"ring_echo_64", "ring_echo_64_inprocess"};
    static const char *const path[MODES] = {
        "\"path\": \"rk_actor_call, kernel in a worker process (default)\"",
        "\"path\": \"rk_actor_call, kernel in this process (isolation none)\""};
    for (int m = 0; m < MODES; m++)
        latency_row(rep, lat[m], "cuda", s[m], (size_t)part * ROUNDS, path[m]);
    static const char *const names[2] = {"throughput_echo_64_api", "throughput_echo_64_api_inprocess"};
    for (int m = 0; m < MODES; m++) {
        bench_result *b = bench_add(rep, names[m], "cuda");
        b->msgs_per_s = rate[m];
        b->count = n[m];
        snprintf(b->extra, sizeof b->extra, "\"path\": \"rk_actor_send_batch/recv_batch, 1 actor, batches of 32, window 256, %s, "
                 "median of %d rounds\", \"threads\": 1, \"rounds_msgs_per_s\": [%.0f, %.0f, %.0f, %.0f]",
                 m ? "in-process" : "worker process", ROUNDS, rates[m][0], rates[m][1], rates[m][2], rates[m][3]);
        printf("  %-32s %.2f M msg/s\n", names[m], rate[m] / 1e6);
    }
    for (int m = 0; m < MODES; m++)
        free(s[m]);
    return 0;
}

/* ---- pipelined requests from several host threads, an actor each ---- */
typedef struct api_thread {
    rk_runtime *rt;
    double seconds;
    api_pipe_fn fn;
    pthread_barrier_t *go;
    uint64_t count;
    double rate;
} api_thread;

static void *api_thread_main(void *p)
{
    api_thread *t = (api_thread *)p;
    rk_actor *a = NULL;
    int rc = rk_actor_open(t->rt, &a);
    pthread_barrier_wait(t->go);
    if (rc == 0) {
        t->rate = t->fn(a, t->seconds, &t->count);
        rk_actor_close(a);
    }
    return NULL;
}

bench_result *api_threads_row(bench_report *rep, const char *name, rk_runtime *rt, int threads, double seconds,
                             api_pipe_fn fn, const char *what)
{
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)threads);
    api_thread t[16];
    pthread_t th[16];
    for (int i = 0; i < threads; i++) {
        t[i] = (api_thread){rt, seconds, fn, &go, 0, 0};
        int e = pthread_create(&th[i], NULL, api_thread_main, &t[i]);
        if (e) { /* the started ones wait at the barrier for it: no way back */
            fprintf(stderr, "rk-bench gpu: starting host thread %d of %d failed: %s\n", i + 1, threads, strerror(e));
            exit(1);
        }
    }
    double total = 0;
    uint64_t n = 0;
    int failed = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        total += t[i].rate;
        n += t[i].count;
        failed += t[i].rate == 0;
    }
    pthread_barrier_destroy(&go);
    if (failed) {
        fprintf(stderr, "rk-bench gpu: %s failed in %d of %d threads\n", what, failed, threads);
        return NULL;
    }
    bench_result *b = bench_add(rep, name, "cuda");
    b->msgs_per_s = total;
    b->count = n;
    return b;
}

/* throughput_echo_64_api_Nt<suffix>: `threads` host threads, each with
 * its own actor pipelining as api_pipelined does, on rt */
int api_threads_on(bench_report *rep, rk_runtime *rt, int threads, double seconds, const char *suffix)
{
    char name[64];
    snprintf(name, sizeof name, "throughput_echo_64_api_%dt%s", threads, suffix);
    bench_result *b = api_threads_row(rep, name, rt, threads, seconds, api_pipelined, "pipelined echo");
    if (!b)
        return 1;
    rk_info in;
    rk_runtime_info(rt, &in);
    snprintf(b->extra, sizeof b->extra,
             "\"path\": \"rk_actor_send_batch/recv_batch, an actor per thread, batches of 32, window 256 each, "
             "worker process\", \"threads\": %d, \"devices\": %d, \"reply_rings\": %u, \"block\": %u, "
             "\"ring_slots\": %u", threads, rk_runtime_device_count(rt), in.reply_rings, in.block, in.ring_slots);
    printf("  %-32s %.2f M msg/s\n", name, b->msgs_per_s / 1e6);
    return 0;
}

/* ... on a runtime of its own (default mode, one device) */
static int api_threads(bench_report *rep, int device, int threads, double seconds)
{
    rk_runtime *rt;
    if (open_cuda(&rt, device, RK_ISOLATION_AUTO, NULL))
        return 1;
    int rc = api_threads_on(rep, rt, threads, seconds, "");
    rk_runtime_close(rt);
    return rc;
}

/* module_echo_64, user_actor_64 and vadd_64_api: one runtime with
 * `module` loaded (its ring kernel serves all three), taken in turn in
 * eight parts, so that the only difference is the path in the kernel */
int module_section(bench_report *rep, int device, const char *module, long count)
{
    rk_runtime *rt;
    if (open_cuda(&rt, device, RK_ISOLATION_AUTO, module))
        return 1;
    uint16_t type;
    if (!rk_runtime_actor_find(rt, "copy", &type)) {
        fprintf(stderr, "rk-bench gpu: module %s has no actor \"copy\" (benchmarks/bench_actors.cu)\n", module);
        rk_runtime_close(rt);
        return 1;
    }
    rk_actor *a;
    CKRK(rk_actor_open(rt, &a));
    enum { PARTS = 8, PATHS = 3 };
    const long part = count / PARTS;
    uint64_t *s[PATHS];
    for (int m = 0; m < PATHS; m++)
        s[m] = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)part * PARTS);
    int rc = 0;
    for (int k = 0; k < PATHS * PARTS && !rc; k++) {
        const int m = k % PATHS;
        uint64_t *dst = s[m] + (k / PATHS) * part;
        const long warm = k < PATHS ? 20000 : 1000;
        rc = m == 2 ? api_lat_vadd64(a, dst, part, warm) : api_lat(a, m ? type : (uint16_t)RK_OP_ECHO, dst, part, warm);
    }
    rk_actor_close(a);
    rk_runtime_close(rt);
    if (!rc) {
        latency_row(rep, "module_echo_64", "cuda", s[0], (size_t)part * PARTS,
                    "\"path\": \"rk_actor_call of the built-in echo, a module's ring kernel (worker process)\"");
        latency_row(rep, "user_actor_64", "cuda", s[1], (size_t)part * PARTS,
                    "\"path\": \"rk_actor_call of a module's user actor copy (64 B in, 64 B out), same runtime\"");
        latency_row(rep, "vadd_64_api", "cuda", s[2], (size_t)part * PARTS,
                    "\"path\": \"rk_actor_call of the built-in vadd, 2 x 8 float32 (64 B in, 32 B out), same runtime\"");
    }
    for (int m = 0; m < PATHS; m++)
        free(s[m]);
    return rc;
}

int runtime_section(bench_report *rep, int device, long count, double seconds, double idle_s,
                    const int *threads, int n_threads)
{
    if (api_isolation_pair(rep, device, count, seconds))
        return 1;
    for (int i = 0; i < n_threads; i++)
        if (api_threads(rep, device, threads[i], seconds))
            return 1;
    rk_runtime *rt;
    if (open_cuda(&rt, device, RK_ISOLATION_AUTO, NULL))
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
