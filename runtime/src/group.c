/* runtime/src/group.c - several devices behind one runtime.
 *
 * A group is a runtime that holds one ordinary runtime per device (a lane):
 * its own region, rings, worker process, supervisor and ring kernel. So a
 * fault on one device is recovered by that lane's supervisor and the other
 * lanes never see it; and nothing of the single-device paths changes. An
 * actor belongs to one lane (rk_actor_open places it), which keeps its
 * requests in order and its device-resident state on one GPU. */
#include "internal.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GPUs the NVIDIA driver lists, without a CUDA call in this process. */
static int rk__gpus_listed(void)
{
    DIR *d = opendir("/proc/driver/nvidia/gpus");
    int n = 0;
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The devices asked for, checked: count in *n, ordinals in dev[]. */
static int rk__group_devices(const rk_config *cfg, int *n, int dev[RK_MAX_DEVICES])
{
    *n = cfg->n_devices;
    if (*n == RK_DEVICES_ALL) {
        int g = rk__gpus_listed();
        *n = g < 1 ? 1 : g > RK_MAX_DEVICES ? RK_MAX_DEVICES : g;
        for (int i = 0; i < *n; i++)
            dev[i] = i;
        return 0;
    }
    if (*n < 0 || *n > RK_MAX_DEVICES)
        return rk__fail(RK_EINVAL, "n_devices is %d; it must be 0..%d or RK_DEVICES_ALL", *n,
                        RK_MAX_DEVICES);
    for (int i = 0; i < *n; i++) {
        dev[i] = cfg->devices[i];
        if (dev[i] < 0)
            return rk__fail(RK_EINVAL, "devices[%d] is %d; a device ordinal is >= 0", i, dev[i]);
        for (int j = 0; j < i; j++)
            if (dev[j] == dev[i])
                return rk__fail(RK_EINVAL, "devices[%d] and devices[%d] are both device %d; each "
                                "device serves one lane", j, i, dev[i]);
    }
    return 0;
}

int rk__group_open(rk_runtime **out, const rk_config *cfg)
{
    int n, dev[RK_MAX_DEVICES];
    int rc = rk__group_devices(cfg, &n, dev);
    if (rc)
        return rc;
    rk_config one = *cfg;
    one.n_devices = 0;
    if (n == 1) {
        one.device = dev[0];
        return rk_runtime_open(out, &one);
    }
    rk_runtime *g = rk__runtime_alloc();
    rk_runtime **lanes = calloc((size_t)n, sizeof *lanes);
    if (!g || !lanes) {
        free(g);
        free(lanes);
        return rk__fail(RK_ENOMEM, "rk_runtime_open: out of memory for %d devices", n);
    }
    g->cfg = *cfg;
    g->lanes = lanes;
    g->region_fd = -1;
    pthread_mutex_init(&g->relaunch_lock, NULL);
    for (int i = 0; i < n; i++) {
        one.device = dev[i];
        rc = rk_runtime_open(&lanes[i], &one);
        if (rc) {
            char detail[512];
            snprintf(detail, sizeof detail, "%s", rk_last_detail());
            g->n_lanes = i;
            rk__group_close(g);
            return rk__fail(rc, "device %d (%d of %d): %s", dev[i], i + 1, n, detail);
        }
        lanes[i]->lane = i;
        g->n_lanes = i + 1;
    }
    *out = g;
    return 0;
}

void rk__group_close(rk_runtime *rt)
{
    for (int i = 0; i < rt->n_lanes; i++)
        rk_runtime_close(rt->lanes[i]);
    pthread_mutex_destroy(&rt->relaunch_lock);
    pthread_mutex_destroy(&rt->info_lock);
    free(rt->lanes);
    free(rt);
}

void rk__group_stats(const rk_runtime *rt, rk_stats *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < rt->n_lanes; i++) {
        rk_stats s;
        rk_runtime_stats(rt->lanes[i], &s);
        out->requests += s.requests;
        out->replies += s.replies;
        out->errors += s.errors;
        out->restarts += s.restarts;
        out->arena_used += s.arena_used;
        out->arena_peak += s.arena_peak;
    }
}

/* rk__group_relaunch's work, under the group's relaunch lock (two at once
 * could leave the devices with a mix of both configurations). */
