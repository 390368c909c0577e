/* device/kernel.cuh - the persistent cooperative ring kernel, as a template
 * over the user's GPU actors (device/actor.cuh explains why a template).
 *
 * Roles (one cooperative grid, launched once per runtime):
 *   block 0, warp 0  DISPATCHER: polls the H2D ring in host memory. Idle, it
 *                    reads one slot per poll (a warp loads the whole 256-B
 *                    slot: lane i reads line i, so "a message is here" and
 *                    the message itself arrive in ONE PCIe round trip);
 *                    busy, the crew (warps 2..) reads up to 128 slots per
 *                    round trip, the next poll's in flight while this
 *                    one is answered (crew_pipe). Small messages
 *                    (echo, NOP) are answered straight from registers; the
 *                    rest is staged in shared memory and run by the warp,
 *                    or, for arena payloads above RK__WARP_ARENA_MAX, posted
 *                    as a job for the whole grid. No grid-wide barrier is
 *                    ever on the small-message path.
 *   block 0, warp 1  HOUSEKEEPER: writes the heartbeat, reads the stop word,
 *                    publishes H2D cons_head (so the dispatcher never stalls
 *                    on a system-scope release fence), and shuts the kernel
 *                    down cleanly.
 *   block 0, warps 2.. CREW: reads, checks and answers busy polls (crew.cuh).
 *   blocks 1..G-1    WORKERS: wait on DEVICE memory (job counter in the
 *                    scratch, __nanosleep backoff) and run grid jobs (large
 *                    vadd / echo / user actors) over all their threads.
 *
 * The dispatcher is the single producer of every reply (D2H) ring (a
 * reply goes to its actor's: reply.cuh): it hands the crew the positions
 * of a poll's replies, and posts the replies of finished grid jobs itself.
 * Lines are LL lines, so replies need no fence between them, except that
 * arena output is fenced (system scope) before the reply that points to it.
 * Host memory is only loaded and stored (ring.cuh), never RMW'd.
 *
 * This header is the kernel and its host-side entry points; the roles live
 * in ring.cuh (PTX vocabulary, ring geometry), block0.cuh (block 0's shared
 * state), ops.cuh (what a request runs), reply.cuh (D2H production),
 * crew.cuh, dispatch.cuh, idle.cuh and dispatcher.cuh (the dispatcher
 * warp's state, idle path and loop), housekeeper.cuh, jobs.cuh (grid jobs
 * and the workers) and experiments.cuh (RK_KERNEL_EXPERIMENTS builds
 * only).
 */
#ifndef RK_DEVICE_KERNEL_CUH
#define RK_DEVICE_KERNEL_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "block0.cuh"
#include "crew.cuh"
#include "dispatcher.cuh"
#include "housekeeper.cuh"
#include "jobs.cuh"
#include "kernel_desc.h"
#include "ops.cuh"
#include "reply.cuh"
#include "ring.cuh"
#include "rk/error.h"

namespace rk {
namespace dev {

template <unsigned MaxThreads, class... A>
__global__ void __launch_bounds__(MaxThreads) ring_kernel(rk_kargs ka)
{
    scratch *ds = static_cast<scratch *>(ka.scratch);
    const bool has_workers = gridDim.x > 1;
    if (blockIdx.x != 0) {
        worker<A...>(ka, ds);
        return;
    }
    __shared__ shared0 sh;
    if (threadIdx.x == 0) {
        /* acquire: pairs with the host consumer's store-release of the
         * ring's cons_head (ring.c), as d2h_wait's refresh does */
        sh.h2d_done = rk__ld_acquire_sys(&static_cast<rk_ring *>(ka.h2d)->cons_head);
        sh.stop = 0;
        sh.jobs_posted = 0;
        sh.dispatcher_done = 0;
        sh.loader_quit = 0;
        sh.poll_pos = 0;
    }
    __syncthreads();
    const uint32_t warp = threadIdx.x / 32;
    const bool has_loader = blockDim.x >= 96;
    if (warp == 0)
        dispatcher<A...>(ka, sh, ds, has_workers, has_loader);
    else if (warp == 1)
        housekeeper<A...>(ka, sh, ds, has_workers);
#ifdef RK_KERNEL_EXPERIMENTS
    else if (ka.flags & RK_KF_SERIAL)
        crew(ka, sh); /* comparison: the serial busy path on every block */
#endif
    else
        crew_pipe(ka, sh, warp - 2, blockDim.x / 32 - 2, blockDim.x - 32);
}

/* ---- host-side entry points, compiled in the kernel's translation unit ---- */
template <unsigned MaxThreads, class... A> struct kernel_host {
    static int launch(const rk_kargs *args, unsigned grid, unsigned block, unsigned smem, void *stream)
    {
        rk_kargs copy = *args;
        void *params[] = {&copy};
        return (int)cudaLaunchCooperativeKernel((const void *)ring_kernel<MaxThreads, A...>, dim3(grid), dim3(block),
                                                params, smem, (cudaStream_t)stream);
    }
    static int attrs(int *max_threads, size_t *static_smem, int *num_regs)
    {
        cudaFuncAttributes fa;
        cudaError_t e = cudaFuncGetAttributes(&fa, (const void *)ring_kernel<MaxThreads, A...>);
        if (e == cudaSuccess) {
            *max_threads = fa.maxThreadsPerBlock;
            *static_smem = fa.sharedSizeBytes;
            *num_regs = fa.numRegs;
        }
        return (int)e;
    }
    static int occupancy(int *blocks_per_sm, int block, size_t dyn_smem)
    {
        return (int)cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, ring_kernel<MaxThreads, A...>, block,
                                                                  dyn_smem);
    }
    static int set_max_dyn_smem(int bytes)
    {
        return (int)cudaFuncSetAttribute((const void *)ring_kernel<MaxThreads, A...>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    }
};

template <unsigned MaxThreads, class... A> rk_kernel_desc make_desc(const char *name)
{
    rk_kernel_desc d = {};
    d.magic = RK_KDESC_MAGIC;
    d.version = RK_KDESC_VERSION;
    d.name = name;
    const uint16_t types[] = {A::type..., 0};
    static_assert(sizeof...(A) <= RK_KDESC_MAX_TYPES, "too many GPU actors in one kernel");
    d.n_types = sizeof...(A);
    for (uint32_t i = 0; i < d.n_types; i++)
        d.types[i] = types[i];
    d.launch = kernel_host<MaxThreads, A...>::launch;
    d.attrs = kernel_host<MaxThreads, A...>::attrs;
    d.occupancy = kernel_host<MaxThreads, A...>::occupancy;
    d.set_max_dyn_smem = kernel_host<MaxThreads, A...>::set_max_dyn_smem;
#ifdef RK_KERNEL_EXPERIMENTS
    d.features |= RK_KDESC_F_EXPERIMENTS;
#endif
    return d;
}

} // namespace dev
} // namespace rk

#endif
