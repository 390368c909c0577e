/* reload.c - rk_runtime_reload_modules: a new set of actor modules for a
 * runtime that stays open. The new set is loaded and checked in this
 * process first (a bad module changes nothing), then each device's
 * consumer is restarted on it by its backend (rk__backend_ops.reload);
 * a device whose consumer does not start on it is back on the previous
 * set, and so are the devices done before it (all or none).
 * rk_runtime_reload_prepare does the part that needs no pause ahead:
 * the set loaded, its workers started beside the serving ones. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actor.h"
#include "barrier.h"
#include "modules.h"

/* What rk_runtime_reload_prepare made for one device: the set, and the
 * paths it was asked for (a reload of other paths does not use it). */
typedef struct rk__prepared {
    rk__registry reg;
    char **paths;
    size_t n;
} rk__prepared;

/* Requests rt's open actors have in flight or staged, and one of their
 * actors' names (for the detail). Types are what a reload changes: a
 * request posted for the old set must not reach the new one. */
static uint32_t rk__unanswered(rk_runtime *rt, uint16_t *type)
{
    uint32_t n = 0;
    rk__d2h_lock_all(rt); /* routers change the records' states under them */
    for (uint32_t i = 0; i < rt->n_actor_slots; i++) {
        rk_actor *a = rk__actor_at(rt, i);
        if (!a || a->closing) /* a closed actor's requests are dropped by the reload */
            continue;
        for (uint32_t t = 0; t < a->window; t++) {
            const uint8_t st = rk__ld_relaxed(&a->pend[t].state);
            if (st == RK__P_SENT || st == RK__P_STAGED || st == RK__P_QUEUED) {
                if (!n)
                    *type = a->pend[t].type;
                n++;
            }
        }
    }
    rk__d2h_unlock_all(rt);
    return n;
}

/* What both calls refuse before anything changes: 0, or the refusal. */
static int rk__reload_usable(const char *fn, rk_runtime *group, const char *const *paths, size_t n)
{
    if (!group)
        return rk__fail(RK_EINVAL, "%s: runtime is NULL", fn);
    if (n && !paths)
        return rk__fail(RK_EINVAL, "%s: n is %zu but paths is NULL", fn, n);
    /* (before a prepared set's paths are compared with them) */
    for (size_t i = 0; i < n; i++)
        if (!paths[i])
            return rk__fail(RK_EINVAL, "%s: paths[%zu] of %zu is NULL, not a module file or directory", fn, i, n);
    for (int i = 0; i < rk_runtime_device_count(group); i++) {
        rk_runtime *rt = rk_runtime_device(group, i);
        if (!rt->backend->reload)
            return rk__fail(RK_ENOTSUP, "%s: the %s backend runs the modules' GPU kernel in this process (isolation "
                            "none) and cannot load another; reopen the runtime, or use a worker process (the "
                            "default isolation)", fn, rt->backend->name);
        const int bad = atomic_load(&rt->fault);
        if (bad)
            return rk__fail(-bad, "%s: the runtime failed for good (%s)", fn, rk_strerror(bad));
    }
    return 0;
}

static void rk__prep_drop(rk_runtime *rt)
{
    rk__prepared *p = rt->prep;
    if (!p)
        return;
    if (rt->backend && rt->backend->unprepare && rt->backend_state) /* (a stopped backend ended it) */
        rt->backend->unprepare(rt);
    rk__registry_drop(&p->reg);
    for (size_t i = 0; i < p->n; i++)
        free(p->paths[i]);
    free(p->paths);
    free(p);
    rt->prep = NULL;
}

void rk__reload_free(rk_runtime *rt) { rk__prep_drop(rt); }

/* Takes rt's prepared set into *out when it was made for these paths. */
static bool rk__prep_take(rk_runtime *rt, const char *const *paths, size_t n, rk__registry *out)
{
    rk__prepared *p = rt->prep;
    bool same = p && p->n == n;
    for (size_t i = 0; same && i < n; i++)
        same = strcmp(p->paths[i], paths[i]) == 0;
    if (!same)
        return false;
    *out = p->reg;
    p->reg = (rk__registry){0};
    return true;
}

