/* device/block0.cuh - block 0's shared state and the hand-over between its
 * warps (dispatcher, housekeeper, crew): the busy-poll geometry, shared0,
 * flag words and named barriers. */
#ifndef RK_DEVICE_BLOCK0_CUH
#define RK_DEVICE_BLOCK0_CUH

#include <stdint.h>

#include "ring.cuh"
#include "rk_abi.h"

namespace rk {
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
constexpr int KROWS = KP_MAX > K ? KP_MAX : K; /* staged rows */
/* pipe_ring_clear: a warp clears a pp_rmask set, a word a lane; the crew
 * packs its slots' rings 3 bits each in one word (crew_pipe_t) */
static_assert(RK__D2H_RINGS_MAX * (KP_MAX / 32) == 32, "one pp_rmask word a lane");
static_assert(RK__D2H_RINGS_MAX <= 8 && JMAX * 3 <= 32, "a crew warp's rings in one word");
constexpr uint32_t MAX_WORDS = RK_RING_SLOT_MAX / 8; /* lines of the largest slot */

/* block 0's shared state */
struct shared0 {
    /* dispatcher -> housekeeper at stop: each reply ring's next position */
    unsigned long long d2h_tail[RK__D2H_RINGS_MAX];
    unsigned long long h2d_done; /* positions the dispatcher consumed */
    unsigned long long poll_pos; /* dispatcher -> crew: the busy poll's first position */
    uint32_t stop;               /* housekeeper -> dispatcher: 1 stop, 2 abort */
    uint32_t jobs_posted;        /* dispatcher -> housekeeper */
    uint32_t dispatcher_done;
    uint32_t loader_quit;        /* dispatcher -> crew at stop */
    unsigned long long fastmask;  /* busy batch: complete echo/NOP messages (crew_check) */
    unsigned long long wr_dpos;   /* their first D2H position (one reply ring only) */
    /* pipelined poll: each reply ring's first position (poll_pos: first H2D;
     * the crew reads them between barriers 1 and 2) */
    unsigned long long pp_dpos[RK__D2H_RINGS_MAX];
    uint32_t pp_n;                /* pipelined poll: slots */
    uint32_t pp_par;              /* pipelined poll: its pp_rmask set */
    /* pipelined poll, several reply rings: bit k % 32 of pp_rmask[par][r][k / 32]
     * says slot k answers on ring r. The crew sets the bits before barrier
     * 2 and reads them after it; two sets, so that the dispatcher clears
     * the next poll's while a crew warp still reads this one's */
    uint32_t pp_rmask[2][RK__D2H_RINGS_MAX][KP_MAX / 32];
    uint32_t firstbad[32];        /* pipelined poll: per crew warp, its first slot that is not
                                   * a complete echo/NOP (pp_n if none) */
    unsigned long long st[8];     /* dispatcher counters (lane 0), copied to scratch.stats at stop */
    uint32_t idle_fx;             /* dispatcher: the wait after an idle-path reply, cycles x 2^IDLE_FX_SHIFT
                                   * (lane 0 writes: idle_adapt) */
    uint32_t idle_win;            /* dispatcher: the wait's window, polls | misses << 16
                                   * (lane 0 writes: idle_adapt) */
    uint32_t read1;               /* dispatcher: the usual first poll read after a reply,
                                   * cycles (lane 0 writes: idle_adapt) */
    uint32_t idle_rr;             /* dispatcher: the reply ring of the last idle answer, the
                                   * next one's guess (lane 0 writes: idle_poll) */
    uint32_t words[MAX_WORDS];   /* staged request (slow path) */
    uint32_t reply[MAX_WORDS];   /* staged reply (slow path) */
    uint32_t jreply[16];         /* a grid job's reply (post_job_replies) */
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
/* Whether sh.stop is at least `at_least`, one answer for the whole warp:
 * each lane's own atomic read may land on either side of the
 * housekeeper's store, and every caller branches into warp-collective
 * code on it (a shuffle or vote with FULL that only part of the warp
 * reaches hangs). Call with the warp converged. */
__device__ __forceinline__ bool warp_stop(shared0 &sh, uint32_t at_least)
{
    return __any_sync(FULL, flag_ld(&sh.stop) >= at_least);
}
/* The stop's last resort (sh.stop 2, set by the host RK__STOP_WAIT_NS
 * into a stop: device/engine.c): a wait on the host that has gone on that
 * long (reply-ring room nobody makes, a request's lines never finished)
 * ends the kernel with an error instead of writing past it. The host
 * then sees a failed kernel, not a clean stop: its rings are reset and
 * what it still owes is re-posted (runtime/src/supervisor.c), as after
 * a fault. (Until 2026-11-27 the waits returned and the replies were
 * written over unread ones; grid jobs' replies were dropped.) Call where
 * the caller would otherwise wait again. */
__device__ __forceinline__ void stop_abort_check(shared0 &sh)
{
    if (flag_ld(&sh.stop) >= 2)
        __trap();
}
__device__ __forceinline__ uint32_t vol_ld(const uint32_t *p) { return *(const volatile uint32_t *)p; }
__device__ __forceinline__ unsigned long long vol_ld(const unsigned long long *p)
{
    return *(const volatile unsigned long long *)p;
}

/* Named barrier id over n threads of block 0 (the non-.aligned form:
 * compute-sanitizer synccheck rejected bar.sync id, n here). */
__device__ __forceinline__ void bar_named(uint32_t id, uint32_t n)
{
    asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
}

} // namespace dev
} // namespace rk

#endif
