/* device/housekeeper.cuh - the housekeeper warp (block 0, warp 1): the
 * heartbeat, the stop word, lazy publication of H2D cons_head, and the
 * clean stop (workers' quit job, indices handed back to the host); where
 * the H2D ring has a mirror, between its rounds, the reader (reader.cuh). */
#ifndef RK_DEVICE_HOUSEKEEPER_CUH
#define RK_DEVICE_HOUSEKEEPER_CUH

#include <stdint.h>

#include "block0.cuh"
#include "jobs.cuh"
#include "kernel_desc.h"
#include "reader.cuh"
#include "ring.cuh"

namespace rk {
namespace dev {

/* ---- the housekeeper warp (block 0, warp 1) ---- */

/* Lane 0's state between its steps. */
struct hk_state {
    ring_view in;
    uint64_t published, last_seen, t_change, last_hb;
    uint32_t ns; /* the next pause, ns */
};

__device__ __forceinline__ void hk_open(const rk_kargs &ka, shared0 &sh, hk_state &h)
{
    h.in = ring_open(static_cast<rk_ring *>(ka.h2d));
    h.published = flag_ld(&sh.h2d_done);
    h.last_seen = h.published;
    h.t_change = 0;
    h.last_hb = 0;
    h.ns = 0;
    /* release: pairs with the host's load-acquire of state (the CUDA
     * backend waits for RUNNING before its self-test ping) */
    rk__st_release_sys(&ka.region->state, (int32_t)RK__STATE_RUNNING);
}

/* One round of lane 0's work, with the stop word s it read: the
 * heartbeat, the stop, publication. True once the dispatcher is done;
 * else h.ns is the pause before the next round. */
__device__ __forceinline__ bool hk_step(const rk_kargs &ka, shared0 &sh, hk_state &h, uint32_t s)
{
    const uint64_t now = rk__globaltimer();
    if (now - h.last_hb > 200000ull) { /* 0.2 ms */
        rk__st_relaxed_sys(&ka.region->heartbeat, now);
        h.last_hb = now;
    }
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
    if (done != h.last_seen) {
        h.last_seen = done;
        h.t_change = now;
        busy = true;
    }
    if (done != h.published && (done - h.published >= (h.in.slots + 7) / 8 || now - h.t_change > 20000ull)) {
        rk__st_release_sys(h.in.cons_head, done);
        h.published = done;
    }
    if (flag_ld(&sh.dispatcher_done))
        return true;
    /* nothing here is urgent (publication is lazy, stop and the
     * heartbeat are millisecond matters): never spin, so this warp's
     * system-scope reads stay out of the dispatcher's way */
    if (busy)
        h.ns = 2000;
    else
        h.ns = h.ns < 20000 ? h.ns * 2 + 256 : h.ns;
    return false;
}

/* The housekeeper of a ring without a mirror: lane 0's rounds, a pause
 * between them. */
__device__ __forceinline__ void hk_loop(const rk_kargs &ka, shared0 &sh, hk_state &h)
{
    /* acquire: pairs with the host's store-release of stop */
    while (!hk_step(ka, sh, h, rk__ld_acquire_sys(&ka.region->stop)))
        __nanosleep(h.ns);
}

/* ... with a mirror: the whole warp is the reader (reader.cuh) between
 * the rounds, and a round's read of the stop word rides along with a
 * mirror read while the dispatcher's stamps come (one every round trip of
 * a host that calls and waits); on its own it would keep the reader away
 * for a whole read. Rounds come at least every READER_HK_LATE cycles. */
constexpr long long READER_HK_LATE = 40000; /* ~20 us */

__device__ __forceinline__ void hk_read_loop(const rk_kargs &ka, shared0 &sh, hk_state &h, uint32_t lane)
{
    const ring_view in = ring_open(static_cast<rk_ring *>(ka.h2d));
    uint64_t last = 0;
    bool slot_read = true; /* the last stamp's slot read again (or none wanted) */
    long long due = clock64(), stamped = due - 2 * READER_HK_LATE;
    for (;;) {
        const uint64_t s = reader_look(&sh.rd_stamp, lane);
        const long long now = __shfl_sync(FULL, clock64(), 0);
        const bool round = now >= due;
        uint32_t stop = 0;
        const bool served = s != last;
        if (served) {
            last = s;
            stamped = now;
            slot_read = reader_serve(sh, ka.h2d_mirror, in, s, round ? &ka.region->stop : nullptr, &stop, lane);
        } else if (!slot_read && reader_look(&sh.rd_miss, lane) == last) {
            /* a miss seen after the watch (the dispatcher's read slow) */
            reader_slot(sh, in, last, lane);
            slot_read = true;
        }
        /* stamps coming: the round waits for one, up to READER_HK_LATE */
        if (round && (served || now - stamped > READER_HK_LATE || now - due > READER_HK_LATE)) {
            uint32_t quit = 0, ns = 0;
            if (lane == 0) {
                /* acquire: pairs with the host's store-release of stop */
                if (!served || stop)
                    stop = rk__ld_acquire_sys(&ka.region->stop);
                quit = hk_step(ka, sh, h, stop);
                ns = h.ns;
            }
            if (__shfl_sync(FULL, quit, 0))
                return;
            due = clock64() + 2ll * __shfl_sync(FULL, ns, 0); /* ~2 cycles a ns */
        } else if (!served) {
            __nanosleep(64); /* a stamp comes ahead of its read time (the wait): seen in time */
        }
    }
}

/* The clean stop: workers quit, indices go back to the host (lane 0). */
__device__ __forceinline__ void hk_close(const rk_kargs &ka, shared0 &sh, scratch *ds, const hk_state &h,
                                         bool has_workers)
{
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
    rk__st_release_sys(h.in.cons_head, (uint64_t)flag_ld(&sh.h2d_done));
    const ring_view out0 = ring_open(static_cast<rk_ring *>(ka.d2h));
    for (uint32_t r = 0; r < ka.d2h_rings; r++)
        rk__st_release_sys(ring_at(out0, ka.d2h_stride, r).prod_tail, (uint64_t)flag_ld(&sh.d2h_tail[r]));
    rk__st_relaxed_sys(&ka.region->heartbeat, rk__globaltimer());
    /* release: the indices above before the state; pairs with a host
     * load-acquire of state */
    rk__st_release_sys(&ka.region->state, (int32_t)RK__STATE_STOPPED);
}

/* the whole warp stays until the end (lane 0 works, or every lane reads)
 * so that no warp of block 0 is partly exited while the others use named
 * barriers */
template <class... A>
__device__ void housekeeper(const rk_kargs &ka, shared0 &sh, scratch *ds, bool has_workers)
{
    const uint32_t lane = threadIdx.x & 31;
    hk_state h = {};
    if (lane == 0)
        hk_open(ka, sh, h);
    if (ka.h2d_mirror)
        hk_read_loop(ka, sh, h, lane);
    else if (lane == 0)
        hk_loop(ka, sh, h);
    __syncwarp();
    if (lane == 0)
        hk_close(ka, sh, ds, h, has_workers);
    __syncwarp();
}

} // namespace dev
} // namespace rk

#endif
