/* bench_gpu.cu - `rk-bench gpu`: every GPU path of the product side by side,
 * in one run, on one machine, so each claim is a ratio against the floor
 * measured in the same run.
 *
 *   floor                 one GPU thread ping-pongs one word through host-mapped memory
 *   launch_sync           cudaLaunchKernel(empty) + cudaStreamSynchronize
 *   graph_sync            cudaGraphLaunch(one empty kernel) + sync
 *   memcpy_launch_memcpy  64 B cudaMemcpyAsync H2D + kernel + 64 B D2H + sync
 *   pinned_copy           cudaMemcpy of pinned memory: 2 x 64 MiB H2D + 64 MiB D2H
 *   vadd_staged_16777216  the same copies around a vadd kernel (what users do today)
 *   ring_echo_64_raw      64 B echo round trip through the ring kernel, host loop on the rings
 *   throughput_echo_64    pipelined 64 B echoes through the ring kernel, host loop on the rings
 *   vadd_16777216         vadd of 2^24 float32 through the ring kernel, operands in the arena
 *   ring_echo_64          64 B echo round trip through the runtime API (rk_actor_call)
 *   throughput_echo_64_api, vadd_16777216_api   the same through the runtime API
 *   idle_cpu              host CPU of an idle CUDA runtime over --idle seconds
 *
 * The "raw" paths drive the library's own ring kernel (rk_builtin_kernel)
 * over rings laid out with the public rk_ring_* API, with a host loop that
 * writes and reads the LL lines directly (one producer, one consumer
 * thread): they measure what the kernel and the ring layout can do,
 * separately from the runtime's actor layer. */
#include <cuda_runtime.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../device/kernel_desc.h"
#include "../device/ring.cuh"
#include "bench_gpu.h"
#include "rk/rk.h"

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "rk-bench gpu: %s: %s\n", #x, cudaGetErrorString(e_));                 \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)
#define CKRK(x)                                                                                    \
    do {                                                                                           \
        int r_ = (x);                                                                              \
        if (r_) {                                                                                  \
            fprintf(stderr, "rk-bench gpu: %s: %s: %s\n", #x, rk_err_name(r_), rk_last_detail()); \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static const size_t VN = (size_t)1 << 24; /* vadd elements */
static int g_pf;
static uint32_t g_plen = 64;
/* raw throughput threads (--threads P,C): two of each, so that the host
 * loop (one consumer reads ~20 M replies/s of DMA-written lines) is not
 * what is measured; --variants shows 1 + 1 too */
static uint32_t g_prod = 2, g_cons = 2;

/* ---------------- kernels of the baselines ---------------- */
__global__ void floor_kernel(const uint32_t *ping, uint32_t *pong, uint32_t n)
{
    for (uint32_t i = 1; i <= n; i++) {
        while (rk::dev::rk__ld_relaxed_sys(ping) != i)
            ;
        rk::dev::rk__st_relaxed_sys(pong, i);
    }
}
__global__ void empty_kernel() {}
__global__ void copy64_kernel(const uint4 *in, uint4 *out)
{
    if (threadIdx.x < 4)
        out[threadIdx.x] = in[threadIdx.x];
}
__global__ void vadd_kernel(const float4 *a, const float4 *b, float4 *c, size_t n4)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        float4 x = a[i], y = b[i];
        c[i] = make_float4(__fadd_rn(x.x, y.x), __fadd_rn(x.y, y.y), __fadd_rn(x.z, y.z), __fadd_rn(x.w, y.w));
    }
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n / 2];
}

/* Records a vadd of VN elements timed R times (ns in t): its bandwidth
 * counts the 3 x VN x 4 bytes it moves (a and b read, c written). */
static void add_vadd(bench_report *rep, const char *name, const char *path, double *t, int R)
{
    double tm = median(t, R);
    bench_result *v = bench_add(rep, name, "cuda");
    v->gb_per_s = 3.0 * (double)VN * 4 / tm;
    v->count = R;
    snprintf(v->extra, sizeof v->extra, "\"path\": \"%s\", \"median_ms\": %.3f, \"bytes\": %zu", path,
             tm / 1e6, 3 * VN * 4);
    printf("  %-24s %.1f GB/s (%.3f ms median of %d)\n", name, v->gb_per_s, tm / 1e6, R);
}

