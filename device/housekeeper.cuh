/* device/housekeeper.cuh - the housekeeper warp (block 0, warp 1): the
 * heartbeat, the stop word, lazy publication of H2D cons_head, and the
 * clean stop (workers' quit job, indices handed back to the host). */
#ifndef RK_DEVICE_HOUSEKEEPER_CUH
#define RK_DEVICE_HOUSEKEEPER_CUH

#include <stdint.h>

#include "block0.cuh"
#include "jobs.cuh"
#include "kernel_desc.h"
#include "ring.cuh"

namespace rk {
namespace dev {

/* ---- the housekeeper warp (block 0, warp 1) ---- */
template <class... A>
__device__ void housekeeper_lane0(const rk_kargs &ka, shared0 &sh, scratch *ds, bool has_workers);

/* the whole warp stays until the end (lane 0 works) so that no warp of
 * block 0 is partly exited while the others use named barriers */
template <class... A>
__device__ void housekeeper(const rk_kargs &ka, shared0 &sh, scratch *ds, bool has_workers)
{
    if ((threadIdx.x & 31) == 0)
        housekeeper_lane0<A...>(ka, sh, ds, has_workers);
    __syncwarp();
}

template <class... A>
__device__ void housekeeper_lane0(const rk_kargs &ka, shared0 &sh, scratch *ds, bool has_workers)
{
    const ring_view in = ring_open(static_cast<rk_ring *>(ka.h2d));
    const ring_view out0 = ring_open(static_cast<rk_ring *>(ka.d2h));
    uint64_t published = flag_ld(&sh.h2d_done), last_seen = published, t_change = 0;
    uint64_t last_hb = 0;
    uint32_t ns = 0;

    /* release: pairs with the host's load-acquire of state (the CUDA
     * backend waits for RUNNING before its self-test ping) */
    rk__st_release_sys(&ka.region->state, (int32_t)RK__STATE_RUNNING);
    for (;;) {
        const uint64_t now = rk__globaltimer();
        if (now - last_hb > 200000ull) { /* 0.2 ms */
            rk__st_relaxed_sys(&ka.region->heartbeat, now);
            last_hb = now;
        }
        /* acquire: pairs with the host's store-release of stop */
        const uint32_t s = rk__ld_acquire_sys(&ka.region->stop);
        if (s > flag_ld(&sh.stop))
            flag_st(&sh.stop, s);
        /* publish consumption. release: orders the dispatcher's reads of
         * the slots (before its cta-release of h2d_done, acquired here)
         * before the host may overwrite them */
        const uint64_t done = flag_ld(&sh.h2d_done);
        bool busy = false;
        /* lazily: producers need cons_head only when the ring looks full,
         * and each release store here is a system fence on the dispatcher's
         * SM; publish after slots/8 positions, or once the dispatcher has
         * stopped moving */
        if (done != last_seen) {
            last_seen = done;
            t_change = now;
            busy = true;
        }
        if (done != published && (done - published >= (in.slots + 7) / 8 || now - t_change > 20000ull)) {
            rk__st_release_sys(in.cons_head, done);
            published = done;
        }
        if (flag_ld(&sh.dispatcher_done))
            break;
        /* nothing here is urgent (publication is lazy, stop and the
         * heartbeat are millisecond matters): never spin, so this warp's
         * system-scope reads stay out of the dispatcher's way */
        if (busy)
            ns = 2000;
        else
            ns = ns < 20000 ? ns * 2 + 256 : ns;
        __nanosleep(ns);
    }
    /* clean stop: workers quit, indices go back to the host */
    if (has_workers) {
        const uint32_t p = flag_ld(&sh.jobs_posted);
        uint32_t spins = 0;
        /* acquire (gpu): pairs with the workers' release of job_completed
         * (the entry the quit job takes is free) */
        while (p - rk__ld_acquire_gpu(&ds->job_completed) >= NJ && spins++ < 100000)
            __nanosleep(1000);
        ds->jobs[p % NJ].op = 1;
        /* release (gpu): the quit op before the counter; pairs with the
         * workers' acquire of job_posted */
        rk__st_release_gpu(&ds->job_posted, p + 1);
    }
    /* release: the dispatcher's slot reads before cons_head, every reply
     * line (the crew's issued before the dispatcher's last barrier 1, the
     * dispatcher's own; both acquired here through d2h_tail) before each
     * reply ring's prod_tail; the host loads them with acquire (ring.c's
     * producers, the next launch's dispatch_open) */
    rk__st_release_sys(in.cons_head, (uint64_t)flag_ld(&sh.h2d_done));
    for (uint32_t r = 0; r < ka.d2h_rings; r++)
        rk__st_release_sys(ring_at(out0, ka.d2h_stride, r).prod_tail, (uint64_t)flag_ld(&sh.d2h_tail[r]));
    rk__st_relaxed_sys(&ka.region->heartbeat, rk__globaltimer());
    /* release: the indices above before the state; pairs with a host
     * load-acquire of state */
    rk__st_release_sys(&ka.region->state, (int32_t)RK__STATE_STOPPED);
}

} // namespace dev
} // namespace rk

#endif
