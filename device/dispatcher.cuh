/* device/dispatcher.cuh - the dispatcher warp (block 0, warp 0): polls the
 * H2D ring, answers echo/NOP from registers, orchestrates the crew on
 * bursts, serves the rest itself or posts it as a grid job, and hands its
 * positions over at stop. */
#ifndef RK_DEVICE_DISPATCHER_CUH
#define RK_DEVICE_DISPATCHER_CUH

#include <stdint.h>

#include "block0.cuh"
#include "crew.cuh"
#include "experiments.cuh"
#include "jobs.cuh"
#include "kernel_desc.h"
#include "ops.cuh"
#include "reply.cuh"
#include "ring.cuh"
#include "rk/error.h"
#include "rk/msg.h"

namespace rk {
namespace dev {

#ifndef RK_KERNEL_IDLE_DELAY
#define RK_KERNEL_IDLE_DELAY 400u /* cycles (~0.2 us): see the idle poll */
#endif

/* Not a trusted built-in: the word that says in host memory which request
 * runs, so that a fault is blamed on it (rk_abi.h, running slots: 0 for
 * the dispatcher warp, 1 + the job index for a grid job); 0 for a
 * built-in. From the request's words len, type, RK__W_ACTOR, RK__W_ID_LO. */
__device__ __forceinline__ uint64_t run_word(uint32_t len, uint16_t type, uint32_t actor_tag, uint32_t id_lo)
{
#ifndef RK_KERNEL_NO_RUN_MARK /* experiment only (device/README.md): what the marks cost */
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
 * (0.7-1.2 us, against 0.35 for this one: device/README.md, "User actors
 * on the GPU"). The handler's own output is in shared memory (inline
 * requests) or fenced at system scope apart (arena requests). */
__device__ __forceinline__ void actor_fence()
{
#if defined(RK_KERNEL_NO_ACTOR_FENCE) /* experiment only (device/README.md) */
#elif defined(RK_KERNEL_ACTOR_FENCE_SYS)
    rk__fence_release_sys();
#else
    rk__fence_acq_rel_gpu();
#endif
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
    const uint64_t run = run_word(len, type, w[RK__W_ACTOR], w[RK__W_ID_LO]);

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
                return post_job(ka, ds, sh, out, w, dpos, dhead, posted, replied, lane, run);
            } else {
                /* acquire: pairs with the producer's release fence before
                 * its lines, so the arena payload is visible */
                rk__fence_acquire_sys();
                if (run && lane == 0)
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
        if (run && lane == 0)
            rk__st_relaxed_sys(&ka.region->running[0], run);
        gpu_ctx c{lane, 32, false};
        const uint32_t cap = out.msg_max - (uint32_t)sizeof(rk_msg_hdr);
        status = run_op<A...>(ka, type, c, reinterpret_cast<const uint8_t *>(w + 7), hlen,
                              reinterpret_cast<uint8_t *>(r + 7), cap, &out_len);
        status = __shfl_sync(FULL, status, 0);
        out_len = __shfl_sync(FULL, out_len, 0);
        reply_room_check(cap, status, out_len);
        /* an actor's faulting store faults after it returned: the fence
         * waits for it, so no RK_OK reply leaves first (H100, d660e6f) */
        if (run)
            actor_fence();
        rwords = sizeof(rk_msg_hdr) + (reply_has_data(status) ? out_len : 0);
    }
    __syncwarp();
    if (lane >= 1 && lane < 5)
        r[lane] = w[lane];
    if (lane == 0)
        r[0] = rwords;
    if (lane == 5)
        r[5] = (uint32_t)status;
    if (lane == 6)
        r[6] = reply_has_data(status) ? out_len : 0;
    __syncwarp();
    d2h_post_words(ka, out, dpos, dhead, sh, r, lane);
    if (run && lane == 0) /* answered: no longer running */
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
 * What the H200 measurements (rk-bench gpu --variants / --idle-variants,
 * device/README.md) decided here:
 *  - idle, one strong read of the next slot in flight (plus line 0 of the
 *    one after, to notice a burst); an echo/NOP found so is answered from
 *    the registers with strong reply lines and no fence, and the next read
 *    waits RK_KERNEL_IDLE_DELAY cycles after such a reply;
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
    bool stalled;    /* a request could not be taken now (aborting): stop polling */
    bool burst;      /* the idle poll saw the next slot filled too */
    uint32_t idle;   /* empty idle polls (back off after ~20 ms of them) */
    uint32_t ns;     /* ... the back-off */
    uint32_t idle_delay; /* cycles from an idle-path reply to the next poll read */
    uint32_t idle_wait;  /* ... still to wait before the next idle poll read */
    bool pipe;       /* pipelined busy polls: the crew is warps 2.. */
    uint32_t pipe_n; /* slots per pipelined poll */
    uint32_t pp_par; /* the pp_rmask set of the next pipelined poll */
    uint32_t gen;    /* the request generation served (rk_kargs.gen) */
    uint32_t nrings; /* reply rings (rk_kargs.d2h_rings) */
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
    d.busy = false;
    d.stalled = false;
    d.burst = false;
    d.gen = ka.gen;
    d.nrings = ka.d2h_rings;
    d.pp_par = 0;
#ifdef RK_KERNEL_EXPERIMENTS
    d.idle_delay = idle_delay_of(ka.flags, RK_KERNEL_IDLE_DELAY);
    d.pipe = has_loader && !(ka.flags & RK_KF_SERIAL);
    d.pipe_n = pipe_slots(d.ncrew - 1, (ka.flags & RK_KF_KP64) ? 64u : (uint32_t)KP_MAX);
#else
    d.idle_delay = RK_KERNEL_IDLE_DELAY;
    d.pipe = has_loader;
    d.pipe_n = pipe_slots(d.ncrew - 1);
#endif
    /* counters in shared memory (lane 0): registers are scarce at block 1024 */
    if (d.lane == 0)
        for (int i = 0; i < 8; i++)
            sh.st[i] = 0;
}

/* A user actor's request that the idle poll found complete in its
 * registers (lane i line i, L; one warp's lines, inline, this
 * generation), served as echo is: no staging into a batch, no out-of-line
 * calls, the handler inlined, the reply stored from the registers. The
 * staged path (serve_staged, serve_slow) cost a lone warp ~2 600 cycles
 * for a 64-B request (H100: device/README.md, "User actors on the GPU"). */
template <class... A>
__device__ __forceinline__ void serve_user(dispatch &d, const dispatch_ref &p, const rk_kargs &ka, shared0 &sh,
                                           uint64_t L, uint32_t rr, const ring_view &out)
{
    const uint32_t lane = d.lane;
    const uint16_t type = (uint16_t)(__shfl_sync(FULL, (uint32_t)L, 1) & 0xffffu);
    const uint32_t hlen = __shfl_sync(FULL, (uint32_t)L, 6);
    /* from the registers: run_word of the words in shared memory made
     * the round trip 2.99-3.00 us, against 2.91-2.93 (H100) */
    const uint64_t run = run_word(__shfl_sync(FULL, (uint32_t)L, 0), type, __shfl_sync(FULL, (uint32_t)L, RK__W_ACTOR),
                                  __shfl_sync(FULL, (uint32_t)L, RK__W_ID_LO));
    sh.words[lane] = (uint32_t)L; /* the request's words: the handler's input at word 7 */
    __syncwarp();
    if (run && lane == 0)
        rk__st_relaxed_sys(&ka.region->running[0], run);
    uint32_t *r = sh.reply;
    const uint32_t cap = p.out.msg_max - (uint32_t)sizeof(rk_msg_hdr);
    int status = -RK_ENOTSUP;
    uint32_t out_len = 0;
    gpu_ctx c{lane, 32, false};
    actor_list<A...>::run(type, c, sh.words + 7, hlen, r + 7, cap, &out_len, &status);
    status = __shfl_sync(FULL, status, 0);
    out_len = __shfl_sync(FULL, out_len, 0);
    reply_room_check(cap, status, out_len);
    actor_fence();
    const uint32_t olen = reply_has_data(status) ? out_len : 0u;
    const uint32_t rl = 1u + ((uint32_t)sizeof(rk_msg_hdr) + olen + 3u) / 4u;
    __syncwarp(); /* the handler's reply words (shared memory) before we read them */
    /* lane i's reply word: the request's header words, or the handler's */
    uint32_t wd = lane < 7 ? (uint32_t)L : r[lane];
    if (lane == 0)
        wd = (uint32_t)sizeof(rk_msg_hdr) + olen;
    if (lane == 5)
        wd = (uint32_t)status;
    if (lane == 6)
        wd = olen;
    /* room on its reply ring rr: the idle poll checked it; strong lines,
     * no fence, as echo's */
    const uint64_t dpos = d2h_take(out, rr, p.dpos, p.dhead, sh, lane);
    if (rl <= 32) {
        if (lane < rl)
            rk__st_relaxed_sys(ring_slot(out, dpos) + lane, ring_line(wd, ring_flag(out, dpos)));
    } else { /* a reply longer than a warp's lines (slots over 256 B) */
        if (lane < 7)
            r[lane] = wd;
        __syncwarp();
        ring_warp_store(out, dpos, r, lane);
    }
    if (run && lane == 0) /* answered: no longer running */
        rk__st_relaxed_sys(&ka.region->running[0], 0ull);
    __syncwarp();
}

/* The idle echo/NOP answer's reply side, worked out before the poll's
 * read while nothing waits on it: lane r holds reply ring r's next slot,
 * its flag and whether it has room (lanes >= nrings: ring 0's, unused).
 * Worked out after the read returned, behind local-memory loads of the
 * ring views, this cost the round trip ~0.1 us (H200: 548 against 332
 * cycles from the find to the reply's stores; device/README.md, "The idle
 * answer"). */
struct echo_ready {
    unsigned long long slot;
    uint32_t flag, room, msg_max, gen;
};

__device__ __forceinline__ echo_ready echo_prepare(const dispatch &d, const dispatch_ref &p, const rk_kargs &ka)
{
    const ring_view o = ring_at(p.out, ka.d2h_stride, d.lane < d.nrings ? d.lane : 0u);
    echo_ready e;
    e.slot = (unsigned long long)ring_slot(o, p.dpos);
    e.flag = ring_flag(o, p.dpos);
    e.room = p.dpos - p.dhead < o.slots;
    e.msg_max = p.in.msg_max;
    e.gen = d.gen;
    /* in registers from here: the compiler would otherwise work them out
     * again where they are used, after the read */
    asm volatile("" : "+l"(e.slot), "+r"(e.flag), "+r"(e.room), "+r"(e.msg_max), "+r"(e.gen));
    return e;
}

/* Answers the request the idle poll found (lane i line i: L, its lines'
 * flag: flag) if it is a complete inline echo/NOP of this generation and
 * its reply ring (rr) has room: strong reply lines, no fence (LL lines
 * need none between them; measured 0.65 us quicker than weak stores +
 * fence.sc.sys). Returns whether it did. Every shuffle but the reply
 * ring's three is independent of the others. */
__device__ __forceinline__ bool echo_answer(const echo_ready &e, const rk_kargs &ka, uint64_t L, uint32_t flag,
                                            uint32_t lane, uint32_t &rr)
{
    rr = reply_ring_of(ka, __shfl_sync(FULL, (uint32_t)L, RK__W_ACTOR));
    uint64_t *s = (uint64_t *)__shfl_sync(FULL, e.slot, rr);
    const uint32_t rf = __shfl_sync(FULL, e.flag, rr);
    const uint32_t room = __shfl_sync(FULL, e.room, rr);
    uint32_t type, plen;
    const bool inl = slot_inline_at(L, flag, e.msg_max, lane, e.gen, &type, &plen);
    if (!room || !inl || (type != RK_OP_ECHO && type != RK_OP_NOP))
        return false;
#ifdef RK_KERNEL_EXPERIMENTS
    if (ka.flags & RK_KF_IDLE_SC) {
        /* comparison: weak reply lines + fence.sc.sys (before 2026-11) */
        reply_fast_of<true>(s, rf, L, type, plen, lane);
        rk__fence_seq_cst_sys();
        return true;
    }
#endif
    reply_fast_of<false>(s, rf, L, type, plen, lane);
    return true;
}

/* The idle poll found a request that is not an echo/NOP it could answer
 * at once: a small user actor's is answered from the registers (quick =
 * 1), anything else staged (nload = 1). */
template <class... A>
__device__ __forceinline__ void idle_other(dispatch &d, const dispatch_ref &p, const rk_kargs &ka, shared0 &sh,
                                           uint64_t a, uint32_t flag, uint32_t &nload, uint32_t &quick)
{
    const uint32_t lane = d.lane;
    uint32_t type = 0;
    /* its reply ring (lane r holds ring r's positions) */
    const uint32_t rr = reply_ring_of(ka, __shfl_sync(FULL, (uint32_t)a, RK__W_ACTOR));
    const ring_view out = ring_at(p.out, ka.d2h_stride, rr);
    const bool room = __shfl_sync(FULL, p.dpos, rr) - __shfl_sync(FULL, p.dhead, rr) < out.slots;
    const bool inl = room && slot_inline(p.in, a, d.hpos, lane, d.gen, &type);
    if (sizeof...(A) > 0 && inl && type >= RK_OP_USER) {
        serve_user<A...>(d, p, ka, sh, a, rr, out);
        quick = 1;
        d.idle_wait = d.idle_delay;
        nload = 0;
    } else {
        /* counter 7: line 0 there but a later line not yet (the
         * read overtook the producer's stores: one more poll) */
        const uint32_t l0 = (uint32_t)__shfl_sync(FULL, a, 0);
        const uint32_t nl = 1u + ((l0 <= p.in.msg_max ? l0 : p.in.msg_max) + 3u) / 4u;
        if (!__all_sync(FULL, lane >= nl || (uint32_t)(a >> 32) == flag))
            stat_add(sh, 7, 1, lane);
        sh.lines[lane] = a;
        nload = 1;
    }
}

/* Idle: polls the next slot, one strong read in flight (a strong read
 * notices a message ~0.2 us sooner than .cv; two strong reads of one
 * address in flight are served one after the other, and two staggered .cv
 * reads measured 1.5 us slower: device/README.md). Answers an echo/NOP
 * or a small user actor's request found so from the registers (quick =
 * 1), or stages it (nload = 1).
 * Returns false when no message came. */
template <class... A>
__device__ __forceinline__ bool idle_poll(dispatch &d, const dispatch_ref &p, const rk_kargs &ka, shared0 &sh,
                                          uint32_t &nload, uint32_t &quick)
{
    const uint32_t lane = d.lane;
    const uint32_t flag = ring_flag(p.in, d.hpos);
    const uint64_t *slot = ring_slot(p.in, d.hpos) + lane;
    const uint64_t *next = ring_slot(p.in, d.hpos + 1);
    const echo_ready e = echo_prepare(d, p, ka);
    if (d.idle_wait) {
        /* just answered a message here: a read issued now reaches
         * the host right behind the reply (PCIe reads do not pass
         * writes), before a host waiting for that reply can send
         * its next request, and the read after it comes a whole
         * read time (~1 us) later. Issued later, the first read
         * finds that request nearly always (measured: round-trip p99
         * 3.6 -> 3.0 us for +0.3 us at p50), if the host's turn is
         * short (device/README.md, "The host's turn"). The loop's
         * bookkeeping since the reply took ~1 440 cycles before this
         * wait starts (H200: "Where the late round trips come from") */
        spin_cycles(d.idle_wait);
        d.idle_wait = 0;
    }
    uint64_t a = 0, b = 0;
    bool got = false;
    for (int it = 0; it < 64 && !got; it++) {
        a = rk__ld_relaxed_sys(slot);
        /* the next slot: its line 0 only (is a burst coming?) */
        b = lane == 0 ? rk__ld_cv(next) : 0ull;
        got = (uint32_t)(__shfl_sync(FULL, a, 0) >> 32) == flag;
        if (!got && d.idle > 300000) {
            /* idle for a while (~20+ ms): back off */
            __nanosleep(d.ns);
            d.ns = d.ns < 32000 ? d.ns * 2 + 64 : d.ns;
            break;
        }
    }
    if (!got) {
        d.idle += 64;
        stat_add(sh, 6, 1, lane);
        return false;
    }
#ifdef RK_KERNEL_EXPERIMENTS
    const long long t_found = clock64();
#endif
    uint32_t rr;
    if (echo_answer(e, ka, a, flag, lane, rr)) {
#ifdef RK_KERNEL_EXPERIMENTS
        if (ka.flags & RK_KF_STAMP)
            stat_add(sh, 3, (unsigned long long)(clock64() - t_found), lane);
#endif
        if (lane == rr)
            p.dpos++;
        quick = 1;
        d.idle_wait = d.idle_delay;
        nload = 0;
    } else {
        idle_other<A...>(d, p, ka, sh, a, flag, nload, quick);
    }
    /* a second message already there: read a busy batch next */
    d.burst = (uint32_t)(__shfl_sync(FULL, b, 0) >> 32) == ring_flag(p.in, d.hpos + 1);
    return true;
}

/* Busy, pipelined: the crew reads pipe_n slots (while this warp sets up
 * the poll, they already have them in flight if the last poll was answered
 * in full), checks them and answers the leading run of complete echo/NOP
 * (pre of them); this warp serves the rest from sh.lines. nload: the
 * poll's slots. */
__device__ __forceinline__ void pipe_poll(dispatch &d, const dispatch_ref &p, const rk_kargs &ka, shared0 &sh,
                                          uint32_t &nload, uint32_t &pre)
{
    const uint32_t lane = d.lane;
    d.idle_wait = 0; /* a burst came instead: no wait for the next idle poll */
    /* room for all the replies first, on every reply ring (they might
     * all be for one; lane r checks ring r) */
    const uint32_t n = d.pipe_n < p.out.slots ? d.pipe_n : p.out.slots;
    d2h_wait_all(ka, p.out, p.dpos, p.dhead, n, sh, lane);
    if (lane < ka.d2h_rings)
        *(volatile unsigned long long *)&sh.pp_dpos[lane] = p.dpos;
    const uint32_t par = d.pp_par;
    d.pp_par ^= 1u;
    if (ka.d2h_rings > 1)
        pipe_ring_clear(sh, par, lane);
    if (lane == 0) {
        *(volatile unsigned long long *)&sh.poll_pos = d.hpos;
        *(volatile uint32_t *)&sh.pp_n = n;
        *(volatile uint32_t *)&sh.pp_par = par;
    }
    __syncwarp();
    bar_named(1, 32 * d.ncrew);
    bar_named(2, 32 * d.ncrew);
    pre = pipe_prefix(sh, d.ncrew - 1, n, lane);
    /* the crew answered the first pre slots: each ring moves past its share */
    p.dpos += pipe_ring_count(sh, par, ka.d2h_rings, pre, lane);
    nload = n;
    stat_add(sh, 1, 1, lane);
}

/* Busy, serial: K slots in one round trip, spread over the crew (every
 * warp of block 0 but the housekeeper: a warp keeps only so many reads of
 * host memory in flight). nload: the poll's slots (K). */
__device__ __forceinline__ void serial_poll(dispatch &d, const dispatch_ref &p, const rk_kargs &ka, shared0 &sh,
                                            uint32_t &nload)
{
    const uint32_t lane = d.lane;
    d.idle_wait = 0;
    /* room for a whole batch of replies first (the crew writes them at
     * wr_dpos + k without asking; one reply ring only: with several, the
     * crew answers nothing and serve_staged every slot, crew_check) */
    if (ka.d2h_rings == 1)
        d2h_wait(p.out, p.dpos + (K < p.out.slots ? K : p.out.slots) - 1, p.dhead, sh, lane);
    const uint64_t dpos0 = __shfl_sync(FULL, p.dpos, 0);
    if (lane == 0) {
        *(volatile unsigned long long *)&sh.poll_pos = d.hpos;
        *(volatile unsigned long long *)&sh.wr_dpos = dpos0;
        *(volatile unsigned long long *)&sh.fastmask = 0ull;
    }
    __syncwarp();
    bar_named(1, 32 * d.ncrew);
    crew_load_d(sh, p.in, d.hpos, d.ncrew, lane);
    bar_named(2, 32 * d.ncrew);
    nload = K;
    stat_add(sh, 1, 1, lane);
}

/* A serial busy batch: the crew (this warp too) checks its share and marks
 * the complete echo/NOP messages; the leading run of them is answered by
 * the whole crew at once (one warp's stores to host memory are slow to
 * issue). Returns how many were answered. */
__device__ __forceinline__ uint32_t serial_answer(dispatch &d, const dispatch_ref &p, shared0 &sh)
{
    const uint32_t lane = d.lane;
    crew_check(sh, p.in, d.hpos, 0, d.ncrew, lane, d.gen, d.nrings);
    const long long cw0 = clock64();
    bar_named(3, 32 * d.ncrew);
    write_share(sh, p.out, 0, d.ncrew, lane);
    bar_named(4, 32 * d.ncrew);
    stat_add(sh, 3, (unsigned long long)(clock64() - cw0), lane);
    const uint64_t fm = vol_ld(&sh.fastmask);
    const uint32_t F = ~fm == 0 ? (uint32_t)K : (uint32_t)(__ffsll((long long)~fm) - 1);
    if (lane == 0) /* (one reply ring: several leave F at 0) */
        p.dpos += F;
    return F;
}

/* Stages the words of the message at pos, whose first 32 lines lane i
 * holds (L; nl lines, len bytes), in sh.words; reads lines 32.. again
 * from the ring. */
__device__ __forceinline__ void stage_words(const ring_view &in, shared0 &sh, uint64_t L, uint64_t pos,
                                            uint32_t flag, uint32_t nl, uint32_t len, uint32_t w1, uint32_t lane)
{
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
}

/* Serves the staged slots done..nload-1 of this poll in order (sh.lines):
 * echo/NOP from the staged lines, the rest by serve_slow; stops at a slot
 * that is not complete yet. done: the poll's slots consumed so far. */
template <class... A>
__device__ __forceinline__ void serve_staged(dispatch &d, const dispatch_ref &p, const rk_kargs &ka, shared0 &sh,
                                             scratch *ds, bool has_workers, uint32_t &done, uint32_t nload)
{
    const uint32_t lane = d.lane;
    uint32_t nfast = 0;
    for (uint32_t k = done; k < nload; k++) {
        const uint64_t pos = d.hpos + k;
        const uint32_t flag = ring_flag(p.in, pos);
        const uint64_t L = sh.lines[k * LS + lane];
        const uint64_t l0 = __shfl_sync(FULL, L, 0);
        if ((uint32_t)(l0 >> 32) != flag)
            break;
        const uint32_t len = (uint32_t)l0 <= p.in.msg_max ? (uint32_t)l0 : p.in.msg_max;
        const uint32_t nl = 1u + (len + 3u) / 4u;
        if (!__all_sync(FULL, lane >= nl || (uint32_t)(L >> 32) == flag))
            break; /* the producer is still writing lines */
        const uint32_t w1 = __shfl_sync(FULL, (uint32_t)L, 1);
        if (slot_fast(p.in, L, pos, lane, d.gen)) {
            /* echo / NOP straight from the staged line, on its reply
             * ring: lane i writes reply line i, weak (one fence.sc.sys
             * after the batch) */
            const uint32_t rr = reply_ring_of(ka, __shfl_sync(FULL, (uint32_t)L, RK__W_ACTOR));
            const ring_view out = ring_at(p.out, ka.d2h_stride, rr);
            reply_fast<true>(out, d2h_take(out, rr, p.dpos, p.dhead, sh, lane), L, lane);
            nfast++;
        } else {
            if (nfast) {
                rk__fence_seq_cst_sys(); /* the weak reply lines so far */
                nfast = 0;
            }
            stage_words(p.in, sh, L, pos, flag, nl, len, w1, lane);
            if (flag_ld(&sh.stop) >= 2 ||
                !serve_slow<A...>(ka, sh, ds, p.out, has_workers, lane, p.dpos, p.dhead, p.posted, p.replied)) {
                d.stalled = true;
                break;
            }
        }
        done++;
    }
    if (nfast)
        rk__fence_seq_cst_sys(); /* push the weak reply lines out (measured: deferring it
                                  * into the next poll made round trips 0.4 us slower) */
}

/* Stopping: finishes the grid jobs already posted, then hands over. */
__device__ __forceinline__ void dispatcher_stop(dispatch &d, const dispatch_ref &p, const rk_kargs &ka, shared0 &sh,
                                                scratch *ds)
{
    const uint32_t lane = d.lane;
    while (p.posted != p.replied && flag_ld(&sh.stop) < 2) {
        post_job_replies(ka, ds, sh, p.out, p.dpos, p.dhead, p.replied, lane);
        __nanosleep(1000);
    }
    __syncwarp();
    if (lane == 0)
        sh.loader_quit = 1;
    __syncwarp();
    /* release the crew; past this barrier its last replies (pipelined
     * path: stored after barrier 2) are issued, before the housekeeper
     * hands prod_tail back */
    bar_named(1, 32 * d.ncrew);
    for (uint32_t r = 0; r < ka.d2h_rings; r++) {
        const uint64_t t = __shfl_sync(FULL, p.dpos, r);
        if (lane == 0)
            flag_st(&sh.d2h_tail[r], (unsigned long long)t);
    }
    if (lane == 0) {
        for (int i = 0; i < 8; i++)
            ds->stats[i] = sh.st[i];
        flag_st(&sh.h2d_done, (unsigned long long)d.hpos);
        flag_st(&sh.dispatcher_done, 1u);
    }
    __syncwarp();
}

template <class... A>
__device__ void dispatcher(const rk_kargs &ka, shared0 &sh, scratch *ds, bool has_workers, bool has_loader)
{
    ring_view in, out;
    uint64_t dpos, dhead;
    uint32_t posted, replied;
    dispatch d;
    const dispatch_ref p{in, out, dpos, dhead, posted, replied};
    dispatch_open(d, p, ka, sh, has_loader);
    const uint32_t lane = d.lane;
    for (;;) {
        if (flag_ld(&sh.stop))
            break;
        if (ka.flags & RK_KF_MUTE) { /* test only: never answer */
            __nanosleep(10000);
            continue;
        }
        if (p.posted != p.replied)
            post_job_replies(ka, ds, sh, p.out, p.dpos, p.dhead, p.replied, lane);
        uint32_t nload, pre = 0, quick = 0;
        stat_add(sh, 0, 1, lane);
        const long long c0 = clock64();
        if (!d.busy) {
            if (!idle_poll<A...>(d, p, ka, sh, nload, quick))
                continue;
        } else if (d.pipe) {
            pipe_poll(d, p, ka, sh, nload, pre);
        } else {
            serial_poll(d, p, ka, sh, nload);
        }
        __syncwarp();
        const long long c1 = clock64();
        uint32_t done = quick;
        if (pre) {
            /* the crew answered the first pre slots (pipe_poll moved the
             * rings' positions past them) */
            done = pre;
        } else if (nload == K && !d.pipe) {
            done = serial_answer(d, p, sh);
        }
        serve_staged<A...>(d, p, ka, sh, ds, has_workers, done, nload);
        __syncwarp();
        /* a request the idle poll staged (a user actor, vadd) was
         * answered by this warp: its next read waits as after an echo */
        if (!d.busy && !quick && done == 1 && p.posted == p.replied)
            d.idle_wait = d.idle_delay;
        const long long c2 = clock64();
        if (lane == 0) { /* counters: after the replies, off the round trip */
            sh.st[2] += done;
            sh.st[4] += (unsigned long long)(c1 - c0);
            sh.st[5] += (unsigned long long)(c2 - c1);
        }
        if (done) {
            d.hpos += done;
            /* consumed: the housekeeper publishes cons_head (release) */
            if (lane == 0)
                flag_st(&sh.h2d_done, (unsigned long long)d.hpos);
            d.idle = 0;
            d.ns = 0;
        }
        d.busy = done >= 2 || (done == 1 && d.burst);
        d.burst = false;
        if (d.stalled)
            break;
    }
    dispatcher_stop(d, p, ka, sh, ds);
}

} // namespace dev
} // namespace rk

#endif
