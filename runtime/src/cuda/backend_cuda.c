/* backend_cuda.c - the CUDA backend: registers the shared region with the
 * device (mapped), launches the persistent cooperative ring kernel
 * (device/kernel.cuh), proves with a ping through the rings that polling
 * host memory works here, and watches the kernel: a CUDA error or a dead
 * heartbeat fails the runtime with -RK_EDEVICE within about 100 ms
 * (watchdog period 20 ms, heartbeat deadline 500 ms; the kernel stamps it
 * every 0.2 ms). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "../barrier.h"
#include "cuda_internal.h"

#define RK__WATCH_PERIOD_NS 20000000ll    /* 20 ms */
#define RK__HEARTBEAT_DEADLINE_NS 500000000ll
#define RK__STOP_WAIT_NS 3000000000ll

typedef struct rk__cuda {
    int device;
    const rk_kernel_desc *kd;
    rk__cuda_limits lim;
    cudaStream_t stream;
    void *scratch;
    bool registered;
    uint8_t *dregion; /* device pointer of the region */
    rk_kargs args;
    uint32_t grid, block, smem;
    bool running;     /* a kernel was launched and not yet stopped */
    pthread_mutex_t lock; /* launch/stop vs the watchdog */
    pthread_t watchdog;
    bool wd_started;
    _Atomic bool wd_quit;
    _Atomic int fault;
    int64_t hb_deadline_ns; /* RK_CUDA_HEARTBEAT_MS overrides (sanitizers slow the kernel) */
} rk__cuda;

static int rk__cuda_int_env(const char *name, int def)
{
    const char *e = getenv(name);
    return e && *e ? atoi(e) : def;
}

static void rk__cuda_set_fault(rk_runtime *rt, rk__cuda *c, const char *why)
{
    int expected = 0;
    if (atomic_compare_exchange_strong(&c->fault, &expected, -RK_EDEVICE)) {
        rk__st_release(&rt->region->state, (int32_t)-RK_EDEVICE);
        rk__runtime_fault(rt, -RK_EDEVICE, why);
    }
}

/* Launches the kernel with c->grid/block/smem (validated). */
static int rk__cuda_launch(rk_runtime *rt, rk__cuda *c, uint32_t flags)
{
    cudaError_t e = cudaMemsetAsync(c->scratch, 0, RK_KERNEL_SCRATCH_BYTES, c->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess)
        return rk__fail(RK_EDEVICE, "clearing the ring kernel's scratch failed: %s", cudaGetErrorString(e));
    rk__st_relaxed(&rt->region->stop, 0u);
    rk__st_release(&rt->region->state, (int32_t)RK__STATE_INIT);
    c->args.d2h_start = rk__ld_acquire(&rt->d2h->prod_tail);
    /* RK_CUDA_KFLAGS: kernel experiment flags (device/kernel_desc.h RK_KF_*), for rk-bench */
    c->args.flags = flags | (uint32_t)rk__cuda_int_env("RK_CUDA_KFLAGS", 0);
    int le = c->kd->launch(&c->args, c->grid, c->block, c->smem, c->stream);
    if (le) {
        cudaGetLastError();
        int code = le == cudaErrorCooperativeLaunchTooLarge ? RK_EGRID : RK_EDEVICE;
        return rk__fail(code, "cudaLaunchCooperativeKernel(grid %u, block %u, smem %u B) failed on %s: %s",
                        c->grid, c->block, c->smem, c->lim.name, cudaGetErrorString((cudaError_t)le));
    }
    c->running = true;
    return 0;
}

/* Waits for the running kernel to return. Returns 0, or -RK_EDEVICE when it
 * faulted or would not stop. */
