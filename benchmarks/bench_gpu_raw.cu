/* bench_gpu_raw.cu - `rk-bench gpu`, the raw rings: the library's own ring
 * kernel (rk_builtin_kernel) over rings laid out with the public rk_ring_*
 * API, with a host loop that writes and reads the LL lines directly: what
 * the kernel and the ring layout can do, apart from the runtime's actor
 * layer.
 *
 *   ring_echo_64_raw      64 B echo round trip, host loop on the rings
 *   throughput_echo_64    pipelined 64 B echoes, P producer + C consumer threads
 *   vadd_16777216         vadd of 2^24 float32, operands in the mapped arena */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "bench_gpu_internal.h"

/* experiment knobs of the host loop, off (kept as measured so far) */
static int g_pf;
static uint32_t g_plen = 64;

int raw_open(raw *r, uint32_t slots, size_t arena_size, int sm_count, int block, uint32_t kflags)
{
    memset(r, 0, sizeof *r);
    r->slots = slots;
    r->kflags = kflags;
    size_t ring = rk_ring_memsize(slots, 256);
    size_t ring_pg = (ring + 4095) & ~(size_t)4095;
    r->size = 4096 + 2 * ring_pg + arena_size;
    r->mem = (uint8_t *)mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (r->mem == MAP_FAILED)
        return 1;
    rk__region *reg = (rk__region *)r->mem; /* runtime/abi/rk_abi.h; gen 0 = the raw messages' */
    r->hb = &reg->heartbeat;
    r->stop = &reg->stop;
    r->state = &reg->state;
    r->h2d = (rk_ring *)(r->mem + 4096);
    r->d2h = (rk_ring *)(r->mem + 4096 + ring_pg);
    r->arena = r->mem + 4096 + 2 * ring_pg;
    r->arena_size = arena_size;
    CKRK(rk_ring_init(r->h2d, ring, slots, 256));
    CKRK(rk_ring_init(r->d2h, ring, slots, 256));
    CK(cudaHostRegister(r->mem, r->size, cudaHostRegisterMapped | cudaHostRegisterPortable));
    uint8_t *d;
    CK(cudaHostGetDevicePointer((void **)&d, r->mem, 0));
    CK(cudaStreamCreateWithFlags(&r->s, cudaStreamNonBlocking));
    CK(cudaMalloc(&r->scratch, RK_KERNEL_SCRATCH_BYTES));
    CK(cudaMemset(r->scratch, 0, RK_KERNEL_SCRATCH_BYTES));
    rk_kargs a;
    memset(&a, 0, sizeof a);
    a.h2d = d + ((uint8_t *)r->h2d - r->mem);
    a.d2h = d + ((uint8_t *)r->d2h - r->mem);
    a.arena = d + (r->arena - r->mem);
    a.arena_size = arena_size;
    a.region = (rk__region *)d;
    a.d2h_rings = 1; /* the raw rings: one reply ring, read in order */
    a.d2h_stride = ring_pg;
    a.scratch = r->scratch;
    a.nan_bits = 0xffc00000u;
    a.flags = kflags;
    int per_sm = 0;
    CK((cudaError_t)rk_builtin_kernel.occupancy(&per_sm, block, 0));
    CK((cudaError_t)rk_builtin_kernel.launch(&a, (unsigned)(per_sm * sm_count), (unsigned)block, 0, r->s));
    while (__atomic_load_n(r->state, __ATOMIC_ACQUIRE) != 1) {
        if (cudaStreamQuery(r->s) != cudaErrorNotReady) {
            fprintf(stderr, "rk-bench gpu: raw ring kernel died\n");
            return 1;
        }
        usleep(100);
    }
    return 0;
}

/* RK_KF_READ1_HIST: the first poll read's cycles after an idle-path reply
 * (device/experiments.cuh read1_hist_add), a line per kind of poll. */
