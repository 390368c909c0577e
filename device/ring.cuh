/* device/ring.cuh - the device side of the rings (layout: rk/ring.h).
 *
 * Memory-ordering vocabulary for device code. Names mirror the host's
 * runtime/src/barrier.h (rk__ld_acquire / rk__st_release / ...), so each edge
 * of the ring protocol reads the same on both sides; the scope is in the
 * suffix: _sys for host-mapped words (rings, region, arena), _gpu for device
 * memory shared between blocks of the ring kernel.
 *
 * Rule: on host-mapped memory the device only LOADS and
 * STORES - never read-modify-write: the H200 host reports
 * HostNativeAtomicSupported = 0, so device RMW on host memory would not be
 * atomic with respect to the host. Every RMW the kernel needs happens on
 * device (global or shared) memory.
 */
#ifndef RK_DEVICE_RING_CUH
#define RK_DEVICE_RING_CUH

#include <stdint.h>

#include "rk/msg.h"
#include "rk/ring.h"

namespace rk {
namespace dev {

/* ---- system scope (host-mapped memory) ---- */
__device__ __forceinline__ uint64_t rk__ld_relaxed_sys(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ uint32_t rk__ld_relaxed_sys(const uint32_t *p)
{
    uint32_t v;
    asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
/* weak, "fetch again" (do not trust a cached copy of system memory): no
 * ordering, so a warp keeps many in flight; LL flags make it safe */
__device__ __forceinline__ uint64_t rk__ld_cv(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.global.cv.u64 %0, [%1];" : "=l"(v) : "l"(p));
    return v;
}
__device__ __forceinline__ uint64_t rk__ld_acquire_sys(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ uint32_t rk__ld_acquire_sys(const uint32_t *p)
{
    uint32_t v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void rk__st_relaxed_sys(uint64_t *p, uint64_t v)
{
    asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void rk__st_relaxed_sys(uint32_t *p, uint32_t v)
{
    asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void rk__st_weak(uint64_t *p, uint64_t v)
{
    asm volatile("st.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
#ifdef RK_KERNEL_EXPERIMENTS /* RK_KF_WR_V2 (device/experiments.cuh) */
__device__ __forceinline__ void rk__st_relaxed_sys_v2(uint64_t *p, uint64_t a, uint64_t b)
{
    asm volatile("st.relaxed.sys.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory");
}
#endif
__device__ __forceinline__ void rk__st_release_sys(uint64_t *p, uint64_t v)
{
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void rk__st_release_sys(uint32_t *p, uint32_t v)
{
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void rk__st_release_sys(int32_t *p, int32_t v)
{
    rk__st_release_sys(reinterpret_cast<uint32_t *>(p), (uint32_t)v);
}
/* acquire after validating flags loaded relaxed; release before publishing
 * data that lines point to (arena payloads). */
__device__ __forceinline__ void rk__fence_acquire_sys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
__device__ __forceinline__ void rk__fence_release_sys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
__device__ __forceinline__ void rk__fence_seq_cst_sys() { asm volatile("fence.sc.sys;" ::: "memory"); }

/* ---- gpu scope (device memory shared between blocks) ---- */
/* an actor's handler -> its reply (dispatch.cuh, actor_fence) */
__device__ __forceinline__ void rk__fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }
__device__ __forceinline__ uint32_t rk__ld_acquire_gpu(const uint32_t *p)
{
    uint32_t v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void rk__st_release_gpu(uint32_t *p, uint32_t v)
{
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ uint64_t rk__globaltimer()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* ---- ring geometry, read once from the (constant) ring header ---- */
struct ring_view {
    uint64_t *base; /* first slot (ring + RK_RING_HDR_BYTES), as u64 lines */
    uint64_t *cons_head;
    uint64_t *prod_tail;
    uint32_t mask;       /* slots - 1 */
    uint32_t order;      /* log2(slots) */
    uint32_t slot_lines; /* slot_size / 8 */
    uint32_t slots;
    uint32_t msg_max; /* slot_size / 2 - 4 */
};

__device__ __forceinline__ ring_view ring_open(rk_ring *r)
{
    ring_view v;
    const uint32_t *c = reinterpret_cast<const uint32_t *>(r);
    v.slots = rk__ld_relaxed_sys(&c[1]);
    uint32_t slot_size = rk__ld_relaxed_sys(&c[2]);
    v.order = rk__ld_relaxed_sys(&c[3]);
    v.mask = v.slots - 1;
    v.slot_lines = slot_size / 8;
    v.msg_max = slot_size / 2 - 4;
    v.base = reinterpret_cast<uint64_t *>(reinterpret_cast<char *>(r) + RK_RING_HDR_BYTES);
    v.cons_head = &r->cons_head;
    v.prod_tail = &r->prod_tail;
    return v;
}

/* Reply ring r of a kernel's reply rings (rk_abi.h: ring 0 at ka.d2h,
 * the others d2h_stride bytes apart, the same geometry): v0's view moved
 * by r strides. */
__device__ __forceinline__ ring_view ring_at(const ring_view &v0, uint64_t stride_bytes, uint32_t r)
{
    ring_view v = v0;
    const size_t off = (size_t)r * (size_t)(stride_bytes / 8);
    v.base += off;
    v.cons_head += off;
    v.prod_tail += off;
    return v;
}

/* The flag every line of the message at pos carries (rk_ring_flag). */
__device__ __forceinline__ uint32_t ring_flag(const ring_view &v, uint64_t pos)
{
    return (uint32_t)(pos >> v.order) + 1u;
}
__device__ __forceinline__ uint64_t *ring_slot(const ring_view &v, uint64_t pos)
{
    return v.base + (size_t)(pos & v.mask) * v.slot_lines;
}
__device__ __forceinline__ uint64_t ring_line(uint32_t data, uint32_t flag)
{
    return ((uint64_t)flag << 32) | data;
}

/* Warp-wide: writes a message of len bytes whose data words are words[0..)
 * (words[0] = the length, then 4 message bytes per word) into the slot at
 * pos, lane i line i (+32, ...). LL lines need no fence between them: the
 * consumer validates every line's flag. Arena payloads the message points
 * to must be fenced (rk__fence_release_sys) by the caller before. */
__device__ __forceinline__ void ring_warp_store(const ring_view &v, uint64_t pos,
                                                const uint32_t *words, uint32_t lane)
{
    const uint32_t nl = 1u + (words[0] + 3u) / 4u;
    const uint32_t flag = ring_flag(v, pos);
    uint64_t *s = ring_slot(v, pos);
    for (uint32_t i = lane; i < nl; i += 32)
        rk__st_relaxed_sys(s + i, ring_line(words[i], flag));
}

} // namespace dev
} // namespace rk

#endif