static void latency_row(bench_report *rep, const char *name, const char *backend, uint64_t *s, size_t n,
                        const char *extra)
{
    bench_result *r = bench_add(rep, name, backend);
    bench_latency_stats(r, s, n);
    if (extra)
        snprintf(r->extra, sizeof r->extra, "%s", extra);
    printf("  %-24s p50 %8.2f us  p99 %8.2f us  (%zu)\n", name, r->p50_ns / 1e3, r->p99_ns / 1e3, n);
    fflush(stdout);
}

/* ---------------- raw rings: the ring kernel without the actor layer ---------------- */
typedef struct raw {
    uint8_t *mem;
    size_t size;
    rk_ring *h2d, *d2h;
    uint8_t *arena;
    size_t arena_size;
    uint64_t *hb;
    uint32_t *stop;
    int32_t *state;
    void *scratch;
    cudaStream_t s;
    uint32_t slots;
} raw;

static int raw_open(raw *r, uint32_t slots, size_t arena_size, int sm_count, int block = 256, uint32_t kflags = 0)
{
    memset(r, 0, sizeof *r);
    r->slots = slots;
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

static void raw_close(raw *r, const char *label = NULL)
{
    __atomic_store_n(r->stop, 1u, __ATOMIC_RELEASE);
    cudaStreamSynchronize(r->s);
    if (label) {
        /* the dispatcher's counters (device/kernel.cuh scratch.stats) */
        unsigned long long st[8];
        size_t off = RK_KERNEL_STATS_OFFSET;
        if (cudaMemcpy(st, (char *)r->scratch + off, sizeof st, cudaMemcpyDeviceToHost) == cudaSuccess && st[0])
            printf("    [%s] dispatcher: %llu loops, %llu busy polls, %llu msgs (%.1f per busy poll), %llu idle polls; "
                   "%.0f cycles/loop to the checked batch, %.0f cycles/loop after it (serial path: %.0f writing)\n",
                   label, st[0], st[1], st[2], st[1] ? (double)st[2] / (double)st[1] : 0.0, st[6],
                   (double)st[4] / (double)st[0], (double)st[5] / (double)st[0], (double)st[3] / (double)st[0]);
        if (cudaMemcpy(st, (char *)r->scratch + off, sizeof st, cudaMemcpyDeviceToHost) == cudaSuccess && st[0] && st[7])
            printf("    [%s] idle polls that saw line 0 before the rest of the slot: %llu (%.2f %% of messages)\n", label,
                   st[7], st[2] ? 100.0 * (double)st[7] / (double)st[2] : 0.0);
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

/* count timed 64-byte echo round trips on the raw rings, one at a time,
 * after 20 000 untimed ones, from positions *hpos / *dpos (advanced) */
static int raw_echo_lat(raw *r, uint64_t *hpos, uint64_t *dpos, uint64_t *smp, long count)
{
    uint32_t w[64];
    const long warm = 20000;
    for (long i = 0; i < warm + count; i++) {
        uint64_t t0 = bench_now_ns();
        echo_msg(w, *hpos);
        raw_put(r->h2d, *hpos, w, 88);
        int len;
        while ((len = raw_get(r->d2h, *dpos, w, 64)) < 0)
            ;
        uint64_t t1 = bench_now_ns();
        __atomic_store_n(&r->d2h->cons_head, *dpos + 1, __ATOMIC_RELEASE);
        if (len != 88 || ((rk_msg_hdr *)w)->id != *hpos) {
            fprintf(stderr, "rk-bench gpu: raw echo: bad reply (len %d)\n", len);
            return 1;
        }
        ++*hpos;
        ++*dpos;
        if (i >= warm)
            smp[i - warm] = t1 - t0;
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

/* Pipelined echo through the raw rings with P producer and C consumer
 * threads. Returns messages per second (bad replies in *bad). */
static double raw_throughput(raw *r, uint64_t n, uint32_t P, uint32_t C, uint64_t *bad)
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

/* Experiment (rk-bench gpu --variants): the busy path of the ring kernel
 * (serial / pipelined, poll size, prefetch, reply store width) and the
 * number of host threads feeding and draining the rings. */


static int raw_variants(int sm_count)
{
    /* busy-path variants of the ring kernel (kernel_desc.h RK_KF_*), block
     * 1024, and the host threads feeding it */
    static const struct {
        uint32_t flags, P, C;
        const char *what;
    } V[] = {
        {RK_KF_SERIAL, 1, 1, "serial 64-slot polls (the previous default)"},
        {RK_KF_NOPF | RK_KF_KP64, 1, 1, "pipelined, 64 slots, no prefetch"},
        {RK_KF_NOPF, 1, 1, "pipelined, 128 slots, no prefetch"},
        {RK_KF_KP64, 1, 1, "pipelined, 64 slots, prefetch"},
        {0, 1, 1, "pipelined, 128 slots, prefetch (default)"},
        {0, 2, 2, "pipelined, 128 slots, prefetch (default)"},
        {RK_KF_WR_V2, 2, 2, "pipelined, 128 slots, prefetch, 16-byte reply stores"},
        {RK_KF_NARROW, 2, 2, "pipelined, 128 slots, prefetch, 24 of 32 lines read per slot"},
        {RK_KF_SERIAL, 2, 2, "serial 64-slot polls (the previous default)"},
    };
    for (size_t v = 0; v < sizeof V / sizeof V[0]; v++) {
        raw r;
        if (raw_open(&r, 4096, 1 << 20, sm_count, 1024, V[v].flags))
            return 1;
        uint64_t bad = 0;
        double rate = raw_throughput(&r, 8000000, V[v].P, V[v].C, &bad);
        raw_close(&r, "variant");
        printf("  variant flags %2u, %u producers, %u consumers: %6.2f M msg/s (%llu bad)  %s\n", V[v].flags, V[v].P,
               V[v].C, rate / 1e6, (unsigned long long)bad, V[v].what);
        fflush(stdout);
        if (bad)
            return 1;
    }
    return 0;
}

static int raw_section(bench_report *rep, int sm_count, long count, double seconds)
{
    raw r;
    const size_t arena = (size_t)3 * VN * 4 + ((size_t)1 << 20);
    if (raw_open(&r, 4096, arena, sm_count))
        return 1;
    uint32_t w[64];
    uint64_t hpos = 0, dpos = 0;

    /* latency, raw loop */
    {
        uint64_t *s = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)count);
        if (raw_echo_lat(&r, &hpos, &dpos, s, count))
            return 1;
        latency_row(rep, "ring_echo_64_raw", "cuda", s, (size_t)count,
                    "\"path\": \"ring kernel, host loop on the rings (no actor layer)\"");
        free(s);
    }
    /* throughput, raw loop: one producer thread, this thread consumes */
    {
        /* reset both rings to position 0 with the kernel idle */
        raw_close(&r, "ring_echo_64_raw");
        /* block 1024: the dispatcher's crew (block 0's warps) is 31 warps */
        if (raw_open(&r, 4096, arena, sm_count, 1024))
            return 1;
        uint64_t n = (uint64_t)(seconds * 25e6);
        uint64_t bad = 0;
        double rate = raw_throughput(&r, n, g_prod, g_cons, &bad);
        bench_result *b = bench_add(rep, "throughput_echo_64", "cuda");
        b->msgs_per_s = rate;
        b->count = n;
        snprintf(b->extra, sizeof b->extra,
                 "\"path\": \"ring kernel (block 1024), host loop on the rings: %u producer + %u consumer threads, 4096 slots\", \"bad\": %llu",
                 g_prod, g_cons, (unsigned long long)bad);
        printf("  %-24s %.2f M msg/s (%llu messages, %u producer + %u consumer threads, %llu bad)\n", "throughput_echo_64",
               rate / 1e6, (unsigned long long)n, g_prod, g_cons, (unsigned long long)bad);
        if (bad)
            return 1;
        hpos = dpos = n;
    }
    /* vadd 2^24 with the operands already in the (pinned, mapped) arena */
    {
        float *a = (float *)r.arena, *b = a + VN, *c = a + 2 * VN;
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
            h.id = hpos;
            h.len = (uint32_t)(2 * VN * 4);
            rk_arena_ref ref = {0, 2 * VN * 4, VN * 4};
            memcpy(m, &h, sizeof h);
            memcpy((uint8_t *)m + sizeof h, &ref, sizeof ref);
            uint64_t t0 = bench_now_ns();
            raw_put(r.h2d, hpos, m, 48);
            while (raw_get(r.d2h, dpos, w, 64) < 0)
                ;
            uint64_t t1 = bench_now_ns();
            __atomic_store_n(&r.d2h->cons_head, dpos + 1, __ATOMIC_RELEASE);
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
            hpos++;
            dpos++;
            if (k)
                t[k - 1] = (double)(t1 - t0);
        }
        add_vadd(rep, "vadd_16777216",
                 "ring kernel, operands in the mapped arena, zero-copy reads/writes by the whole grid", t, R);
    }
    raw_close(&r, "throughput + vadd");
    return 0;
}

/* ---------------- through the runtime API ---------------- */
/* count timed rk_actor_call round trips of a 64-byte echo (after 20 000
 * untimed ones) into smp */
static int api_echo_lat(rk_actor *a, uint64_t *smp, long count)
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

static int runtime_section(bench_report *rep, int device, long count, double seconds, double idle_s)
{
    rk_config cfg;
    rk_config_init(&cfg);
    cfg.backend = RK_BACKEND_CUDA;
    cfg.device = device;
    rk_runtime *rt;
    CKRK(rk_runtime_open(&rt, &cfg));
    rk_info in;
    rk_runtime_info(rt, &in);
    printf("  runtime: %s\n", in.why);
    rk_actor *a;
    CKRK(rk_actor_open(rt, &a));
    uint8_t msg[64];
    for (int i = 0; i < 64; i++)
        msg[i] = (uint8_t)i;
    {
        uint64_t *s = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)count);
        if (api_echo_lat(a, s, count))
            return 1;
        latency_row(rep, "ring_echo_64", "cuda", s, (size_t)count, "\"path\": \"rk_actor_call through the runtime\"");
        free(s);
    }
    {
        /* pipelined through the API: one actor, a window of 256 */
        uint64_t sent = 0, got = 0, t0 = bench_now_ns(), end = t0 + (uint64_t)(seconds * 1e9), t1;
        for (;;) {
            while (sent - got < 256) {
                int rc = rk_actor_send(a, RK_OP_ECHO, msg, 64, 0, NULL, 1000);
                if (rc == -RK_EBUSY)
                    break;
                CKRK(rc);
                sent++;
            }
            rk_reply r;
            CKRK(rk_actor_recv(a, &r, 5000));
            rk_reply_release(a, &r);
            got++;
            if ((got & 1023) == 0 && bench_now_ns() > end)
                break;
        }
        t1 = bench_now_ns();
        while (got < sent) {
            rk_reply r;
            CKRK(rk_actor_recv(a, &r, 5000));
            rk_reply_release(a, &r);
            got++;
        }
        bench_result *b = bench_add(rep, "throughput_echo_64_api", "cuda");
        b->msgs_per_s = (double)got / ((double)(t1 - t0) * 1e-9);
        b->count = got;
        snprintf(b->extra, sizeof b->extra, "\"path\": \"rk_actor_send/recv, 1 actor, window 256\"");
        printf("  %-24s %.2f M msg/s\n", "throughput_echo_64_api", b->msgs_per_s / 1e6);
    }
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
    }
    {
        /* the same through the zero-copy API: the operands are produced in
         * place in the arena (untimed, as a producer would write them);
         * timed: rk_actor_buf_send -> GPU reads a, b and writes c over the
         * link -> reply received */
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
    }
    rk_actor_close(a);
    {
        uint64_t c0 = bench_cpu_ns(), t0 = bench_now_ns();
        usleep((useconds_t)(idle_s * 1e6));
        uint64_t c1 = bench_cpu_ns(), t1 = bench_now_ns();
        double pct = 100.0 * (double)(c1 - c0) / (double)(t1 - t0);
        bench_result *b = bench_add(rep, "idle_cpu", "cuda");
        b->count = 1;
        snprintf(b->extra, sizeof b->extra, "\"cpu_percent_of_a_core\": %.3f, \"seconds\": %.1f", pct, idle_s);
        printf("  %-24s %.3f %% of a core over %.1f s\n", "idle_cpu", pct, idle_s);
    }
    rk_runtime_close(rt);
    return 0;
}

