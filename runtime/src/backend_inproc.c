/* backend_inproc.c - the CUDA backend in this process (isolation none, or a
 * runtime with user GPU actors compiled into the program): librk loads the
 * CUDA engine module (rk-cuda.so, device/engine.h) on demand, so librk
 * itself links no CUDA library, and watches the kernel from a thread: a
 * CUDA error or a silent heartbeat fails the runtime with -RK_EDEVICE (a
 * faulted context cannot be revived in this process). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "actor.h"
#include "barrier.h"
#include "engine.h"
#include "modules.h"
#include "worker.h"
#include "worker_proto.h"

#ifndef RK_CUDA_MODULE_INSTALL_PATH
#define RK_CUDA_MODULE_INSTALL_PATH ""
#endif

#define RK__WATCH_PERIOD_NS 20000000ll /* 20 ms */

typedef struct rk__inproc {
    void *dl;
    const rk__engine_api *api;
    rk__engine *e;
    rk__wdev dev;
    int lock_fd;
    pthread_mutex_t lock; /* the engine: relaunch vs the watchdog */
    pthread_t wd;
    bool wd_on;
    _Atomic bool wd_quit;
    _Atomic int fault;
} rk__inproc;

/* The kernel the runtime's user GPU actors were compiled into
 * (RK_GPU_ACTOR_HANDLE), or NULL for the built-in one. */
static int rk__pick_kernel(const rk_runtime *rt, const rk_kernel_desc **out)
{
    const rk_kernel_desc *kd = NULL;
    const char *first = NULL;
    for (size_t i = 0; i < rt->cfg.n_actors; i++) {
        const rk_actor_def *d = &rt->cfg.actors[i];
        const char *name = d->name ? d->name : "?";
        if (!d->gpu)
            return rk__fail(RK_ENOTSUP, "user actor \"%s\" (type %u) has no GPU handler, and the ring kernel "
                            "cannot call host code", name, d->type);
        const rk_kernel_desc *k = d->gpu;
        if (k->magic != RK_KDESC_MAGIC || k->version != RK_KDESC_VERSION)
            return rk__fail(RK_EINVAL, "user actor \"%s\" (type %u): its gpu handle is not an "
                            "RK_GPU_ACTOR_HANDLE (magic 0x%08x, version %u)", name, d->type, k->magic, k->version);
        if (kd && kd != k)
            return rk__fail(RK_EINVAL, "user actors \"%s\" and \"%s\" come from different GPU handles (%s, %s): "
                            "register all GPU actors of one runtime with one RK_GPU_ACTOR_HANDLE",
                            first, name, kd->name, k->name);
        bool served = false;
        for (uint32_t t = 0; t < k->n_types; t++)
            served |= k->types[t] == d->type;
        if (!served)
            return rk__fail(RK_EINVAL, "user actor \"%s\": GPU handle %s does not serve type %u", name, k->name,
                            d->type);
        kd = k;
        first = name;
    }
    /* a module's kernel (modules.c checked it serves its GPU actors) */
    const rk_kernel_desc *mk = rt->mods ? rt->mods->kernel : NULL;
    if (mk && kd && mk != kd)
        return rk__fail(RK_EINVAL, "the GPU actors of rk_config.actors (%s) and of a module (%s) come from two "
                        "ring kernels; a runtime runs one", kd->name, mk->name);
    *out = mk ? mk : kd;
    return 0;
}

static int rk__load_engine(rk__inproc *c)
{
#ifndef RK_HAVE_CUDA
    (void)c;
    return rk__fail(RK_ENOCUDA, "librk was built without the CUDA backend (%s)", RK_NO_CUDA_WHY);
#else
    char path[512];
    int rc = rk__helper_path("rk-cuda.so", "RK_CUDA_MODULE", RK_CUDA_MODULE_INSTALL_PATH, path, sizeof path);
    if (rc)
        return rc;
    c->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!c->dl)
        return rk__fail(RK_ENODRIVER, "the CUDA engine module %s does not load: %s", path, dlerror());
    const rk__engine_api *(*get)(void) = (const rk__engine_api *(*)(void))dlsym(c->dl, "rk_cuda_engine");
    c->api = get ? get() : NULL;
    if (!c->api || c->api->abi != RK_ENGINE_ABI || c->api->size != sizeof(rk__engine_api))
        return rk__fail(RK_EPROTO, "the CUDA engine module %s is not one of this librk (engine ABI %u)", path,
                        RK_ENGINE_ABI);
    return 0;