static int rk__group_relaunch_locked(rk_runtime *rt, uint32_t grid, uint32_t block, uint32_t smem)
{
    /* one configuration on every device, or none: a device that refuses
     * it (devices of other kinds have other limits) sends the devices
     * relaunched before it back to what they ran (until 2026-11-27 they
     * kept the new one) */
    rk_info was[RK_MAX_DEVICES];
    for (int i = 0; i < rt->n_lanes; i++)
        rk_runtime_info(rt->lanes[i], &was[i]);
    for (int i = 0; i < rt->n_lanes; i++) {
        const int rc = rk_runtime_relaunch(rt->lanes[i], grid, block, smem);
        if (rc == 0)
            continue;
        char why[512];
        snprintf(why, sizeof why, "%s", rk_last_detail());
        int stuck = -1; /* a device that could not go back (the first) */
        for (int j = 0; j < i; j++)
            if (rk_runtime_relaunch(rt->lanes[j], was[j].grid, was[j].block, was[j].smem) && stuck < 0)
                stuck = j;
        if (stuck >= 0)
            return rk__fail(rc, "device %d (%d of %d) refused grid %u, block %u, smem %u: %s; device %d did not go "
                            "back to grid %u, block %u, smem %u: %s",
                            rt->lanes[i]->cfg.device, i + 1, rt->n_lanes, grid, block, smem, why,
                            rt->lanes[stuck]->cfg.device, was[stuck].grid, was[stuck].block, was[stuck].smem,
                            rk_last_detail());
        return rk__fail(rc, "device %d (%d of %d) refused grid %u, block %u, smem %u: %s%s",
                        rt->lanes[i]->cfg.device, i + 1, rt->n_lanes, grid, block, smem, why,
                        i ? "; the devices before it went back to their configuration" : "");
    }
    return 0;
}

int rk__group_relaunch(rk_runtime *rt, uint32_t grid, uint32_t block, uint32_t smem)
{
    pthread_mutex_lock(&rt->relaunch_lock);
    const int rc = rk__group_relaunch_locked(rt, grid, block, smem);
    pthread_mutex_unlock(&rt->relaunch_lock);
    return rc;
}

int rk__group_health(rk_runtime *rt)
{
    int first = 0;
    for (int i = 0; i < rt->n_lanes; i++) {
        int h = rk_runtime_health(rt->lanes[i]);
        if (h == 0)
            return 0;
        if (!first)
            first = h;
    }
    return first;
}

/* Whether a lane takes new actors: not failed for good, and its worker
 * neither crash-looping (degraded: its GPU is not restarted) nor failed. */
static bool rk__lane_up(rk_runtime *l)
{
    if (atomic_load(&l->fault) || atomic_load(&l->closing))
        return false;
    rk_worker_info w;
    rk_runtime_worker(l, &w);
    return w.state != RK_WORKER_DEGRADED && w.state != RK_WORKER_FAILED;
}

/* Whether a lane has a free actor slot (max_actors counts per lane). */
static bool rk__lane_room(rk_runtime *l)
{
    for (uint32_t i = 0; i < l->n_actor_slots; i++)
        if (!__atomic_load_n(&l->actors[i], __ATOMIC_RELAXED))
            return true;
    return false;
}

/* The lane for a new actor: the fewest requests outstanding among the
 * lanes that are up, ties in turn from a rotating start; when none is up,
 * the same among those not failed for good (a degraded lane still serves
 * the built-ins). Lanes with a free actor slot first: a full one would
 * refuse it (-RK_EBUSY) while another has room. NULL (detail set) when
 * every lane has failed. */
rk_runtime *rk__group_place(rk_runtime *rt)
{
    uint32_t start = atomic_fetch_add(&rt->next_lane, 1);
    rk_runtime *best = NULL;
    uint64_t best_out = 0;
    for (int pass = 0; pass < 3 && !best; pass++)
        for (int k = 0; k < rt->n_lanes; k++) {
            rk_runtime *l = rt->lanes[(start + (uint32_t)k) % (uint32_t)rt->n_lanes];
            if (pass == 0 ? !rk__lane_up(l) : atomic_load(&l->fault) != 0)
                continue;
            if (pass < 2 && !rk__lane_room(l)) /* pass 2: every lane full, rk_actor_open says so */
                continue;
            uint64_t req = atomic_load(&l->n_requests), rep = rk__replies(l);
            uint64_t outstanding = req > rep ? req - rep : 0;
            if (!best || outstanding < best_out) {
                best = l;
                best_out = outstanding;
            }
        }
    if (!best)
        rk__fail(RK_EDEVICE, "rk_actor_open: all %d devices of this runtime have failed for good "
                 "(rk_runtime_device(rt, i) and rk_runtime_health say why)", rt->n_lanes);
    return best;
}

int rk_runtime_device_count(const rk_runtime *rt) { return rt && rt->lanes ? rt->n_lanes : 1; }

rk_runtime *rk_runtime_device(rk_runtime *rt, int i)
{
    if (!rt || i < 0 || i >= rk_runtime_device_count(rt))
        return NULL;
    return rt->lanes ? rt->lanes[i] : rt;
}

int rk_actor_open_on(rk_runtime *rt, int device, rk_actor **out)
{
    if (out)
        *out = NULL; /* as rk_actor_open: NULL on every failure */
    if (!rt || !out)
        return rk__fail(RK_EINVAL, "rk_actor_open_on: %s is NULL", rt ? "out" : "runtime");
    int n = rk_runtime_device_count(rt);
    if (device < 0 || device >= n)
        return rk__fail(RK_EINVAL, "rk_actor_open_on: device %d; this runtime has %d (0..%d)", device, n,
                        n - 1);
    return rk_actor_open(rk_runtime_device(rt, device), out);
}
