/* runtime.c - opening and closing a runtime: configuration, the shared
 * region, which backend serves it and where (this process or a worker). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "actor.h"
#include "barrier.h"
#include "worker_proto.h"

void rk_config_init(rk_config *cfg)
{
    if (!cfg)
        return;
    memset(cfg, 0, sizeof *cfg);
    cfg->backend = RK_BACKEND_AUTO;
    cfg->isolation = RK_ISOLATION_AUTO;
    cfg->block = 0; /* the largest the kernel allows, at most 1024 */
    cfg->ring_slots = 4096; /* 8 threads x the default window in flight */
    cfg->slot_size = 256;
    cfg->arena_size = (size_t)256 << 20;
    cfg->max_payload = (size_t)128 << 20;
    cfg->actor_window = 256;
    cfg->max_actors = 64;
    /* RK_REPLY_RINGS: to compare the reply paths without a rebuild */
    cfg->reply_rings = (uint32_t)rk__env_range("RK_REPLY_RINGS", RK__REPLY_RINGS_DEFAULT, 0, RK_REPLY_RINGS_MAX);
    cfg->request_deadline_ms = 10000;
    /* RK_HEARTBEAT_MS: for runs that slow the consumer down (sanitizers) */
    cfg->heartbeat_ms = (uint32_t)rk__env_range("RK_HEARTBEAT_MS", 1000, 50, RK_HEARTBEAT_MS_MAX);
    cfg->fault_limit = 10;
    cfg->fault_window_ms = 60000;
}

const char *rk_backend_name(rk_backend_kind kind)
{
    switch (kind) {
    case RK_BACKEND_AUTO:
        return "auto";
    case RK_BACKEND_CPU:
        return "cpu";
    case RK_BACKEND_CUDA:
        return "cuda";
    }
    return "?";
}

int rk_backend_parse(const char *s, rk_backend_kind *out)
{
    if (!out)
        return rk__fail(RK_EINVAL, "rk_backend_parse: out is NULL");
    static const rk_backend_kind kinds[] = {RK_BACKEND_AUTO, RK_BACKEND_CPU, RK_BACKEND_CUDA};
    for (size_t i = 0; s && i < 3; i++)
        if (!strcmp(s, rk_backend_name(kinds[i]))) {
            *out = kinds[i];
            return 0;
        }
    return rk__fail(RK_EINVAL, "backend \"%s\" is not one of auto, cpu, cuda", s ? s : "(null)");
}

static bool rk__pow2(uint64_t x) { return x && !(x & (x - 1)); }

static int rk__config_check_actors(const rk_config *c)
{
    if (c->n_actors && !c->actors)
        return rk__fail(RK_EINVAL, "n_actors is %zu but actors is NULL", c->n_actors);
    for (size_t i = 0; i < c->n_actors; i++) {
        const rk_actor_def *d = &c->actors[i];
        if (d->type < RK_OP_USER)
            return rk__fail(RK_EINVAL, "user actor \"%s\" has type %u; user types start at %u",
                            d->name ? d->name : "?", d->type, RK_OP_USER);
        if (!d->cpu && !d->gpu)
            return rk__fail(RK_EINVAL, "user actor \"%s\" (type %u) has neither a CPU nor a GPU handler",
                            d->name ? d->name : "?", d->type);
        for (size_t j = 0; j < i; j++)
            if (c->actors[j].type == d->type)
                return rk__fail(RK_EINVAL, "user actor type %u is registered twice", d->type);
    }
    if (c->n_actors && c->isolation == RK_ISOLATION_PROCESS)
        return rk__fail(RK_EINVAL,
                        "isolation process: the %zu user actors given in rk_config are code of this "
                        "program and cannot run in a worker process (use isolation auto or none)",
                        c->n_actors);
    return 0;
}

/* What no CUDA device runs (rk/runtime.h RK_*_MAX), refused on every
 * backend: the CPU backend would record any shape. The device's own
 * limits (launch_check.c) come after, on CUDA. */
