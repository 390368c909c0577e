/* device/dispatcher.cuh - the dispatcher warp (block 0, warp 0): polls the
 * H2D ring, answers echo/NOP from registers, orchestrates the crew on
 * bursts, serves the rest itself or posts it as a grid job, and hands its
 * positions over at stop. */
#ifndef RK_DEVICE_DISPATCHER_CUH
#define RK_DEVICE_DISPATCHER_CUH

#include <stdint.h>

#include "block0.cuh"
#include "crew.cuh"
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
#define RK_KERNEL_IDLE_DELAY 500u /* cycles (~0.25 us): see the idle poll */
#endif

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
                    post_job_replies(ds, sh, out, dpos, dhead, replied, lane);
                    __nanosleep(ns);
                    ns = ns < 4096 ? ns * 2 + 32 : ns;
                }
                job *j = &ds->jobs[posted % NJ];
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
            post_job_replies(ds, sh, out, dpos, dhead, replied, lane);
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
            if (dpos - dhead < out.slots && slot_fast(in, a, hpos, lane)) {
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
            crew_check(sh, in, hpos, 0, ncrew, lane);
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
            if (slot_fast(in, L, pos, lane)) {
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
        post_job_replies(ds, sh, out, dpos, dhead, replied, lane);
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

} // namespace dev
} // namespace rk

#endif
