/* device/dispatcher.cuh - the dispatcher warp's loop (block 0, warp 0):
 * polls the H2D ring (idle: idle.cuh), orchestrates the crew on bursts,
 * serves the rest itself or posts it as a grid job, and hands its
 * positions over at stop. */
#ifndef RK_DEVICE_DISPATCHER_CUH
#define RK_DEVICE_DISPATCHER_CUH

#include <stdint.h>

#include "block0.cuh"
#include "crew.cuh"
#include "dispatch.cuh"
#include "experiments.cuh"
#include "idle.cuh"
#include "jobs.cuh"
#include "kernel_desc.h"
#include "ops.cuh"
#include "reply.cuh"
#include "ring.cuh"
#include "rk/error.h"
#include "rk/msg.h"

namespace rk {
namespace dev {

/* Serves a staged request (sh.words) with the warp; posts its reply or a
 * grid job. */
template <class... A>
__device__ __noinline__ void serve_slow(const rk_kargs &ka, shared0 &sh, scratch *ds, const ring_view &out,
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
        return;
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
                post_job(ka, ds, sh, out, w, dpos, dhead, posted, replied, lane, run);
                return;
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
    d.after = false;
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
    d.after = false;
    /* room for a whole batch of replies first (the crew writes them at
     * wr_dpos + k without asking; one reply ring only: with several, the
     * crew answers nothing and serve_staged every slot, crew_check) */
    if (ka.d2h_rings == 1) /* (lane 0's position; d2h_wait wants them warp-uniform) */
        d2h_wait_all(ka, p.out, p.dpos, p.dhead, K < p.out.slots ? K : p.out.slots, sh, lane);
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
        while ((uint32_t)((x = rk__ld_relaxed_sys(ring_slot(in, pos) + i)) >> 32) != flag)
            stop_abort_check(sh); /* (a producer that never finishes its lines) */
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
            serve_slow<A...>(ka, sh, ds, p.out, has_workers, lane, p.dpos, p.dhead, p.posted, p.replied);
        }
        done++;
    }
    if (nfast)
        rk__fence_seq_cst_sys(); /* push the weak reply lines out (measured: deferring it
                                  * into the next poll made round trips 0.4 us slower) */
}

/* Stopping: finishes the grid jobs already posted (however long they run:
 * the host's stop gives up on a kernel that does not stop, engine.c),
 * then hands over. */
__device__ __forceinline__ void dispatcher_stop(dispatch &d, const dispatch_ref &p, const rk_kargs &ka, shared0 &sh,
                                                scratch *ds)
{
    const uint32_t lane = d.lane;
    while (p.posted != p.replied) {
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
        ds->idle_wait = idle_cycles_of(sh.idle_fx);
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
        if (d.busy)
            after_read(d, sh, ka, lane); /* before a busy poll (an idle poll does it once its read is out) */
        if (d.stop_seen || (!d.defer && warp_stop(sh, 1)))
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
        /* a request the idle poll staged (vadd, a user actor that does not
         * fit a warp) was answered by this warp: its next read is not
         * held back, and not counted by the wait's step (idle_adapt). The
         * staging and this loop's bookkeeping after the reply put ~2 000
         * cycles before that read by themselves; with the wait learnt by
         * the echo loop on top (1 200-1 400 cycles), a 64-B vadd through
         * the module kernel took 0.4-0.7 us longer (H100). */
        const long long c2 = clock64();
        if (lane == 0) { /* counters: after the replies, off the round trip */
            sh.st[2] += done;
            sh.st[4] += (unsigned long long)(c1 - c0);
            sh.st[5] += (unsigned long long)(c2 - c1);
        }
        if (done) {
            d.hpos += done;
            /* consumed: the housekeeper publishes cons_head (release) */
            /* after an idle answer after_read publishes it, once the next read is out */
            d.defer = quick;
#ifdef RK_KERNEL_EXPERIMENTS
            if (ka.flags & RK_KF_EARLY_FENCE) /* comparison: here, before the next read (before 2026-11-27) */
                d.defer = false;
#endif
            if (lane == 0 && !d.defer)
                flag_st(&sh.h2d_done, (unsigned long long)d.hpos);
            d.idle = 0;
            d.ns = 0;
        }
        d.busy = done >= 2 || (done == 1 && d.burst);
        d.burst = false;
    }
    dispatcher_stop(d, p, ka, sh, ds);
}

} // namespace dev
} // namespace rk

#endif
