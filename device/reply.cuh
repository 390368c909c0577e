/* device/reply.cuh - D2H production: the dispatcher warp is the ring's
 * single producer (the crew writes replies only at positions the
 * dispatcher handed it). Room is checked against a cached cons_head;
 * replies are LL lines, so they need no fence between them. */
#ifndef RK_DEVICE_REPLY_CUH
#define RK_DEVICE_REPLY_CUH

#include <stdint.h>

#include "block0.cuh"
#include "kernel_desc.h"
#include "ring.cuh"
#include "rk/msg.h"

namespace rk {
namespace dev {

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

} // namespace dev
} // namespace rk

#endif
