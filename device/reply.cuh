/* device/reply.cuh - D2H production: the dispatcher warp is the single
 * producer of every reply ring (the crew writes replies only at positions
 * the dispatcher handed it). A reply goes to the ring of its actor
 * (RK__REPLY_RING: actor modulo the rings, as the host maps them). The
 * dispatcher keeps the rings' positions one ring a lane: lane r holds ring
 * r's next position (dpos) and its cached cons_head (dhead); every lane
 * of the warp learns them with a shuffle. Room is checked against the
 * cached cons_head; replies are LL lines, so they need no fence between
 * them. */
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

/* Waits until position dpos is free in D2H. dpos and dhead are the same
 * in every lane (the loop's shuffles need the whole warp: per-lane ring
 * positions, as the dispatcher keeps them, go through d2h_take or
 * d2h_wait_all). The cached head is refreshed (one PCIe read) only when
 * it says "full". acquire: pairs with the host consumer's store-release
 * of cons_head, so its reads of the slot's old lap are done before we
 * overwrite it. */
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
        if (dpos - dhead < out.slots)
            return;
        stop_abort_check(sh);
        __nanosleep(ns);
        ns = ns < 8192 ? ns * 2 + 32 : ns;
    }
}

/* The reply ring of a request whose actor word (RK__W_ACTOR) is w. */
__device__ __forceinline__ uint32_t reply_ring_of(const rk_kargs &ka, uint32_t w)
{
    return RK__REPLY_RING(w & 0xffffu, ka.d2h_rings);
}

/* A position on reply ring r (view out) once it has room: ring r's dpos
 * and dhead are lane r's (header); lane r's dpos moves past it. */
__device__ __forceinline__ uint64_t d2h_take(const ring_view &out, uint32_t r, uint64_t &dpos, uint64_t &dhead,
                                             shared0 &sh, uint32_t lane)
{
    const uint64_t pos = __shfl_sync(FULL, dpos, r);
    uint64_t head = __shfl_sync(FULL, dhead, r);
    d2h_wait(out, pos, head, sh, lane);
    if (lane == r)
        dpos = pos + 1, dhead = head;
    return pos;
}

/* Posts a staged reply (words[0] = reply length, words[1..] the reply) on
 * the reply ring of its actor: ring 0's view out0, positions one ring a
 * lane. */
__device__ __forceinline__ void d2h_post_words(const rk_kargs &ka, const ring_view &out0, uint64_t &dpos,
                                               uint64_t &dhead, shared0 &sh, const uint32_t *words, uint32_t lane)
{
    const uint32_t r = reply_ring_of(ka, words[RK__W_ACTOR]);
    const ring_view out = ring_at(out0, ka.d2h_stride, r);
    ring_warp_store(out, d2h_take(out, r, dpos, dhead, sh, lane), words, lane);
}

/* Waits until every reply ring has room for n replies (a busy poll's
 * worst case: all of them on one ring); lane r refreshes ring r's head.
 * acquire: as d2h_wait's. */
__device__ __forceinline__ void d2h_wait_all(const rk_kargs &ka, const ring_view &out0, uint64_t dpos,
                                             uint64_t &dhead, uint32_t n, shared0 &sh, uint32_t lane)
{
    const bool mine = lane < ka.d2h_rings;
    if (__all_sync(FULL, !mine || dpos + n - 1 - dhead < out0.slots))
        return;
    const uint64_t *head = ring_at(out0, ka.d2h_stride, mine ? lane : 0).cons_head;
    uint32_t ns = 0;
    for (;;) {
        if (mine && dpos + n - 1 - dhead >= out0.slots)
            dhead = rk__ld_acquire_sys(head);
        if (__all_sync(FULL, !mine || dpos + n - 1 - dhead < out0.slots))
            return;
        stop_abort_check(sh);
        __nanosleep(ns);
        ns = ns < 8192 ? ns * 2 + 32 : ns;
    }
}

/* The reply to the echo/NOP whose lines lane i holds (L; its type, and
 * w6 its header's payload length): lane i's reply word (0: the length, 5:
 * the status, 6: the payload length, the rest the request's) and, in rl,
 * the reply's lines. */
__device__ __forceinline__ uint32_t reply_word_of(uint64_t L, uint32_t type, uint32_t w6, uint32_t lane,
                                                  uint32_t &rl)
{
    const uint32_t plen = type == RK_OP_ECHO ? w6 : 0u;
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

/* Writes lane i's line of that reply into slot s (flag rf): strong stores
 * (measured faster than weak stores + a fence per warp when many warps
 * write at once; LL lines need no fence between them), or, Weak, weak
 * stores the caller fences. */
template <bool Weak = false>
__device__ __forceinline__ void reply_fast_of(uint64_t *s, uint32_t rf, uint64_t L, uint32_t type, uint32_t w6,
                                              uint32_t lane)
{
    uint32_t rl;
    const uint32_t d = reply_word_of(L, type, w6, lane, rl);
    if (lane < rl) {
        if (Weak)
            rk__st_weak(s + lane, ring_line(d, rf));
        else
            rk__st_relaxed_sys(s + lane, ring_line(d, rf));
    }
}

/* ... with the type and payload length read from the lines */
template <bool Weak = false>
__device__ __forceinline__ void reply_fast_at(uint64_t *s, uint32_t rf, uint64_t L, uint32_t lane)
{
    const uint32_t w1 = __shfl_sync(FULL, (uint32_t)L, 1);
    const uint32_t w6 = __shfl_sync(FULL, (uint32_t)L, 6);
    reply_fast_of<Weak>(s, rf, L, w1 & 0xffffu, w6, lane);
}

/* The same at position dpos of ring out (s: its slot, rf: its flag). */
template <bool Weak = false>
__device__ __forceinline__ void reply_fast(const ring_view &out, uint64_t dpos, uint64_t L, uint32_t lane)
{
    reply_fast_at<Weak>(ring_slot(out, dpos), ring_flag(out, dpos), L, lane);
}

} // namespace dev
} // namespace rk

#endif
