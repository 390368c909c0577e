/* rk/gpu_actor.cuh - GPU actors in a module: one list gives the ring
 * kernel its handlers and the runtime its declarations.
 *
 *     #include <rk/gpu_actor.cuh>
 *
 *     struct saxpy {
 *         // the declaration (rk/module.h); RK_ACTOR_GPU is added for you
 *         static constexpr rk_actor_decl decl = {
 *             .name = "saxpy", .n_inputs = 3, .inputs = {"a", "x", "y"},
 *             .n_outputs = 1, .outputs = {"y"}, .sizes = {RK_SIZE_OF_INPUT(2)},
 *             .cpu = saxpy_cpu};          // the CPU twin, or nullptr
 *         // the GPU handler: every thread of the group serving one request
 *         // runs it (a warp for inline messages, the worker grid for arena
 *         // payloads above 16 KiB): loop rank-strided, never wait for other
 *         // threads; rank 0's return value (0 or -RK_E*) and *out_len make
 *         // the reply. Fields: rk_fields_parse / rk_fields_layout; an
 *         // error of its own: return rk::actor_error(c, out, cap, out_len, "...").
 *         __device__ static int run(const rk::gpu_ctx &c, const void *in, uint32_t in_len,
 *                                   void *out, uint32_t out_cap, uint32_t *out_len);
 *     };
 *     RK_GPU_MODULE("my_actors", saxpy /, more... /)
 *
 * Build (one .cu, the CUDA runtime linked statically, nvcc's default):
 *
 *     nvcc -std=c++17 -arch=sm_90 -shared -Xcompiler -fPIC,-fvisibility=hidden \
 *         $(pkg-config --cflags rk) my_actors.cu -o my_actors.so
 *
 * then `rk-bridge --actors my_actors.so` (or rk_config.modules) serves each
 * actor by name. RK_GPU_MODULE instantiates the whole ring kernel with the
 * handlers compiled into its dispatch (no -rdc, no function pointers; they
 * are inlined like echo and vadd) and exports the module table, the i-th
 * actor served as message type RK_OP_USER + i. A runtime runs one ring
 * kernel, so a runtime loads at most one module built with RK_GPU_MODULE
 * (CPU-only modules beside it are fine).
 *
 * State: a GPU actor may keep device-resident state in __device__
 * variables across messages. After a fault the GPU worker is replaced by a
 * fresh process, which loads the module again: that state starts over from
 * its initial value (keep what must survive on the host side).
 *
 * Thread-safety and ownership: as rk/module.h says; the handler runs on the
 * GPU concurrently for different requests (one group each). */
#ifndef RK_GPU_ACTOR_CUH
#define RK_GPU_ACTOR_CUH

#include <string.h>
#include <utility>

/* installed: rk/device/; in ringkernel's source tree: device/ on the
 * include path */
#if __has_include("device/kernel.cuh")
#include "device/kernel.cuh"
#else
#include "kernel.cuh"
#endif
#include "rk/module.h"

namespace rk {

/* An actor's own error, from a GPU handler: every thread of the group
 * calls it; rank 0 writes the sentence (at most cap bytes) as the reply,
 * which the caller gets with status -RK_EACTOR (rk-bridge: ACTOR_FAILED).
 * Returns -RK_EACTOR, for the handler to return. */
__device__ inline int actor_error(const gpu_ctx &c, void *out, uint32_t cap, uint32_t *out_len,
                                  const char *why)
{
    uint32_t n = 0;
    while (why[n] && n < cap)
        n++;
    if (c.rank == 0)
        memcpy(out, why, n);
    *out_len = n;
    return -RK_EACTOR;
}

/* A's handler served as message type T (the module's i-th actor). */
template <uint16_t T, class A> struct typed_actor {
    static constexpr uint16_t type = T;
    __device__ static int run(const gpu_ctx &c, const void *in, uint32_t in_len, void *out,
                              uint32_t out_cap, uint32_t *out_len)
    {
        return A::run(c, in, in_len, out, out_cap, out_len);
    }
};

template <class A> constexpr rk_actor_decl gpu_decl()
{
    rk_actor_decl d = A::decl;
    d.flags |= RK_ACTOR_GPU;
    return d;
}

template <class Seq, class... A> struct gpu_module;
template <size_t... I, class... A> struct gpu_module<std::index_sequence<I...>, A...> {
    static_assert(sizeof...(A) > 0, "RK_GPU_MODULE needs at least one actor");
    static rk_kernel_desc kernel(const char *name)
    {
        return dev::make_desc<1024, typed_actor<(uint16_t)(RK_OP_USER + I), A>...>(name);
    }
    static constexpr rk_actor_decl decls[sizeof...(A)] = {gpu_decl<A>()...};
};

} // namespace rk

#define RK_GPU_MODULE(name_, ...)                                                                  \
    using rk__this_module = rk::gpu_module<std::index_sequence_for<__VA_ARGS__>, __VA_ARGS__>;     \
    static const rk_kernel_desc rk__module_kernel = rk__this_module::kernel(name_);                \
    RK_MODULE_EXPORT(name_, rk__this_module::decls, &rk__module_kernel)

#endif /* RK_GPU_ACTOR_CUH */
