/* device/kernel.cuh - the persistent cooperative ring kernel, as a template
 * over the user's GPU actors (device/actor.cuh explains why a template).
 *
 * Roles (one cooperative grid, launched once per runtime):
 *   block 0, warp 0  DISPATCHER: polls the H2D ring in host memory. Idle, it
 *                    reads one slot per poll (a warp loads the whole 256-B
 *                    slot: lane i reads line i, so "a message is here" and
 *                    the message itself arrive in ONE PCIe round trip);
 *                    busy, the crew (warps 2..) reads up to 128 slots per
 *                    round trip, the next poll's in flight while this
 *                    one is answered (crew_pipe). Small messages
 *                    (echo, NOP) are answered straight from registers; the
 *                    rest is staged in shared memory and run by the warp,
 *                    or, for arena payloads above RK__WARP_ARENA_MAX, posted
 *                    as a job for the whole grid. No grid-wide barrier is
 *                    ever on the small-message path.
 *   block 0, warp 1  HOUSEKEEPER: writes the heartbeat, reads the stop word,
 *                    publishes H2D cons_head (so the dispatcher never stalls
 *                    on a system-scope release fence), posts the replies of
 *                    finished grid jobs, and shuts the kernel down cleanly.
 *   blocks 1..G-1    WORKERS: wait on DEVICE memory (job counter in the
 *                    scratch, __nanosleep backoff) and run grid jobs (large
 *                    vadd / echo / user actors) over all their threads.
 *
 * D2H positions are reserved with a shared-memory atomic in block 0 (the
 * dispatcher and the housekeeper both produce); lines are LL lines, so
 * replies need no fence, except that arena output is fenced (system scope)
 * before the reply that points to it.
 *
 * Host memory is only loaded and stored (ring.cuh), never RMW'd.
 */
#ifndef RK_DEVICE_KERNEL_CUH
#define RK_DEVICE_KERNEL_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "kernel_desc.h"
#include "ring.cuh"
#include "rk/error.h"

