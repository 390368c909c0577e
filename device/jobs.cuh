/* device/jobs.cuh - grid jobs: arena payloads above RK__WARP_ARENA_MAX run
 * over every thread of the worker blocks (blocks 1..G-1). The dispatcher
 * posts a job to a queue in the device scratch, the workers wait on it in
 * DEVICE memory, the last block to finish publishes completion, and the
 * dispatcher posts the reply. */
#ifndef RK_DEVICE_JOBS_CUH
#define RK_DEVICE_JOBS_CUH

#include <stddef.h>
#include <stdint.h>

#include "block0.cuh"
#include "kernel_desc.h"
#include "ops.cuh"
#include "reply.cuh"
#include "ring.cuh"

namespace rk {
namespace dev {

constexpr uint32_t RK__WARP_ARENA_MAX = 16384; /* larger arena payloads go to the grid */
constexpr uint32_t NJ = 16;                   /* grid job queue entries */
/* region->running: [0] the dispatcher warp's request, [1 + j] job entry j's */
static_assert(1 + NJ <= RK__RUNNING_SLOTS, "a running slot per grid job entry");

/* one grid job: the request's header + arena ref as message words 1..12 */
struct job {
    uint32_t words[13];
    uint32_t op; /* 0 run, 1 quit */
    int32_t status;
    uint32_t out_len;
};
struct scratch {
    uint32_t job_posted;
    uint32_t pad0[31];
    uint32_t job_completed;
    uint32_t pad1[31];
    uint32_t job_done[NJ];
    uint32_t pad2[32 - NJ];
    job jobs[NJ];
    /* dispatcher counters, written when it stops (rk-bench reads them):
     * loops, busy polls, messages, D2H head refreshes, cycles loading,
     * cycles processing, idle polls */
    unsigned long long stats[8];
    unsigned long long idle_wait; /* the adaptive idle wait at stop, cycles (idle_adapt) */
    uint32_t read1_hist[RK_READ1_ROWS][RK_READ1_BINS]; /* RK_KF_READ1_HIST (experiments.cuh) */
};
static_assert(sizeof(scratch) <= RK_KERNEL_SCRATCH_BYTES, "scratch too large");
static_assert(offsetof(scratch, stats) == RK_KERNEL_STATS_OFFSET, "stats offset");
static_assert(offsetof(scratch, idle_wait) == RK_KERNEL_IDLE_WAIT_OFFSET, "idle wait offset");
static_assert(offsetof(scratch, read1_hist) == RK_KERNEL_READ1_HIST_OFFSET, "first-read histogram offset");

/* Posts the replies of the grid jobs that finished, each on its actor's
 * reply ring (out: ring 0's view; dpos, dhead: one ring a lane). */
__device__ __noinline__ void post_job_replies(const rk_kargs &ka, scratch *ds, shared0 &sh, const ring_view &out,
                                              uint64_t &dpos, uint64_t &dhead, uint32_t &replied, uint32_t lane)
{
    uint32_t completed = 0;
    /* acquire (gpu): pairs with the last worker block's release of
     * job_completed, so the jobs' status and out_len are visible */
    if (lane == 0)
        completed = rk__ld_acquire_gpu(&ds->job_completed);
    completed = __shfl_sync(FULL, completed, 0);
    if (completed == replied)
        return;
    /* release: the workers' arena output (fenced at system scope by each
     * block before it counted itself done) before the replies' lines */
    rk__fence_release_sys();
    while (replied != completed) {
        const job *j = &ds->jobs[replied % NJ];
        uint32_t *r = sh.jreply;
        if (lane < 13)
            r[lane] = j->words[lane];
        __syncwarp();
        if (lane == 0) {
            r[0] = sizeof(rk_msg_hdr) + sizeof(rk_arena_ref);
            r[5] = (uint32_t)j->status;
            r[6] = reply_has_data(j->status) ? j->out_len : 0;
        }
        __syncwarp();
        d2h_post_words(ka, out, dpos, dhead, sh, r, lane);
        if (lane == 0 && (j->words[RK__W_TYPE] & 0xffffu) > RK_OP_VADD) /* answered: no longer running */
            rk__st_relaxed_sys(&ka.region->running[1 + replied % NJ], 0ull);
        __syncwarp();
        replied++;
    }
}

/* Posts the staged request w (words 0..12: its header and arena ref) as a
 * grid job, once the queue has room (posting the replies of finished jobs
 * meanwhile). Its reply follows when the workers are done
 * (post_job_replies). */
__device__ __forceinline__ void post_job(const rk_kargs &ka, scratch *ds, shared0 &sh, const ring_view &out,
                                         const uint32_t *w, uint64_t &dpos, uint64_t &dhead, uint32_t &posted,
                                         uint32_t &replied, uint32_t lane, uint64_t run)
{
    uint32_t ns = 0;
    /* The entry this job overwrites is free once its reply is posted:
     * post_job_replies reads the entry's words for it. (Until 2026-11-26
     * this waited for the workers only, and a 17th job in flight could
     * overwrite a finished job whose reply was not posted yet: that reply
     * went out under the new job's id and the old request got none.)
     * replied <= job_completed, so the workers are done with it too: their
     * release of job_completed was acquired by post_job_replies. */
    while (posted - replied >= NJ) {
        post_job_replies(ka, ds, sh, out, dpos, dhead, replied, lane);
        if (posted - replied < NJ)
            break;
        __nanosleep(ns);
        ns = ns < 4096 ? ns * 2 + 32 : ns;
    }
    job *j = &ds->jobs[posted % NJ];
    if (run && lane == 0) /* not a trusted built-in: its running slot (rk_abi.h) */
        rk__st_relaxed_sys(&ka.region->running[1 + posted % NJ], run);
    if (lane < 13)
        j->words[lane] = w[lane];
    if (lane == 0)
        j->op = 0;
    __syncwarp();
    if (lane == 0) {
        /* release (gpu): the job's words before the counter;
         * pairs with the workers' acquire of job_posted */
        rk__st_release_gpu(&ds->job_posted, posted + 1);
        flag_st(&sh.jobs_posted, posted + 1);
    }
    posted++;
    __syncwarp();
}

/* ---- worker blocks ---- */
template <class... A>
__device__ void worker(const rk_kargs &ka, scratch *ds)
{
    __shared__ uint32_t s_op;
    const uint32_t nworkers = gridDim.x - 1;
    const gpu_ctx c{(blockIdx.x - 1) * blockDim.x + threadIdx.x, nworkers * blockDim.x, true};
    uint32_t next = 0;
    for (;;) {
        if (threadIdx.x == 0) {
            uint32_t ns = 0, spins = 0;
            /* acquire: pairs with the dispatcher's release of job_posted */
            while (rk__ld_acquire_gpu(&ds->job_posted) <= next) {
                if (++spins > 64) {
                    __nanosleep(ns);
                    ns = ns < 20000 ? ns * 2 + 128 : ns;
                }
            }
            s_op = ds->jobs[next % NJ].op;
        }
        __syncthreads();
        job *j = &ds->jobs[next % NJ];
        if (s_op == 1)
            return;
        const uint32_t *w = j->words;
        const uint16_t type = (uint16_t)(w[1] & 0xffffu);
        const uint32_t hlen = w[6];
        const uint64_t in_off = w[7] | ((uint64_t)w[8] << 32);
        const uint64_t out_off = w[9] | ((uint64_t)w[10] << 32);
        const uint64_t out_cap = w[11] | ((uint64_t)w[12] << 32);
        /* acquire: the arena payload (the host's release fence before the
         * request's lines; the dispatcher validated them) */
        rk__fence_acquire_sys();
        uint32_t out_len = 0;
        int st = run_op<A...>(ka, type, c, ka.arena + in_off, hlen, ka.arena + out_off, out_cap, &out_len);
        if (c.rank == 0) {
            j->status = st;
            j->out_len = out_len;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            /* release at system scope: this block's arena output (cumulative
             * over the block through the barrier) before the completion */
            __threadfence_system();
            const uint32_t prev = atomicAdd(&ds->job_done[next % NJ], 1u);
            if (prev == nworkers - 1) {
                ds->job_done[next % NJ] = 0;
                __threadfence_system();
                /* release (gpu): the job's status / out_len before the
                 * counter; pairs with the dispatcher's acquire of
                 * job_completed (post_job_replies, post_job) */
                rk__st_release_gpu(&ds->job_completed, next + 1);
            }
        }
        next++;
    }
}

} // namespace dev
} // namespace rk

#endif