/* One device's prepared set: loaded, and its consumer started. */
static int rk__prep_one(rk_runtime *rt, const char *const *paths, size_t n)
{
    rk__prepared *p = calloc(1, sizeof *p);
    if (!p || (n && !(p->paths = calloc(n, sizeof *p->paths)))) {
        free(p);
        return rk__fail(RK_ENOMEM, "rk_runtime_reload_prepare: out of memory");
    }
    rt->prep = p;
    for (; p->n < n; p->n++)
        if (!(p->paths[p->n] = strdup(paths[p->n])))
            return rk__fail(RK_ENOMEM, "rk_runtime_reload_prepare: out of memory");
    int rc = rk__registry_build(rt, paths, n, &p->reg);
    if (rc == 0 && rt->backend->prepare)
        rc = rt->backend->prepare(rt, &p->reg);
    return rc;
}

int rk_runtime_reload_prepare(rk_runtime *rt, const char *const *paths, size_t n)
{
    int rc = rk__reload_usable("rk_runtime_reload_prepare", rt, paths, n);
    if (rc)
        return rc;
    const int n_lanes = rk_runtime_device_count(rt);
    for (int i = 0; rc == 0 && i < n_lanes; i++) {
        rk__prep_drop(rk_runtime_device(rt, i));
        rc = rk__prep_one(rk_runtime_device(rt, i), paths, n);
    }
    if (rc)
        for (int i = 0; i < n_lanes; i++)
            rk__prep_drop(rk_runtime_device(rt, i));
    return rc;
}

int rk_runtime_reload_modules(rk_runtime *rt, const char *const *paths, size_t n)
{
    int rc = rk__reload_usable("rk_runtime_reload_modules", rt, paths, n);
    if (rc)
        return rc;
    /* the devices of a group, or rt itself: rk_runtime_device's, indexed many times below */
    const int n_lanes = rk_runtime_device_count(rt);
    rk_runtime *const *lanes = rt->lanes ? rt->lanes : &rt;
    for (int i = 0; rc == 0 && i < n_lanes; i++) {
        uint16_t type = 0;
        const uint32_t busy = rk__unanswered(lanes[i], &type);
        if (busy)
            rc = rk__fail(RK_EBUSY, "rk_runtime_reload_modules: %u request(s) in flight or staged%s (one of type "
                          "%u, %s): a reload needs every reply received first; nothing was changed",
                          busy, n_lanes > 1 ? " on one device" : "", type, rk__type_name(lanes[i], type));
    }
    if (rc)
        return rc;
    /* (n_lanes >= 1; unsigned, so the compiler sees no negative size) */
    rk__registry *next = calloc((unsigned)n_lanes, sizeof *next);
    if (!next)
        return rk__fail(RK_ENOMEM, "rk_runtime_reload_modules: out of memory");
    /* every device loads its own copy (as at open); all load, or none */
    int built = 0;
    for (; built < n_lanes && rc == 0; built++)
        if (!rk__prep_take(lanes[built], paths, n, &next[built]))
            rc = rk__registry_build(lanes[built], paths, n, &next[built]);
    if (rc == 0) {
        int done = 0;
        for (; done < n_lanes && rc == 0; done++)
            rc = lanes[done]->backend->reload(lanes[done], &next[done], false);
        if (rc) {
            /* lane done-1 is back on its set; put the ones before it back
             * (one whose worker does not start is degraded on it: a
             * device left on the new set would serve types the others
             * do not) */
            char why[1024];
            snprintf(why, sizeof why, "%s", rk_last_detail());
            for (int i = 0; i < done - 1; i++)
                if (lanes[i]->backend->reload(lanes[i], &next[i], true))
                    snprintf(why + strlen(why), sizeof why - strlen(why), "; device %d: %s", i, rk_last_detail());
            rc = rk__fail(rc, "%s", why);
        }
    }
    /* next[] holds what is not installed: the old sets, or the new ones */
    for (int i = 0; i < built; i++)
        rk__registry_drop(&next[i]);
    free(next);
    for (int i = 0; i < n_lanes; i++)
        rk__prep_drop(lanes[i]); /* used, or for other paths */
    return rc;
}
