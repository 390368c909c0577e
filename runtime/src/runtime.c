/* runtime.c - opening and closing a runtime: configuration, the shared
 * region, backend choice. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "barrier.h"
#include "internal.h"

void rk_config_init(rk_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->backend = RK_BACKEND_AUTO;
    cfg->block = 256;
    cfg->ring_slots = 1024;
    cfg->slot_size = 256;
    cfg->arena_size = (size_t)256 << 20;
    cfg->max_payload = (size_t)128 << 20;
    cfg->actor_window = 256;
    cfg->max_actors = 64;
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
    static const rk_backend_kind kinds[] = {RK_BACKEND_AUTO, RK_BACKEND_CPU, RK_BACKEND_CUDA};
    for (size_t i = 0; s && i < 3; i++)
        if (!strcmp(s, rk_backend_name(kinds[i]))) {
            *out = kinds[i];
            return 0;
        }
    return rk__fail(RK_EINVAL, "backend \"%s\" is not one of auto, cpu, cuda", s ? s : "(null)");
}

static bool rk__pow2(uint64_t x) { return x && !(x & (x - 1)); }

static int rk__config_check(const rk_config *c)
{
    if (c->backend != RK_BACKEND_AUTO && c->backend != RK_BACKEND_CPU &&
        c->backend != RK_BACKEND_CUDA)
        return rk__fail(RK_EINVAL, "backend %d is not auto, cpu or cuda", (int)c->backend);
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
    if (c->max_payload > ((size_t)1 << 32) - RK_ARENA_ALIGN)
        return rk__fail(RK_EINVAL, "max_payload %zu B exceeds the 4 GiB a message header counts",
                        c->max_payload);
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
    return 0;
}

static size_t rk__page_up(size_t x) { return (x + 4095) & ~(size_t)4095; }

/* Lays out [region header | H2D | D2H | arena] in one memfd mapping. The
 * memfd (not anonymous memory) keeps the door open to sharing the region
 * with a CUDA child process that can fault without taking us down. */
static int rk__region_create(rk_runtime *rt)
{
    const rk_config *c = &rt->cfg;
    size_t ring = rk_ring_memsize(c->ring_slots, c->slot_size);
    size_t h2d_off = rk__page_up(sizeof(rk__region));
    size_t d2h_off = h2d_off + rk__page_up(ring);
    size_t arena_off = d2h_off + rk__page_up(ring);
    size_t size = arena_off + rk__page_up(c->arena_size);

    rt->region_fd = memfd_create("rk-region", MFD_CLOEXEC);
    if (rt->region_fd < 0)
        return rk__fail(RK_ESYS, "memfd_create for the %zu B shared region failed: %s", size,
                        strerror(errno));
    if (ftruncate(rt->region_fd, (off_t)size) != 0)
        return rk__fail(RK_ESYS, "sizing the shared region to %zu B failed: %s", size,
                        strerror(errno));
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, rt->region_fd, 0);
    if (p == MAP_FAILED)
        return rk__fail(RK_ENOMEM, "mapping the %zu B shared region failed: %s", size,
                        strerror(errno));
    rt->region = p;
    rt->region_size = size;
    rk__region *reg = p;
    reg->size = size;
    reg->h2d_off = h2d_off;
    reg->d2h_off = d2h_off;
    reg->arena_off = arena_off;
    reg->arena_size = c->arena_size;
    rt->h2d = (rk_ring *)((char *)p + h2d_off);
    rt->d2h = (rk_ring *)((char *)p + d2h_off);
    int rc = rk_ring_init(rt->h2d, ring, c->ring_slots, c->slot_size);
    if (rc == 0)
        rc = rk_ring_init(rt->d2h, ring, c->ring_slots, c->slot_size);
    if (rc == 0)
        rc = rk__arena_init(&rt->arena, (char *)p + arena_off, c->arena_size);
    /* release: a backend that sees the magic sees a complete layout */
    rk__st_release(&reg->magic, RK__REGION_MAGIC);
    return rc;
}

static void rk__free(rk_runtime *rt)
{
    for (uint32_t i = 0; rt->actors && i < rt->n_actor_slots; i++)
        if (rt->actors[i])
            rk_actor_close(rt->actors[i]);
    free(rt->actors);
    if (rt->arena.free)
        rk__arena_destroy(&rt->arena);
    if (rt->region)
        munmap(rt->region, rt->region_size);
    if (rt->region_fd >= 0)
        close(rt->region_fd);
    pthread_mutex_destroy(&rt->actors_lock);
    pthread_mutex_destroy(&rt->d2h_lock);
    free(rt);
}