static int rk__cuda_halt(rk_runtime *rt, rk__cuda *c)
{
    if (!c->running)
        return 0;
    /* release: pairs with the housekeeper's load-acquire of stop */
    rk__st_release(&rt->region->stop, 1u);
    int64_t t0 = rk__now_ns();
    cudaError_t e;
    bool hard = false;
    while ((e = cudaStreamQuery(c->stream)) == cudaErrorNotReady) {
        int64_t dt = rk__now_ns() - t0;
        if (!hard && dt > RK__STOP_WAIT_NS) {
            /* the host stopped draining D2H, or a job hangs: abort */
            rk__st_release(&rt->region->stop, 2u);
            hard = true;
        }
        if (dt > 2 * RK__STOP_WAIT_NS) {
            rk__log(RK__LOG_ERROR, "ring kernel on %s did not stop within %lld ms; leaving it", c->lim.name,
                    (long long)(dt / 1000000));
            c->running = false;
            return rk__fail(RK_EDEVICE, "ring kernel did not stop");
        }
        rk__sleep_ns(200000);
    }
    c->running = false;
    rk__st_relaxed(&rt->region->stop, 0u);
    if (e != cudaSuccess)
        return rk__fail(RK_EDEVICE, "ring kernel failed: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    return 0;
}

static void *rk__cuda_watchdog(void *arg)
{
    rk_runtime *rt = arg;
    rk__cuda *c = rt->backend_state;
    cudaSetDevice(c->device);
    uint64_t last_hb = 0;
    int64_t last_change = rk__now_ns();
    while (!atomic_load(&c->wd_quit)) {
        rk__sleep_ns(RK__WATCH_PERIOD_NS);
        pthread_mutex_lock(&c->lock);
        if (c->running && !atomic_load(&c->fault)) {
            cudaError_t e = cudaStreamQuery(c->stream);
            int64_t now = rk__now_ns();
            uint64_t hb = rk__ld_relaxed(&rt->region->heartbeat);
            if (hb != last_hb) {
                last_hb = hb;
                last_change = now;
            }
            char why[256];
            if (e != cudaErrorNotReady) {
                snprintf(why, sizeof why, "ring kernel on %s %s: %s", c->lim.name,
                         e == cudaSuccess ? "exited unexpectedly" : "faulted",
                         e == cudaSuccess ? "no CUDA error" : cudaGetErrorString(e));
                c->running = e == cudaSuccess ? false : c->running;
                rk__cuda_set_fault(rt, c, why);
            } else if (now - last_change > c->hb_deadline_ns) {
                snprintf(why, sizeof why, "ring kernel on %s: heartbeat silent for %lld ms", c->lim.name,
                         (long long)((now - last_change) / 1000000));
                rk__cuda_set_fault(rt, c, why);
            }
        } else {
            last_change = rk__now_ns();
        }
        pthread_mutex_unlock(&c->lock);
    }
    return NULL;
}

static void rk__cuda_free(rk_runtime *rt, rk__cuda *c)
{
    if (c->scratch)
        cudaFree(c->scratch);
    if (c->stream)
        cudaStreamDestroy(c->stream);
    if (c->registered)
        cudaHostUnregister(rt->region);
    cudaGetLastError();
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static void rk__cuda_fill_info(rk_runtime *rt, rk__cuda *c)
{
    rk_info *in = &rt->info;
    in->backend = RK_BACKEND_CUDA;
    strcpy(in->backend_name, "cuda");
    in->has_device = 1;
    snprintf(in->device_name, sizeof in->device_name, "%s", c->lim.name);
    in->sm_count = c->lim.sm_count;
    in->cc_major = c->lim.cc_major;
    in->cc_minor = c->lim.cc_minor;
    in->grid = c->grid;
    in->block = c->block;
    in->smem = c->smem;
    in->max_grid = c->lim.max_grid;
    in->max_block = (uint32_t)(c->lim.max_block_kernel < c->lim.max_block_dev ? c->lim.max_block_kernel
                                                                              : c->lim.max_block_dev);
    in->max_smem = c->lim.max_smem;
}

/* One ping through the rings: proves the kernel sees host writes and the
 * host sees the kernel's. No actor exists yet, so we drain D2H ourselves. */
static int rk__cuda_selftest(rk_runtime *rt, rk__cuda *c)
{
    const int timeout_ms = rk__cuda_int_env("RK_CUDA_SELFTEST_MS", 5000);
    rk_msg_hdr h = {.type = RK_OP_NOP, .actor = 0xffff, .id = 0x5e1f7e575e1f7e57ull};
    int rc = rk_ring_mp_enqueue(rt->h2d, &h, sizeof h);
    if (rc)
        return rk__fail(RK_ESELFTEST, "self-test: cannot enqueue the ping: %s", rk_last_detail());
    int64_t t0 = rk__now_ns(), deadline = t0 + (int64_t)timeout_ms * 1000000;
    uint8_t buf[RK_RING_SLOT_MAX / 2];
    for (;;) {
        uint32_t len = 0;
        rc = rk_ring_sc_dequeue(rt->d2h, buf, sizeof buf, &len);
        if (rc == 0) {
            rk_msg_hdr r;
            memcpy(&r, buf, sizeof r);
            if (len < sizeof r || r.id != h.id || r.type != RK_OP_NOP || r.status != 0)
                return rk__fail(RK_ESELFTEST, "self-test: wrong reply (len %u, type %u, id %llx, status %d)", len,
                                r.type, (unsigned long long)r.id, r.status);
            rk__log(RK__LOG_INFO, "CUDA self-test: ping through the rings in %.1f us",
                    (double)(rk__now_ns() - t0) / 1e3);
            return 0;
        }
        if (rc != -RK_EAGAIN)
            return rk__fail(RK_ESELFTEST, "self-test: bad reply: %s", rk_last_detail());
        cudaError_t e = cudaStreamQuery(c->stream);
        if (e != cudaErrorNotReady)
            return rk__fail(RK_ESELFTEST, "self-test: the ring kernel %s: %s",
                            e == cudaSuccess ? "exited" : "faulted", cudaGetErrorString(e));
        if (rk__now_ns() > deadline)
            return rk__fail(RK_ESELFTEST,
                            "self-test: no reply to a ping through the rings within %d ms: the device does not see host writes to mapped memory on this machine (or the kernel is not running)",
                            timeout_ms);
        rk__sleep_ns(rk__now_ns() - t0 < 10000000 ? 2000 : 200000);
    }
}

static int rk__cuda_start(rk_runtime *rt)
{
    rk__cuda *c = calloc(1, sizeof *c);
    if (!c)
        return rk__fail(RK_ENOMEM, "CUDA backend: out of memory");
    pthread_mutex_init(&c->lock, NULL);
    c->device = rt->cfg.device;
    c->hb_deadline_ns = (int64_t)rk__cuda_int_env("RK_CUDA_HEARTBEAT_MS", 0) * 1000000;
    if (c->hb_deadline_ns <= 0)
        c->hb_deadline_ns = RK__HEARTBEAT_DEADLINE_NS;
    c->grid = rt->cfg.grid;
    c->block = rt->cfg.block;
    c->smem = rt->cfg.smem;
    int rc = rk__cuda_check_device(c->device, &c->lim);
    if (rc == 0)
        rc = rk__cuda_pick_kernel(rt, &c->kd);
    cudaError_t e = cudaSuccess;
    if (rc == 0) {
        e = cudaSetDevice(c->device);
        if (e != cudaSuccess)
            rc = rk__fail(RK_ENODEV, "cudaSetDevice(%d) failed: %s", c->device, cudaGetErrorString(e));
    }
    if (rc == 0)
        rc = rk__cuda_check_config(c->kd, &c->lim, &c->grid, c->block, c->smem);
    /* ring and arena memory must be visible to the device: register the
     * whole region, mapped (portable: any context of this process) */
    if (rc == 0 && !rk__cuda_fake("notmapped")) {
        e = cudaHostRegister(rt->region, rt->region_size, cudaHostRegisterMapped | cudaHostRegisterPortable);
        if (e != cudaSuccess)
            rc = rk__fail(RK_ENOTMAPPED, "cudaHostRegister of the %zu B shared region failed on %s: %s",
                          rt->region_size, c->lim.name, cudaGetErrorString(e));
        else
            c->registered = true;
    }
    if (rc == 0) {
        const struct {
            const char *what;
            void *p;
        } parts[] = {{"H2D ring", rt->h2d}, {"D2H ring", rt->d2h}, {"data arena", rt->arena.base},
                     {"region header", rt->region}};
        for (size_t i = 0; rc == 0 && i < sizeof parts / sizeof parts[0]; i++) {
            struct cudaPointerAttributes a;
            memset(&a, 0, sizeof a);
            e = cudaPointerGetAttributes(&a, parts[i].p);
            cudaGetLastError();
            if (e != cudaSuccess || a.type != cudaMemoryTypeHost || !a.devicePointer)
                rc = rk__fail(RK_ENOTMAPPED, "%s at %p is not visible to device %d (%s): %s", parts[i].what,
                              parts[i].p, c->device, c->lim.name,
                              e != cudaSuccess ? cudaGetErrorString(e)
                                               : "not registered as mapped host memory");
        }
    }
    if (rc == 0) {
        void *d = NULL;
        e = cudaHostGetDevicePointer(&d, rt->region, 0);
        if (e != cudaSuccess)
            rc = rk__fail(RK_ENOTMAPPED, "cudaHostGetDevicePointer failed: %s", cudaGetErrorString(e));
        c->dregion = d;
    }
    if (rc == 0) {
        e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
        if (e == cudaSuccess)
            e = cudaMalloc(&c->scratch, RK_KERNEL_SCRATCH_BYTES);
        if (e != cudaSuccess)
            rc = rk__fail(RK_EDEVICE, "CUDA backend set-up failed on %s: %s", c->lim.name, cudaGetErrorString(e));
    }
    if (rc) {
        rk__cuda_free(rt, c);
        return rc;
    }
    uint8_t *h = (uint8_t *)rt->region, *d = c->dregion;
#define RK__DEV(p) ((void *)(d + ((uint8_t *)(p) - h)))
    c->args.h2d = RK__DEV(rt->h2d);
    c->args.d2h = RK__DEV(rt->d2h);
    c->args.arena = RK__DEV(rt->arena.base);
    c->args.arena_size = rt->arena.size;
    c->args.heartbeat = RK__DEV(&rt->region->heartbeat);
    c->args.stop = RK__DEV(&rt->region->stop);
    c->args.state = RK__DEV(&rt->region->state);
    c->args.scratch = c->scratch;
    {
        /* the host's default NaN (x86: 0xffc00000, Arm: 0x7fc00000): what
         * rk__vadd_f32 returns for inf - inf */
        volatile float inf = __builtin_inff();
        float nan = inf - inf;
        memcpy(&c->args.nan_bits, &nan, 4);
    }
#undef RK__DEV
    rt->backend_state = c;
    rc = rk__cuda_launch(rt, c, rk__cuda_fake("mute") ? RK_KF_MUTE : 0);
    if (rc == 0)
        rc = rk__cuda_selftest(rt, c);
    if (rc) {
        char detail[512];
        snprintf(detail, sizeof detail, "%s", rk_last_detail());
        rk__cuda_halt(rt, c);
        /* leave clean rings for the CPU backend auto falls back to */
        size_t rs = rk_ring_memsize(rt->cfg.ring_slots, rt->cfg.slot_size);
        rk_ring_init(rt->h2d, rs, rt->cfg.ring_slots, rt->cfg.slot_size);
        rk_ring_init(rt->d2h, rs, rt->cfg.ring_slots, rt->cfg.slot_size);
        rk__st_release(&rt->region->state, (int32_t)RK__STATE_INIT);
        rt->backend_state = NULL;
        rk__cuda_free(rt, c);
        return rk__fail(rc, "%s", detail);
    }
    rk__cuda_fill_info(rt, c);
    /* the kernel polls H2D and never sleeps on its doorbell: producers may
     * skip the doorbell's fence (set before any actor exists) */
    rt->h2d->flags |= RK_RING_F_NO_SLEEP;
    snprintf(rt->info.why, sizeof rt->info.why,
             "CUDA device %d (%s) passed launch validation and the self-test: grid %u x block %u, smem %u B",
             c->device, c->lim.name, c->grid, c->block, c->smem);
    if (pthread_create(&c->watchdog, NULL, rk__cuda_watchdog, rt) == 0)
        c->wd_started = true;
    else
        rk__log(RK__LOG_WARN, "CUDA backend: no watchdog thread; faults are seen by health() only");
    return 0;
}

static void rk__cuda_stop(rk_runtime *rt)
{
    rk__cuda *c = rt->backend_state;
    if (!c)
        return;
    cudaSetDevice(c->device);
    atomic_store(&c->wd_quit, true);
    if (c->wd_started)
        pthread_join(c->watchdog, NULL);
    pthread_mutex_lock(&c->lock);
    if (atomic_load(&c->fault)) {
        /* a faulted context is dead: nothing to wait for */
        cudaError_t e = cudaStreamQuery(c->stream);
        if (e != cudaErrorNotReady)
            c->running = false;
    }
    int rc = rk__cuda_halt(rt, c);
    if (rc)
        rk__log(RK__LOG_WARN, "CUDA backend stop: %s", rk_last_detail());
    pthread_mutex_unlock(&c->lock);
    rt->backend_state = NULL;
    rk__cuda_free(rt, c);
}

static int rk__cuda_health(rk_runtime *rt)
{
    rk__cuda *c = rt->backend_state;
    return c ? atomic_load(&c->fault) : 0;
}

static int rk__cuda_relaunch(rk_runtime *rt, uint32_t grid, uint32_t block, uint32_t smem)
{
    rk__cuda *c = rt->backend_state;
    if (!c)
        return rk__fail(RK_ECLOSED, "CUDA backend is not running");
    if (atomic_load(&c->fault))
        return rk__fail(RK_EDEVICE, "the CUDA backend faulted; a relaunch cannot revive its context");
    cudaSetDevice(c->device);
    rk__cuda_limits lim = c->lim;
    uint32_t g = grid;
    /* validate first: an invalid configuration changes nothing */
    int rc = rk__cuda_check_config(c->kd, &lim, &g, block, smem);
    if (rc) {
        c->kd->set_max_dyn_smem((int)c->smem);
        return rc;
    }
    pthread_mutex_lock(&c->lock);
    /* the kernel consumes a request only once its reply (or grid job) is
     * posted, and publishes its positions at stop: queued requests wait in
     * the H2D ring for the new kernel */
    rc = rk__cuda_halt(rt, c);
    if (rc == 0) {
        c->lim = lim;
        c->grid = g;
        c->block = block;
        c->smem = smem;
        rc = rk__cuda_launch(rt, c, 0);
    }
    if (rc == 0) {
        int64_t deadline = rk__now_ns() + 5000000000ll;
        while (rk__ld_acquire(&rt->region->state) != RK__STATE_RUNNING) {
            cudaError_t e = cudaStreamQuery(c->stream);
            if (e != cudaErrorNotReady) {
                rc = rk__fail(RK_EDEVICE, "relaunched ring kernel %s: %s", e ? "faulted" : "exited",
                              cudaGetErrorString(e));
                break;
            }
            if (rk__now_ns() > deadline) {
                rc = rk__fail(RK_EDEVICE, "relaunched ring kernel did not start within 5 s");
                break;
            }
            rk__sleep_ns(20000);
        }
    }
    if (rc == 0)
        rk__cuda_fill_info(rt, c);
    pthread_mutex_unlock(&c->lock);
    if (rc) {
        char why[300];
        snprintf(why, sizeof why, "relaunch failed: %s", rk_last_detail());
        rk__cuda_set_fault(rt, c, why);
        return rk__fail(rc, "%s", why + 17);
    }
    return 0;
}

const rk__backend_ops rk__cuda_backend = {
    .name = "cuda",
    .kind = RK_BACKEND_CUDA,
    .start = rk__cuda_start,
    .stop = rk__cuda_stop,
    .health = rk__cuda_health,
    .relaunch = rk__cuda_relaunch,
};