static int rk__shape_check(uint32_t grid, uint32_t block, uint32_t smem)
{
    if (block > RK_BLOCK_MAX)
        return rk__fail(RK_EBLOCK, "block %u threads exceeds the per-block limit %u of every CUDA device "
                        "(RK_BLOCK_MAX)", block, RK_BLOCK_MAX);
    if (smem > RK_SMEM_MAX)
        return rk__fail(RK_ESMEM, "shared memory %u B exceeds the per-block limit %u B (227 KiB) of every "
                        "CUDA device (RK_SMEM_MAX)", smem, RK_SMEM_MAX);
    if (grid > RK_GRID_MAX)
        return rk__fail(RK_EGRID, "grid %u blocks exceeds %u, the most a CUDA grid may have (RK_GRID_MAX)",
                        grid, RK_GRID_MAX);
    return 0;
}

static int rk__config_check(const rk_config *c)
{
    if (c->backend != RK_BACKEND_AUTO && c->backend != RK_BACKEND_CPU &&
        c->backend != RK_BACKEND_CUDA)
        return rk__fail(RK_EINVAL, "backend %d is not auto, cpu or cuda", (int)c->backend);
    if (c->isolation != RK_ISOLATION_AUTO && c->isolation != RK_ISOLATION_PROCESS &&
        c->isolation != RK_ISOLATION_NONE)
        return rk__fail(RK_EINVAL, "isolation %d is not auto, process or none", (int)c->isolation);
    if (!rk__pow2(c->ring_slots) || c->ring_slots < 2 || c->ring_slots > RK_RING_SLOTS_MAX)
        return rk__fail(RK_EINVAL, "ring_slots %u is not a power of two in 2..%u", c->ring_slots,
                        RK_RING_SLOTS_MAX);
    /* 128 B is the least that carries a header and an arena reference */
    if (!rk__pow2(c->slot_size) || c->slot_size < 128 || c->slot_size > RK_RING_SLOT_MAX)
        return rk__fail(RK_EINVAL, "slot_size %u B is not a power of two in 128..%u B",
                        c->slot_size, RK_RING_SLOT_MAX);
    if (c->actor_window < 1 || c->actor_window > 32768)
        return rk__fail(RK_EINVAL, "actor_window %u is outside 1..32768", c->actor_window);
    if (c->max_actors < 1 || c->max_actors > 65535)
        return rk__fail(RK_EINVAL, "max_actors %u is outside 1..65535", c->max_actors);
    if (c->reply_rings && (!rk__pow2(c->reply_rings) || c->reply_rings > RK_REPLY_RINGS_MAX))
        return rk__fail(RK_EINVAL, "reply_rings %u is not a power of two in 1..%u (0: the default, %u)",
                        c->reply_rings, RK_REPLY_RINGS_MAX, RK__REPLY_RINGS_DEFAULT);
    if (c->max_payload > ((size_t)1 << 32) - RK_ARENA_ALIGN)
        return rk__fail(RK_EINVAL, "max_payload %zu B exceeds %zu B, the most a message header counts "
                        "(4 GiB less RK_ARENA_ALIGN)", c->max_payload, ((size_t)1 << 32) - RK_ARENA_ALIGN);
    if (c->heartbeat_ms < 50)
        return rk__fail(RK_EINVAL, "heartbeat_ms %u is below 50 ms: a busy CPU worker stamps it "
                        "every 20 ms", c->heartbeat_ms);
    /* the worker's stamping period is heartbeat_ms / 4 in 32-bit us */
    if (c->heartbeat_ms > RK_HEARTBEAT_MS_MAX)
        return rk__fail(RK_EINVAL, "heartbeat_ms %u exceeds %u (one hour)", c->heartbeat_ms, RK_HEARTBEAT_MS_MAX);
    if (c->fault_limit < 1)
        return rk__fail(RK_EINVAL, "fault_limit 0: at least one fault must be allowed");
    /* the supervisor keeps the time of each of the last fault_limit faults */
    if (c->fault_limit > RK_FAULT_LIMIT_MAX)
        return rk__fail(RK_EINVAL, "fault_limit %u exceeds %u", c->fault_limit, RK_FAULT_LIMIT_MAX);
    int rc = rk__shape_check(c->grid, c->block, c->smem);
    return rc ? rc : rk__config_check_actors(c);
}

