/* engine.c - the CUDA engine (engine.h): registers the shared region with
 * the device (mapped), launches the persistent cooperative ring kernel
 * (kernel.cuh) after launch validation (launch_check.c), tells whether it
 * still runs, stops and relaunches it. The self-test ping and the
 * heartbeat watch belong to whoever owns the engine (librk's supervisor
 * for a worker, its in-process backend for the module). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "barrier.h"
#include "engine.h"
#include "launch_check.h"

/* A stop waits this long for the kernel, then tells it to abort (a wait
 * on the host then ends the kernel with an error: stop_abort_check in
 * block0.cuh), and gives up on it after twice this (a grid job that
 * still runs: the kernel cannot end before its blocks do). */
#define RK__STOP_WAIT_NS 3000000000ll
#define RK__RUN_WAIT_NS 5000000000ll

struct rk__engine {
    rk__engine_cfg cfg;
    const rk_kernel_desc *kd;
    rk__cuda_limits lim;
    rk__region *region;
    size_t region_size;
    cudaStream_t stream;
    void *scratch;
    bool registered;
    rk_kargs args;
    uint32_t grid, block, smem;
    bool running; /* a kernel was launched and not yet seen to end */
    bool stuck;   /* a stop gave up on it: it may still run (rk__eng_free) */
    char uuid[48];
};

/* Copies rk_last_detail() (set by launch_check.c or below) into err. */
static int rk__eng_err(int rc, char *err, size_t cap)
{
    if (rc && err && cap)
        snprintf(err, cap, "%s", rk_last_detail());
    return rc;
}

static void rk__eng_dev(const rk__engine *e, rk__wdev *dev)
{
    memset(dev, 0, sizeof *dev);
    snprintf(dev->name, sizeof dev->name, "%s", e->lim.name);
    snprintf(dev->uuid, sizeof dev->uuid, "%s", e->uuid);
    dev->cc_major = e->lim.cc_major;
    dev->cc_minor = e->lim.cc_minor;
    dev->sm_count = e->lim.sm_count;
    dev->grid = e->grid;
    dev->block = e->block;
    dev->smem = e->smem;
    dev->max_grid = e->lim.max_grid;
    dev->max_block = (uint32_t)(e->lim.max_block_kernel < e->lim.max_block_dev ? e->lim.max_block_kernel
                                                                               : e->lim.max_block_dev);
    dev->max_smem = e->lim.max_smem;
}

static void rk__eng_free(rk__engine *e)
{
    /* a kernel a stop gave up on may still run (a grid job that never
     * ends): cudaFree would wait for it for good, and the region must stay
     * registered (pinned) while it reads it. Left to the process's end: a
     * worker's supervisor kills it (RK__WF_MAY_RUN); in process the exit
     * waits for the kernel (device/README.md, "Faults") */
    if (e->scratch && !e->stuck)
        cudaFree(e->scratch);
    if (e->stream)
        cudaStreamDestroy(e->stream);
    if (e->registered && !e->stuck)
        cudaHostUnregister(e->region);
    cudaGetLastError();
    free(e);
}

/* The ring and arena memory must be visible to the device: register the
 * whole region, mapped (portable: any context of this process), and check
 * each part. */
static int rk__eng_register(rk__engine *e)
{
    cudaError_t ce = cudaSuccess;
    /* RK_CUDA_FAKE=notmapped: not registered, as on a machine that cannot
     * map it; the checks below must then say so */
    if (!rk__cuda_fake("notmapped")) {
        ce = cudaHostRegister(e->region, e->region_size, cudaHostRegisterMapped | cudaHostRegisterPortable);
        if (ce != cudaSuccess)
            return rk__fail(RK_ENOTMAPPED, "cudaHostRegister of the %zu B shared region failed on %s: %s",
                            e->region_size, e->lim.name, cudaGetErrorString(ce));
        e->registered = true;
    }
    uint8_t *h = (uint8_t *)e->region;
    const struct {
        const char *what;
        void *p;
    } parts[] = {{"region header", h},
                 {"H2D ring", h + e->region->h2d_off},
                 {"D2H rings", h + e->region->d2h_off},
                 {"data arena", h + e->region->arena_off}};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        struct cudaPointerAttributes a;
        memset(&a, 0, sizeof a);
        ce = cudaPointerGetAttributes(&a, parts[i].p);
        cudaGetLastError();
        if (ce != cudaSuccess || a.type != cudaMemoryTypeHost || !a.devicePointer)
            return rk__fail(RK_ENOTMAPPED, "%s at %p is not visible to device %d (%s): %s", parts[i].what,
                            parts[i].p, e->cfg.device, e->lim.name,
                            ce != cudaSuccess ? cudaGetErrorString(ce) : "not registered as mapped host memory");
    }
    void *d = NULL;
    ce = cudaHostGetDevicePointer(&d, e->region, 0);
    if (ce != cudaSuccess)
        return rk__fail(RK_ENOTMAPPED, "cudaHostGetDevicePointer failed: %s", cudaGetErrorString(ce));
    uint8_t *dr = d;
    e->args.h2d = dr + e->region->h2d_off;
    e->args.d2h = dr + e->region->d2h_off;
    e->args.d2h_stride = e->region->d2h_stride;
    e->args.d2h_rings = e->region->d2h_rings;
    e->args.arena = dr + e->region->arena_off;
    e->args.arena_size = e->region->arena_size;
    e->args.region = (rk__region *)dr;
    return 0;
}