int rk_runtime_open(rk_runtime **out, const rk_config *cfg)
{
    if (!out)
        return rk__fail(RK_EINVAL, "rk_runtime_open: out is NULL");
    *out = NULL;
    rk_runtime *rt = calloc(1, sizeof *rt);
    if (!rt)
        return rk__fail(RK_ENOMEM, "rk_runtime_open: out of memory");
    rt->region_fd = -1;
    pthread_mutex_init(&rt->actors_lock, NULL);
    pthread_mutex_init(&rt->d2h_lock, NULL);
    if (cfg)
        rt->cfg = *cfg;
    else
        rk_config_init(&rt->cfg);

    int rc = rk__config_check(&rt->cfg);
    if (rc == 0) {
        rt->n_actor_slots = rt->cfg.max_actors;
        rt->actors = calloc(rt->n_actor_slots, sizeof *rt->actors);
        if (!rt->actors)
            rc = rk__fail(RK_ENOMEM, "rk_runtime_open: out of memory for %u actors",
                          rt->n_actor_slots);
    }
    if (rc == 0)
        rc = rk__region_create(rt);
    if (rc) {
        rk__free(rt);
        return rc;
    }

    rk_info *in = &rt->info;
    in->ring_slots = rt->cfg.ring_slots;
    in->slot_size = rt->cfg.slot_size;
    in->msg_max = rk_ring_msg_max(rt->h2d);
    in->arena_size = rt->arena.size;
    in->max_payload = rt->cfg.max_payload;

    /* Backend choice: CUDA when asked for or when auto finds a usable GPU;
     * a forced CUDA that cannot run is an error, never a silent fallback. */
    char why[sizeof in->why] = "";
    if (rt->cfg.backend == RK_BACKEND_CPU) {
        snprintf(why, sizeof why, "CPU backend requested");
    } else {
#ifdef RK_HAVE_CUDA
        rc = rk__cuda_backend.start(rt);
        if (rc == 0) {
            rt->backend = &rk__cuda_backend;
            if (!rt->info.why[0])
                snprintf(rt->info.why, sizeof rt->info.why,
                         "CUDA device passed launch validation and the self-test");
        } else if (rt->cfg.backend == RK_BACKEND_CUDA) {
            char detail[512];
            snprintf(detail, sizeof detail, "%s", rk_last_detail());
            rk__free(rt);
            return rk__fail(rc, "%s", detail);
        } else {
            snprintf(why, sizeof why, "CUDA backend unavailable (%s): %s", rk_err_name(rc),
                     rk_last_detail());
        }
#else
        if (rt->cfg.backend == RK_BACKEND_CUDA) {
            rk__free(rt);
            return rk__fail(RK_ENOCUDA,
                            "backend cuda requested, but librk was built without the CUDA backend "
                            "(%s)", RK_NO_CUDA_WHY);
        }
        snprintf(why, sizeof why, "librk was built without the CUDA backend (%s)", RK_NO_CUDA_WHY);
#endif
    }
    if (!rt->backend) {
        rc = rk__cpu_backend.start(rt);
        if (rc) {
            rk__free(rt);
            return rc;
        }
        rt->backend = &rk__cpu_backend;
        snprintf(rt->info.why, sizeof rt->info.why, "%s", why);
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
    atomic_store(&rt->closing, true);
    if (rt->backend)
        rt->backend->stop(rt);
    rk__runtime_wake(rt);
    rk__free(rt);
}

void rk_runtime_info(const rk_runtime *rt, rk_info *out) { *out = rt->info; }

void rk_runtime_stats(const rk_runtime *rt, rk_stats *out)
{
    rk_runtime *m = (rk_runtime *)rt; /* the arena lock is internal state */
    out->requests = atomic_load(&m->n_requests);
    out->replies = atomic_load(&m->n_replies);
    out->errors = atomic_load(&m->n_errors);
    out->restarts = atomic_load(&m->n_restarts);
    size_t used, peak;
    rk__arena_usage(&m->arena, &used, &peak);
    out->arena_used = used;
    out->arena_peak = peak;
}

int rk_runtime_health(rk_runtime *rt)
{
    int f = atomic_load(&rt->fault);
    if (f)
        return f;
    return rt->backend->health ? rt->backend->health(rt) : 0;
}

int rk_runtime_relaunch(rk_runtime *rt, uint32_t grid, uint32_t block, uint32_t smem)
{
    if (!rt)
        return rk__fail(RK_EINVAL, "rk_runtime_relaunch: runtime is NULL");
    if (rt->backend->relaunch) {
        int rc = rt->backend->relaunch(rt, grid, block, smem);
        if (rc == 0)
            atomic_fetch_add(&rt->n_restarts, 1);
        return rc;
    }
    /* CPU backend: nothing GPU-specific to validate; record what was asked */
    rt->info.grid = rt->cfg.grid = grid;
    rt->info.block = rt->cfg.block = block;
    rt->info.smem = rt->cfg.smem = smem;
    return 0;
}

void rk__runtime_fault(rk_runtime *rt, int code, const char *why)
{
    int expected = 0;
    if (atomic_compare_exchange_strong(&rt->fault, &expected, code < 0 ? code : -code))
        rk__log(RK__LOG_ERROR, "backend %s failed (%s): %s", rt->info.backend_name,
                rk_err_name(code), why ? why : "");
    rk__runtime_wake(rt);
}

void rk__runtime_wake(rk_runtime *rt)
{
    /* seq_cst: pairs with the sleeper's increment of `sleepers` before it
     * re-checks for replies (Dekker): either it sees the reply or we see
     * it sleeping */
    rk__fence_seq_cst();
    if (atomic_load_explicit(&rt->sleepers, memory_order_relaxed)) {
        rk__fetch_add(&rt->wake_seq, 1u);
        rk__futex_wake(&rt->wake_seq, INT32_MAX);
    }
}