static void rk__free(rk_runtime *rt)
{
    rk__reload_free(rt);
    rk__registry_free(rt);
    for (uint32_t i = 0; rt->actors && i < rt->n_actor_slots; i++)
        if (rt->actors[i])
            rk_actor_close(rt->actors[i]);
    free(rt->actors);
    if (rt->arena.free)
        rk__arena_destroy(&rt->arena);
    rk__region_unmap(&rt->view);
    if (rt->region_fd >= 0)
        close(rt->region_fd);
    pthread_mutex_destroy(&rt->actors_lock);
    pthread_mutex_destroy(&rt->info_lock);
    free(rt);
}

/* Starts `ops`; on failure keeps its detail in why (for a fallback). */
static int rk__try(rk_runtime *rt, const rk__backend_ops *ops, char *why, size_t cap)
{
    int rc = ops->start(rt);
    if (rc == 0) {
        rt->backend = ops;
        return 0;
    }
    snprintf(why, cap, "%s", rk_last_detail());
    return rc;
}

/* Backend choice: CUDA when asked for or when auto finds a usable GPU (in a
 * worker process unless the configuration keeps it here); a forced CUDA
 * that cannot run is an error, never a silent fallback. */
static int rk__choose_backend(rk_runtime *rt)
{
    const rk_config *c = &rt->cfg;
    /* user actors given as code of this program can only run in this process */
    const bool here = c->isolation == RK_ISOLATION_NONE || c->n_actors > 0;
    const bool cpu_worker = c->isolation == RK_ISOLATION_PROCESS;
    const rk__backend_ops *cpu = cpu_worker ? &rk__worker_backend : &rk__cpu_backend;
    char why[200] = "", fail[512] = "";
    if (c->backend == RK_BACKEND_CPU) {
        snprintf(why, sizeof why, "CPU backend requested%s", cpu_worker ? ", in a worker process" : "");
    } else {
        rt->worker_kind = RK__WB_CUDA;
        int rc = rk__try(rt, here ? &rk__inproc_backend : &rk__worker_backend, fail, sizeof fail);
        if (rc == 0)
            return 0;
        if (c->backend == RK_BACKEND_CUDA)
            return rk__fail(rc, "%s", fail);
        snprintf(why, sizeof why, "CUDA backend unavailable (%s): ", rk_err_name(rc));
    }
    rt->worker_kind = RK__WB_CPU;
    char fail2[512];
    int rc = rk__try(rt, cpu, fail2, sizeof fail2);
    if (rc)
        return rk__fail(rc, "%s", fail2);
    const int n = snprintf(rt->info.why, sizeof rt->info.why, "%s%s", why, fail);
    if (n >= (int)sizeof rt->info.why) /* cut: say so */
        memcpy(rt->info.why + sizeof rt->info.why - 4, "...", 4);
    return 0;
}

void *rk__zalloc_lines(size_t n, size_t size)
{
    if (size && n > (SIZE_MAX - 63) / size)
        return NULL;
    /* aligned_alloc wants a multiple of the alignment */
    const size_t bytes = (n * size + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, bytes ? bytes : 64);
    if (p)
        memset(p, 0, bytes);
    return p;
}

void rk__rings_clean(rk_runtime *rt)
{
    const size_t rs = rk_ring_memsize(rt->cfg.ring_slots, rt->cfg.slot_size);
    rk_ring_init(rt->h2d, rs, rt->cfg.ring_slots, rt->cfg.slot_size);
    for (uint32_t i = 0; i < rt->n_d2h; i++) {
        rk_ring_init(rt->d2h[i].ring, rs, rt->cfg.ring_slots, rt->cfg.slot_size);
        atomic_store_explicit(&rt->d2h[i].claim, 0, memory_order_relaxed);
    }
}

/* its hot fields are aligned to cache lines (internal.h) */
rk_runtime *rk__runtime_alloc(void)
{
    rk_runtime *rt = rk__zalloc_lines(1, sizeof(rk_runtime));
    if (rt)
        pthread_mutex_init(&rt->info_lock, NULL);
    return rt;
}