static void read1_report(const raw *r, const char *label)
{
    static const char *what[RK_READ1_ROWS] = {"found by the first read", "by the second (a miss)",
                                             "by the second, first read slow", "by a later one"};
    uint32_t h[RK_READ1_ROWS][RK_READ1_BINS];
    if (cudaMemcpy(h, (char *)r->scratch + RK_KERNEL_READ1_HIST_OFFSET, sizeof h, cudaMemcpyDeviceToHost) !=
        cudaSuccess)
        return;
    for (uint32_t k = 0; k < RK_READ1_ROWS; k++) {
        uint64_t n = 0, c = 0;
        for (uint32_t b = 0; b < RK_READ1_BINS; b++)
            n += h[k][b];
        if (!n)
            continue;
        static const double q[] = {0.1, 0.5, 0.9, 0.99};
        uint32_t at[4], j = 0;
        for (uint32_t b = 0; b < RK_READ1_BINS && j < 4; b++) {
            c += h[k][b];
            while (j < 4 && (double)c >= q[j] * (double)n)
                at[j++] = (b + 1) * RK_READ1_BIN;
        }
        printf("    [%s] first read after a reply, %-31s %8llu polls, cycles p10 <= %u p50 <= %u p90 <= %u "
               "p99 <= %u%s\n", label, what[k], (unsigned long long)n, at[0], at[1], at[2], at[3],
               at[3] >= RK_READ1_BINS * RK_READ1_BIN ? " (or more)" : "");
    }
}

void raw_close(raw *r, const char *label)
{
    __atomic_store_n(r->stop, 1u, __ATOMIC_RELEASE);
    cudaStreamSynchronize(r->s);
    if (label) {
        /* the dispatcher's counters (device/kernel.cuh scratch.stats) */
        unsigned long long st[8] = {0};
        size_t off = RK_KERNEL_STATS_OFFSET;
        if (cudaMemcpy(st, (char *)r->scratch + off, sizeof st, cudaMemcpyDeviceToHost) == cudaSuccess && st[0])
            printf("    [%s] dispatcher: %llu loops, %llu busy polls, %llu msgs (%.1f per busy poll), %llu idle polls; "
                   "%.0f cycles/loop to the checked batch, %.0f cycles/loop after it (serial path: %.0f writing)\n",
                   label, st[0], st[1], st[2], st[1] ? (double)st[2] / (double)st[1] : 0.0, st[6],
                   (double)st[4] / (double)st[0], (double)st[5] / (double)st[0], (double)st[3] / (double)st[0]);
        if (st[2])
            printf("    [%s] per message: %.0f cycles polling it, %.0f serving it\n", label,
                   (double)st[4] / (double)st[2], (double)st[5] / (double)st[2]);
        if (st[2] && st[3] && !st[1])
            printf((r->kflags & RK_KF_GAP) ? "    [%s] idle answers: %.0f cycles from the reply's stores to the next read\n"
                                           : "    [%s] idle answers: %.0f cycles from the find to the reply's stores\n",
                   label, (double)st[3] / (double)st[2]);
        if (st[0] && st[7])
            printf("    [%s] idle polls that saw line 0 before the rest of the slot: %llu (%.2f %% of messages)\n", label,
                   st[7], st[2] ? 100.0 * (double)st[7] / (double)st[2] : 0.0);
        unsigned long long wait = 0;
        if (st[0] && cudaMemcpy(&wait, (char *)r->scratch + RK_KERNEL_IDLE_WAIT_OFFSET, sizeof wait,
                                cudaMemcpyDeviceToHost) == cudaSuccess)
            printf("    [%s] idle wait after a reply at the end: %llu cycles\n", label, wait);
        if (st[0])
            read1_report(r, label);
    }
    cudaStreamDestroy(r->s);
    cudaFree(r->scratch);
    cudaHostUnregister(r->mem);
    munmap(r->mem, r->size);
}

/* Writes a message (len bytes at msg) at position pos of ring r: LL lines,
 * line 0 last. The device consumer never sleeps: no doorbell. */
static int g_nt = 0; /* producer writes lines with non-temporal stores */
static inline void raw_put(rk_ring *rg, uint64_t pos, const uint32_t *w, uint32_t len)
{
    uint64_t *slot = rk_ring_slot(rg, pos);
    const uint64_t flag = (uint64_t)rk_ring_flag(rg, pos) << 32;
    __atomic_thread_fence(__ATOMIC_RELEASE);
    if (g_nt) {
        for (uint32_t i = 0; i < (len + 3) / 4; i++)
            __builtin_ia32_movnti64((long long *)&slot[1 + i], (long long)(flag | w[i]));
        __builtin_ia32_movnti64((long long *)&slot[0], (long long)(flag | len));
        __builtin_ia32_sfence();
        return;
    }
    for (uint32_t i = 0; i < (len + 3) / 4; i++)
        __atomic_store_n(&slot[1 + i], flag | w[i], __ATOMIC_RELAXED);
    __atomic_store_n(&slot[0], flag | len, __ATOMIC_RELAXED);
}

