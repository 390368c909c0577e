/* test_gpu_configs.c - the ring kernel under configurations other than the
 * default: blocks of 64 and 96 threads (the dispatcher alone on the serial
 * busy path; one crew warp), one block (large operations on the dispatcher
 * warp), rings of 64 slots (a lap every few polls), slots of 128 B (most
 * messages out of line, in the arena) to 4 KiB (replies longer than a warp's
 * lines), one to eight reply rings. In each, 4 threads drive an actor each:
 * pipelined (a window in flight) echoes of 1 B to ~3 slots and vadds of 1 to
 * 8 192 floats (odd threads through rk_actor_send_batch / recv_batch),
 * then rk_actor_call ping-pongs; in every other configuration
 * (in process: their GPU code is this program's, configs_actors.cu) also two
 * user actors, one whose reply is up to 8 x its request and one whose reply
 * is an eighth of it, inline and from the arena. Every reply is checked against
 * its request (by id), none may be missing, repeated or wrong, and the
 * runtime must be healthy after. A third of the way in, the kernel is
 * relaunched under the load as the next configuration's grid and block.
 * Built with RK_TEST_CPU_ONLY it is the CPU backend's twin (tests
 * configs_cpu, with the user actors' CPU twins, and configs_cpu_process,
 * on a worker process, without them). A block-64 kernel stopped answering
 * after one ring lap until 2026-11-26 (test_gpu_stress.c has that case). */
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <stdbool.h>

#include "configs_actors.h"
#include "gpu_common.h"
#ifndef RK_TEST_CPU_ONLY
#include "kernel_desc.h"
extern const rk_kernel_desc configs_actors; /* configs_actors.cu */
#endif

#define THREADS 4
#define WINDOW 48
#define TABLE 256 /* > WINDOW, a power of two */

typedef struct {
    uint32_t grid, block, ring_slots, slot_size, reply_rings;
} cfg;

typedef struct {
    rk_runtime *rt;
    const cfg *c;
    uint32_t t, msg_max;
    bool actors; /* the runtime serves CONFIGS_WIDEN and CONFIGS_SHRINK */
    uint64_t n;
    uint64_t got; /* replies checked so far (atomic: the main thread watches) */
} job;

/* what a request was, by its id (open addressing; WINDOW in flight) */
typedef struct {
    uint64_t id, seq; /* id 0: free */
    uint32_t len;     /* payload bytes */
    uint16_t type;
} want;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* payload byte i of request seq of thread t: the same on send and check */
static void payload(uint32_t t, uint64_t seq, uint8_t *p, size_t len)
{
    uint64_t s = mix(((uint64_t)t << 48) ^ seq);
    for (size_t i = 0; i < len; i++) {
        if (i % 8 == 0)
            s = mix(s + i);
        p[i] = (uint8_t)(s >> (8 * (i % 8)));
    }
}

/* request seq's type and payload length: echoes of 1 B to three slots'
 * worth (inline and out of line), small vadds, every 97th a vadd of 8 192
 * floats (64 KiB, the arena); with the user actors also widen (1 B to 300,
 * every 7th of them 20 000 B: a reply of up to 160 000 B from the worker
 * grid) and shrink (1 B to three slots, every 7th 40 000 B) */
static void shape(const job *j, uint64_t seq, uint16_t *type, uint32_t *len)
{
    const uint64_t r = mix(seq * 31 + j->t), k = (r >> 8) % 10, v = r >> 16;
    const uint32_t slots3 = 3 * j->msg_max;
    if (seq % 97 == 96)
        *type = RK_OP_VADD, *len = 2 * 8192 * 4;
    else if (k < 2)
        *type = RK_OP_VADD, *len = 2 * 4 * (uint32_t)(1 + v % 64);
    else if (k == 2 && j->actors)
        *type = CONFIGS_WIDEN, *len = v % 7 == 6 ? 20000 : 1 + (uint32_t)((v >> 3) % 300);
    else if (k == 3 && j->actors)
        *type = CONFIGS_SHRINK, *len = v % 7 == 6 ? 40000 : 1 + (uint32_t)((v >> 3) % slots3);
    else
        *type = RK_OP_ECHO, *len = 1 + (uint32_t)(v % slots3);
}