void rk__info_lock(rk_runtime *rt) { pthread_mutex_lock(&rt->info_lock); }
void rk__info_unlock(rk_runtime *rt) { pthread_mutex_unlock(&rt->info_lock); }

void rk__info_record(rk_runtime *rt, uint32_t grid, uint32_t block, uint32_t smem)
{
    rk__info_lock(rt);
    rt->info.grid = rt->cfg.grid = grid;
    rt->info.block = rt->cfg.block = block;
    rt->info.smem = rt->cfg.smem = smem;
    rk__info_unlock(rt);
}

int rk_runtime_open(rk_runtime **out, const rk_config *cfg)
{
    if (!out)
        return rk__fail(RK_EINVAL, "rk_runtime_open: out is NULL");
    *out = NULL;
    if (cfg && cfg->n_devices != 0 && cfg->n_devices != 1)
        return rk__group_open(out, cfg); /* several devices: group.c */
    rk_runtime *rt = rk__runtime_alloc();
    if (!rt)
        return rk__fail(RK_ENOMEM, "rk_runtime_open: out of memory");
    rt->region_fd = -1;
    pthread_mutex_init(&rt->actors_lock, NULL);
    if (cfg)
        rt->cfg = *cfg;
    else
        rk_config_init(&rt->cfg);
    if (!rt->cfg.reply_rings)
        rt->cfg.reply_rings = RK__REPLY_RINGS_DEFAULT;

    int rc = rk__config_check(&rt->cfg);
    if (rc == 0) {
        rt->n_actor_slots = rt->cfg.max_actors;
        rt->actors = calloc(rt->n_actor_slots, sizeof *rt->actors);
        if (!rt->actors)
            rc = rk__fail(RK_ENOMEM, "rk_runtime_open: out of memory for %u actors",
                          rt->n_actor_slots);
    }
    if (rc == 0)
        rc = rk__registry_load(rt);
    if (rc == 0)
        rc = rk__region_create(&rt->cfg, &rt->region_fd, &rt->view);
    if (rc == 0) {
        rt->h2d = rt->view.h2d;
        rt->n_d2h = rt->view.n_d2h;
        for (uint32_t i = 0; i < rt->n_d2h; i++)
            rt->d2h[i].rt = rt, rt->d2h[i].ring = rt->view.d2h[i], rt->d2h[i].index = i;
        rc = rk__arena_init(&rt->arena, rt->view.arena, rt->view.arena_size);
    }
    if (rc == 0) {
        rk_info *in = &rt->info;
        in->ring_slots = rt->cfg.ring_slots;
        in->slot_size = rt->cfg.slot_size;
        in->msg_max = rk_ring_msg_max(rt->h2d);
        in->reply_rings = rt->n_d2h;
        in->arena_size = rt->arena.size;
        in->max_payload = rt->cfg.max_payload;
        rc = rk__choose_backend(rt);
    }
    if (rc) {
        char detail[512];
        snprintf(detail, sizeof detail, "%s", rk_last_detail());
        rk__free(rt);
        return rk__fail(rc, "%s", detail);
    }
    /* auto falling back to the CPU is a warning (the user asked for the GPU
     * if there is one); delivered only where asked for (rk/log.h) */
    bool fell_back = rt->cfg.backend == RK_BACKEND_AUTO && rt->info.backend == RK_BACKEND_CPU;
    rk__log(fell_back ? RK__LOG_WARN : RK__LOG_INFO, "backend %s: %s", rt->info.backend_name,
            rt->info.why);
    rk__clear_detail();
    *out = rt;
    return 0;
}

void rk_runtime_close(rk_runtime *rt)
{
    if (!rt)
        return;
    if (rt->lanes) {
        rk__group_close(rt);
        return;
    }
    atomic_store(&rt->closing, true);
    if (rt->backend)
        rt->backend->stop(rt);
    rk__runtime_wake(rt);
    rk__free(rt);
}

