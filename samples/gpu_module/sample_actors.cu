/* sample_actors.cu - a module of GPU actors, loaded by path when rk-bridge
 * starts (a new version: install it over the file and send rk-bridge
 * SIGHUP, README.md "Actor modules") and called by name from any language:
 *
 *   saxpy  (a, x, y -> y)   a * x + y over float32, with a CPU twin whose
 *                           results are bit-identical (one rounded multiply,
 *                           one rounded add, no FMA on either side)
 *   count  (add -> total)   state: a u64 running total kept on the device
 *                           across messages (the CPU twin keeps its own);
 *                           it starts over from 0 after a fault (a fresh
 *                           GPU worker loads the module again)
 *   crash  (why -> none)    a fault on purpose: stores through a bad
 *                           pointer (fault isolation: costs this request)
 *   spin   (why -> none)    never returns (the request deadline recovers)
 *
 * crash and spin have no CPU twin: on the CPU backend they answer that
 * they need the GPU. Build, from an installed ringkernel:
 *
 *   nvcc -std=c++17 -arch=sm_90 -shared -Xcompiler -fPIC,-fvisibility=hidden \
 *       $(pkg-config --cflags rk) sample_actors.cu -o sample_actors.so
 *   rk-bridge --actors ./sample_actors.so
 *
 * and call it: `rk-client call saxpy a=@a.bin x=@x.bin y=@y.bin`, or from
 * Python (bridge/client/python): Client().call("saxpy", a=..., x=..., y=...).
 */
#include <rk/gpu_actor.cuh>

#include <stdint.h>
#include <string.h>

/* A CPU twin's own error: the sentence is the reply (status -RK_EACTOR);
 * the GPU handlers use rk::actor_error. */
static int sample_fail(void *out, size_t cap, size_t *out_len, const char *why)
{
    size_t n = 0;
    while (why[n] && n < cap)
        n++;
    memcpy(out, why, n);
    *out_len = n;
    return -RK_EACTOR;
}

/* ---- saxpy ------------------------------------------------------------ */

/* The fields, checked the same way on both sides. */
__host__ __device__ static const char *saxpy_fields(const void *in, size_t in_len, rk_field f[3])
{
    if (rk_fields_parse(in, in_len, 3, 0, f))
        return "saxpy: the request does not hold three fields a, x, y";
    if (f[0].len != 4)
        return "saxpy: a must be one float32 (4 bytes)";
    if (f[1].len != f[2].len || f[1].len % 4)
        return "saxpy: x and y must be float32 arrays of the same length";
    return nullptr;
}

static int saxpy_cpu(const void *in, size_t in_len, void *out, size_t cap, size_t *out_len, void *user)
{
    (void)user;
    rk_field f[3];
    if (const char *why = saxpy_fields(in, in_len, f))
        return sample_fail(out, cap, out_len, why);
    size_t n = f[1].len / 4;
    float a, xi, yi;
    memcpy(&a, f[0].data, 4);
    for (size_t i = 0; i < n; i++) {
        memcpy(&xi, (const char *)f[1].data + 4 * i, 4);
        memcpy(&yi, (const char *)f[2].data + 4 * i, 4);
        volatile float m = a * xi; /* volatile: no contraction into an FMA */
        float o = m + yi;
        memcpy((char *)out + 4 * i, &o, 4);
    }
    *out_len = n * 4;
    return 0;
}

struct saxpy {
    static constexpr rk_actor_decl decl = {.name = "saxpy", .n_inputs = 3, .inputs = {"a", "x", "y"},
                                           .n_outputs = 1, .outputs = {"y"},
                                           .sizes = {RK_SIZE_OF_INPUT(2)}, .cpu = saxpy_cpu};
    __device__ static int run(const rk::gpu_ctx &c, const void *in, uint32_t in_len, void *out,
                              uint32_t cap, uint32_t *out_len)
    {
        rk_field f[3];
        if (const char *why = saxpy_fields(in, in_len, f))
            return rk::actor_error(c, out, cap, out_len, why);
        /* the fields lie at 16-byte offsets in the payload (rk/module.h),
         * which is at least 4-byte aligned: float loads are fine */
        const uint32_t n = (uint32_t)(f[1].len / 4);
        const float a = *(const float *)f[0].data;
        const float *x = (const float *)f[1].data, *y = (const float *)f[2].data;
        float *o = (float *)out;
        for (uint32_t i = c.rank; i < n; i += c.size)
            o[i] = __fadd_rn(__fmul_rn(a, x[i]), y[i]);
        *out_len = n * 4;
        return 0;
    }
};

/* ---- count: device-resident state ------------------------------------ */

__device__ unsigned long long sample_total; /* 0 when the module loads */
static uint64_t sample_total_cpu;
#define COUNT_BAD_ADD "count: add must be one u64 (8 bytes)"

static int count_cpu(const void *in, size_t in_len, void *out, size_t cap, size_t *out_len, void *user)
{
    (void)user;
    uint64_t add;
    if (in_len != 8)
        return sample_fail(out, cap, out_len, COUNT_BAD_ADD);
    memcpy(&add, in, 8);
    uint64_t t = sample_total_cpu += add; /* one consumer thread at a time (rk/module.h) */
    memcpy(out, &t, 8);
    *out_len = 8;
    return 0;
}

struct count {
    static constexpr rk_actor_decl decl = {.name = "count", .n_inputs = 1, .inputs = {"add"},
                                           .n_outputs = 1, .outputs = {"total"},
                                           .sizes = {RK_SIZE_FIXED(8)}, .cpu = count_cpu};
    __device__ static int run(const rk::gpu_ctx &c, const void *in, uint32_t in_len, void *out,
                              uint32_t cap, uint32_t *out_len)
    {
        if (in_len != 8)
            return rk::actor_error(c, out, cap, out_len, COUNT_BAD_ADD);
        if (c.rank == 0) {
            unsigned long long add;
            memcpy(&add, in, 8);
            unsigned long long t = atomicAdd(&sample_total, add) + add;
            memcpy(out, &t, 8);
        }
        *out_len = 8;
        return 0;
    }
};

/* ---- crash and spin: GPU only ----------------------------------------- */

struct crash {
    static constexpr rk_actor_decl decl = {.name = "crash", .n_inputs = 1, .inputs = {"why"},
                                           .n_outputs = 1, .outputs = {"none"},
                                           .sizes = {RK_SIZE_FIXED(0)}, .cpu = nullptr};
    __device__ static int run(const rk::gpu_ctx &c, const void *, uint32_t, void *, uint32_t,
                              uint32_t *out_len)
    {
        if (c.rank == 0) {
            /* an address no allocation has: an illegal-address fault */
            volatile int *bad = (volatile int *)(uintptr_t)0x10;
            *bad = 1;
        }
        *out_len = 0;
        return 0;
    }
};

struct spin {
    static constexpr rk_actor_decl decl = {.name = "spin", .n_inputs = 1, .inputs = {"why"},
                                           .n_outputs = 1, .outputs = {"none"},
                                           .sizes = {RK_SIZE_FIXED(0)}, .cpu = nullptr};
    __device__ static int run(const rk::gpu_ctx &, const void *, uint32_t, void *, uint32_t,
                              uint32_t *out_len)
    {
        *out_len = 0;
        for (volatile unsigned long long i = 0;; i = i + 1)
            ;
    }
};

RK_GPU_MODULE("sample_actors", saxpy, count, crash, spin);
