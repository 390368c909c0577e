/* device/experiments.cuh - code behind the ring kernel's experiment and
 * comparison switches (kernel_desc.h RK_KF_*, all but the test hook
 * RK_KF_MUTE), for rk-bench gpu --variants / --idle-variants.
 *
 * Compiled only when the build defines RK_KERNEL_EXPERIMENTS (meson
 * -Dkernel_experiments=true). Without it the kernel ignores those flags and
 * none of this is compiled in; the kernel's descriptor says which
 * (rk_kernel_desc.features & RK_KDESC_F_EXPERIMENTS). The other sites are
 * marked with #ifdef RK_KERNEL_EXPERIMENTS where they are (crew.cuh:
 * RK_KF_SERIAL's crew warps, RK_KF_NOPF / NARROW / WR_V2 in crew_pipe;
 * dispatch.cuh: RK_KF_SERIAL / KP64 / IDLE_DELAY in dispatch_open; idle.cuh:
 * RK_KF_IDLE_SC in echo_answer, RK_KF_STAMP in idle_poll and idle_serve,
 * RK_KF_GAP in idle_poll and idle_reads, RK_KF_IDLE_ONE in idle_poll,
 * RK_KF_IDLE_CHAIN in idle_poll, RK_KF_IDLE_NOLAT, RK_KF_READ1_HIST and
 * RK_KF_WAIT_MIN150 in idle_adapt; dispatcher.cuh: RK_KF_EARLY_FENCE in
 * the dispatcher loop;
 * kernel.cuh: the serial crew's launch). */
#ifndef RK_DEVICE_EXPERIMENTS_CUH
#define RK_DEVICE_EXPERIMENTS_CUH
#ifdef RK_KERNEL_EXPERIMENTS

#include <stdint.h>

#include "block0.cuh"
#include "kernel_desc.h"
#include "reply.cuh"
#include "ring.cuh"

namespace rk {
namespace dev {

constexpr uint32_t NARROW_LINES = 24; /* RK_KF_NARROW: lines read per slot */

/* RK_KF_WR_V2: reply_fast with 16-byte strong stores, two lines per lane. */
__device__ __forceinline__ void reply_fast_v2(const ring_view &out, uint64_t dpos, uint64_t L, uint32_t lane)
{
    uint32_t rl;
    const uint32_t d = reply_word_of(L, __shfl_sync(FULL, (uint32_t)L, 1) & 0xffffu, __shfl_sync(FULL, (uint32_t)L, 6),
                                     lane, rl);
    const uint32_t rf = ring_flag(out, dpos);
    uint64_t *s = ring_slot(out, dpos);
    const uint32_t j0 = 2 * lane, j1 = 2 * lane + 1;
    const uint32_t d0 = __shfl_sync(FULL, d, j0 & 31), d1 = __shfl_sync(FULL, d, j1 & 31);
    if (lane < 16 && j0 < rl)
        rk__st_relaxed_sys_v2(s + j0, ring_line(d0, rf), j1 < rl ? ring_line(d1, rf) : 0ull);
}

/* RK_KF_NARROW: the crew read lines 0..NARROW_LINES-1 of the slot at pos
 * (lane i: v). A complete line 0 of a message longer than that: read the
 * rest now (one more round trip). */
__device__ __forceinline__ uint64_t narrow_rest(const ring_view &in, uint64_t pos, uint64_t v, uint32_t lane,
                                                bool lane_in)
{
    const uint64_t l0 = __shfl_sync(FULL, v, 0);
    const uint32_t len = (uint32_t)l0 <= in.msg_max ? (uint32_t)l0 : in.msg_max;
    if ((uint32_t)(l0 >> 32) == ring_flag(in, pos) && 1u + (len + 3u) / 4u > NARROW_LINES && lane >= NARROW_LINES &&
        lane_in)
        v = rk__ld_cv(ring_slot(in, pos) + lane);
    return v;
}

/* RK_KF_IDLE_DELAY(x): cycles from an idle-path reply to the next poll read
 * (0: the default RK_KERNEL_IDLE_DELAY; 0xff: none). */
__device__ __forceinline__ uint32_t idle_delay_of(uint32_t flags, uint32_t dflt)
{
    const uint32_t dk = (flags >> 16) & 0xffu;
    return dk == 0 ? dflt : dk == 0xff ? 0u : dk * 100u;
}

/* RK_KF_READ1_HIST: counts the first read after an idle-path reply (lat1
 * cycles; the poll took `reads`, the wait's step counted `seen`) in the
 * scratch's histogram (kernel_desc.h RK_KERNEL_READ1_HIST_OFFSET). Lane 0
 * only. */
__device__ __forceinline__ void read1_hist_add(const rk_kargs &ka, uint32_t reads, uint32_t lat1, uint32_t seen)
{
    const uint32_t row = reads == 1 ? 0u : reads == 2 ? (seen == 2 ? 1u : 2u) : 3u;
    const uint32_t bin = lat1 / RK_READ1_BIN < RK_READ1_BINS ? lat1 / RK_READ1_BIN : RK_READ1_BINS - 1;
    atomicAdd((uint32_t *)((char *)ka.scratch + RK_KERNEL_READ1_HIST_OFFSET) + row * RK_READ1_BINS + bin, 1u);
}

} // namespace dev
} // namespace rk

#endif
#endif