static void driver_version(char *out, size_t cap)
{
    snprintf(out, cap, "unknown");
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (!f)
        return;
    char line[512];
    if (fgets(line, sizeof line, f)) {
        /* "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release ..." */
        for (char *t = strtok(line, " \t\n"); t; t = strtok(NULL, " \t\n"))
            if (t[0] >= '0' && t[0] <= '9' && strchr(t, '.')) {
                snprintf(out, cap, "%s", t);
                break;
            }
    }
    fclose(f);
}

/* The floor (see floor_kernel) on its own: count round trips into smp. */
static int floor_lat(uint64_t *smp, long count)
{
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    uint32_t *hw;
    CK(cudaHostAlloc((void **)&hw, 4096, cudaHostAllocMapped));
    memset(hw, 0, 4096);
    uint32_t *dw;
    CK(cudaHostGetDevicePointer((void **)&dw, hw, 0));
    uint32_t *ping = hw, *pong = hw + 32; /* separate 128-B lines */
    const long warm = 20000;
    floor_kernel<<<1, 1, 0, s>>>(dw, dw + 32, (uint32_t)(warm + count));
    CK(cudaGetLastError());
    for (long i = 1; i <= warm + count; i++) {
        uint64_t t0 = bench_now_ns();
        __atomic_store_n(ping, (uint32_t)i, __ATOMIC_RELEASE);
        while (__atomic_load_n(pong, __ATOMIC_ACQUIRE) != (uint32_t)i)
            ;
        uint64_t t1 = bench_now_ns();
        if (i > warm)
            smp[i - warm - 1] = t1 - t0;
    }
    CK(cudaStreamSynchronize(s));
    CK(cudaFreeHost(hw));
    cudaStreamDestroy(s);
    return 0;
}