void rk_runtime_info(const rk_runtime *rt, rk_info *out)
{
    if (!rt || !out)
        return;
    rk_runtime *r = rk__lane0(rt); /* (the lock is internal state) */
    rk__info_lock(r);
    *out = r->info;
    rk__info_unlock(r);
}

void rk_runtime_stats(const rk_runtime *rt, rk_stats *out)
{
    if (!rt || !out)
        return;
    if (rt->lanes) {
        rk__group_stats(rt, out);
        return;
    }
    rk_runtime *m = (rk_runtime *)rt; /* the arena lock is internal state */
    out->requests = atomic_load(&m->n_requests);
    out->replies = rk__replies(m);
    out->errors = atomic_load(&m->n_errors);
    out->restarts = atomic_load(&m->n_restarts);
    size_t used, peak;
    rk__arena_usage(&m->arena, &used, &peak);
    out->arena_used = used;
    out->arena_peak = peak;
}

int rk_runtime_health(rk_runtime *rt)
{
    if (!rt)
        return rk__fail(RK_EINVAL, "rk_runtime_health: runtime is NULL");
    if (rt->lanes)
        return rk__group_health(rt);
    int f = atomic_load(&rt->fault);
    if (f)
        return f;
    return rt->backend->health ? rt->backend->health(rt) : 0;
}

int rk_runtime_relaunch(rk_runtime *rt, uint32_t grid, uint32_t block, uint32_t smem)
{
    if (!rt)
        return rk__fail(RK_EINVAL, "rk_runtime_relaunch: runtime is NULL");
    int bad = rk__shape_check(grid, block, smem);
    if (bad)
        return bad;
    if (rt->lanes)
        return rk__group_relaunch(rt, grid, block, smem);
    /* tests (test_devices): this device refuses every configuration, as a
     * device whose limits it exceeds would */
    const char *refuse = getenv("RK_TEST_REFUSE_RELAUNCH");
    if (refuse && *refuse && atoi(refuse) == rt->cfg.device)
        return rk__fail(RK_EINVAL, "device %d refuses every configuration (RK_TEST_REFUSE_RELAUNCH)", rt->cfg.device);
    if (rt->backend->relaunch) {
        int rc = rt->backend->relaunch(rt, grid, block, smem);
        if (rc == 0)
            atomic_fetch_add(&rt->n_restarts, 1);
        return rc;
    }
    /* CPU backend: no device to validate against (rk__shape_check was
     * all); record what was asked (and count it, as every backend counts
     * a relaunch) */
    rk__info_record(rt, grid, block, smem);
    atomic_fetch_add(&rt->n_restarts, 1);
    return 0;
}

void rk_runtime_worker(rk_runtime *rt, rk_worker_info *out)
{
    if (!rt || !out)
        return;
    rt = rk__lane0(rt);
    memset(out, 0, sizeof *out);
    out->last_fault.actor = 0xffff;
    if (rt->backend && rt->backend->worker) {
        rt->backend->worker(rt, out);
        return;
    }
    out->state = RK_WORKER_NONE;
    strcpy(out->state_name, "none");
    snprintf(out->backend, sizeof out->backend, "%s", rt->info.backend_name);
}

int rk_runtime_recoveries(rk_runtime *rt, rk_recovery *out, int max)
{
    if (!rt || !out || max <= 0)
        return 0;
    rt = rk__lane0(rt);
    if (!rt->backend->recoveries)
        return 0;
    return rt->backend->recoveries(rt, out, max);
}

int rk_runtime_retry_gpu(rk_runtime *rt)
{
    if (!rt)
        return rk__fail(RK_EINVAL, "rk_runtime_retry_gpu: runtime is NULL");
    for (int i = 0; i < rt->n_lanes; i++) { /* a group: every device */
        int rc = rk_runtime_retry_gpu(rt->lanes[i]);
        if (rc || i == rt->n_lanes - 1)
            return rc;
    }
    if (!rt->backend->retry)
        return rk__fail(RK_ENOTSUP, "rk_runtime_retry_gpu: the %s backend runs in this process; there "
                        "is no worker to restart", rt->info.backend_name);
    return rt->backend->retry(rt);
}