/* Reads the message at pos when complete: returns its length, or -1. */
static inline int raw_get(rk_ring *rg, uint64_t pos, uint32_t *w, uint32_t cap)
{
    const uint64_t *slot = rk_ring_slot(rg, pos);
    const uint32_t flag = rk_ring_flag(rg, pos);
    uint64_t l0 = __atomic_load_n(&slot[0], __ATOMIC_RELAXED);
    if ((uint32_t)(l0 >> 32) != flag)
        return -1;
    uint32_t len = (uint32_t)l0, nw = (len + 3) / 4;
    if (nw > cap)
        nw = cap;
    for (uint32_t i = 0; i < nw; i++) {
        uint64_t l;
        while ((uint32_t)((l = __atomic_load_n(&slot[1 + i], __ATOMIC_RELAXED)) >> 32) != flag)
            ;
        w[i] = (uint32_t)l;
    }
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return (int)len;
}

/* 64-byte echo request: 24-byte header + 64 bytes */
static void echo_msg(uint32_t *w, uint64_t id)
{
    memset(w, 0, 88);
    rk_msg_hdr h;
    memset(&h, 0, sizeof h);
    h.type = RK_OP_ECHO;
    h.id = id;
    h.len = 64;
    memcpy(w, &h, sizeof h);
    for (int i = 0; i < 16; i++)
        w[6 + i] = (uint32_t)(id * 16 + i);
}

/* 64-byte vadd request: 24-byte header + two 8-float vectors; its reply
 * is the header + 8 floats (56 bytes) */
static void vadd64_msg(uint32_t *w, uint64_t id)
{
    echo_msg(w, id);
    ((rk_msg_hdr *)w)->type = RK_OP_VADD;
    for (int i = 0; i < 16; i++) {
        const float f = (float)((id + (uint64_t)i) & 1023) * 0.5f;
        memcpy(&w[6 + i], &f, 4);
    }
}

static bool vadd64_ok(const uint32_t *req, const uint32_t *w, int len)
{
    if (len != 56 || ((const rk_msg_hdr *)w)->status != 0)
        return false;
    for (int i = 0; i < 8; i++) {
        float a, b, c;
        memcpy(&a, &req[6 + i], 4);
        memcpy(&b, &req[14 + i], 4);
        memcpy(&c, &w[6 + i], 4);
        if (c != a + b)
            return false;
    }
    return true;
}

/* Round trips of 64-B echoes, or (vadd) of 64-B vadds: the staged path
 * (serve_staged, serve_slow), which the idle poll's register paths for
 * echo and small user actors skip. */
int raw_echo_lat(raw *r, uint64_t *hpos, uint64_t *dpos, uint64_t *smp, long count, bool vadd, long turn_ns)
{
    uint32_t w[64], req[64];
    const long warm = 20000;
    const int rlen = vadd ? 56 : 88;
    for (long i = 0; i < warm + count; i++) {
        uint64_t t0 = bench_now_ns();
        if (vadd)
            vadd64_msg(req, *hpos);
        else
            echo_msg(req, *hpos);
        raw_put(r->h2d, *hpos, req, 88);
        /* the next slot's lines fetched for writing, but its first 64 B
         * (the kernel polls those), as librk's producer does
         * (rk__ring_prefetch_w), so that the raw loop and rk_actor_call
         * differ by the actor layer only (without it the raw loop was
         * 14-15 % late on two H100 hosts where the API was 3.6-6.5 %; on
         * two others three alternating pairs did not tell with and
         * without apart: benchmarks/results/h100_raw_prefetch_ab.txt) */
        for (uint32_t k = 64; k < r->h2d->slot_size && k < 512; k += 64)
            __builtin_prefetch((const char *)rk_ring_slot(r->h2d, *hpos + 1) + k, 1, 3);
        int len;
        while ((len = raw_get(r->d2h, *dpos, w, 64)) < 0)
            ;
        uint64_t t1 = bench_now_ns();
        __atomic_store_n(&r->d2h->cons_head, *dpos + 1, __ATOMIC_RELEASE);
        if (len != rlen || ((rk_msg_hdr *)w)->id != *hpos || (vadd && !vadd64_ok(req, w, len))) {
            fprintf(stderr, "rk-bench gpu: raw %s: bad reply (len %d)\n", vadd ? "vadd" : "echo", len);
            return 1;
        }
        ++*hpos;
        ++*dpos;
        if (i >= warm)
            smp[i - warm] = t1 - t0;
        while (turn_ns && bench_now_ns() - t1 < (uint64_t)turn_ns)
            ; /* --idle-variants: a host slower to send the next request */
    }
    return 0;
}