/* rk_actor_call round trips of a 64-byte echo through a CUDA runtime
 * whose kernel runs with the experiment flags kflags (RK_CUDA_KFLAGS) */
static int api_idle_lat(uint64_t *smp, long count, uint32_t kflags)
{
    char fl[32];
    snprintf(fl, sizeof fl, "%u", kflags);
    setenv("RK_CUDA_KFLAGS", fl, 1);
    rk_config cfg;
    rk_config_init(&cfg);
    cfg.backend = RK_BACKEND_CUDA;
    rk_runtime *rt;
    rk_actor *a;
    CKRK(rk_runtime_open(&rt, &cfg));
    CKRK(rk_actor_open(rt, &a));
    unsetenv("RK_CUDA_KFLAGS");
    if (api_echo_lat(a, smp, count))
        return 1;
    rk_actor_close(a);
    rk_runtime_close(rt);
    return 0;
}

/* Experiment (rk-bench gpu --idle-variants): the idle path of the ring
 * kernel (one 64-B echo at a time, block 256) under the RK_KF_IDLE_* flags,
 * on the raw rings and through rk_actor_call, each against the floor
 * measured in the same process; two rounds, interleaved, so that drift of
 * the host shows. Rows: idle_<flags>_<round>,
 * api_<flags>_<round>, floor_<round>. */