/* the user actors' CPU twins: the CPU backend's actors and the reference */
static int widen_cpu(const void *in, size_t in_len, void *out, size_t out_cap, size_t *out_len, void *user)
{
    (void)user;
    const uint8_t *i = in;
    if (in_len == 0)
        return -RK_EINVAL;
    const size_t n = (1u + i[0] % 8u) * in_len;
    if (n > out_cap)
        return -RK_EMSGSIZE;
    for (size_t j = 0; j < n; j++)
        ((uint8_t *)out)[j] = (uint8_t)(i[j % in_len] ^ (j / in_len));
    *out_len = n;
    return 0;
}
static size_t widen_cap(size_t in_len) { return 8 * in_len; }

static int shrink_cpu(const void *in, size_t in_len, void *out, size_t out_cap, size_t *out_len, void *user)
{
    (void)user;
    const size_t n = (in_len + 7) / 8;
    if (n > out_cap)
        return -RK_EMSGSIZE;
    for (size_t j = 0; j < n; j++)
        ((uint8_t *)out)[j] = (uint8_t)(((const uint8_t *)in)[8 * j] + 1);
    *out_len = n;
    return 0;
}
static size_t shrink_cap(size_t in_len) { return (in_len + 7) / 8; }

static void put(want *tb, want w)
{
    for (uint32_t i = (uint32_t)mix(w.id) % TABLE;; i = (i + 1) % TABLE)
        if (!tb[i].id) {
            tb[i] = w;
            return;
        }
}

static want take(want *tb, uint64_t id)
{
    for (uint32_t i = (uint32_t)mix(id) % TABLE, k = 0; k < TABLE; i = (i + 1) % TABLE, k++)
        if (tb[i].id == id) {
            want w = tb[i];
            /* backward-shift delete keeps the probe chains whole */
            uint32_t hole = i;
            for (uint32_t n = (i + 1) % TABLE; tb[n].id; n = (n + 1) % TABLE) {
                const uint32_t home = (uint32_t)mix(tb[n].id) % TABLE;
                if ((n - home + TABLE) % TABLE >= (n - hole + TABLE) % TABLE) {
                    tb[hole] = tb[n];
                    hole = n;
                }
            }
            tb[hole].id = 0;
            return w;
        }
    return (want){0};
}

/* checks reply r against what request w was */
static void check(const job *j, const want *w, const rk_reply *r, uint8_t *buf)
{
    CHECK(w->id, "thread %u: a reply to id %llu, which is not in flight (or came twice)", j->t,
          (unsigned long long)r->id);
    CHECK(r->status == 0, "thread %u request %llu (type %u, %u B): status %s: %s", j->t, (unsigned long long)w->seq,
          w->type, w->len, rk_err_name(r->status), rk_last_detail());
    payload(j->t, w->seq, buf, w->len);
    if (w->type == CONFIGS_WIDEN || w->type == CONFIGS_SHRINK) {
        uint8_t *want = buf + 3 * (size_t)j->msg_max + 2 * 40000; /* driver's buffer: room past the payloads */
        size_t n = 0;
        const int rc = (w->type == CONFIGS_WIDEN ? widen_cpu : shrink_cpu)(buf, w->len, want, 8 * 20000, &n, NULL);
        CHECK(rc == 0, "reference");
        CHECK(r->len == n && !memcmp(r->data, want, n), "thread %u %s %llu (%u B): reply %zu B, want %zu (or differs)",
              j->t, w->type == CONFIGS_WIDEN ? "widen" : "shrink", (unsigned long long)w->seq, w->len, r->len, n);
        return;
    }
    if (w->type == RK_OP_ECHO) {
        CHECK(r->len == w->len && !memcmp(r->data, buf, w->len), "thread %u echo %llu (%u B): reply %zu B differs",
              j->t, (unsigned long long)w->seq, w->len, r->len);
        return;
    }
    const size_t n = w->len / 8;
    CHECK(r->len == 4 * n, "thread %u vadd %llu: reply %zu B, want %zu", j->t, (unsigned long long)w->seq, r->len,
          4 * n);
    const float *a = (const float *)buf, *b = a + n, *s = (const float *)r->data;
    for (size_t i = 0; i < n; i++) {
        const float x = a[i] + b[i];
        /* bit for bit, NaNs as NaNs (their payloads may differ) */
        CHECK(!memcmp(&x, &s[i], 4) || (x != x && s[i] != s[i]), "thread %u vadd %llu: element %zu", j->t,
              (unsigned long long)w->seq, i);
    }
}