#endif
}

static void rk__inproc_free(rk__inproc *c)
{
    if (c->e)
        c->api->close(c->e);
    if (c->lock_fd >= 0)
        close(c->lock_fd);
    /* the module stays loaded: cudart keeps process-wide state that does
     * not survive unloading */
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static void rk__inproc_fault(rk_runtime *rt, rk__inproc *c, const char *why)
{
    int expected = 0;
    if (atomic_compare_exchange_strong(&c->fault, &expected, -RK_EDEVICE)) {
        rk__st_release(&rt->view.hdr->state, (int32_t)-RK_EDEVICE);
        rk__runtime_fault(rt, -RK_EDEVICE, why);
    }
}

static void *rk__inproc_watchdog(void *arg)
{
    rk_runtime *rt = arg;
    rk__inproc *c = rt->backend_state;
    uint64_t last_hb = 0;
    int64_t last_change = rk__now_ns();
    const int64_t hb_deadline = (int64_t)rt->cfg.heartbeat_ms * 1000000;
    while (!atomic_load(&c->wd_quit)) {
        rk__sleep_ns(RK__WATCH_PERIOD_NS);
        rk__gpu_lock_drain(c->lock_fd); /* runtimes this GPU refused (gpu_lock.c) */
        pthread_mutex_lock(&c->lock);
        char why[512] = "";
        int64_t now = rk__now_ns();
        uint64_t hb = rk__ld_relaxed(&rt->view.hdr->heartbeat);
        if (hb != last_hb)
            last_hb = hb, last_change = now;
        int st = atomic_load(&c->fault) ? 0 : c->api->poll(c->e, why, sizeof why);
        if (st > 0)
            snprintf(why, sizeof why, "the ring kernel on %s exited unexpectedly", c->dev.name);
        else if (st == 0 && !atomic_load(&c->fault) && now - last_change > hb_deadline)
            snprintf(why, sizeof why, "the ring kernel on %s: heartbeat silent for %lld ms", c->dev.name,
                     (long long)((now - last_change) / 1000000));
        if (why[0])
            rk__inproc_fault(rt, c, why);
        pthread_mutex_unlock(&c->lock);
    }
    return NULL;
}

static int rk__inproc_alive(void *arg)
{
    rk__inproc *c = arg;
    char why[512];
    int st = c->api->poll(c->e, why, sizeof why);
    if (st == 0)
        return 0;
    return rk__fail(RK_EDEVICE, "%s", st > 0 ? "the ring kernel exited" : why);
}

static void rk__inproc_info(rk_runtime *rt, const rk__wdev *d)
{
    rk__info_lock(rt);
    rk_info *in = &rt->info;
    in->backend = RK_BACKEND_CUDA;
    strcpy(in->backend_name, "cuda");
    in->has_device = 1;
    snprintf(in->device_name, sizeof in->device_name, "%s", d->name);
    in->sm_count = d->sm_count;
    in->cc_major = d->cc_major;
    in->cc_minor = d->cc_minor;
    in->grid = d->grid;
    in->block = d->block;
    in->smem = d->smem;
    in->max_grid = d->max_grid;
    in->max_block = d->max_block;
    in->max_smem = d->max_smem;
    rk__info_unlock(rt);
}

static int rk__inproc_start(rk_runtime *rt)
{
    rk__inproc *c = calloc(1, sizeof *c);
    if (!c)
        return rk__fail(RK_ENOMEM, "CUDA backend: out of memory");
    c->lock_fd = -1;
    pthread_mutex_init(&c->lock, NULL);
    rk__engine_cfg cfg = {.device = rt->cfg.device, .grid = rt->cfg.grid, .block = rt->cfg.block,
                          .smem = rt->cfg.smem};
    const char *fake = getenv("RK_CUDA_FAKE");
    if (fake && strstr(fake, "mute"))
        cfg.kflags |= RK_KF_MUTE;
    if (rt->cfg.test_faults) /* a fault here is fatal for the runtime: that is what such a test checks */
        cfg.kflags |= RK_KF_TEST_FAULTS;
    char err[512] = "";
    int rc = rk__pick_kernel(rt, &cfg.kernel);
    if (rc == 0)
        rc = rk__load_engine(c);
    if (rc == 0 && (rc = c->api->open(&c->e, &cfg, rt->view.hdr, rt->view.size, &c->dev, err, sizeof err)))
        rc = rk__fail(rc, "%s", err);
    if (rc == 0 && !rt->cfg.share_gpu) {
        c->lock_fd = rk__gpu_lock(c->dev.uuid, c->dev.name);
        rc = c->lock_fd < 0 ? c->lock_fd : 0;
    }
    if (rc == 0 && (rc = c->api->launch(c->e, 0, 0, 0, 0, &c->dev, err, sizeof err)))
        rc = rk__fail(rc, "%s", err);
    if (rc == 0)
        rc = rk__selftest(rt, (int)rk__env_range("RK_CUDA_SELFTEST_MS", 5000, 1, RK__ENV_MS_MAX), rk__inproc_alive, c);
    if (rc) {
        char detail[512];
        snprintf(detail, sizeof detail, "%s", rk_last_detail());
        rk__inproc_free(c);
        /* leave clean rings for the CPU backend auto falls back to */
        rk__rings_clean(rt);
        rk__st_release(&rt->view.hdr->state, (int32_t)RK__STATE_INIT);
        return rk__fail(rc, "%s", detail);
    }
    rt->backend_state = c;
    rt->wflags = rt->cfg.test_faults ? RK__WF_TEST_FAULTS : 0;
    rk__inproc_info(rt, &c->dev);
    /* the kernel polls H2D and never sleeps on its doorbell: producers may
     * skip the doorbell's fence (set before any actor exists) */
    rk__ring_set_flags(rt->h2d, RK_RING_F_NO_SLEEP);
    snprintf(rt->info.why, sizeof rt->info.why,
             "CUDA device %d (%s) passed launch validation and the self-test in this process "
             "(isolation none): grid %u x block %u, smem %u B",
             rt->cfg.device, c->dev.name, c->dev.grid, c->dev.block, c->dev.smem);
    if (pthread_create(&c->wd, NULL, rk__inproc_watchdog, rt) == 0)
        c->wd_on = true;
    else
        rk__log(RK__LOG_WARN, "CUDA backend: no watchdog thread; faults are seen by health() only");
    return 0;
}

static void rk__inproc_stop(rk_runtime *rt)
{
    rk__inproc *c = rt->backend_state;
    if (!c)
        return;
    atomic_store(&c->wd_quit, true);
    if (c->wd_on)
        pthread_join(c->wd, NULL);
    char err[512];
    rk__drainer dr; /* (the kernel's last replies may need room) */
    rk__drainer_start(&dr, rt);
    if (!atomic_load(&c->fault) && c->api->halt(c->e, err, sizeof err))
        rk__log(RK__LOG_WARN, "CUDA backend stop: %s", err);
    rk__drainer_stop(&dr);
    rt->backend_state = NULL;
    rk__inproc_free(c);
}

static int rk__inproc_health(rk_runtime *rt)
{
    rk__inproc *c = rt->backend_state;
    return c ? atomic_load(&c->fault) : 0;
}

static int rk__inproc_relaunch(rk_runtime *rt, uint32_t grid, uint32_t block, uint32_t smem)
{
    rk__inproc *c = rt->backend_state;
    if (!c)
        return rk__fail(RK_ECLOSED, "CUDA backend is not running");
    if (atomic_load(&c->fault))
        return rk__fail(RK_EDEVICE, "the CUDA backend faulted; a relaunch cannot revive its context");
    char err[512] = "";
    pthread_mutex_lock(&c->lock);
    /* the kernel stops at a message boundary, and its replies may need
     * room that only a drain makes (else it aborts after RK__STOP_WAIT_NS
     * and writes them over unread ones) */
    rk__drainer dr;
    rk__drainer_start(&dr, rt);
    int rc = c->api->relaunch(c->e, grid, block, smem, &c->dev, err, sizeof err);
    rk__drainer_stop(&dr);
    if (rc == 0)
        rk__inproc_info(rt, &c->dev);
    pthread_mutex_unlock(&c->lock);
    if (rc == 0)
        return 0;
    char ignored[8];
    if (c->api->poll(c->e, ignored, sizeof ignored) != 0) {
        /* not a refused configuration (that changes nothing): the kernel
         * did not come back */
        char why[600];
        snprintf(why, sizeof why, "relaunch failed: %s", err);
        rk__inproc_fault(rt, c, why);
    }
    return rk__fail(rc, "%s", err);
}

const rk__backend_ops rk__inproc_backend = {
    .name = "cuda-inprocess",
    .start = rk__inproc_start,
    .stop = rk__inproc_stop,
    .health = rk__inproc_health,
    .relaunch = rk__inproc_relaunch,
};
