/* device/ops.cuh - what the kernel runs for a request: the built-in
 * operations (NOP, echo, vadd, the test-only fault) and the user's GPU
 * actors, dispatched by type at compile time. Every thread of the group
 * serving a request (a warp, or the whole worker grid) runs them with its
 * own rank (gpu_ctx). */
#ifndef RK_DEVICE_OPS_CUH
#define RK_DEVICE_OPS_CUH

#include <stdint.h>

#include "kernel_desc.h"
#include "ring.cuh"
#include "rk/error.h"
#include "rk/msg.h"

namespace rk {

/* What a GPU actor's handler learns about the threads serving a request:
 * every thread of the group calls the handler with its own rank. A warp
 * serves inline (small) messages; the whole worker grid serves arena
 * payloads above 16 KiB. Handlers loop rank-strided over their data and
 * must not wait for one another (no group barrier). Rank 0's return value
 * and *out_len are the reply's status and length. */
struct gpu_ctx {
    uint32_t rank;
    uint32_t size;
    bool grid;
};

namespace dev {

/* float add with the host's (x86 SSE / AArch64) NaN rule, so results are
 * bit-identical to rk__vadd_f32 even for NaN inputs: a NaN operand comes
 * back quieted, the first one when both are NaN. Plain IEEE add, round to
 * nearest, denormals kept (no FMA, no fast-math). */
__device__ __forceinline__ float vadd1(float x, float y, uint32_t dnan)
{
    const float r = __fadd_rn(x, y);
    if (r == r)
        return r;
    uint32_t ux = __float_as_uint(x), uy = __float_as_uint(y);
    if ((ux & 0x7fffffffu) > 0x7f800000u)
        return __uint_as_float(ux | 0x00400000u);
    if ((uy & 0x7fffffffu) > 0x7f800000u)
        return __uint_as_float(uy | 0x00400000u);
    return __uint_as_float(dnan); /* inf - inf: the host's default NaN */
}

__device__ __forceinline__ void copy_bytes(const gpu_ctx &c, uint8_t *dst, const uint8_t *src, uint64_t n)
{
    uint64_t i = 0;
    if ((((uintptr_t)dst | (uintptr_t)src) & 15) == 0) {
        const uint64_t n16 = n / 16;
        const uint4 *s = reinterpret_cast<const uint4 *>(src);
        uint4 *d = reinterpret_cast<uint4 *>(dst);
        for (uint64_t k = c.rank; k < n16; k += c.size)
            d[k] = s[k];
        i = n16 * 16;
    } else if ((((uintptr_t)dst | (uintptr_t)src) & 3) == 0) {
        const uint64_t n4 = n / 4;
        const uint32_t *s = reinterpret_cast<const uint32_t *>(src);
        uint32_t *d = reinterpret_cast<uint32_t *>(dst);
        for (uint64_t k = c.rank; k < n4; k += c.size)
            d[k] = s[k];
        i = n4 * 4;
    }
    for (uint64_t k = i + c.rank; k < n; k += c.size)
        dst[k] = src[k];
}

__device__ __forceinline__ void vadd_n(const gpu_ctx &c, const float *a, const float *b, float *o, uint64_t n,
                                       uint32_t dnan)
{
    uint64_t i = 0;
    if ((((uintptr_t)a | (uintptr_t)b | (uintptr_t)o) & 15) == 0) {
        const uint64_t n4 = n / 4;
        const float4 *a4 = reinterpret_cast<const float4 *>(a);
        const float4 *b4 = reinterpret_cast<const float4 *>(b);
        float4 *o4 = reinterpret_cast<float4 *>(o);
        for (uint64_t k = c.rank; k < n4; k += c.size) {
            float4 x = a4[k], y = b4[k];
            o4[k] = make_float4(vadd1(x.x, y.x, dnan), vadd1(x.y, y.y, dnan), vadd1(x.z, y.z, dnan),
                                vadd1(x.w, y.w, dnan));
        }
        i = n4 * 4;
    }
    for (uint64_t k = i + c.rank; k < n; k += c.size)
        o[k] = vadd1(a[k], b[k], dnan);
}

/* ---- the user's actors, dispatched by type at compile time ---- */
template <class... A> struct actor_list;
template <> struct actor_list<> {
    __device__ static bool run(uint16_t, const gpu_ctx &, const void *, uint32_t, void *, uint32_t,
                               uint32_t *, int *)
    {
        return false;
    }
};
template <class H, class... T> struct actor_list<H, T...> {
    __device__ static bool run(uint16_t type, const gpu_ctx &c, const void *in, uint32_t in_len,
                               void *out, uint32_t out_cap, uint32_t *out_len, int *status)
    {
        if (type == H::type) {
            *status = H::run(c, in, in_len, out, out_cap, out_len);
            return true;
        }
        return actor_list<T...>::run(type, c, in, in_len, out, out_cap, out_len, status);
    }
};

/* Runs one operation on the calling group. Returns the status (rank 0's
 * counts); *out_len the reply bytes. Out of line, one copy: inlined at its
 * three call sites it made serve_slow 40 KB of code (10 KB now). The size
 * was not what makes a user actor's round trip slow: that measured the
 * same either way (device/NOTES.md, "User actors on the GPU"). */
template <class... A>
__device__ __noinline__ int run_op(const rk_kargs &ka, uint16_t type, const gpu_ctx &c, const uint8_t *in,
                      uint32_t in_len, uint8_t *out, uint64_t out_cap, uint32_t *out_len)
{
    *out_len = 0;
    switch (type) {
    case RK_OP_NOP:
        return 0;
    case RK_OP_ECHO:
        if (in_len > out_cap)
            return -RK_EMSGSIZE;
        copy_bytes(c, out, in, in_len);
        *out_len = in_len;
        return 0;
    case RK_OP_VADD: {
        if (in_len == 0 || in_len % 8)
            return -RK_EINVAL;
        const uint64_t n = in_len / 8;
        if (out_cap < n * 4)
            return -RK_EMSGSIZE;
        const float *a = reinterpret_cast<const float *>(in);
        vadd_n(c, a, a + n, reinterpret_cast<float *>(out), n, ka.nan_bits);
        *out_len = (uint32_t)(n * 4);
        return 0;
    }
    case RK_OP_FAULT:
        if (!(ka.flags & RK_KF_TEST_FAULTS))
            return -RK_ENOTSUP;
        /* test only: an illegal address, as a buggy actor would make. The
         * null page: never mapped in any context (an address far beyond
         * the arena can land in memory another worker's context happens
         * to map there, and then the write scribbles instead of faulting) */
        if (c.rank == 0) {
            volatile uintptr_t bad = 8;
            *(volatile uint32_t *)bad = 1u;
        }
        return 0;
    case RK_OP_HANG:
        if (!(ka.flags & RK_KF_TEST_FAULTS))
            return -RK_ENOTSUP;
        /* test only: an endless loop (the stop word never takes this
         * value), or a nap of the milliseconds in[0..3] (rk/msg.h) */
        if (in_len >= 4) {
            uint32_t ms;
            memcpy(&ms, in, sizeof ms);
            const uint64_t end = rk__globaltimer() + (uint64_t)ms * 1000000ull;
            while (rk__globaltimer() < end)
                __nanosleep(100000);
            return 0;
        }
        while (*(volatile uint32_t *)&ka.region->stop != 0xdeadbeefu)
            __nanosleep(100000);
        return 0;
    default: {
        int st = -RK_ENOTSUP;
        uint32_t cap = out_cap > 0xffffffffull ? 0xffffffffu : (uint32_t)out_cap;
        if (type >= RK_OP_USER && actor_list<A...>::run(type, c, in, in_len, out, cap, out_len, &st))
            return st;
        return -RK_ENOTSUP;
    }
    }
}

} // namespace dev
} // namespace rk

#endif