static int raw_idle_variants(bench_report *rep, int sm_count, long count)
{
    static const struct {
        uint32_t flags;
        int api; /* 0: the raw rings; 1: rk_actor_call */
        const char *what;
    } V[] = {
        {0, 0, "default: one strong poll read, 500 cycles after a reply"},
        {RK_KF_IDLE_DELAY(0xff), 0, "no delay after a reply"},
        {RK_KF_IDLE_DELAY(3), 0, "300 cycles after a reply before the next poll read"},
        {RK_KF_IDLE_DELAY(9), 0, "900 cycles after a reply"},
        {RK_KF_IDLE_DELAY(0xff) | RK_KF_IDLE_SC, 0, "no delay; weak reply + fence.sc.sys (before 2026-11)"},
        {0, 1, "rk_actor_call, default"},
        {RK_KF_IDLE_DELAY(0xff), 1, "rk_actor_call, no delay"},
        {RK_KF_IDLE_DELAY(3), 1, "rk_actor_call, 300 cycles"},
        {RK_KF_IDLE_DELAY(9), 1, "rk_actor_call, 900 cycles"},
    };
    const int nv = (int)(sizeof V / sizeof V[0]);
    uint64_t *smp = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)count);
    char name[64];
    for (int round = 0; round < 2; round++) {
        if (floor_lat(smp, count))
            return 1;
        snprintf(name, sizeof name, "floor_%d", round);
        latency_row(rep, name, "cuda", smp, (size_t)count, NULL);
        for (int v = 0; v < nv; v++) {
            if (V[v].api) {
                if (api_idle_lat(smp, count, V[v].flags))
                    return 1;
                snprintf(name, sizeof name, "api_%u_%d", V[v].flags, round);
            } else {
                raw r;
                if (raw_open(&r, 4096, (size_t)1 << 20, sm_count, 256, V[v].flags))
                    return 1;
                uint64_t hpos = 0, dpos = 0;
                if (raw_echo_lat(&r, &hpos, &dpos, smp, count))
                    return 1;
                snprintf(name, sizeof name, "idle_%u_%d", V[v].flags, round);
                raw_close(&r, name);
            }
            bench_result *b = bench_add(rep, name, "cuda");
            bench_latency_stats(b, smp, (size_t)count);
            printf("  idle variant %-22s p50 %6.3f us  p90 %6.3f  p99 %6.3f  p99.9 %6.3f  %s\n", name,
                   b->p50_ns / 1e3, b->p90_ns / 1e3, b->p99_ns / 1e3, b->p999_ns / 1e3, V[v].what);
        }
    }
    if (floor_lat(smp, count))
        return 1;
    latency_row(rep, "floor_2", "cuda", smp, (size_t)count, NULL);
    free(smp);
    return 0;
}

