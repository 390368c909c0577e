/* device/crew.cuh - the crew (block 0, warps 2..): busy polls read, checked
 * and answered by many warps at once (one warp keeps only so many reads of
 * host memory in flight, and its stores to host memory issue slowly).
 * slot_fast is the echo/NOP test every path shares. */
#ifndef RK_DEVICE_CREW_CUH
#define RK_DEVICE_CREW_CUH

#include <stdint.h>

#include "block0.cuh"
#include "experiments.cuh"
#include "kernel_desc.h"
#include "reply.cuh"
#include "ring.cuh"
#include "rk/msg.h"

namespace rk {
namespace dev {

/* ---- the serial busy path: 64-slot polls, loaded into shared memory,
 * then checked, then answered (barriers 1-4). Blocks of 64..95 threads
 * (no crew warps) take it, the dispatcher alone doing every share; with
 * experiments, RK_KF_SERIAL puts it on every block (crew warps below). ---- */

/* Writes the replies of the batch's leading echo/NOP messages k = idx,
 * idx + n, ... below the first bit clear in sh.fastmask, at D2H positions
 * wr_dpos + k. */
__device__ __forceinline__ void write_share(shared0 &sh, const ring_view &out, uint32_t idx, uint32_t n,
                                            uint32_t lane)
{
    const uint64_t fm = vol_ld(&sh.fastmask);
    const uint32_t F = ~fm == 0 ? (uint32_t)K : (uint32_t)(__ffsll((long long)~fm) - 1);
    const uint64_t base = vol_ld(&sh.wr_dpos);
    for (uint32_t k = idx; k < F; k += n)
        reply_fast(out, base + k, sh.lines[k * LS + lane], lane);
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

/* Lane i holds line i of a slot whose lines carry flag: is it a complete
 * inline request of generation gen (messages up to msg_max bytes) whose
 * lines fit one warp? Its type in *type, its header's payload length in
 * *plen, and in *lines whether every line its length names is there (not
 * yet: the read overtook the producer's stores). (A request of another
 * generation goes the slow way, which drops it: rk_abi.h, rk__region.gen.) */
__device__ __forceinline__ bool slot_inline_at(uint64_t L, uint32_t flag, uint32_t msg_max, uint32_t lane,
                                               uint32_t gen, uint32_t *type, uint32_t *plen, bool *lines)
{
    const uint64_t l0 = __shfl_sync(FULL, L, 0);
    const uint32_t len = (uint32_t)l0 <= msg_max ? (uint32_t)l0 : msg_max;
    const uint32_t nl = 1u + (len + 3u) / 4u;
    /* lane 0 < nl: line 0's flag is part of the test */
    const bool ok = __all_sync(FULL, lane >= nl || (uint32_t)(L >> 32) == flag);
    const uint32_t w1 = __shfl_sync(FULL, (uint32_t)L, 1);
    const uint32_t hlen = __shfl_sync(FULL, (uint32_t)L, 6);
    const uint32_t w5 = __shfl_sync(FULL, (uint32_t)L, RK__W_STATUS);
    *type = w1 & 0xffffu;
    *plen = hlen;
    *lines = ok;
    return ok && w5 == gen && nl <= 32 && len >= sizeof(rk_msg_hdr) && !((w1 >> 16) & RK_MSG_ARENA) &&
           hlen <= len - sizeof(rk_msg_hdr);
}

/* ... the slot at position pos of ring in */
__device__ __forceinline__ bool slot_inline(const ring_view &in, uint64_t L, uint64_t pos, uint32_t lane,
                                            uint32_t gen, uint32_t *type)
{
    uint32_t plen;
    bool lines;
    return slot_inline_at(L, ring_flag(in, pos), in.msg_max, lane, gen, type, &plen, &lines);
}

/* ... and an echo/NOP (answered from the lines themselves)? */
__device__ __forceinline__ bool slot_fast(const ring_view &in, uint64_t L, uint64_t pos, uint32_t lane,
                                          uint32_t gen)
{
    uint32_t type;
    const bool ok = slot_inline(in, L, pos, lane, gen, &type);
    return ok && (type == RK_OP_ECHO || type == RK_OP_NOP);
}

/* Checks this crew member's share of a busy batch (messages idx, idx + n,
 * ...; the warp reads each message's lines side by side) and marks the
 * complete echo/NOP ones in sh.fastmask. With several reply rings it marks
 * none (write_share knows one ring's positions only; serve_staged answers
 * them all: the serial path is for blocks of 64-95 threads). */
__device__ __forceinline__ void crew_check(shared0 &sh, const ring_view &in, uint64_t pos, uint32_t idx, uint32_t n,
                                           uint32_t lane, uint32_t gen, uint32_t nrings)
{
    for (uint32_t k = idx; nrings == 1 && k < (uint32_t)K; k += n)
        if (slot_fast(in, sh.lines[k * LS + lane], pos + k, lane, gen) && lane == 0)
            atomicOr(&sh.fastmask, 1ull << k);
}

#ifdef RK_KERNEL_EXPERIMENTS
/* RK_KF_SERIAL (comparison): crew warps (block 0, warps 2..) on the serial
 * busy path (64-slot polls: load, then check, then reply; barriers 1-4),
 * the default before the pipelined path. */
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
        crew_check(sh, in, pos, idx, ncrew, lane, ka.gen, ka.d2h_rings);
        bar_named(3, 32 * ncrew);
        write_share(sh, out, idx, ncrew, lane);
        bar_named(4, 32 * ncrew);
    }
}
#endif

/* ---- pipelined busy polls (blocks of 96 threads or more) ----
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

/* Bits below slot F of chunk q (slots 32q..32q+31) of a pipelined poll. */
__device__ __forceinline__ uint32_t pipe_below(uint32_t F, uint32_t q)
{
    return F >= 32u * (q + 1u) ? FULL : F <= 32u * q ? 0u : (1u << (F - 32u * q)) - 1u;
}

/* How many of a pipelined poll's first F slots answer on reply ring
 * `lane` (after barrier 2; with several rings, from the crew's pp_rmask
 * set par); lanes of no ring get 0. */
__device__ __forceinline__ uint32_t pipe_ring_count(shared0 &sh, uint32_t par, uint32_t nrings, uint32_t F,
                                                    uint32_t lane)
{
    if (nrings == 1)
        return lane == 0 ? F : 0u;
    if (lane >= nrings)
        return 0u;
    uint32_t cnt = 0;
#pragma unroll
    for (uint32_t q = 0; q < KP_MAX / 32; q++)
        cnt += __popc(sh.pp_rmask[par][lane][q] & pipe_below(F, q));
    return cnt;
}

/* Clears pp_rmask set par for the next poll (the dispatcher, before
 * barrier 1: the crew's atomicOr into the set come after that barrier,
 * which orders shared memory among its threads). The crew last read this
 * set two polls ago, before it reached barrier 2 of the last poll, which
 * this warp has passed. */
__device__ __forceinline__ void pipe_ring_clear(shared0 &sh, uint32_t par, uint32_t lane)
{
    (&sh.pp_rmask[par][0][0])[lane] = 0u;
}

/* Where a reply of a pipelined poll goes with several rings (after
 * barrier 2): lane j < JMAX works out the slot and flag for this warp's
 * slot k = c + j * nc (rings: the warp's slots' rings, 3 bits each; Dl:
 * lane r holds ring r's first position of the poll, read before barrier
 * 2, because after it the dispatcher may write the next poll's). Ring r's
 * position is Dl plus the poll's earlier slots on ring r (pp_rmask set
 * par). All slots at once, a lane each: worked out per slot, one after
 * another, the stores waited for a chain of shuffles and loads, and a
 * 128-slot poll took ~11 500 cycles with 8 rings against ~8 200 with
 * one (a throw-away build of rk-bench gpu's raw rows with 8 rings, every
 * reply on ring 0; H200, 2026-11-26); now ~8 650. */
struct pipe_dst {
    uint64_t *s; /* the reply's slot */
    uint32_t rf; /* its flag */
};
__device__ __forceinline__ pipe_dst pipe_dest(const rk_kargs &ka, const ring_view &out0, shared0 &sh, uint32_t par,
                                              uint64_t Dl, uint32_t rings, uint32_t c, uint32_t nc, uint32_t F,
                                              uint32_t lane)
{
    const uint32_t k = c + lane * nc;
    const bool mine = lane < (uint32_t)JMAX && k < F;
    const uint32_t r = mine ? (rings >> (3u * lane)) & 7u : 0u;
    const uint32_t *m = sh.pp_rmask[par][r];
    uint32_t before = 0;
    if (mine) {
        before = __popc(m[k / 32u] & ((1u << (k % 32u)) - 1u));
#pragma unroll
        for (uint32_t q = 0; q + 1 < KP_MAX / 32; q++)
            if (q < k / 32u)
                before += __popc(m[q]);
    }
    const uint64_t pos = __shfl_sync(FULL, Dl, r) + before;
    const ring_view o = ring_at(out0, ka.d2h_stride, r);
    return {ring_slot(o, pos), ring_flag(o, pos)};
}

/* Marks this warp's slot k (lines L) on its reply ring in pp_rmask set
 * par, before barrier 2; returns the ring. Barrier 2 orders the mark
 * before every reader's load (pipe_dest, pipe_ring_count). */
__device__ __forceinline__ uint32_t pipe_mark(shared0 &sh, uint32_t par, uint64_t L, uint32_t k, uint32_t nrings,
                                              uint32_t lane)
{
    const uint32_t r = RK__REPLY_RING(__shfl_sync(FULL, (uint32_t)L, RK__W_ACTOR), nrings);
    if (lane == 0)
        atomicOr(&sh.pp_rmask[par][r][k / 32u], 1u << (k % 32u));
    return r;
}

/* Writes the reply to this warp's j-th slot (lines L) where pipe_dest
 * put it. */
__device__ __forceinline__ void pipe_reply(const pipe_dst &dst, int j, uint64_t L, uint32_t lane)
{
    uint64_t *s = reinterpret_cast<uint64_t *>(__shfl_sync(FULL, reinterpret_cast<unsigned long long>(dst.s), j));
    reply_fast_at(s, __shfl_sync(FULL, dst.rf, j), L, lane);
}

/* Slots per pipelined poll for nc crew warps, at most kmax. */
__device__ __forceinline__ uint32_t pipe_slots(uint32_t nc, uint32_t kmax = KP_MAX)
{
    const uint32_t n = nc * (uint32_t)JMAX;
    return n < kmax ? n : kmax;
}

/* crew warp c of nc (block 0, warp c + 2) on the pipelined path; Multi:
 * several reply rings. One ring has a loop of its own: with the several
 * rings' code in it, its polls took ~10 % longer (the same build). */
template <bool Multi>
__device__ __forceinline__ void crew_pipe_t(const rk_kargs &ka, shared0 &sh, uint32_t c, uint32_t nc, uint32_t nthr)
{
    const uint32_t lane = threadIdx.x & 31;
    const ring_view in = ring_open(static_cast<rk_ring *>(ka.h2d));
    const ring_view out0 = ring_open(static_cast<rk_ring *>(ka.d2h));
    const uint32_t nrings = Multi ? ka.d2h_rings : 1u;
    const bool lane_in = lane < in.slot_lines; /* slots of fewer than 32 lines */
#ifdef RK_KERNEL_EXPERIMENTS
    const bool prefetch = !(ka.flags & RK_KF_NOPF);
    const bool narrow = ka.flags & RK_KF_NARROW;
    const bool wr_v2 = ka.flags & RK_KF_WR_V2;
    const bool lane_rd = lane_in && (!narrow || lane < NARROW_LINES);
#else
    constexpr bool prefetch = true;
    const bool lane_rd = lane_in;
#endif
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
        /* the poll's geometry, read before barrier 2 (the dispatcher
         * writes the next poll's before barrier 1): H2D position, slots,
         * the one reply ring's first position (D) or, Multi, lane r ring
         * r's (Dl) */
        const uint64_t P = vol_ld(&sh.poll_pos);
        const uint64_t D = Multi ? 0ull : vol_ld(&sh.pp_dpos[0]);
        const uint64_t Dl = Multi && lane < nrings ? vol_ld(&sh.pp_dpos[lane]) : 0ull;
        const uint32_t n = vol_ld(&sh.pp_n);
        const uint32_t par = Multi ? vol_ld(&sh.pp_par) : 0u;
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
        uint32_t rings = 0; /* Multi: slot j's reply ring in bits 3j.. */
#pragma unroll
        for (int j = 0; j < JMAX; j++) {
            const uint32_t k = c + (uint32_t)j * nc;
            if (k < n) {
#ifdef RK_KERNEL_EXPERIMENTS
                if (narrow)
                    v[j] = narrow_rest(in, P + k, v[j], lane, lane_in);
#endif
                sh.lines[k * LS + lane] = v[j];
                if (!slot_fast(in, v[j], P + k, lane, ka.gen) && bad == n)
                    bad = k;
                if (Multi) /* its reply ring, for pipe_dest and the dispatcher's count */
                    rings |= pipe_mark(sh, par, v[j], k, nrings, lane) << (3 * j);
            }
        }
        if (lane == 0)
            sh.firstbad[c] = bad;
        bar_named(2, nthr);
        const uint32_t F = pipe_prefix(sh, nc, n, lane);
        const pipe_dst dst =
            Multi ? pipe_dest(ka, out0, sh, par, Dl, rings, c, nc, F, lane) : pipe_dst{nullptr, 0u};
#pragma unroll
        for (int j = 0; j < JMAX; j++) {
            const uint32_t k = c + (uint32_t)j * nc;
            if (k >= F)
                continue;
            if (Multi) {
                pipe_reply(dst, j, v[j], lane);
                continue;
            }
#ifdef RK_KERNEL_EXPERIMENTS
            if (wr_v2) {
                reply_fast_v2(out0, D + k, v[j], lane);
                continue;
            }
#endif
            reply_fast(out0, D + k, v[j], lane);
        }
    }
}

__device__ void crew_pipe(const rk_kargs &ka, shared0 &sh, uint32_t c, uint32_t nc, uint32_t nthr)
{
    if (ka.d2h_rings > 1)
        crew_pipe_t<true>(ka, sh, c, nc, nthr);
    else
        crew_pipe_t<false>(ka, sh, c, nc, nthr);
}

} // namespace dev
} // namespace rk

#endif
