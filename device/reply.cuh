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
#include "rk/error.h"
#include "rk/msg.h"

namespace rk {
namespace dev {

/* Whether a reply of this status carries the handler's bytes: a success,
 * or an actor's own error (-RK_EACTOR: its sentence), as on the CPU
 * backend (runtime/src/serve_cpu.c). */
__device__ __forceinline__ bool reply_has_data(int status) { return status == 0 || status == -RK_EACTOR; }

/* A handler that says it wrote more than the cap it was given: nothing of
 * it leaves (it would overrun the reply slot); RK_EINTERNAL, as ops.c
 * answers a CPU twin that overran. */
__device__ __forceinline__ void reply_room_check(uint32_t cap, int &status, uint32_t &out_len)
{
    if (out_len > cap) {
        status = -RK_EINTERNAL;
        out_len = 0;
    }
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

/* The reply to the echo/NOP whose lines lane i holds (L): lane i's reply
 * word (0: the length, 5: the status, 6: the payload length, the rest the
 * request's) and, in rl, the reply's lines. */
__device__ __forceinline__ uint32_t reply_word(uint64_t L, uint32_t lane, uint32_t &rl)
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
    rl = 1u + ((uint32_t)sizeof(rk_msg_hdr) + plen + 3u) / 4u;
    return d;
}

/* Writes the reply of the echo/NOP whose lines lane i holds (L) at D2H
 * position dpos, lane i line i: strong stores (measured faster than weak
 * stores + a fence per warp when many warps write at once; LL lines need no
 * fence between them), or, Weak, weak stores the caller fences. */
template <bool Weak = false>
__device__ __forceinline__ void reply_fast(const ring_view &out, uint64_t dpos, uint64_t L, uint32_t lane)
{
    uint32_t rl;
    const uint32_t d = reply_word(L, lane, rl);
    const uint32_t rf = ring_flag(out, dpos);
    uint64_t *s = ring_slot(out, dpos);
    if (lane < rl) {
        if (Weak)
            rk__st_weak(s + lane, ring_line(d, rf));
        else
            rk__st_relaxed_sys(s + lane, ring_line(d, rf));
    }
}

} // namespace dev
} // namespace rk

#endif
