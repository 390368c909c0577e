/* device/dispatch.cuh - the dispatcher warp's state (dispatch, its
 * local-memory half dispatch_ref), how it starts, and the helpers its idle
 * and busy paths share (run marks, the actor fence, counters, waiting). */
#ifndef RK_DEVICE_DISPATCH_CUH
#define RK_DEVICE_DISPATCH_CUH

#include <stdint.h>

#include "block0.cuh"
#include "crew.cuh" /* pipe_slots */
#include "experiments.cuh"
#include "kernel_desc.h"
#include "reply.cuh"
#include "ring.cuh"
#include "rk/error.h"
#include "rk/msg.h"

namespace rk {
namespace dev {

#ifndef RK_KERNEL_IDLE_DELAY
#define RK_KERNEL_IDLE_DELAY 400u /* cycles (~0.2 us): the idle wait's start (it adapts: idle_adapt) */
#endif
/* The idle wait's bounds and steps (idle.cuh, idle_adapt), in fixed
 * point (1 / 2^IDLE_FX_SHIFT cycle): +3.2 cycles after a request found by
 * the poll's second read, -3.2 / 205 after one found by its first, so it
 * settles where ~0.5 % of requests miss the first read (at ~0.3 % the
 * platform's own late replies held it high: +0.1-0.35 us of p50 on an
 * H100 host). The steps are small because a host's slow moments come in
 * runs: each miss of a run raised the wait by a step, and the step took
 * 205 first-read finds to come back down, so with steps of 16 cycles
 * (before 2026-11-28) runs of misses left every round trip +0.2-0.6 us
 * late for a while; steps of 3.2 halved that (device/NOTES.md, "Smaller
 * steps"). At most 2 400 cycles, about a read's time: waiting longer than
 * that costs more than the miss it avoids. */
#ifndef RK_KERNEL_IDLE_FX_SHIFT /* compile-time defines for A/B builds (-Dcuda_args=...) */
#define RK_KERNEL_IDLE_FX_SHIFT 6u
#endif
#ifndef RK_KERNEL_IDLE_WAIT_UP
#define RK_KERNEL_IDLE_WAIT_UP 205u
#endif
#ifndef RK_KERNEL_IDLE_WAIT_DOWN
#define RK_KERNEL_IDLE_WAIT_DOWN 1u
#endif
constexpr uint32_t IDLE_FX_SHIFT = RK_KERNEL_IDLE_FX_SHIFT;
constexpr uint32_t IDLE_WAIT_UP = RK_KERNEL_IDLE_WAIT_UP, IDLE_WAIT_DOWN = RK_KERNEL_IDLE_WAIT_DOWN;
/* cycles -> the wait's fixed point, and back */
__host__ __device__ constexpr uint32_t idle_fx_of(uint32_t cycles) { return cycles << IDLE_FX_SHIFT; }
__host__ __device__ constexpr uint32_t idle_cycles_of(uint32_t fx) { return fx >> IDLE_FX_SHIFT; }
constexpr uint32_t IDLE_WAIT_MIN = 0u, IDLE_WAIT_MAX = idle_fx_of(2400u);
constexpr uint32_t IDLE_WAIT_MIN_OLD = idle_fx_of(150u); /* the least before 2026-11-27 (RK_KF_WAIT_MIN150) */

/* The idle wait fx (cycles x 64) after the first poll that followed an
 * idle-path reply took `reads` reads (idle.cuh, idle_adapt; a host test
 * checks where it settles: tests/gpu/test_idle_wait.cu). lo: its least
 * (IDLE_WAIT_MIN, 0: on H100 hosts the read after a reply goes out after
 * the host's next request nearly always even with no wait; the
 * comparison RK_KF_WAIT_MIN150 keeps the old 150). */
__host__ __device__ constexpr uint32_t idle_wait_step(uint32_t fx, uint32_t reads, uint32_t lo = IDLE_WAIT_MIN)
{
    return reads == 1   ? (fx > lo + IDLE_WAIT_DOWN ? fx - IDLE_WAIT_DOWN : lo)
           : reads == 2 ? (fx + IDLE_WAIT_UP < IDLE_WAIT_MAX ? fx + IDLE_WAIT_UP : IDLE_WAIT_MAX)
                        : fx;
}

/* The windowed law (RK_KERNEL_IDLE_WIN polls a window, the default): the
 * wait moves once a window, by IDLE_STEP cycles, up when more than
 * IDLE_WIN_HI of its polls were misses (second-read finds), down when
 * fewer than IDLE_WIN_LO were, so it still settles where ~0.5 % miss
 * (1024, 8 and 3: ~5.4 misses a window); up by a step per HI + 1 misses
 * (at most IDLE_UP_MAX), so that it climbs from its start to a slow
 * host's turn within a few windows. Why not a step a poll
 * (idle_wait_step, RK_KERNEL_IDLE_WIN=0): in a few milliseconds in which
 * the platform delays every reply a little, every request is a miss, each
 * raised the wait, and the quantile's slow way down (205 finds a step)
 * then left every round trip up to ~1 us late for ~0.15 s (test
 * idle_wait's host model); the stretches of 12-100 % late round trips
 * that 8 of 18 actor-API rows had on two H100 machines, round by round,
 * the floor's none, look like that (device/NOTES.md, "Stretches, and a
 * wait that moves once a window"). A window moves it at most IDLE_UP_MAX
 * steps however many of its polls missed, and the quiet windows after
 * take them back. The state
 * (win): polls counted in the window (low 16 bits) and misses (high);
 * finds after more reads count as neither. */
#ifndef RK_KERNEL_IDLE_WIN
#define RK_KERNEL_IDLE_WIN 1024u
#endif
#ifndef RK_KERNEL_IDLE_WIN_HI
#define RK_KERNEL_IDLE_WIN_HI 8u
#endif
#ifndef RK_KERNEL_IDLE_WIN_LO
#define RK_KERNEL_IDLE_WIN_LO 3u
#endif
#ifndef RK_KERNEL_IDLE_STEP
#define RK_KERNEL_IDLE_STEP 32u
#endif
constexpr uint32_t IDLE_UP_MAX = 8u; /* steps up a window: a host that got slower is followed
                                      * in a few windows, a burst moves it at most this */
constexpr uint32_t IDLE_WIN = RK_KERNEL_IDLE_WIN, IDLE_WIN_HI = RK_KERNEL_IDLE_WIN_HI,
                   IDLE_WIN_LO = RK_KERNEL_IDLE_WIN_LO, IDLE_STEP = idle_fx_of(RK_KERNEL_IDLE_STEP);
static_assert(IDLE_WIN < 0x10000u, "a window's polls fit 16 bits");

/* One idle-path poll that took `reads` (as idle_reads_seen counts them)
 * into the window win and the wait fx; lo: the wait's least. */
__host__ __device__ inline void idle_wait_next(uint32_t &fx, uint32_t &win, uint32_t reads,
                                               uint32_t lo = IDLE_WAIT_MIN)
{
    if (IDLE_WIN == 0u) { /* the step-a-poll law */
        fx = idle_wait_step(fx, reads, lo);
        return;
    }
    if (reads != 1u && reads != 2u)
        return;
    win += 1u + (reads == 2u ? 0x10000u : 0u);
    if ((win & 0xffffu) < IDLE_WIN)
        return;
    const uint32_t misses = win >> 16;
    if (misses > IDLE_WIN_HI) { /* a step per HI + 1 misses, at most IDLE_UP_MAX */
        const uint32_t k = misses / (IDLE_WIN_HI + 1u), up = (k < IDLE_UP_MAX ? k : IDLE_UP_MAX) * IDLE_STEP;
        fx = fx + up < IDLE_WAIT_MAX ? fx + up : IDLE_WAIT_MAX;
    }
    else if (misses < IDLE_WIN_LO)
        fx = fx > lo + IDLE_STEP ? fx - IDLE_STEP : lo;
    win = 0u;
}

/* A second-read find whose first read came back more than IDLE_READ_SLOW
 * cycles (~0.3 us) over the usual: the read queued behind a reply late on
 * its way out (PCIe reads do not pass writes; the platform's delays are
 * 0.5-5.6 us: device/NOTES.md, "Where the late round trips come from"),
 * so the request missed it because the reply reached the host late, not
 * because the host's turn was longer than the wait. Such a find moves
 * nothing, as a later one does: replies the platform delays should not
 * push every round trip's wait toward the cap (in two noisy H100 minutes
 * the wait sat near it and p50 rose 0.1-0.3 us; how many of those misses
 * were of this kind was not measured). */
constexpr uint32_t IDLE_READ_SLOW = 600u;

/* The reads the wait's step counts the first poll after a reply as
 * (idle_wait_step): `reads`, except a second-read find whose first read
 * took lat1 cycles, over base + IDLE_READ_SLOW (base: the usual first
 * read; 0 not known yet), counts as a later one. */
__host__ __device__ constexpr uint32_t idle_reads_seen(uint32_t reads, uint32_t lat1, uint32_t base)
{
    return reads == 2 && base != 0u && lat1 > base + IDLE_READ_SLOW ? 3u : reads;
}

/* The usual first read, cycles: a moving average (1/16) of the first
 * reads that found the request (reads == 1), the first of them as it is. */
__host__ __device__ constexpr uint32_t idle_read_base(uint32_t base, uint32_t reads, uint32_t lat1)
{
    return reads != 1u   ? base
           : base == 0u  ? lat1
           : lat1 >= base ? base + (lat1 - base) / 16u
                          : base - (base - lat1) / 16u;
}

/* Not a trusted built-in: the word that says in host memory which request
 * runs, so that a fault is blamed on it (rk_abi.h, running slots: 0 for
 * the dispatcher warp, 1 + the job index for a grid job); 0 for a
 * built-in. From the request's words len, type, RK__W_ACTOR, RK__W_ID_LO. */
__device__ __forceinline__ uint64_t run_word(uint32_t len, uint16_t type, uint32_t actor_tag, uint32_t id_lo)
{
#ifndef RK_KERNEL_NO_RUN_MARK /* experiment only (device/NOTES.md): what the marks cost */
    if (len >= sizeof(rk_msg_hdr) && type > RK_OP_VADD)
        return RK__RUN_WORD(actor_tag & 0xffffu, actor_tag >> 16, id_lo);
#endif
    return 0ull;
}

/* Between a user actor's handler and its reply: a store of the handler's
 * that faults must kill the context before an RK_OK leaves (without a
 * fence it did: the crash sample's reply got out first, H100). A
 * faulting store is never performed, so a gpu-scope fence, which waits
 * for the warp's stores to be performed in the GPU, never passes it; the
 * fence at system scope that it replaces waited for host memory as well
 * (0.7-1.2 us, against 0.35 for this one: device/NOTES.md, "User actors
 * on the GPU"). The handler's own output is in shared memory (inline
 * requests) or fenced at system scope apart (arena requests). */
__device__ __forceinline__ void actor_fence()
{
#if defined(RK_KERNEL_NO_ACTOR_FENCE) /* experiment only (device/NOTES.md) */
#elif defined(RK_KERNEL_ACTOR_FENCE_SYS)
    rk__fence_release_sys();
#else
    rk__fence_acq_rel_gpu();
#endif
}

__device__ __forceinline__ void spin_cycles(uint32_t n)
{
    const long long t0 = clock64();
    while (clock64() - t0 < (long long)n)
        ;
}

/* ---- the dispatcher warp (block 0, warp 0) ----
 *
 * What the H200 measurements (rk-bench gpu --variants / --idle-variants,
 * device/README.md and device/NOTES.md) decided here:
 *  - idle, one strong read of the next slot in flight (plus line 0 of the
 *    one after, to notice a burst); an echo/NOP found so is answered from
 *    the registers with strong reply lines and no fence, and the next read
 *    waits after such a reply, a wait that adapts to the host's turn
 *    (idle_adapt, from RK_KERNEL_IDLE_DELAY cycles);
 *  - busy, the crew reads up to 128 slots per poll with weak "fetch again"
 *    loads (ld.global.cv: strong reads of host memory are not kept in
 *    flight together; LL flags make weak reads safe) and answers their
 *    leading run of echo/NOP (crew.cuh); this warp serves the rest from
 *    shared memory: echo/NOP with weak reply lines and one fence.sc.sys
 *    per batch, anything else through serve_slow;
 *  - arena payloads are acquired with one ld.acquire.sys of line 0. */

__device__ __forceinline__ void stat_add(shared0 &sh, int i, unsigned long long v, uint32_t lane)
{
    if (lane == 0)
        sh.st[i] += v;
}

/* The dispatcher warp's registers between polls (every lane holds the same
 * values). */
struct dispatch {
    uint32_t ncrew; /* this warp, and warps 2.. */
    uint32_t lane;
    uint64_t hpos;   /* next H2D position to consume */
    bool busy;       /* the last poll took two messages or more (or one, and saw a burst) */
    bool burst;      /* the idle poll saw the next slot filled too */
    uint32_t idle;   /* empty idle polls (back off after ~20 ms of them) */
    uint32_t ns;     /* ... the back-off */
    uint32_t idle_wait; /* cycles still to wait before the next idle poll read (sh.idle_fx) */
    bool after;      /* the last poll answered one message: the next idle poll's reads step the wait */
    bool pipe;       /* pipelined busy polls: the crew is warps 2.. */
    uint32_t pipe_n; /* slots per pipelined poll */
    uint32_t pp_par; /* the pp_rmask set of the next pipelined poll */
    uint32_t gen;    /* the request generation served (rk_kargs.gen) */
    uint32_t nrings; /* reply rings (rk_kargs.d2h_rings) */
    bool defer;      /* after an idle answer: h2d_done's publish and the stop check still to do
                      * (after_read, once the next poll read is out) */
    bool stop_seen;  /* ... and the stop check, done there, saw a stop */
    uint32_t pend;   /* ... answers idle_poll made without returning, not yet counted */
    uint32_t ad_reads, ad_lat1; /* ... the wait's step still to take (idle_adapt; 0: none) */
#ifdef RK_KERNEL_EXPERIMENTS
    long long t_ans; /* RK_KF_GAP: the clock after the last echo_fast answer (0: none) */
#endif
};

/* The dispatcher's locals that its out-of-line helpers (serve_slow,
 * post_job_replies, crew_load_d) take by reference, so they live in local
 * memory. They stay separate locals of dispatcher(), reached through this:
 * one struct of them changed their local-memory layout (measured: more
 * spills at block 1024). */
struct dispatch_ref {
    ring_view &in, &out;      /* out: reply ring 0 (ring_at: the others) */
    uint64_t &dpos, &dhead;   /* lane r: reply ring r's next position and cached cons_head */
    uint32_t &posted, &replied; /* grid jobs */
};

__device__ __forceinline__ void dispatch_open(dispatch &d, const dispatch_ref &p, const rk_kargs &ka, shared0 &sh,
                                              bool has_loader)
{
    d.ncrew = blockDim.x / 32 - 1;
    d.lane = threadIdx.x & 31;
    p.in = ring_open(static_cast<rk_ring *>(ka.h2d));
    p.out = ring_open(static_cast<rk_ring *>(ka.d2h));
    d.hpos = flag_ld(&sh.h2d_done);
    /* lane r: reply ring r from where the host left it (prod_tail: 0, a
     * rings reset's position, or the last kernel's hand-over). acquire:
     * pairs with the host's store-release of those words (ring.c, the
     * rings reset), as d2h_wait's refresh does */
    p.dpos = 0;
    p.dhead = 0;
    if (d.lane < ka.d2h_rings) {
        const ring_view o = ring_at(p.out, ka.d2h_stride, d.lane);
        p.dpos = rk__ld_acquire_sys(o.prod_tail);
        p.dhead = rk__ld_acquire_sys(o.cons_head);
    }
    p.posted = 0;
    p.replied = 0;
    d.idle = 0;
    d.ns = 0;
    d.idle_wait = 0;
    d.after = false;
    d.defer = false;
    d.stop_seen = false;
    d.pend = 0;
    d.ad_reads = 0;
    d.ad_lat1 = 0;
    d.busy = false;
    d.burst = false;
    d.gen = ka.gen;
    d.nrings = ka.d2h_rings;
    d.pp_par = 0;
#ifdef RK_KERNEL_EXPERIMENTS
    d.t_ans = 0;
    const uint32_t idle_fx = idle_fx_of(idle_delay_of(ka.flags, RK_KERNEL_IDLE_DELAY));
    d.pipe = has_loader && !(ka.flags & RK_KF_SERIAL);
    d.pipe_n = pipe_slots(d.ncrew - 1, (ka.flags & RK_KF_KP64) ? 64u : (uint32_t)KP_MAX);
#else
    const uint32_t idle_fx = idle_fx_of(RK_KERNEL_IDLE_DELAY);
    d.pipe = has_loader;
    d.pipe_n = pipe_slots(d.ncrew - 1);
#endif
    /* counters and the idle wait in shared memory (lane 0 writes): registers
     * are scarce at block 1024 (ptxas, sm_90: the adaptive wait costs +8 B
     * of spill stores, +44 B of loads there; in a register, +12 B / +44 B) */
    if (d.lane == 0) {
        for (int i = 0; i < 8; i++)
            sh.st[i] = 0;
        sh.idle_fx = idle_fx;
        sh.idle_win = 0;
        sh.read1 = 0;
        sh.idle_rr = 0;
    }
    __syncwarp();
}

} // namespace dev
} // namespace rk

#endif