namespace rk {

/* What a GPU actor's handler learns about the threads serving a request:
 * every thread of the group calls the handler with its own rank. A warp
 * serves inline (small) messages; the whole worker grid serves arena
 * payloads above 16 KiB. Handlers loop rank-strided over their data and
 * must not wait for one another (no group barrier). Rank 0's return value
 * and *out_len are the reply's status and length. */
struct gpu_ctx {
    uint32_t rank;
    uint32_t size;
    bool grid;
};

namespace dev {

constexpr uint32_t FULL = 0xffffffffu;
constexpr int K = 64;                         /* slots per busy poll */
/* row stride of the staged lines, in lines: 33, not 32, so that lane j
 * reading line i of message j (the batch check) does not hit one shared
 * memory bank 32 times over (measured: 7000 of 8700 cycles per batch) */
constexpr int LS = 33;
/* pipelined busy polls (the default): up to KP_MAX slots per poll, JMAX per
 * crew warp (warps 2..; the dispatcher only orchestrates), the next poll's
 * slots read while this one is checked and answered */
constexpr int KP_MAX = 128;
constexpr int JMAX = 5;
#ifndef RK_KERNEL_IDLE_DELAY
#define RK_KERNEL_IDLE_DELAY 500u /* cycles (~0.25 us): see the idle poll */
#endif
constexpr int KROWS = KP_MAX > K ? KP_MAX : K; /* staged rows */
constexpr uint32_t NARROW_LINES = 24;          /* RK_KF_NARROW: lines read per slot */
constexpr uint32_t RK__WARP_ARENA_MAX = 16384; /* larger arena payloads go to the grid */
constexpr uint32_t NJ = 16;                   /* grid job queue entries */
constexpr uint32_t MAX_WORDS = RK_RING_SLOT_MAX / 8; /* lines of the largest slot */

/* one grid job: the request's header + arena ref as message words 1..12 */
struct job {
    uint32_t words[13];
    uint32_t op; /* 0 run, 1 quit */
    int32_t status;
    uint32_t out_len;
};
struct scratch {
    uint32_t job_posted;
    uint32_t pad0[31];
    uint32_t job_completed;
    uint32_t pad1[31];
    uint32_t job_done[NJ];
    uint32_t pad2[32 - NJ];
    job jobs[NJ];
    /* dispatcher counters, written when it stops (rk-bench reads them):
     * loops, busy polls, messages, D2H head refreshes, cycles loading,
     * cycles processing, idle polls */
    unsigned long long stats[8];
};
static_assert(sizeof(scratch) <= RK_KERNEL_SCRATCH_BYTES, "scratch too large");
static_assert(offsetof(scratch, stats) == RK_KERNEL_STATS_OFFSET, "stats offset");

/* block 0's shared state */
struct shared0 {
    unsigned long long d2h_tail; /* dispatcher -> housekeeper at stop: next D2H position */
    unsigned long long d2h_head; /* D2H cons_head at start */
    unsigned long long h2d_done; /* positions the dispatcher consumed */
    unsigned long long poll_pos; /* dispatcher -> loader: the busy poll's first position */
    uint32_t stop;               /* housekeeper -> dispatcher: 1 stop, 2 abort */
    uint32_t jobs_posted;        /* dispatcher -> housekeeper */
    uint32_t dispatcher_done;
    uint32_t loader_quit;
    unsigned long long fastmask;  /* busy batch: complete echo/NOP messages (crew_check) */
    unsigned long long wr_dpos;   /* their first D2H position */
    unsigned long long pp_dpos;   /* pipelined poll: first D2H position (poll_pos: first H2D) */
    uint32_t pp_n;                /* pipelined poll: slots */
    uint32_t firstbad[32];        /* pipelined poll: per crew warp, its first slot that is not
                                   * a complete echo/NOP (pp_n if none) */
    unsigned long long st[8];     /* dispatcher counters (lane 0), copied to scratch.stats at stop */
    uint32_t words[MAX_WORDS];   /* staged request (slow path) */
    uint32_t reply[MAX_WORDS];   /* staged reply (slow path) */
    uint32_t jreply[16];         /* housekeeper's job reply */
    uint64_t lines[KROWS * LS];  /* one busy poll: slots x 32 lines (row stride LS) */
};

/* Flag words in shared memory that one warp writes and another polls:
 * atomics (plus block fences for release/acquire), so the hand-over is
 * visible to compute-sanitizer racecheck as synchronisation. */
__device__ __forceinline__ void flag_st(uint32_t *p, uint32_t v)
{
    __threadfence_block(); /* release */
    atomicExch(p, v);
}
__device__ __forceinline__ void flag_st(unsigned long long *p, unsigned long long v)
{
    __threadfence_block(); /* release */
    atomicExch(p, v);
}
__device__ __forceinline__ uint32_t flag_ld(uint32_t *p)
{
    uint32_t v = atomicOr(p, 0u);
    __threadfence_block(); /* acquire */
    return v;
}
__device__ __forceinline__ unsigned long long flag_ld(unsigned long long *p)
{
    unsigned long long v = atomicOr(p, 0ull);
    __threadfence_block(); /* acquire */
    return v;
}
__device__ __forceinline__ uint32_t vol_ld(const uint32_t *p) { return *(const volatile uint32_t *)p; }
__device__ __forceinline__ unsigned long long vol_ld(const unsigned long long *p)
{
    return *(const volatile unsigned long long *)p;
}

/* float add with the host's (x86 SSE / AArch64) NaN rule, so results are
 * bit-identical to rk__vadd_f32 even for NaN inputs: a NaN operand comes
 * back quieted, the first one when both are NaN. Plain IEEE add, round to
 * nearest, denormals kept (no FMA, no fast-math). */
__device__ __forceinline__ float vadd1(float x, float y, uint32_t dnan)
{
    const float r = __fadd_rn(x, y);
    if (r == r)
        return r;
    uint32_t ux = __float_as_uint(x), uy = __float_as_uint(y);
    if ((ux & 0x7fffffffu) > 0x7f800000u)
        return __uint_as_float(ux | 0x00400000u);
    if ((uy & 0x7fffffffu) > 0x7f800000u)
        return __uint_as_float(uy | 0x00400000u);
    return __uint_as_float(dnan); /* inf - inf: the host's default NaN */
}

__device__ __forceinline__ void copy_bytes(const gpu_ctx &c, uint8_t *dst, const uint8_t *src, uint64_t n)
{
    uint64_t i = 0;
    if ((((uintptr_t)dst | (uintptr_t)src) & 15) == 0) {
        const uint64_t n16 = n / 16;
        const uint4 *s = reinterpret_cast<const uint4 *>(src);
        uint4 *d = reinterpret_cast<uint4 *>(dst);
        for (uint64_t k = c.rank; k < n16; k += c.size)
            d[k] = s[k];
        i = n16 * 16;
    } else if ((((uintptr_t)dst | (uintptr_t)src) & 3) == 0) {
        const uint64_t n4 = n / 4;
        const uint32_t *s = reinterpret_cast<const uint32_t *>(src);
        uint32_t *d = reinterpret_cast<uint32_t *>(dst);
        for (uint64_t k = c.rank; k < n4; k += c.size)
            d[k] = s[k];
        i = n4 * 4;
    }
    for (uint64_t k = i + c.rank; k < n; k += c.size)
        dst[k] = src[k];
}

__device__ __forceinline__ void vadd_n(const gpu_ctx &c, const float *a, const float *b, float *o, uint64_t n,
                                       uint32_t dnan)
{
    uint64_t i = 0;
    if ((((uintptr_t)a | (uintptr_t)b | (uintptr_t)o) & 15) == 0) {
        const uint64_t n4 = n / 4;
        const float4 *a4 = reinterpret_cast<const float4 *>(a);
        const float4 *b4 = reinterpret_cast<const float4 *>(b);
        float4 *o4 = reinterpret_cast<float4 *>(o);
        for (uint64_t k = c.rank; k < n4; k += c.size) {
            float4 x = a4[k], y = b4[k];
            o4[k] = make_float4(vadd1(x.x, y.x, dnan), vadd1(x.y, y.y, dnan), vadd1(x.z, y.z, dnan),
                                vadd1(x.w, y.w, dnan));
        }
        i = n4 * 4;
    }
    for (uint64_t k = i + c.rank; k < n; k += c.size)
        o[k] = vadd1(a[k], b[k], dnan);
}

/* ---- the user's actors, dispatched by type at compile time ---- */
template <class... A> struct actor_list;
template <> struct actor_list<> {
    __device__ static bool run(uint16_t, const gpu_ctx &, const void *, uint32_t, void *, uint32_t,
                               uint32_t *, int *)
    {
        return false;
    }
};
template <class H, class... T> struct actor_list<H, T...> {
    __device__ static bool run(uint16_t type, const gpu_ctx &c, const void *in, uint32_t in_len,
                               void *out, uint32_t out_cap, uint32_t *out_len, int *status)
    {
        if (type == H::type) {
            *status = H::run(c, in, in_len, out, out_cap, out_len);
            return true;
        }
        return actor_list<T...>::run(type, c, in, in_len, out, out_cap, out_len, status);
    }
};

/* Runs one operation on the calling group. Returns the status (rank 0's
 * counts); *out_len the reply bytes. */
template <class... A>
__device__ int run_op(const rk_kargs &ka, uint16_t type, const gpu_ctx &c, const uint8_t *in,
                      uint32_t in_len, uint8_t *out, uint64_t out_cap, uint32_t *out_len)
{
    *out_len = 0;
    switch (type) {
    case RK_OP_NOP:
        return 0;
    case RK_OP_ECHO:
        if (in_len > out_cap)
            return -RK_EMSGSIZE;
        copy_bytes(c, out, in, in_len);
        *out_len = in_len;
        return 0;
    case RK_OP_VADD: {
        if (in_len == 0 || in_len % 8)
            return -RK_EINVAL;
        const uint64_t n = in_len / 8;
        if (out_cap < n * 4)
            return -RK_EMSGSIZE;
        const float *a = reinterpret_cast<const float *>(in);
        vadd_n(c, a, a + n, reinterpret_cast<float *>(out), n, ka.nan_bits);
        *out_len = (uint32_t)(n * 4);
        return 0;
    }
    case RK_OP_FAULT:
        if (!(ka.flags & RK_KF_TEST_FAULTS))
            return -RK_ENOTSUP;
        /* test only: an illegal address, as a buggy actor would make */
        if (c.rank == 0)
            *(volatile uint32_t *)(ka.arena + ka.arena_size + (1ull << 44)) = 1u;
        return 0;
    case RK_OP_HANG:
        if (!(ka.flags & RK_KF_TEST_FAULTS))
            return -RK_ENOTSUP;
        /* test only: an endless loop (the stop word is never this value) */
        while (*(volatile uint32_t *)&ka.region->stop != 0xdeadbeefu)
            __nanosleep(100000);
        return 0;
    default: {
        int st = -RK_ENOTSUP;
        uint32_t cap = out_cap > 0xffffffffull ? 0xffffffffu : (uint32_t)out_cap;
        if (type >= RK_OP_USER && actor_list<A...>::run(type, c, in, in_len, out, cap, out_len, &st))
            return st;
        return -RK_ENOTSUP;
    }
    }
}

/* ---- D2H production: the dispatcher warp is the ring's single producer ---- */
__device__ __forceinline__ void bar_named(uint32_t id, uint32_t n)
{
    asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
}

/* Waits until position dpos is free in D2H. The cached head is refreshed
 * (one PCIe read) only when it says "full". acquire: pairs with the host
 * consumer's store-release of cons_head, so its reads of the slot's old
 * lap are done before we overwrite it. */
__device__ __forceinline__ void d2h_wait(const ring_view &out, uint64_t dpos, uint64_t &dhead, shared0 &sh,
                                         uint32_t lane)
{
    if (dpos - dhead < out.slots)
        return;
    uint32_t ns = 0;
    for (;;) {
        uint64_t h = 0;
        if (lane == 0)
            h = rk__ld_acquire_sys(out.cons_head);
        dhead = __shfl_sync(FULL, h, 0);
        if (dpos - dhead < out.slots || flag_ld(&sh.stop) >= 2)
            return; /* (abort: the host no longer drains) */
        __nanosleep(ns);
        ns = ns < 8192 ? ns * 2 + 32 : ns;
    }
}

/* words[0] = reply length, words[1..] the reply */
__device__ __forceinline__ void d2h_post_words(const ring_view &out, uint64_t &dpos, uint64_t &dhead,
                                               shared0 &sh, const uint32_t *words, uint32_t lane)
{
    d2h_wait(out, dpos, dhead, sh, lane);
    ring_warp_store(out, dpos, words, lane);
    dpos++;
}

/* Posts the replies of the grid jobs that finished. */
__device__ __noinline__ void post_job_replies(const rk_kargs &ka, scratch *ds, shared0 &sh, const ring_view &out,
                                              uint64_t &dpos, uint64_t &dhead, uint32_t &replied, uint32_t lane)
{
    uint32_t completed = 0;
    if (lane == 0)
        completed = rk__ld_acquire_gpu(&ds->job_completed);
    completed = __shfl_sync(FULL, completed, 0);
    if (completed == replied)
        return;
    /* release: the workers' arena output (fenced at system scope by each
     * block before it counted itself done) before the replies' lines */
    rk__fence_release_sys();
    while (replied != completed) {
        const job *j = &ds->jobs[replied % NJ];
        uint32_t *r = sh.jreply;
        if (lane < 13)
            r[lane] = j->words[lane];
        __syncwarp();
        if (lane == 0) {
            r[0] = sizeof(rk_msg_hdr) + sizeof(rk_arena_ref);
            r[5] = (uint32_t)j->status;
            r[6] = j->status == 0 ? j->out_len : 0;
        }
        __syncwarp();
        d2h_post_words(out, dpos, dhead, sh, r, lane);
        if (lane == 0 && (j->words[RK__W_TYPE] & 0xffffu) > RK_OP_VADD) /* answered: no longer running */
            rk__st_relaxed_sys(&ka.region->running[1 + replied % NJ], 0ull);
        __syncwarp();
        replied++;
    }
}

/* Serves a staged request (sh.words) with the warp; posts its reply or a
 * grid job. Returns false when it could not be taken now (aborting): the
 * request then stays in the ring. */
template <class... A>
__device__ __noinline__ bool serve_slow(const rk_kargs &ka, shared0 &sh, scratch *ds, const ring_view &out,
                                        bool has_workers, uint32_t lane, uint64_t &dpos, uint64_t &dhead,
                                        uint32_t &posted, uint32_t &replied)
{
    uint32_t *w = sh.words;
    uint32_t *r = sh.reply;
    const uint32_t len = w[0];
    const uint16_t type = (uint16_t)(w[1] & 0xffffu);
    const uint16_t flags = (uint16_t)(w[1] >> 16);
    const uint32_t hlen = w[6];
    int status = 0;
    uint32_t out_len = 0;
    uint32_t rwords; /* reply message bytes */

    /* another generation's request: the host re-posts it if it still owes
     * it, so drop it (consumed, no reply) */
    if (len >= sizeof(rk_msg_hdr) && w[RK__W_STATUS] != ka.gen)
        return true;
    /* not a trusted built-in: say in host memory which request runs, so a
     * fault is blamed on it (rk_abi.h, running slots); the slot is 0 for
     * this warp, 1 + job index for a grid job */
    const bool mark = len >= sizeof(rk_msg_hdr) && type > RK_OP_VADD;
    const uint64_t run = RK__RUN_WORD(w[RK__W_ACTOR] & 0xffffu, w[RK__W_ACTOR] >> 16, w[RK__W_ID_LO]);

    if (len < sizeof(rk_msg_hdr)) {
        status = -RK_EPROTO;
        rwords = sizeof(rk_msg_hdr);
    } else if (flags & RK_MSG_ARENA) {
        rwords = sizeof(rk_msg_hdr) + sizeof(rk_arena_ref);
        if (len < rwords) {
            status = -RK_EPROTO;
            rwords = sizeof(rk_msg_hdr);
        } else {
            const uint64_t in_off = w[7] | ((uint64_t)w[8] << 32);
            const uint64_t out_off = w[9] | ((uint64_t)w[10] << 32);
            const uint64_t out_cap = w[11] | ((uint64_t)w[12] << 32);
            const uint64_t asz = ka.arena_size;
            if (in_off > asz || hlen > asz - in_off || out_off > asz || out_cap > asz - out_off) {
                status = -RK_EPROTO;
            } else if (has_workers && hlen > RK__WARP_ARENA_MAX) {
                /* the whole grid: post a job (its reply follows when the
                 * workers are done; see post_job_replies) */
                uint32_t ns = 0;
                for (;;) {
                    uint32_t c = 0;
                    if (lane == 0)
                        c = rk__ld_acquire_gpu(&ds->job_completed);
                    c = __shfl_sync(FULL, c, 0);
                    if (posted - c < NJ)
                        break;
                    if (flag_ld(&sh.stop) >= 2)
                        return false;
                    post_job_replies(ka, ds, sh, out, dpos, dhead, replied, lane);
                    __nanosleep(ns);
                    ns = ns < 4096 ? ns * 2 + 32 : ns;
                }
                job *j = &ds->jobs[posted % NJ];
                if (mark && lane == 0)
                    rk__st_relaxed_sys(&ka.region->running[1 + posted % NJ], run);
                if (lane < 13)
                    j->words[lane] = w[lane];
                if (lane == 0)
                    j->op = 0;
                __syncwarp();
                if (lane == 0) {
                    /* release (gpu): the job's words before the counter;
                     * pairs with the workers' acquire of job_posted */
                    rk__st_release_gpu(&ds->job_posted, posted + 1);
                    flag_st(&sh.jobs_posted, posted + 1);
                }
                posted++;
                __syncwarp();
                return true;
            } else {
                /* acquire: pairs with the producer's release fence before
                 * its lines, so the arena payload is visible */
                rk__fence_acquire_sys();
                if (mark && lane == 0)
                    rk__st_relaxed_sys(&ka.region->running[0], run);
                gpu_ctx c{lane, 32, false};
                status = run_op<A...>(ka, type, c, ka.arena + in_off, hlen, ka.arena + out_off, out_cap, &out_len);
                status = __shfl_sync(FULL, status, 0);
                out_len = __shfl_sync(FULL, out_len, 0);
                __syncwarp();
                /* release: the arena output before the reply's lines */
                rk__fence_release_sys();
            }
            if (lane >= 7 && lane < 13)
                r[lane] = w[lane];
        }
    } else if (hlen > len - sizeof(rk_msg_hdr)) {
        status = -RK_EPROTO;
        rwords = sizeof(rk_msg_hdr);
    } else {
        if (mark && lane == 0)
            rk__st_relaxed_sys(&ka.region->running[0], run);
        gpu_ctx c{lane, 32, false};
        status = run_op<A...>(ka, type, c, reinterpret_cast<const uint8_t *>(w + 7), hlen,
                              reinterpret_cast<uint8_t *>(r + 7), out.msg_max - sizeof(rk_msg_hdr), &out_len);
        status = __shfl_sync(FULL, status, 0);
        out_len = __shfl_sync(FULL, out_len, 0);
        rwords = sizeof(rk_msg_hdr) + (status == 0 ? out_len : 0);
    }
    __syncwarp();
    if (lane >= 1 && lane < 5)
        r[lane] = w[lane];
    if (lane == 0)
        r[0] = rwords;
    if (lane == 5)
        r[5] = (uint32_t)status;
    if (lane == 6)
        r[6] = status == 0 ? out_len : 0;
    __syncwarp();
    d2h_post_words(out, dpos, dhead, sh, r, lane);
    if (mark && lane == 0) /* answered: no longer running */
        rk__st_relaxed_sys(&ka.region->running[0], 0ull);
    __syncwarp();
    return true;
}

__device__ __forceinline__ void spin_cycles(uint32_t n)
{
    const long long t0 = clock64();
    while (clock64() - t0 < (long long)n)
        ;
}

/* ---- the dispatcher warp (block 0, warp 0) ----
 *
 * What the H200 measurements (rk-bench gpu --variants, device/README.md)
 * decided here:
 *  - slot reads are weak "fetch again" loads (ld.global.cv): strong
 *    ld.relaxed.sys reads of host memory are not kept in flight together,
 *    so 32 of them cost 32 round trips; LL flags make weak reads safe, and
 *    arena payloads are acquired with one ld.acquire.sys of line 0;
 *  - one read in flight when idle (staggered reads were slower), two slots
 *    per read so a burst is noticed at once, 32 slots per round trip
 *    (this warp and the loader warp, 16 each) while busy;
 *  - reply lines are weak stores, made visible by one fence.sc.sys per
 *    batch (cheaper than strong stores line by line). */
/* Writes the reply of the echo/NOP whose lines lane i holds (L) at D2H
 * position dpos: strong stores (measured faster than weak stores + a fence
 * per warp when many warps write at once); LL lines need no fence. */
template <bool Weak = false>
__device__ __forceinline__ void reply_fast(const ring_view &out, uint64_t dpos, uint64_t L, uint32_t lane,
                                           uint32_t kflags)
{
    const uint32_t w1 = __shfl_sync(FULL, (uint32_t)L, 1);
    const uint32_t w6 = __shfl_sync(FULL, (uint32_t)L, 6);
    const uint32_t plen = (w1 & 0xffffu) == RK_OP_ECHO ? w6 : 0u;
    uint32_t d = (uint32_t)L;
    if (lane == 0)
        d = (uint32_t)sizeof(rk_msg_hdr) + plen;
    if (lane == 5)
        d = 0;
    if (lane == 6)
        d = plen;
    const uint32_t rl = 1u + ((uint32_t)sizeof(rk_msg_hdr) + plen + 3u) / 4u;
    const uint32_t rf = ring_flag(out, dpos);
    uint64_t *s = ring_slot(out, dpos);
    if (Weak) {
        /* (the caller fences) */
        if (lane < rl)
            rk__st_weak(s + lane, ring_line(d, rf));
    } else if (kflags & RK_KF_WR_V2) {
        const uint32_t j0 = 2 * lane, j1 = 2 * lane + 1;
        const uint32_t d0 = __shfl_sync(FULL, d, j0 & 31), d1 = __shfl_sync(FULL, d, j1 & 31);
        if (lane < 16 && j0 < rl)
            rk__st_relaxed_sys_v2(s + j0, ring_line(d0, rf), j1 < rl ? ring_line(d1, rf) : 0ull);
    } else if (lane < rl) {
        rk__st_relaxed_sys(s + lane, ring_line(d, rf));
    }
}

/* Writes the replies of the batch's leading echo/NOP messages k = idx,
 * idx + n, ... < sh.wr_n at D2H positions wr_dpos + k. */
__device__ __forceinline__ void write_share(shared0 &sh, const ring_view &out, uint32_t idx, uint32_t n,
                                            uint32_t lane, uint32_t kflags)
{
    const uint64_t fm = vol_ld(&sh.fastmask);
    const uint32_t F = ~fm == 0 ? (uint32_t)K : (uint32_t)(__ffsll((long long)~fm) - 1);
    const uint64_t base = vol_ld(&sh.wr_dpos);
    for (uint32_t k = idx; k < F; k += n)
        reply_fast(out, base + k, sh.lines[k * LS + lane], lane, kflags);
}

__device__ __forceinline__ void crew_load(shared0 &sh, const ring_view &in, uint64_t pos, uint32_t idx, uint32_t n,
                                          uint32_t lane);
/* the dispatcher's share (serial path), out of line: its 16 registers of
 * reads in flight stay out of the dispatcher's register budget (spills
 * 340 -> 90 B at block 1024) */
__device__ __noinline__ void crew_load_d(shared0 &sh, const ring_view &in, uint64_t pos, uint32_t n, uint32_t lane)
{
    crew_load(sh, in, pos, 0, n, lane);
}
/* Loads this crew member's share of a busy poll: slots idx, idx + n, ...
 * of the K at pos, 16 reads in flight at a time. */
__device__ __forceinline__ void crew_load(shared0 &sh, const ring_view &in, uint64_t pos, uint32_t idx, uint32_t n,
                                          uint32_t lane)
{
    for (uint32_t base = idx; base < (uint32_t)K; base += 16 * n) {
        uint64_t v[16];
#pragma unroll
        for (int j = 0; j < 16; j++) {
            const uint32_t k = base + j * n;
            if (k < (uint32_t)K)
                v[j] = rk__ld_cv(ring_slot(in, pos + k) + lane);
        }
#pragma unroll
        for (int j = 0; j < 16; j++) {
            const uint32_t k = base + j * n;
            if (k < (uint32_t)K)
                sh.lines[k * LS + lane] = v[j];
        }
    }
}

/* Lane i holds line i of the slot at pos: is it a complete echo/NOP of
 * generation gen whose lines fit one warp? (Another generation's request
 * goes the slow way, which drops it: rk_abi.h, rk__region.gen.) */
__device__ __forceinline__ bool slot_fast(const ring_view &in, uint64_t L, uint64_t pos, uint32_t lane,
                                          uint32_t gen)
{
    const uint32_t flag = ring_flag(in, pos);
    const uint64_t l0 = __shfl_sync(FULL, L, 0);
    const uint32_t len = (uint32_t)l0 <= in.msg_max ? (uint32_t)l0 : in.msg_max;
    const uint32_t nl = 1u + (len + 3u) / 4u;
    /* lane 0 < nl: line 0's flag is part of the test */
    const bool ok = __all_sync(FULL, lane >= nl || (uint32_t)(L >> 32) == flag);
    const uint32_t w1 = __shfl_sync(FULL, (uint32_t)L, 1);
    const uint32_t hlen = __shfl_sync(FULL, (uint32_t)L, 6);
    const uint32_t w5 = __shfl_sync(FULL, (uint32_t)L, RK__W_STATUS);
    const uint32_t type = w1 & 0xffffu;
    return ok && w5 == gen && nl <= 32 && len >= sizeof(rk_msg_hdr) && !((w1 >> 16) & RK_MSG_ARENA) &&
           (type == RK_OP_ECHO || type == RK_OP_NOP) && hlen <= len - sizeof(rk_msg_hdr);
}

/* Checks this crew member's share of a busy batch (messages idx, idx + n,
 * ...; the warp reads each message's lines side by side) and marks the
 * complete echo/NOP ones in sh.fastmask. */
__device__ __forceinline__ void crew_check(shared0 &sh, const ring_view &in, uint64_t pos, uint32_t idx, uint32_t n,
                                           uint32_t lane, uint32_t gen)
{
    for (uint32_t k = idx; k < (uint32_t)K; k += n)
        if (slot_fast(in, sh.lines[k * LS + lane], pos + k, lane, gen) && lane == 0)
            atomicOr(&sh.fastmask, 1ull << k);
}

/* ---- crew warps (block 0, warps 2..): load and answer busy batches ---- */
__device__ void crew(const rk_kargs &ka, shared0 &sh)
{
    const uint32_t lane = threadIdx.x & 31;
    const ring_view in = ring_open(static_cast<rk_ring *>(ka.h2d));
    const ring_view out = ring_open(static_cast<rk_ring *>(ka.d2h));
    const uint32_t ncrew = blockDim.x / 32 - 1;
    const uint32_t idx = threadIdx.x / 32 - 1; /* 1.. (the dispatcher is 0) */
    for (;;) {
        bar_named(1, 32 * ncrew);
        if (vol_ld(&sh.loader_quit))
            return;
        const uint64_t pos = vol_ld(&sh.poll_pos);
        crew_load(sh, in, pos, idx, ncrew, lane);
        bar_named(2, 32 * ncrew);
        crew_check(sh, in, pos, idx, ncrew, lane, ka.gen);
        bar_named(3, 32 * ncrew);
        write_share(sh, out, idx, ncrew, lane, ka.flags);
        bar_named(4, 32 * ncrew);
    }
}

/* ---- pipelined busy polls (default; block >= 96) ----
 *
 * Measured on the serial path above (rk-bench gpu --variants, H200): per
 * 64-slot poll ~6 300 cycles waiting for the slots (one PCIe round trip of
 * 16 KiB) and ~6 000 checking and answering, one after the other. Here the
 * crew warps (warps 2..) keep the slots of a poll in registers (slot k of
 * the poll belongs to crew warp k % nc), and issue the reads of the NEXT
 * poll (positions pos + n.., speculatively: this poll answered in full)
 * before they check and answer this one: the round trip overlaps the
 * checking and the reply stores. A warp reuses its prefetched registers
 * only when the next poll starts where it guessed; otherwise it reads
 * again. Stale prefetched lines are harmless: LL flags are checked after
 * the reuse, and a slot whose lines carry the expected flag holds its final
 * data (the host rewrites it only after we consume it).
 *
 * Two named barriers per poll, no shared-memory atomics: each crew warp
 * publishes the first slot of its share that is not a complete echo/NOP,
 * the minimum over the warps is the answered prefix F. The dispatcher warp
 * reads no slots (it serves the slots from F on, staged in sh.lines). */


/* The answered prefix of a pipelined poll: the least first-bad slot over
 * the nc crew warps (after barrier 2). */
__device__ __forceinline__ uint32_t pipe_prefix(shared0 &sh, uint32_t nc, uint32_t n, uint32_t lane)
{
    uint32_t x = lane < nc ? vol_ld(&sh.firstbad[lane]) : n;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const uint32_t y = __shfl_xor_sync(FULL, x, o);
        x = y < x ? y : x;
    }
    return x;
}

/* Slots per pipelined poll for nc crew warps. */
__device__ __forceinline__ uint32_t pipe_slots(uint32_t nc, uint32_t kflags)
{
    const uint32_t kmax = (kflags & RK_KF_KP64) ? 64u : (uint32_t)KP_MAX;
    const uint32_t n = nc * (uint32_t)JMAX;
    return n < kmax ? n : kmax;
}

/* crew warp c of nc (block 0, warp c + 2) on the pipelined path */
__device__ void crew_pipe(const rk_kargs &ka, shared0 &sh, uint32_t c, uint32_t nc, uint32_t nthr)
{
    const uint32_t lane = threadIdx.x & 31;
    const ring_view in = ring_open(static_cast<rk_ring *>(ka.h2d));
    const ring_view out = ring_open(static_cast<rk_ring *>(ka.d2h));
    const bool lane_in = lane < in.slot_lines; /* slots of fewer than 32 lines */
    const bool prefetch = !(ka.flags & RK_KF_NOPF);
    const bool narrow = ka.flags & RK_KF_NARROW;
    const bool lane_rd = lane_in && (!narrow || lane < NARROW_LINES);
    const uint32_t kflags = ka.flags;
    uint64_t v[JMAX], nv[JMAX];
    uint64_t npos = ~0ull; /* the poll the nv registers were read for */
    uint32_t nn = 0;       /* ... and its slots */
#pragma unroll
    for (int j = 0; j < JMAX; j++)
        nv[j] = 0;
    for (;;) {
        bar_named(1, nthr);
        if (vol_ld(&sh.loader_quit))
            return;
        const uint64_t P = vol_ld(&sh.poll_pos);
        const uint64_t D = vol_ld(&sh.pp_dpos);
        const uint32_t n = vol_ld(&sh.pp_n);
        if (P == npos && n <= nn) {
#pragma unroll
            for (int j = 0; j < JMAX; j++)
                v[j] = nv[j];
        } else {
#pragma unroll
            for (int j = 0; j < JMAX; j++) {
                const uint32_t k = c + (uint32_t)j * nc;
                v[j] = k < n && lane_rd ? rk__ld_cv(ring_slot(in, P + k) + lane) : 0ull;
            }
        }
        if (prefetch) {
            /* the next poll, in flight while this one is checked and answered */
#pragma unroll
            for (int j = 0; j < JMAX; j++) {
                const uint32_t k = c + (uint32_t)j * nc;
                nv[j] = k < n && lane_rd ? rk__ld_cv(ring_slot(in, P + n + k) + lane) : 0ull;
            }
            npos = P + n;
            nn = n;
        }
        /* stage the lines for the dispatcher (it serves slots F..), find
         * this share's first slot that is not a complete echo/NOP */
        uint32_t bad = n;
#pragma unroll
        for (int j = 0; j < JMAX; j++) {
            const uint32_t k = c + (uint32_t)j * nc;
            if (k < n) {
                if (narrow) {
                    /* a complete line 0 of a message longer than the lines
                     * read: read the rest now (one more round trip) */
                    const uint64_t l0 = __shfl_sync(FULL, v[j], 0);
                    const uint32_t len = (uint32_t)l0 <= in.msg_max ? (uint32_t)l0 : in.msg_max;
                    if ((uint32_t)(l0 >> 32) == ring_flag(in, P + k) && 1u + (len + 3u) / 4u > NARROW_LINES &&
                        lane >= NARROW_LINES && lane_in)
                        v[j] = rk__ld_cv(ring_slot(in, P + k) + lane);
                }
                sh.lines[k * LS + lane] = v[j];
                if (!slot_fast(in, v[j], P + k, lane, ka.gen) && bad == n)
                    bad = k;
            }
        }
        if (lane == 0)
            sh.firstbad[c] = bad;
        bar_named(2, nthr);
        const uint32_t F = pipe_prefix(sh, nc, n, lane);
#pragma unroll
        for (int j = 0; j < JMAX; j++) {
            const uint32_t k = c + (uint32_t)j * nc;
            if (k < F)
                reply_fast(out, D + k, v[j], lane, kflags);
        }
    }
}

__device__ __forceinline__ void stat_add(shared0 &sh, int i, unsigned long long v, uint32_t lane)
{
    if (lane == 0)
        sh.st[i] += v;
}

template <class... A>
__device__ void dispatcher(const rk_kargs &ka, shared0 &sh, scratch *ds, bool has_workers, bool has_loader)
{
    const uint32_t ncrew = blockDim.x / 32 - 1; /* this warp, and warps 2.. */
    const uint32_t lane = threadIdx.x & 31;
    const ring_view in = ring_open(static_cast<rk_ring *>(ka.h2d));
    const ring_view out = ring_open(static_cast<rk_ring *>(ka.d2h));
    uint64_t hpos = flag_ld(&sh.h2d_done);
    uint64_t dpos = ka.d2h_start, dhead = vol_ld(&sh.d2h_head);
    uint32_t posted = 0, replied = 0, idle = 0, ns = 0;
    const uint32_t dk = (ka.flags >> 16) & 0xffu;
    const uint32_t idle_delay = dk == 0 ? RK_KERNEL_IDLE_DELAY : dk == 0xff ? 0u : dk * 100u;
    uint32_t idle_wait = 0;
    bool busy = false, stalled = false, fence_due = false, burst = false;
    /* pipelined busy polls: the crew is warps 2.. (nc of them) */
    const bool pipe = has_loader && !(ka.flags & RK_KF_SERIAL);
    const uint32_t pipe_n = pipe_slots(ncrew - 1, ka.flags);
    /* counters in shared memory (lane 0): registers are scarce at block 1024 */
    if (lane == 0)
        for (int i = 0; i < 8; i++)
            sh.st[i] = 0;

    for (;;) {
        if (flag_ld(&sh.stop))
            break;
        if (ka.flags & RK_KF_MUTE) { /* test only: never answer */
            __nanosleep(10000);
            continue;
        }
        if (posted != replied)
            post_job_replies(ka, ds, sh, out, dpos, dhead, replied, lane);
        uint32_t nload, pre = 0, quick = 0;
        stat_add(sh, 0, 1, lane);
        const long long c0 = clock64();
        if (!busy) {
            /* idle: poll the next slot, one strong read in flight (a
             * strong read notices a message ~0.2 us sooner than .cv; two
             * strong reads of one address in flight are served one after
             * the other, and two staggered .cv reads measured 1.5 us
             * slower: device/README.md) */
            const uint32_t flag = ring_flag(in, hpos);
            const uint64_t *slot = ring_slot(in, hpos) + lane;
            const uint64_t *next = ring_slot(in, hpos + 1);
            if (idle_wait) {
                /* just answered a message here: a read issued now reaches
                 * the host right behind the reply (PCIe reads do not pass
                 * writes), before a host waiting for that reply can send
                 * its next request, and the read after it comes a whole
                 * read time (~1 us) later. Issued ~0.25 us later, the
                 * first read finds that request nearly always (measured:
                 * round-trip p99 3.6 -> 3.0 us for +0.3 us at p50). */
                spin_cycles(idle_wait);
                idle_wait = 0;
            }
            uint64_t a = 0, b = 0;
            bool got = false;
            for (int it = 0; it < 64 && !got; it++) {
                a = rk__ld_relaxed_sys(slot);
                /* the next slot: its line 0 only (is a burst coming?) */
                b = lane == 0 ? rk__ld_cv(next) : 0ull;
                if (fence_due) {
                    /* the last batch's weak reply lines: fenced while this
                     * poll is in flight, not before it */
                    rk__fence_seq_cst_sys();
                    fence_due = false;
                }
                got = (uint32_t)(__shfl_sync(FULL, a, 0) >> 32) == flag;
                if (!got && idle > 300000) {
                    /* idle for a while (~20+ ms): back off */
                    __nanosleep(ns);
                    ns = ns < 32000 ? ns * 2 + 64 : ns;
                    break;
                }
            }
            if (!got) {
                idle += 64;
                stat_add(sh, 6, 1, lane);
                continue;
            }
            if (dpos - dhead < out.slots && slot_fast(in, a, hpos, lane, ka.gen)) {
                /* the round trip's common case, answered straight from the
                 * registers: an echo/NOP with room in D2H (no staging in
                 * shared memory, no batch bookkeeping before the reply) */
                if (!(ka.flags & RK_KF_IDLE_SC)) {
                    /* strong stores: they leave for host memory at once,
                     * no fence.sc.sys to wait on before the next poll (LL
                     * lines need no fence between them; measured 0.65 us
                     * quicker than weak stores + fence.sc.sys) */
                    reply_fast<false>(out, dpos, a, lane, 0u);
                } else {
                    reply_fast<true>(out, dpos, a, lane, 0u);
                    rk__fence_seq_cst_sys(); /* push the weak reply lines out */
                }
                dpos++;
                quick = 1;
                idle_wait = idle_delay;
                nload = 0;
            } else {
                /* counter 7: line 0 there but a later line not yet (the
                 * read overtook the producer's stores: one more poll) */
                const uint32_t l0 = (uint32_t)__shfl_sync(FULL, a, 0);
                const uint32_t nl = 1u + ((l0 <= in.msg_max ? l0 : in.msg_max) + 3u) / 4u;
                if (!__all_sync(FULL, lane >= nl || (uint32_t)(a >> 32) == flag))
                    stat_add(sh, 7, 1, lane);
                sh.lines[lane] = a;
                nload = 1;
            }
            /* a second message already there: read a busy batch next */
            burst = (uint32_t)(__shfl_sync(FULL, b, 0) >> 32) == ring_flag(in, hpos + 1);
        } else if (pipe) {
            idle_wait = 0; /* a burst came instead: no wait for the next idle poll */
            /* busy, pipelined: the crew reads pipe_n slots (while this
             * warp sets up the poll, they already have them in flight if
             * the last poll was answered in full), checks them and answers
             * the leading run of complete echo/NOP; this warp serves the
             * rest from sh.lines below. Room for all the replies first. */
            const uint32_t n = pipe_n < out.slots ? pipe_n : out.slots;
            d2h_wait(out, dpos + n - 1, dhead, sh, lane);
            if (lane == 0) {
                *(volatile unsigned long long *)&sh.poll_pos = hpos;
                *(volatile unsigned long long *)&sh.pp_dpos = dpos;
                *(volatile uint32_t *)&sh.pp_n = n;
            }
            __syncwarp();
            bar_named(1, 32 * ncrew);
            bar_named(2, 32 * ncrew);
            pre = pipe_prefix(sh, ncrew - 1, n, lane);
            nload = n;
            stat_add(sh, 1, 1, lane);
        } else {
            idle_wait = 0;
            /* busy: K slots in one round trip, spread over the crew
             * (every warp of block 0 but the housekeeper: a warp keeps
             * only so many reads of host memory in flight) */
            /* room for a whole batch of replies first (the crew writes
             * them at wr_dpos + k without asking) */
            d2h_wait(out, dpos + (K < out.slots ? K : out.slots) - 1, dhead, sh, lane);
            if (lane == 0) {
                *(volatile unsigned long long *)&sh.poll_pos = hpos;
                *(volatile unsigned long long *)&sh.wr_dpos = dpos;
                *(volatile unsigned long long *)&sh.fastmask = 0ull;
            }
            __syncwarp();
            bar_named(1, 32 * ncrew);
            crew_load_d(sh, in, hpos, ncrew, lane);
            bar_named(2, 32 * ncrew);
            nload = K;
            stat_add(sh, 1, 1, lane);
        }
        __syncwarp();
        const long long c1 = clock64();
        uint32_t done = quick, nfast = 0;
        if (pre) {
            /* the crew answered the first pre slots */
            dpos += pre;
            done = pre;
        } else if (nload == K && !pipe) {
            /* a busy batch: the crew (this warp too) checks its share and
             * marks the complete echo/NOP messages; the leading run of them
             * is answered by the whole crew at once (one warp's stores to
             * host memory are slow to issue) */
            crew_check(sh, in, hpos, 0, ncrew, lane, ka.gen);
            const long long cw0 = clock64();
            bar_named(3, 32 * ncrew);
            write_share(sh, out, 0, ncrew, lane, ka.flags);
            bar_named(4, 32 * ncrew);
            stat_add(sh, 3, (unsigned long long)(clock64() - cw0), lane);
            const uint64_t fm = vol_ld(&sh.fastmask);
            const uint32_t F = ~fm == 0 ? (uint32_t)K : (uint32_t)(__ffsll((long long)~fm) - 1);
            dpos += F;
            done = F;
        }
        for (uint32_t k = done; k < nload; k++) {
            const uint64_t pos = hpos + k;
            const uint32_t flag = ring_flag(in, pos);
            const uint64_t L = sh.lines[k * LS + lane];
            const uint64_t l0 = __shfl_sync(FULL, L, 0);
            if ((uint32_t)(l0 >> 32) != flag)
                break;
            const uint32_t len = (uint32_t)l0 <= in.msg_max ? (uint32_t)l0 : in.msg_max;
            const uint32_t nl = 1u + (len + 3u) / 4u;
            if (!__all_sync(FULL, lane >= nl || (uint32_t)(L >> 32) == flag))
                break; /* the producer is still writing lines */
            const uint32_t w1 = __shfl_sync(FULL, (uint32_t)L, 1);
            if (slot_fast(in, L, pos, lane, ka.gen)) {
                /* echo / NOP straight from the staged line: lane i writes
                 * reply line i, weak (one fence.sc.sys after the batch) */
                d2h_wait(out, dpos, dhead, sh, lane);
                reply_fast<true>(out, dpos, L, lane, 0u);
                dpos++;
                nfast++;
            } else {
                if (nfast || fence_due) {
                    rk__fence_seq_cst_sys(); /* the weak reply lines so far */
                    nfast = 0;
                    fence_due = false;
                }
                /* stage the message's words in shared memory */
                if (lane < nl)
                    sh.words[lane] = (uint32_t)L;
                for (uint32_t i = 32 + lane; i < nl; i += 32) {
                    uint64_t x;
                    do {
                        x = rk__ld_relaxed_sys(ring_slot(in, pos) + i);
                    } while ((uint32_t)(x >> 32) != flag && flag_ld(&sh.stop) < 2);
                    sh.words[i] = (uint32_t)x;
                }
                __syncwarp();
                if (lane == 0)
                    sh.words[0] = len;
                if ((w1 >> 16) & RK_MSG_ARENA) {
                    /* acquire (one strong read of line 0): pairs with the
                     * producer's release fence before its lines, so the
                     * arena payload is visible to this warp and, through
                     * job_posted, to the workers */
                    uint64_t x = 0;
                    if (lane == 0)
                        x = rk__ld_acquire_sys(ring_slot(in, pos));
                    __shfl_sync(FULL, x, 0);
                }
                __syncwarp();
                if (flag_ld(&sh.stop) >= 2 ||
                    !serve_slow<A...>(ka, sh, ds, out, has_workers, lane, dpos, dhead, posted, replied)) {
                    stalled = true;
                    break;
                }
            }
            done++;
        }
        if (nfast)
            rk__fence_seq_cst_sys(); /* push the weak reply lines out (measured: deferring it
                                      * into the next poll made round trips 0.4 us slower) */
        __syncwarp();
        const long long c2 = clock64();
        if (lane == 0) { /* counters: after the replies, off the round trip */
            sh.st[2] += done;
            sh.st[4] += (unsigned long long)(c1 - c0);
            sh.st[5] += (unsigned long long)(c2 - c1);
        }
        if (done) {
            hpos += done;
            /* consumed: the housekeeper publishes cons_head (release) */
            if (lane == 0)
                flag_st(&sh.h2d_done, (unsigned long long)hpos);
            idle = 0;
            ns = 0;
        }
        busy = done >= 2 || (done == 1 && burst);
        burst = false;
        if (stalled)
            break;
    }
    if (fence_due)
        rk__fence_seq_cst_sys();
    /* stopping: finish the grid jobs already posted, then hand over */
    while (posted != replied && flag_ld(&sh.stop) < 2) {
        post_job_replies(ka, ds, sh, out, dpos, dhead, replied, lane);
        __nanosleep(1000);
    }
    __syncwarp();
    if (lane == 0)
        sh.loader_quit = 1;
    __syncwarp();
    /* release the crew; past this barrier its last replies (pipelined
     * path: stored after barrier 2) are issued, before the housekeeper
     * hands prod_tail back */
    bar_named(1, 32 * ncrew);
    if (lane == 0) {
        for (int i = 0; i < 8; i++)
            ds->stats[i] = sh.st[i];
        flag_st(&sh.d2h_tail, (unsigned long long)dpos);
        flag_st(&sh.h2d_done, (unsigned long long)hpos);
        flag_st(&sh.dispatcher_done, 1u);
    }
    __syncwarp();
}

/* ---- the housekeeper warp (block 0, warp 1) ---- */
template <class... A>
__device__ void housekeeper_lane0(const rk_kargs &ka, shared0 &sh, scratch *ds, bool has_workers);

/* the whole warp stays until the end (lane 0 works) so that no warp of
 * block 0 is partly exited while the others use named barriers */
template <class... A>
__device__ void housekeeper(const rk_kargs &ka, shared0 &sh, scratch *ds, bool has_workers)
{
    if ((threadIdx.x & 31) == 0)
        housekeeper_lane0<A...>(ka, sh, ds, has_workers);
    __syncwarp();
}

template <class... A>
__device__ void housekeeper_lane0(const rk_kargs &ka, shared0 &sh, scratch *ds, bool has_workers)
{
    const ring_view in = ring_open(static_cast<rk_ring *>(ka.h2d));
    const ring_view out = ring_open(static_cast<rk_ring *>(ka.d2h));
    uint64_t published = flag_ld(&sh.h2d_done), last_seen = published, t_change = 0;
    uint64_t last_hb = 0;
    uint32_t ns = 0;

    rk__st_release_sys(&ka.region->state, (int32_t)RK__STATE_RUNNING);
    for (;;) {
        const uint64_t now = rk__globaltimer();
        if (now - last_hb > 200000ull) { /* 0.2 ms */
            rk__st_relaxed_sys(&ka.region->heartbeat, now);
            last_hb = now;
        }
        /* acquire: pairs with the host's store-release of stop */
        const uint32_t s = rk__ld_acquire_sys(&ka.region->stop);
        if (s > flag_ld(&sh.stop))
            flag_st(&sh.stop, s);
        /* publish consumption. release: orders the dispatcher's reads of
         * the slots (before its cta-release of h2d_done, acquired here)
         * before the host may overwrite them */
        const uint64_t done = flag_ld(&sh.h2d_done);
        bool busy = false;
        /* lazily: producers need cons_head only when the ring looks full,
         * and each release store here is a system fence on the dispatcher's
         * SM; publish after slots/8 positions, or once the dispatcher has
         * stopped moving */
        if (done != last_seen) {
            last_seen = done;
            t_change = now;
            busy = true;
        }
        if (done != published && (done - published >= (in.slots + 7) / 8 || now - t_change > 20000ull)) {
            rk__st_release_sys(in.cons_head, done);
            published = done;
        }
        if (flag_ld(&sh.dispatcher_done))
            break;
        /* nothing here is urgent (publication is lazy, stop and the
         * heartbeat are millisecond matters): never spin, so this warp's
         * system-scope reads stay out of the dispatcher's way */
        if (busy)
            ns = 2000;
        else
            ns = ns < 20000 ? ns * 2 + 256 : ns;
        __nanosleep(ns);
    }
    /* clean stop: workers quit, indices go back to the host */
    if (has_workers) {
        const uint32_t p = flag_ld(&sh.jobs_posted);
        uint32_t spins = 0;
        while (p - rk__ld_acquire_gpu(&ds->job_completed) >= NJ && spins++ < 100000)
            __nanosleep(1000);
        ds->jobs[p % NJ].op = 1;
        rk__st_release_gpu(&ds->job_posted, p + 1);
    }
    rk__st_release_sys(in.cons_head, (uint64_t)flag_ld(&sh.h2d_done));
    rk__st_release_sys(out.prod_tail, (uint64_t)flag_ld(&sh.d2h_tail));
    rk__st_relaxed_sys(&ka.region->heartbeat, rk__globaltimer());
    rk__st_release_sys(&ka.region->state, (int32_t)RK__STATE_STOPPED);
}

/* ---- worker blocks ---- */
template <class... A>
__device__ void worker(const rk_kargs &ka, scratch *ds)
{
    __shared__ uint32_t s_op;
    const uint32_t nworkers = gridDim.x - 1;
    const gpu_ctx c{(blockIdx.x - 1) * blockDim.x + threadIdx.x, nworkers * blockDim.x, true};
    uint32_t next = 0;
    for (;;) {
        if (threadIdx.x == 0) {
            uint32_t ns = 0, spins = 0;
            /* acquire: pairs with the dispatcher's release of job_posted */
            while (rk__ld_acquire_gpu(&ds->job_posted) <= next) {
                if (++spins > 64) {
                    __nanosleep(ns);
                    ns = ns < 20000 ? ns * 2 + 128 : ns;
                }
            }
            s_op = ds->jobs[next % NJ].op;
        }
        __syncthreads();
        job *j = &ds->jobs[next % NJ];
        if (s_op == 1)
            return;
        const uint32_t *w = j->words;
        const uint16_t type = (uint16_t)(w[1] & 0xffffu);
        const uint32_t hlen = w[6];
        const uint64_t in_off = w[7] | ((uint64_t)w[8] << 32);
        const uint64_t out_off = w[9] | ((uint64_t)w[10] << 32);
        const uint64_t out_cap = w[11] | ((uint64_t)w[12] << 32);
        /* acquire: the arena payload (the host's release fence before the
         * request's lines; the dispatcher validated them) */
        rk__fence_acquire_sys();
        uint32_t out_len = 0;
        int st = run_op<A...>(ka, type, c, ka.arena + in_off, hlen, ka.arena + out_off, out_cap, &out_len);
        if (c.rank == 0) {
            j->status = st;
            j->out_len = out_len;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            /* release at system scope: this block's arena output (cumulative
             * over the block through the barrier) before the completion */
            __threadfence_system();
            const uint32_t prev = atomicAdd(&ds->job_done[next % NJ], 1u);
            if (prev == nworkers - 1) {
                ds->job_done[next % NJ] = 0;
                __threadfence_system();
                rk__st_release_gpu(&ds->job_completed, next + 1);
            }
        }
        next++;
    }
}

template <unsigned MaxThreads, class... A>
__global__ void __launch_bounds__(MaxThreads) ring_kernel(rk_kargs ka)
{
    scratch *ds = static_cast<scratch *>(ka.scratch);
    const bool has_workers = gridDim.x > 1;
    if (blockIdx.x != 0) {
        worker<A...>(ka, ds);
        return;
    }
    __shared__ shared0 sh;
    if (threadIdx.x == 0) {
        sh.d2h_tail = ka.d2h_start;
        sh.d2h_head = rk__ld_acquire_sys(&static_cast<rk_ring *>(ka.d2h)->cons_head);
        sh.h2d_done = rk__ld_acquire_sys(&static_cast<rk_ring *>(ka.h2d)->cons_head);
        sh.stop = 0;
        sh.jobs_posted = 0;
        sh.dispatcher_done = 0;
        sh.loader_quit = 0;
        sh.poll_pos = 0;
    }
    __syncthreads();
    const uint32_t warp = threadIdx.x / 32;
    const bool has_loader = blockDim.x >= 96;
    if (warp == 0)
        dispatcher<A...>(ka, sh, ds, has_workers, has_loader);
    else if (warp == 1)
        housekeeper<A...>(ka, sh, ds, has_workers);
    else if (ka.flags & RK_KF_SERIAL)
        crew(ka, sh);
    else
        crew_pipe(ka, sh, warp - 2, blockDim.x / 32 - 2, blockDim.x - 32);
}

/* ---- host-side entry points, compiled in the kernel's translation unit ---- */
template <unsigned MaxThreads, class... A> struct kernel_host {
    static int launch(const rk_kargs *args, unsigned grid, unsigned block, unsigned smem, void *stream)
    {
        rk_kargs copy = *args;
        void *params[] = {&copy};
        return (int)cudaLaunchCooperativeKernel((const void *)ring_kernel<MaxThreads, A...>, dim3(grid), dim3(block),
                                                params, smem, (cudaStream_t)stream);
    }
    static int attrs(int *max_threads, size_t *static_smem, int *num_regs)
    {
        cudaFuncAttributes fa;
        cudaError_t e = cudaFuncGetAttributes(&fa, (const void *)ring_kernel<MaxThreads, A...>);
        if (e == cudaSuccess) {
            *max_threads = fa.maxThreadsPerBlock;
            *static_smem = fa.sharedSizeBytes;
            *num_regs = fa.numRegs;
        }
        return (int)e;
    }
    static int occupancy(int *blocks_per_sm, int block, size_t dyn_smem)
    {
        return (int)cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, ring_kernel<MaxThreads, A...>, block,
                                                                  dyn_smem);
    }
    static int set_max_dyn_smem(int bytes)
    {
        return (int)cudaFuncSetAttribute((const void *)ring_kernel<MaxThreads, A...>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    }
};

template <unsigned MaxThreads, class... A> rk_kernel_desc make_desc(const char *name)
{
    rk_kernel_desc d = {};
    d.magic = RK_KDESC_MAGIC;
    d.version = RK_KDESC_VERSION;
    d.name = name;
    const uint16_t types[] = {A::type..., 0};
    static_assert(sizeof...(A) <= RK_KDESC_MAX_TYPES, "too many GPU actors in one kernel");
    d.n_types = sizeof...(A);
    for (uint32_t i = 0; i < d.n_types; i++)
        d.types[i] = types[i];
    d.launch = kernel_host<MaxThreads, A...>::launch;
    d.attrs = kernel_host<MaxThreads, A...>::attrs;
    d.occupancy = kernel_host<MaxThreads, A...>::occupancy;
    d.set_max_dyn_smem = kernel_host<MaxThreads, A...>::set_max_dyn_smem;
    return d;
}

} // namespace dev
} // namespace rk

#endif
