/* device/actor.cuh - user-defined GPU actors.
 *
 * In your own .cu file:
 *
 *     #include "actor.cuh"            // from ringkernel's device/ folder
 *
 *     struct saxpy {
 *         static constexpr uint16_t type = RK_OP_USER + 1;
 *         // Called by every thread of the group serving one request (a warp
 *         // for inline messages, the whole worker grid for arena payloads
 *         // above 16 KiB): loop rank-strided, never wait for other threads.
 *         // Rank 0's return value (0 or -RK_E*) and *out_len make the reply.
 *         __device__ static int run(const rk::gpu_ctx &c, const void *in, uint32_t in_len,
 *                                   void *out, uint32_t out_cap, uint32_t *out_len);
 *     };
 *     RK_GPU_ACTOR_HANDLE(my_actors, saxpy)      // several: (my_actors, saxpy, other)
 *
 * and in the host code:
 *
 *     extern const rk_kernel_desc my_actors;     // #include "kernel_desc.h"
 *     rk_actor_def def = {.type = RK_OP_USER + 1, .name = "saxpy",
 *                         .cpu = saxpy_cpu, .gpu = &my_actors};
 *
 * RK_GPU_ACTOR_HANDLE instantiates the whole ring kernel (kernel.cuh) with
 * your actors compiled into its dispatch, in YOUR translation unit, and
 * exports a descriptor the CUDA backend launches instead of the built-in
 * kernel. No -rdc, no device linking, no function pointers: the handler
 * is inlined into the dispatcher like echo and vadd (device/README.md says
 * why). All GPU actors of one runtime must come from one handle.
 */
#ifndef RK_DEVICE_ACTOR_CUH
#define RK_DEVICE_ACTOR_CUH

#include "kernel.cuh"

#define RK_GPU_ACTOR_HANDLE(name, ...)                                                             \
    extern "C" const rk_kernel_desc name = rk::dev::make_desc<1024, __VA_ARGS__>(#name)

/* The same with __launch_bounds__(max_threads): for register-hungry
 * handlers (the kernel's own block limit then drops to max_threads). */
#define RK_GPU_ACTOR_HANDLE_BOUNDED(name, max_threads, ...)                                        \
    extern "C" const rk_kernel_desc name = rk::dev::make_desc<max_threads, __VA_ARGS__>(#name)

#endif