/* The pipelined phase, one request and one reply a call. */
static void pipeline_single(job *j, rk_actor *a, want *tb, uint8_t *buf)
{
    uint64_t sent = 0, got = 0;
    while (got < j->n) {
        while (sent < j->n && sent - got < WINDOW) {
            want w = {.seq = sent};
            shape(j, sent, &w.type, &w.len);
            payload(j->t, sent, buf, w.len);
            int rc = rk_actor_send(a, w.type, buf, w.len, 0, &w.id, 10000);
            if (rc == -RK_EBUSY)
                break;
            CHECK_RK(rc, "send");
            put(tb, w);
            sent++;
        }
        rk_reply r;
        CHECK_RK(rk_actor_recv(a, &r, 10000), "recv");
        const want w = take(tb, r.id);
        check(j, &w, &r, buf);
        rk_reply_release(a, &r);
        __atomic_store_n(&j->got, ++got, __ATOMIC_RELAXED);
    }
}

/* The same through the batch calls: up to BATCH requests a send, up to
 * BATCH replies a reap. */
#define BATCH 16
static void pipeline_batch(job *j, rk_actor *a, want *tb, uint8_t *buf, uint8_t *pay[BATCH])
{
    uint64_t sent = 0, got = 0;
    while (got < j->n) {
        rk_send_req rq[BATCH];
        want w[BATCH];
        uint64_t ids[BATCH];
        int nb = 0;
        while (nb < BATCH && sent + (uint64_t)nb < j->n && sent + (uint64_t)nb - got < WINDOW) {
            w[nb] = (want){.seq = sent + (uint64_t)nb};
            shape(j, w[nb].seq, &w[nb].type, &w[nb].len);
            payload(j->t, w[nb].seq, pay[nb], w[nb].len);
            rq[nb] = (rk_send_req){.type = w[nb].type, .data = pay[nb], .len = w[nb].len};
            nb++;
        }
        if (nb) {
            const int k = rk_actor_send_batch(a, rq, nb, ids, 10000);
            CHECK(k > 0, "send_batch of %d: %s: %s", nb, rk_err_name(k), rk_last_detail());
            for (int i = 0; i < k; i++) {
                w[i].id = ids[i];
                put(tb, w[i]);
            }
            sent += (uint64_t)k;
        }
        rk_reply r[BATCH];
        const int m = rk_actor_recv_batch(a, r, BATCH, 10000);
        CHECK(m > 0, "recv_batch: %s: %s", rk_err_name(m), rk_last_detail());
        for (int i = 0; i < m; i++) {
            const want x = take(tb, r[i].id);
            check(j, &x, &r[i], buf);
        }
        rk_reply_release_batch(a, r, m);
        got += (uint64_t)m;
        __atomic_store_n(&j->got, got, __ATOMIC_RELAXED);
    }
}

static void *driver(void *arg)
{
    job *j = arg;
    rk_actor *a;
    CHECK_RK(rk_actor_open(j->rt, &a), "actor");
    want *tb = calloc(TABLE, sizeof *tb);
    /* payloads up to 3 slots or 40 000 B, then a reference reply up to 160 000 B */
    const size_t cap = 3 * (size_t)j->msg_max + 2 * 40000;
    uint8_t *buf = malloc(cap + 8 * 20000), *pay[BATCH];
    CHECK(tb && buf, "oom");
    if (j->t % 2 == 0) {
        pipeline_single(j, a, tb, buf);
    } else { /* odd threads: the batch calls */
        for (int i = 0; i < BATCH; i++)
            CHECK((pay[i] = malloc(cap)), "oom");
        pipeline_batch(j, a, tb, buf, pay);
        for (int i = 0; i < BATCH; i++)
            free(pay[i]);
    }
    for (uint64_t k = 0; k < j->n / 8; k++) { /* one at a time: the idle path */
        want w = {.seq = j->n + k};
        shape(j, w.seq, &w.type, &w.len);
        payload(j->t, w.seq, buf, w.len);
        rk_reply r;
        CHECK_RK(rk_actor_call(a, w.type, buf, w.len, 0, &r, 10000), "call");
        w.id = r.id;
        check(j, &w, &r, buf);
        rk_reply_release(a, &r);
    }
    CHECK(rk_actor_inflight(a) == 0, "thread %u: %u still in flight", j->t, rk_actor_inflight(a));
    free(buf);
    free(tb);
    rk_actor_close(a);
    return NULL;
}