typedef struct {
    raw *r;
    uint64_t n;
    uint32_t idx, step; /* this thread writes positions idx, idx + step, ... */
} prod_arg;

static void *raw_producer(void *p)
{
    prod_arg *a = (prod_arg *)p;
    rk_ring *rg = a->r->h2d;
    uint32_t w[22];
    uint64_t head = 0;
    for (uint64_t pos = a->idx; pos < a->n; pos += a->step) {
        while (pos - head >= rg->slots)
            head = __atomic_load_n(&rg->cons_head, __ATOMIC_ACQUIRE);
        if (g_pf) {
            char *q = (char *)rk_ring_slot(rg, pos + 8 * a->step);
            __builtin_prefetch(q, 1);
            __builtin_prefetch(q + 64, 1);
            __builtin_prefetch(q + 128, 1);
        }
        echo_msg(w, pos);
        ((rk_msg_hdr *)w)->len = g_plen;
        raw_put(rg, pos, w, 24 + g_plen);
    }
    return NULL;
}

/* Consumers: thread j of C reads positions j, j + C, ...; each publishes
 * its progress, and the D2H cons_head (the ring's one consumer index) is
 * the least of them (cons_publish). */
typedef struct {
    raw *r;
    uint64_t n;
    uint32_t idx, step;
    uint64_t *progress; /* [step], each on its own cache line (x8) */
    uint64_t bad;
} cons_arg;

/* The D2H cons_head is the least progress over the consumers. Any of them
 * publishes it (a CAS that only moves it forward): after its own progress,
 * and every few thousand polls while it waits for a reply, because that
 * reply may need ring room that only the others' progress frees. (Before,
 * consumer 0 alone published, at its own progress: it once waited for a
 * reply while the published head lagged ~4 000 slots behind what both had
 * read, and the kernel waited for that room: a hang, at 2 + 2 threads.) */