static int rk__eng_open(rk__engine **out, const rk__engine_cfg *cfg, rk__region *region, size_t region_size,
                        rk__wdev *dev, char *err, size_t cap)
{
    *out = NULL;
    rk__engine *e = calloc(1, sizeof *e);
    if (!e)
        return rk__eng_err(rk__fail(RK_ENOMEM, "CUDA engine: out of memory"), err, cap);
    e->cfg = *cfg;
    e->kd = cfg->kernel ? cfg->kernel : &rk_builtin_kernel;
    e->region = region;
    e->region_size = region_size;
    e->grid = cfg->grid;
    e->block = cfg->block;
    e->smem = cfg->smem;
    int rc = rk__cuda_check_device(cfg->device, &e->lim);
    cudaError_t ce;
    if (rc == 0 && (ce = cudaSetDevice(cfg->device)) != cudaSuccess)
        rc = rk__fail(RK_ENODEV, "cudaSetDevice(%d) failed: %s", cfg->device, cudaGetErrorString(ce));
    if (rc == 0) {
        struct cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, cfg->device) == cudaSuccess) {
            const unsigned char *u = (const unsigned char *)p.uuid.bytes;
            snprintf(e->uuid, sizeof e->uuid,
                     "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                     u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
        }
        rc = rk__cuda_check_config(e->kd, &e->lim, &e->grid, &e->block, e->smem);
    }
    if (rc == 0)
        rc = rk__eng_register(e);
    if (rc == 0) {
        ce = cudaStreamCreateWithFlags(&e->stream, cudaStreamNonBlocking);
        if (ce == cudaSuccess)
            ce = cudaMalloc(&e->scratch, RK_KERNEL_SCRATCH_BYTES);
        if (ce != cudaSuccess)
            rc = rk__fail(RK_EDEVICE, "CUDA engine set-up failed on %s: %s", e->lim.name, cudaGetErrorString(ce));
    }
    if (rc) {
        rk__eng_err(rc, err, cap);
        rk__eng_free(e);
        return rc;
    }
    e->args.scratch = e->scratch;
    /* the host's default NaN (x86: 0xffc00000, Arm: 0x7fc00000): what
     * rk__vadd_f32 returns for inf - inf */
    volatile float inf = __builtin_inff();
    float nan = inf - inf;
    memcpy(&e->args.nan_bits, &nan, 4);
    rk__eng_dev(e, dev);
    *out = e;
    return 0;
}

/* Waits for the running kernel's housekeeper to say RUNNING. */
static int rk__eng_wait_running(rk__engine *e)
{
    int64_t deadline = rk__now_ns() + RK__RUN_WAIT_NS;
    while (rk__ld_acquire(&e->region->state) != RK__STATE_RUNNING) {
        cudaError_t ce = cudaStreamQuery(e->stream);
        if (ce != cudaErrorNotReady) {
            e->running = false;
            return rk__fail(RK_EDEVICE, "the ring kernel %s before it ran: %s", ce ? "faulted" : "exited",
                            cudaGetErrorString(ce));
        }
        if (rk__now_ns() > deadline)
            return rk__fail(RK_EDEVICE, "the ring kernel on %s did not start within %lld ms", e->lim.name,
                            RK__RUN_WAIT_NS / 1000000);
        rk__sleep_ns(20000);
    }
    return 0;
}

static int rk__eng_launch_now(rk__engine *e, uint32_t gen)
{
    cudaError_t ce = cudaMemsetAsync(e->scratch, 0, RK_KERNEL_SCRATCH_BYTES, e->stream);
    if (ce == cudaSuccess)
        ce = cudaStreamSynchronize(e->stream);
    if (ce != cudaSuccess)
        return rk__fail(RK_EDEVICE, "clearing the ring kernel's scratch failed: %s", cudaGetErrorString(ce));
    rk__st_relaxed(&e->region->stop, 0u);
    rk__st_release(&e->region->state, (int32_t)RK__STATE_INIT);
    e->args.gen = gen;
    /* RK_CUDA_KFLAGS: experiment flags (kernel_desc.h RK_KF_*), for rk-bench */
    e->args.flags = e->cfg.kflags | (uint32_t)rk__env_ll("RK_CUDA_KFLAGS", 0);
    int le = e->kd->launch(&e->args, e->grid, e->block, e->smem, e->stream);
    if (le) {
        cudaGetLastError();
        int code = le == cudaErrorCooperativeLaunchTooLarge ? RK_EGRID : RK_EDEVICE;
        return rk__fail(code, "cudaLaunchCooperativeKernel(grid %u, block %u, smem %u B) failed on %s: %s", e->grid,
                        e->block, e->smem, e->lim.name, cudaGetErrorString((cudaError_t)le));
    }
    e->running = true;
    return rk__eng_wait_running(e);
}