int bench_gpu_run(int argc, char **argv, bench_report *rep)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* a stalled section still shows how far it got */
    long count = 200000;
    int variants = 0;
    double seconds = 2.0, idle_s = 5.0;
    int device = 0;
    static const struct option opts[] = {{"count", required_argument, 0, 'n'},
                                         {"seconds", required_argument, 0, 't'},
                                         {"device", required_argument, 0, 'd'},
                                         {"idle", required_argument, 0, 'i'},
                                         {"variants", no_argument, 0, 'v'},
                                         {"idle-variants", no_argument, 0, 'I'},
                                         {"threads", required_argument, 0, 'T'},
                                         {0, 0, 0, 0}};
    int o;
    optind = 1;
    while ((o = getopt_long(argc, argv, "n:t:d:i:vIT:", opts, NULL)) != -1) {
        switch (o) {
        case 'n': count = atol(optarg); break;
        case 't': seconds = atof(optarg); break;
        case 'd': device = atoi(optarg); break;
        case 'i': idle_s = atof(optarg); break;
        case 'v': variants = 1; break;
        case 'I': variants = 2; break;
        case 'T':
            if (sscanf(optarg, "%u,%u", &g_prod, &g_cons) != 2 || g_prod < 1 || g_prod > 8 || g_cons < 1 || g_cons > 8) {
                fprintf(stderr, "rk-bench gpu: --threads P,C with 1..8 each\n");
                return 2;
            }
            break;
        default: return 2;
        }
    }
    if (count < 100)
        count = 100;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev <= device) {
        fprintf(stderr, "rk-bench gpu: no CUDA device %d\n", device);
        return 1;
    }
    CK(cudaSetDevice(device));
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, device));
    int rtv = 0, drv = 0;
    cudaRuntimeGetVersion(&rtv);
    cudaDriverGetVersion(&drv);
    char dv[64];
    driver_version(dv, sizeof dv);
    snprintf(rep->device_json, sizeof rep->device_json,
             "{\"name\": \"%s\", \"driver\": \"%s\", \"cuda\": \"%d.%d\", \"cuda_driver_api\": \"%d.%d\", \"cc\": \"%d.%d\", "
             "\"sm_count\": %d, \"pci_bus\": \"%04x:%02x:%02x\"}",
             p.name, dv, rtv / 1000, rtv % 1000 / 10, drv / 1000, drv % 1000 / 10, p.major, p.minor,
             p.multiProcessorCount, p.pciDomainID, p.pciBusID, p.pciDeviceID);
    printf("rk-bench gpu: %s (driver %s, CUDA %d.%d), %ld round trips per latency path\n", p.name, dv, rtv / 1000,
           rtv % 1000 / 10, count);

    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    uint64_t *smp = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)count);

    if (variants == 2)
        return raw_idle_variants(rep, p.multiProcessorCount, count);
    if (variants)
        return raw_variants(p.multiProcessorCount);

    /* floor: one spinning GPU thread, one word each way through mapped memory */
    if (floor_lat(smp, count))
        return 1;
    latency_row(rep, "floor", "cuda", smp, (size_t)count,
                "\"path\": \"1 GPU thread, 1 word each way, host-mapped memory\"");
    const long nb = count < 50000 ? count : 50000;
    /* launch + sync */
    {
        for (int i = 0; i < 2000; i++)
            empty_kernel<<<1, 1, 0, s>>>();
        CK(cudaStreamSynchronize(s));
        for (long i = 0; i < nb; i++) {
            uint64_t t0 = bench_now_ns();
            empty_kernel<<<1, 1, 0, s>>>();
            cudaStreamSynchronize(s);
            smp[i] = bench_now_ns() - t0;
        }
        CK(cudaGetLastError());
        latency_row(rep, "launch_sync", "cuda", smp, (size_t)nb, NULL);
    }
    /* graph launch + sync */
    {
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        empty_kernel<<<1, 1, 0, s>>>();
        CK(cudaStreamEndCapture(s, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        for (int i = 0; i < 2000; i++)
            cudaGraphLaunch(ge, s);
        CK(cudaStreamSynchronize(s));
        for (long i = 0; i < nb; i++) {
            uint64_t t0 = bench_now_ns();
            cudaGraphLaunch(ge, s);
            cudaStreamSynchronize(s);
            smp[i] = bench_now_ns() - t0;
        }
        CK(cudaGetLastError());
        latency_row(rep, "graph_sync", "cuda", smp, (size_t)nb, NULL);
        cudaGraphExecDestroy(ge);
        cudaGraphDestroy(g);
    }
    /* 64 B memcpy H2D + kernel + 64 B D2H + sync */
    {
        uint8_t *hin, *hout;
        void *din, *dout;
        CK(cudaHostAlloc((void **)&hin, 64, 0));
        CK(cudaHostAlloc((void **)&hout, 64, 0));
        CK(cudaMalloc(&din, 64));
        CK(cudaMalloc(&dout, 64));
        for (int i = 0; i < 64; i++)
            hin[i] = (uint8_t)i;
        for (long i = -2000; i < nb; i++) {
            uint64_t t0 = bench_now_ns();
            cudaMemcpyAsync(din, hin, 64, cudaMemcpyHostToDevice, s);
            copy64_kernel<<<1, 32, 0, s>>>((const uint4 *)din, (uint4 *)dout);
            cudaMemcpyAsync(hout, dout, 64, cudaMemcpyDeviceToHost, s);
            cudaStreamSynchronize(s);
            if (i >= 0)
                smp[i] = bench_now_ns() - t0;
        }
        CK(cudaGetLastError());
        if (memcmp(hin, hout, 64)) {
            fprintf(stderr, "rk-bench gpu: memcpy path: wrong data\n");
            return 1;
        }
        latency_row(rep, "memcpy_launch_memcpy", "cuda", smp, (size_t)nb, NULL);
        cudaFreeHost(hin);
        cudaFreeHost(hout);
        cudaFree(din);
        cudaFree(dout);
    }
    /* pinned copies: the same bytes a vadd of 2^24 moves (2 x 64 MiB in, 64 MiB out) */
    {
        float *hab, *hc, *dab, *dc;
        CK(cudaHostAlloc((void **)&hab, 2 * VN * 4, 0));
        CK(cudaHostAlloc((void **)&hc, VN * 4, 0));
        CK(cudaMalloc((void **)&dab, 2 * VN * 4));
        CK(cudaMalloc((void **)&dc, VN * 4));
        for (size_t i = 0; i < 2 * VN; i++)
            hab[i] = (float)(i % 1000) * 0.5f;
        const int R = 10;
        double t[10], th[10], td[10], tv[10];
        for (int k = -1; k < R; k++) {
            uint64_t t0 = bench_now_ns();
            CK(cudaMemcpy(dab, hab, 2 * VN * 4, cudaMemcpyHostToDevice));
            uint64_t t1 = bench_now_ns();
            CK(cudaMemcpy(hc, dc, VN * 4, cudaMemcpyDeviceToHost));
            uint64_t t2 = bench_now_ns();
            if (k >= 0) {
                t[k] = (double)(t2 - t0);
                th[k] = (double)(t1 - t0);
                td[k] = (double)(t2 - t1);
            }
        }
        for (int k = -1; k < R; k++) {
            uint64_t t0 = bench_now_ns();
            cudaMemcpyAsync(dab, hab, 2 * VN * 4, cudaMemcpyHostToDevice, s);
            vadd_kernel<<<p.multiProcessorCount * 8, 256, 0, s>>>((const float4 *)dab, (const float4 *)(dab + VN),
                                                                   (float4 *)dc, VN / 4);
            cudaMemcpyAsync(hc, dc, VN * 4, cudaMemcpyDeviceToHost, s);
            CK(cudaStreamSynchronize(s));
            if (k >= 0)
                tv[k] = (double)(bench_now_ns() - t0);
        }
        for (size_t i = 0; i < VN; i += 1009)
            if (hc[i] != hab[i] + hab[VN + i]) {
                fprintf(stderr, "rk-bench gpu: staged vadd wrong at %zu\n", i);
                return 1;
            }
        double tm = median(t, R), thm = median(th, R), tdm = median(td, R), tvm = median(tv, R);
        bench_result *b = bench_add(rep, "pinned_copy", "cuda");
        b->gb_per_s = 3.0 * (double)VN * 4 / tm;
        b->count = R;
        snprintf(b->extra, sizeof b->extra,
                 "\"path\": \"cudaMemcpy pinned: 128 MiB H2D then 64 MiB D2H\", \"h2d_gb_per_s\": %.2f, \"d2h_gb_per_s\": %.2f, \"median_ms\": %.3f",
                 2.0 * VN * 4 / thm, (double)VN * 4 / tdm, tm / 1e6);
        printf("  %-24s %.1f GB/s (H2D %.1f, D2H %.1f GB/s; %.3f ms)\n", "pinned_copy", b->gb_per_s,
               2.0 * VN * 4 / thm, (double)VN * 4 / tdm, tm / 1e6);
        bench_result *v = bench_add(rep, "vadd_staged_16777216", "cuda");
        v->gb_per_s = 3.0 * (double)VN * 4 / tvm;
        v->count = R;
        snprintf(v->extra, sizeof v->extra,
                 "\"path\": \"cudaMemcpyAsync H2D + vadd kernel + D2H + sync, pinned\", \"median_ms\": %.3f", tvm / 1e6);
        printf("  %-24s %.1f GB/s (%.3f ms)\n", "vadd_staged_16777216", v->gb_per_s, tvm / 1e6);
        cudaFreeHost(hab);
        cudaFreeHost(hc);
        cudaFree(dab);
        cudaFree(dc);
    }
    free(smp);
    cudaStreamDestroy(s);

    /* the ring kernel, raw, then through the runtime (each holds the whole GPU) */
    if (raw_section(rep, p.multiProcessorCount, count, seconds))
        return 1;
    if (runtime_section(rep, device, count, seconds, idle_s))
        return 1;

    /* the claims, as ratios against this run's floor */
    const bench_result *fl = NULL, *ring = NULL, *mlm = NULL, *thr = NULL, *va = NULL, *pc = NULL, *idle = NULL,
                       *raw_ring = NULL;
    for (size_t i = 0; i < rep->n; i++) {
        const bench_result *r = &rep->results[i];
        if (!strcmp(r->name, "floor")) fl = r;
        if (!strcmp(r->name, "ring_echo_64")) ring = r;
        if (!strcmp(r->name, "ring_echo_64_raw")) raw_ring = r;
        if (!strcmp(r->name, "memcpy_launch_memcpy")) mlm = r;
        if (!strcmp(r->name, "throughput_echo_64")) thr = r;
        if (!strcmp(r->name, "vadd_16777216")) va = r;
        if (!strcmp(r->name, "pinned_copy")) pc = r;
        if (!strcmp(r->name, "idle_cpu")) idle = r;
    }
    if (fl && ring && raw_ring && mlm && thr && va && pc && idle) {
        printf("\nclaims (this run):\n");
        printf("  ring p50 / floor p50        = %.3f (<= 1.15)   raw loop: %.3f\n", ring->p50_ns / fl->p50_ns,
               raw_ring->p50_ns / fl->p50_ns);
        printf("  ring p99 / floor p99        = %.3f (<= 1.5)    raw loop: %.3f\n", ring->p99_ns / fl->p99_ns,
               raw_ring->p99_ns / fl->p99_ns);
        printf("  memcpy+launch p50 / ring p50 = %.2f (>= 3.5)\n", mlm->p50_ns / ring->p50_ns);
        printf("  pipelined 64 B echo         = %.2f M msg/s (>= 20)\n", thr->msgs_per_s / 1e6);
        printf("  vadd / pinned copy          = %.1f %% (>= 80 %%)\n", 100.0 * va->gb_per_s / pc->gb_per_s);
        printf("  idle CPU                    = see idle_cpu row (< 5 %% of a core)\n");
    }
    return 0;
}