static void cons_publish(const cons_arg *a, rk_ring *rg)
{
    uint64_t m = UINT64_MAX;
    for (uint32_t j = 0; j < a->step; j++) {
        const uint64_t v = __atomic_load_n(&a->progress[8 * j], __ATOMIC_ACQUIRE);
        if (v < m)
            m = v;
    }
    uint64_t cur = __atomic_load_n(&rg->cons_head, __ATOMIC_RELAXED);
    /* release: the replies below m are read before the kernel may reuse their slots */
    while (m > cur &&
           !__atomic_compare_exchange_n(&rg->cons_head, &cur, m, true, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
        ;
}

static void *raw_consumer(void *p)
{
    cons_arg *a = (cons_arg *)p;
    rk_ring *rg = a->r->d2h;
    uint32_t w[64];
    uint64_t k = 0;
    for (uint64_t pos = a->idx; pos < a->n; pos += a->step, k++) {
        if (g_pf) {
            const char *q = (const char *)rk_ring_slot(rg, pos + 8 * a->step);
            __builtin_prefetch(q);
            __builtin_prefetch(q + 64);
            __builtin_prefetch(q + 128);
        }
        int len;
        for (uint32_t spins = 1; (len = raw_get(rg, pos, w, 64)) < 0; spins++)
            if ((spins & 4095) == 0)
                cons_publish(a, rg);
        if (len != 24 + (int)g_plen || ((rk_msg_hdr *)w)->id != pos)
            a->bad++;
        if ((k & 15) == 15) {
            /* every position of this consumer below pos + 1 is read */
            __atomic_store_n(&a->progress[8 * a->idx], pos + 1, __ATOMIC_RELEASE);
            cons_publish(a, rg);
        }
    }
    __atomic_store_n(&a->progress[8 * a->idx], a->n, __ATOMIC_RELEASE);
    cons_publish(a, rg); /* the last consumer to finish publishes n */
    return NULL;
}


double raw_throughput(raw *r, uint64_t n, uint32_t P, uint32_t C, uint64_t *bad)
{
    pthread_t tp[8], tc[8];
    prod_arg pa[8];
    cons_arg ca[8];
    uint64_t *progress = (uint64_t *)calloc(8 * 8, sizeof(uint64_t));
    uint64_t t0 = bench_now_ns();
    for (uint32_t j = 0; j < C; j++) {
        ca[j] = (cons_arg){r, n, j, C, progress, 0};
        pthread_create(&tc[j], NULL, raw_consumer, &ca[j]);
    }
    for (uint32_t i = 0; i < P; i++) {
        pa[i] = (prod_arg){r, n, i, P};
        pthread_create(&tp[i], NULL, raw_producer, &pa[i]);
    }
    for (uint32_t j = 0; j < C; j++) {
        /* a stuck run says where it stopped instead of hanging */
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 30;
        if (pthread_timedjoin_np(tc[j], NULL, &dl) != 0) {
            fprintf(stderr, "rk-bench gpu: throughput run stuck after 30 s (%llu messages, %u+%u threads): "
                    "H2D cons_head %llu, D2H cons_head %llu\n", (unsigned long long)n, P, C,
                    (unsigned long long)__atomic_load_n(&r->h2d->cons_head, __ATOMIC_ACQUIRE),
                    (unsigned long long)__atomic_load_n(&r->d2h->cons_head, __ATOMIC_ACQUIRE));
            for (uint32_t i = 0; i < C; i++) {
                const uint64_t pr = __atomic_load_n(&progress[8 * i], __ATOMIC_ACQUIRE);
                const uint64_t l0 = __atomic_load_n(rk_ring_slot(r->d2h, pr), __ATOMIC_ACQUIRE);
                fprintf(stderr, "  consumer %u: progress %llu; D2H slot there: flag %u (wanted %u), len %u\n", i,
                        (unsigned long long)pr, (unsigned)(l0 >> 32), rk_ring_flag(r->d2h, pr), (unsigned)l0);
            }
            const uint64_t h = __atomic_load_n(&r->h2d->cons_head, __ATOMIC_ACQUIRE);
            const uint64_t l0 = __atomic_load_n(rk_ring_slot(r->h2d, h), __ATOMIC_ACQUIRE);
            fprintf(stderr, "  H2D slot at cons_head: flag %u (written %u), len %u\n", (unsigned)(l0 >> 32),
                    rk_ring_flag(r->h2d, h), (unsigned)l0);
            fflush(stderr);
            _exit(3);
        }
    }
    uint64_t t1 = bench_now_ns();
    for (uint32_t i = 0; i < P; i++)
        pthread_join(tp[i], NULL);
    __atomic_store_n(&r->d2h->cons_head, n, __ATOMIC_RELEASE);
    __atomic_store_n(&r->h2d->prod_tail, n, __ATOMIC_RELAXED);
    *bad = 0;
    for (uint32_t j = 0; j < C; j++)
        *bad += ca[j].bad;
    free(progress);
    return (double)n / ((double)(t1 - t0) * 1e-9);
}

/* vadd 2^24 with the operands already in the (pinned, mapped) arena:
 * vadd_16777216, from ring positions *hpos / *dpos (advanced) */
static int raw_vadd(bench_report *rep, raw *r, uint64_t *hpos, uint64_t *dpos)
{
    uint32_t w[64];
    uint64_t hp = *hpos, dp = *dpos;
    float *a = (float *)r->arena, *b = a + VN, *c = a + 2 * VN;
    for (size_t i = 0; i < VN; i++) {
        a[i] = (float)(i % 1000) * 0.25f;
        b[i] = 1.0f / (float)(i % 777 + 1);
    }
    double t[12];
    const int R = 12;
    for (int k = 0; k < R + 1; k++) {
        memset(c, 0xff, VN * 4);
        uint32_t m[12];
        rk_msg_hdr h;
        memset(&h, 0, sizeof h);
        h.type = RK_OP_VADD;
        h.flags = RK_MSG_ARENA;
        h.id = hp;
        h.len = (uint32_t)(2 * VN * 4);
        rk_arena_ref ref = {0, 2 * VN * 4, VN * 4};
        memcpy(m, &h, sizeof h);
        memcpy((uint8_t *)m + sizeof h, &ref, sizeof ref);
        uint64_t t0 = bench_now_ns();
        raw_put(r->h2d, hp, m, 48);
        while (raw_get(r->d2h, dp, w, 64) < 0)
            ;
        uint64_t t1 = bench_now_ns();
        __atomic_store_n(&r->d2h->cons_head, dp + 1, __ATOMIC_RELEASE);
        rk_msg_hdr rh;
        memcpy(&rh, w, sizeof rh);
        if (rh.status != 0 || rh.len != VN * 4) {
            fprintf(stderr, "rk-bench gpu: raw vadd: status %d len %u\n", rh.status, rh.len);
            return 1;
        }
        for (size_t i = 0; i < VN; i += 4099)
            if (c[i] != a[i] + b[i]) {
                fprintf(stderr, "rk-bench gpu: raw vadd wrong at %zu\n", i);
                return 1;
            }
        hp++;
        dp++;
        if (k)
            t[k - 1] = (double)(t1 - t0);
    }
    add_vadd(rep, "vadd_16777216",
             "ring kernel, operands in the mapped arena, zero-copy reads/writes by the whole grid", t, R);
    *hpos = hp;
    *dpos = dp;
    return 0;
}

int raw_section(bench_report *rep, int sm_count, long count, double seconds, uint32_t prod, uint32_t cons)
{
    raw r;
    const size_t arena = (size_t)3 * VN * 4 + ((size_t)1 << 20);
    if (raw_open(&r, 4096, arena, sm_count))
        return 1;
    uint64_t hpos = 0, dpos = 0;

    /* latency, raw loop */
    {
        uint64_t *s = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)count);
        if (raw_echo_lat(&r, &hpos, &dpos, s, count))
            return 1;
        latency_row(rep, "ring_echo_64_raw", "cuda", s, (size_t)count,
                    "\"path\": \"ring kernel, host loop on the rings (no actor layer)\"");
        raw_close(&r, "ring_echo_64_raw");
        /* the staged path (device/NOTES.md, "User actors on the GPU"),
         * on a kernel of its own so that its counters are its own */
        if (raw_open(&r, 4096, arena, sm_count))
            return 1;
        hpos = dpos = 0;
        if (raw_echo_lat(&r, &hpos, &dpos, s, count, true))
            return 1;
        latency_row(rep, "ring_vadd_64_raw", "cuda", s, (size_t)count,
                    "\"path\": \"ring kernel, host loop on the rings, 64 B vadd: staged in shared memory and "
                    "served by serve_slow\"");
        free(s);
    }
    /* throughput, raw loop: prod producer + cons consumer threads */
    {
        /* reset both rings to position 0 with the kernel idle */
        raw_close(&r, "ring_vadd_64_raw");
        /* block 1024: the dispatcher's crew (block 0's warps) is 31 warps */
        if (raw_open(&r, 4096, arena, sm_count, 1024))
            return 1;
        uint64_t n = (uint64_t)(seconds * 25e6);
        uint64_t bad = 0;
        double rate = raw_throughput(&r, n, prod, cons, &bad);
        bench_result *b = bench_add(rep, "throughput_echo_64", "cuda");
        b->msgs_per_s = rate;
        b->count = n;
        snprintf(b->extra, sizeof b->extra,
                 "\"path\": \"ring kernel (block 1024), host loop on the rings: %u producer + %u consumer threads, 4096 slots\", \"bad\": %llu",
                 prod, cons, (unsigned long long)bad);
        printf("  %-24s %.2f M msg/s (%llu messages, %u producer + %u consumer threads, %llu bad)\n", "throughput_echo_64",
               rate / 1e6, (unsigned long long)n, prod, cons, (unsigned long long)bad);
        if (bad)
            return 1;
        hpos = dpos = n;
    }
    if (raw_vadd(rep, &r, &hpos, &dpos))
        return 1;
    raw_close(&r, "throughput + vadd");
    return 0;
}