/* Validates grid/block/smem into a copy of the limits; nothing changes on
 * failure. */
static int rk__eng_validate(rk__engine *e, uint32_t *grid, uint32_t *block, uint32_t smem, rk__cuda_limits *lim)
{
    *lim = e->lim;
    int rc = rk__cuda_check_config(e->kd, lim, grid, block, smem);
    if (rc)
        e->kd->set_max_dyn_smem((int)e->smem); /* keep the running kernel's carve-out */
    return rc;
}

static int rk__eng_launch(rk__engine *e, uint32_t gen, uint32_t grid, uint32_t block,
                          uint32_t smem, rk__wdev *dev, char *err, size_t cap)
{
    if (block && (grid != e->grid || block != e->block || smem != e->smem)) {
        rk__cuda_limits lim;
        int rc = rk__eng_validate(e, &grid, &block, smem, &lim);
        if (rc)
            return rk__eng_err(rc, err, cap);
        e->lim = lim;
        e->grid = grid;
        e->block = block;
        e->smem = smem;
    }
    int rc = rk__eng_launch_now(e, gen);
    rk__eng_dev(e, dev);
    return rk__eng_err(rc, err, cap);
}

static int rk__eng_poll(rk__engine *e, char *err, size_t cap)
{
    if (!e->running)
        return 1;
    cudaError_t ce = cudaStreamQuery(e->stream);
    if (ce == cudaErrorNotReady)
        return 0;
    e->running = false;
    if (ce == cudaSuccess)
        return 1;
    snprintf(err, cap, "the ring kernel on %s faulted: %s (%s)", e->lim.name, cudaGetErrorString(ce),
             cudaGetErrorName(ce));
    return -RK_EDEVICE;
}

static int rk__eng_halt_now(rk__engine *e)
{
    if (!e->running)
        return 0;
    /* release: pairs with the housekeeper's load-acquire of stop */
    rk__st_release(&e->region->stop, 1u);
    int64_t t0 = rk__now_ns();
    cudaError_t ce;
    bool hard = false;
    while ((ce = cudaStreamQuery(e->stream)) == cudaErrorNotReady) {
        int64_t dt = rk__now_ns() - t0;
        if (!hard && dt > RK__STOP_WAIT_NS) {
            /* the host stopped draining D2H, or a job hangs: abort */
            rk__st_release(&e->region->stop, 2u);
            hard = true;
        }
        if (dt > 2 * RK__STOP_WAIT_NS) {
            e->running = false;
            e->stuck = true;
            return rk__fail(RK_EDEVICE,
                            "the ring kernel on %s did not stop within %lld ms: a grid job (a large request) still "
                            "runs",
                            e->lim.name, (long long)(dt / 1000000));
        }
        rk__sleep_ns(200000);
    }
    e->running = false;
    rk__st_relaxed(&e->region->stop, 0u);
    if (ce != cudaSuccess && hard)
        return rk__fail(RK_EDEVICE,
                        "the ring kernel on %s was aborted %lld ms into its stop: its replies found no room (nobody "
                        "drained the reply rings) or a request's lines were never finished (%s)",
                        e->lim.name, (long long)((rk__now_ns() - t0) / 1000000), cudaGetErrorName(ce));
    if (ce != cudaSuccess)
        return rk__fail(RK_EDEVICE, "the ring kernel failed: %s (%s)", cudaGetErrorString(ce), cudaGetErrorName(ce));
    return 0;
}

static int rk__eng_halt(rk__engine *e, char *err, size_t cap) { return rk__eng_err(rk__eng_halt_now(e), err, cap); }

static int rk__eng_relaunch(rk__engine *e, uint32_t grid, uint32_t block, uint32_t smem, rk__wdev *dev, char *err,
                            size_t cap)
{
    rk__cuda_limits lim;
    uint32_t g = grid, b = block;
    /* validate first: an invalid configuration changes nothing */
    int rc = rk__eng_validate(e, &g, &b, smem, &lim);
    if (rc)
        return rk__eng_err(rc, err, cap);
    /* the kernel consumes a request only once its reply (or grid job) is
     * posted, and hands its positions back at stop: queued requests wait in
     * the H2D ring for the new kernel */
    rc = rk__eng_halt_now(e);
    if (rc == 0) {
        e->lim = lim;
        e->grid = g;
        e->block = b;
        e->smem = smem;
        rc = rk__eng_launch_now(e, e->args.gen);
    }
    rk__eng_dev(e, dev);
    return rk__eng_err(rc, err, cap);
}

static void rk__eng_close(rk__engine *e)
{
    if (!e)
        return;
    rk__eng_halt_now(e);
    rk__eng_free(e);
}

const rk__engine_api rk__engine_v1 = {
    .abi = RK_ENGINE_ABI,
    .size = sizeof(rk__engine_api),
    .open = rk__eng_open,
    .launch = rk__eng_launch,
    .poll = rk__eng_poll,
    .halt = rk__eng_halt,
    .relaunch = rk__eng_relaunch,
    .close = rk__eng_close,
};