/* Runs the drivers on config c; a third of the way through the pipelined
 * phase the kernel is relaunched as config r (grid and block) under the
 * load: the requests queued or in flight then must all be answered. */
static void run(const cfg *c, const cfg *r, uint64_t per_thread, bool with_actors)
{
    rk_config k;
    rk_config_init(&k);
    /* user actors: their GPU code is compiled into this program, so the
     * backend runs in it (RK_ISOLATION_NONE); every other configuration
     * runs on a worker process, the default, without them */
    rk_actor_def defs[2] = {
        {.type = CONFIGS_WIDEN, .name = "widen", .cpu = widen_cpu, .reply_size = widen_cap},
        {.type = CONFIGS_SHRINK, .name = "shrink", .cpu = shrink_cpu, .reply_size = shrink_cap},
    };
#ifdef RK_TEST_CPU_ONLY
    k.backend = RK_BACKEND_CPU;
    const char *iso = getenv("RK_TEST_ISOLATION");
    const bool actors = !(iso && !strcmp(iso, "process")); /* (a worker process cannot run them) */
    (void)with_actors;
    if (!actors)
        k.isolation = RK_ISOLATION_PROCESS;
#else
    k.backend = RK_BACKEND_CUDA;
    const bool actors = with_actors;
    defs[0].gpu = defs[1].gpu = &configs_actors;
    if (actors)
        k.isolation = RK_ISOLATION_NONE;
#endif
    if (actors) {
        k.actors = defs;
        k.n_actors = 2;
    }
    k.grid = c->grid; /* 0: the default, as for each of these */
    k.block = c->block;
    k.reply_rings = c->reply_rings;
    if (c->ring_slots)
        k.ring_slots = c->ring_slots;
    if (c->slot_size)
        k.slot_size = c->slot_size;
    k.arena_size = (size_t)32 << 20;
    k.max_payload = (size_t)1 << 20;
    rk_runtime *rt = gpu_open_cfg(&k);
    rk_info in;
    rk_runtime_info(rt, &in);
    job jobs[THREADS];
    pthread_t th[THREADS];
    const double t0 = gpu_now_s();
    for (uint32_t i = 0; i < THREADS; i++) {
        jobs[i] = (job){.rt = rt, .c = c, .t = i, .msg_max = in.msg_max, .actors = actors, .n = per_thread};
        CHECK(pthread_create(&th[i], NULL, driver, &jobs[i]) == 0, "thread");
    }
    for (uint32_t i = 0; i < THREADS; i++)
        while (__atomic_load_n(&jobs[i].got, __ATOMIC_RELAXED) < per_thread / 3)
            sched_yield();
    const int rc = rk_runtime_relaunch(rt, r->grid, r->block, 0);
    CHECK_RK(rc, "relaunch under load");
    rk_info rin;
    rk_runtime_info(rt, &rin);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    CHECK(rk_runtime_health(rt) == 0, "health after the run");
    rk_stats st;
    rk_runtime_stats(rt, &st);
    rk_runtime_close(rt);
    const uint64_t want_n = THREADS * (per_thread + per_thread / 8);
    CHECK(st.requests == want_n && st.replies == want_n, "runtime counted %llu requests, %llu replies; sent %llu",
          (unsigned long long)st.requests, (unsigned long long)st.replies, (unsigned long long)want_n);
    printf("ok grid %3u block %4u, %4u slots of %4u B (msg_max %4u), %u reply rings, %s, relaunched as grid "
           "%3u block %4u: %llu requests in %.2f s\n",
           in.grid, in.block, in.ring_slots, in.slot_size, in.msg_max, in.reply_rings,
           actors ? "user actors, in process" : "built-ins, worker process", rin.grid, rin.block,
           (unsigned long long)want_n, gpu_now_s() - t0);
}

/* A relaunch while nobody drains: one reply ring of 64 slots, one reply
 * unread and 64 more requests queued behind it, then rk_runtime_relaunch
 * from the only thread that would drain. The kernel stops at a message
 * boundary and its replies need room: the runtime drains while it waits
 * (before 2026-11-26 the engine aborted after its wait, wrote replies over
 * unread ones and relaunched on the damaged ring: replies lost, the ring
 * stopped). Every reply comes, by id; in process and on a worker. */
static void relaunch_undrained(bool in_process)
{
    rk_config k;
    rk_config_init(&k);
#ifdef RK_TEST_CPU_ONLY
    k.backend = RK_BACKEND_CPU;
#else
    k.backend = RK_BACKEND_CUDA;
#endif
    if (in_process)
        k.isolation = RK_ISOLATION_NONE;
    k.ring_slots = 64;
    k.reply_rings = 1;
    rk_runtime *rt = gpu_open_cfg(&k);
    rk_actor *a;
    CHECK_RK(rk_actor_open(rt, &a), "actor");
    enum { N = 65 };
    uint64_t ids[N];
    uint64_t m[8];
    for (int i = 0; i < N; i++) {
        for (int w = 0; w < 8; w++)
            m[w] = mix((uint64_t)i * 8 + (uint64_t)w);
        CHECK_RK(rk_actor_send(a, RK_OP_ECHO, m, sizeof m, 0, &ids[i], 5000), "send");
        if (i == 0)
            usleep(100000); /* answered, unread */
    }
    usleep(100000);
    const double t0 = gpu_now_s();
    CHECK_RK(rk_runtime_relaunch(rt, 0, 0, 0), "relaunch with unread replies");
    const double dt = gpu_now_s() - t0;
    for (int n = 0; n < N; n++) {
        rk_reply r;
        CHECK_RK(rk_actor_recv(a, &r, 5000), "recv after the relaunch");
        int i = 0;
        while (i < N && ids[i] != r.id)
            i++;
        CHECK(i < N, "a reply with an id never sent, or twice");
        ids[i] = 0;
        for (int w = 0; w < 8; w++)
            m[w] = mix((uint64_t)i * 8 + (uint64_t)w);
        CHECK(r.status == 0 && r.len == sizeof m && !memcmp(r.data, m, sizeof m), "reply %d: status %d, %zu B", i,
              r.status, r.len);
        rk_reply_release(a, &r);
    }
    CHECK(rk_runtime_health(rt) == 0, "health after the relaunch");
    rk_actor_close(a);
    rk_runtime_close(rt);
    printf("ok relaunch with %d replies unread (%s): %.2f s, every reply after it\n", N,
           in_process ? "isolation none" : "default isolation", dt);
}

int main(void)
{
#ifndef RK_TEST_CPU_ONLY
    gpu_require();
#endif
    static const cfg C[] = {
        /* grid, block, ring slots, slot size, reply rings */
        {1, 64, 64, 256, 1},   /* the dispatcher alone, a lap every 64 */
        {0, 64, 1024, 512, 8}, /* serial path, a ring per actor, workers */
        {2, 96, 256, 256, 2},  /* one crew warp */
        {0, 128, 4096, 128, 4}, /* 128-B slots (60 B inline): most out of line */
        {1, 256, 512, 1024, 1}, /* replies over a warp's lines, one block */
        {3, 160, 2048, 256, 2},
        {0, 1024, 128, 4096, 8},
        {0, 0, 0, 0, 0}, /* the defaults */
    };
#ifdef RK_TEST_CPU_ONLY
    const uint64_t n = 6000; /* (CI runs it under the sanitizers too) */
#else
    const uint64_t n = gpu_quick() ? 600 : 20000;
#endif
    const size_t nc = sizeof C / sizeof C[0];
    for (size_t i = 0; i < nc; i++)
        run(&C[i], &C[(i + 1) % nc], n, i % 2 == 0); /* even: user actors, in process */
    relaunch_undrained(false);
    relaunch_undrained(true);
    printf("PASS: %zu configurations, two relaunches with unread replies\n", sizeof C / sizeof C[0]);
    return 0;
}
