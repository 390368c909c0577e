/* bridge/server/admin.c - the operations about the bridge itself: `status`
 * (anyone, on the main endpoint and on the status endpoint) and `launch`
 * (an admin operation: it changes the kernel every client shares). Who is
 * an admin: with --allow-admin-ops every client; with CURVE, the clients
 * whose key is in --curve-admin-dir (curve.c marks their connection
 * "admin"); nobody else. */
#include "server.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

bool rkb_is_admin(const rkb_loop *l, rkb_entry *e)
{
    if (l->cfg->allow_admin_ops)
        return true;
    if (!l->cfg->curve_secret_file || !e->body_open)
        return false;
    const char *user = zmq_msg_gets(&e->body, "User-Id");
    return user && !strcmp(user, "admin");
}

bool rkb_is_launch_error(int rc)
{
    rc = rc < 0 ? -rc : rc;
    return rc == RK_EBLOCK || rc == RK_ESMEM || rc == RK_EGRID || rc == RK_ENOCOOP ||
           rc == RK_EINVAL;
}

void rkb_do_launch(rkb_loop *l, rkb_entry *e)
{
    uint64_t g = e->req.u.launch.grid, bl = e->req.u.launch.block, sm = e->req.u.launch.smem;
    /* a shape no device runs (rk/runtime.h RK_*_MAX) is the runtime's to
     * refuse, on every backend; here only what a uint32_t cannot carry,
     * naming the limit that holds (not UINT32_MAX) */
    if (g > UINT32_MAX || bl > UINT32_MAX || sm > UINT32_MAX) {
        const char *what = g > UINT32_MAX ? "grid" : bl > UINT32_MAX ? "block" : "smem";
        uint64_t v = g > UINT32_MAX ? g : bl > UINT32_MAX ? bl : sm;
        unsigned max = g > UINT32_MAX ? RK_GRID_MAX : bl > UINT32_MAX ? RK_BLOCK_MAX : RK_SMEM_MAX;
        rkb_answer_error(l, e, RKB_E_LAUNCH_INVALID, "%s %" PRIu64 " exceeds %u, the most any CUDA device "
                         "runs (rk/runtime.h RK_%s_MAX)", what, v, max,
                         g > UINT32_MAX ? "GRID" : bl > UINT32_MAX ? "BLOCK" : "SMEM");
        return;
    }
    int rc = rk_runtime_relaunch(l->sh->rt, (uint32_t)g, (uint32_t)bl, (uint32_t)sm);
    if (rc) {
        const char *d = rk_last_detail();
        if (rkb_is_launch_error(rc))
            rkb_answer_error(l, e, RKB_E_LAUNCH_INVALID, "%s", d[0] ? d : rk_strerror(rc));
        else if (-rc == RK_EDEVICE)
            rkb_answer_error(l, e, RKB_E_DEVICE_FAULT, "relaunch failed: %s", d[0] ? d : rk_strerror(rc));
        else
            rkb_answer_error(l, e, RKB_E_INTERNAL, "relaunch failed (%s): %s", rk_err_name(rc), d);
        return;
    }
    rk_runtime_info(l->sh->rt, &l->info);
    rkb_logk(RKB_LK_LAUNCH, RKB_LOG_INFO, "launch: kernel now grid %u block %u smem %u on the %s backend",
             l->info.grid, l->info.block, l->info.smem, l->info.backend_name);
    rkb_answer_encoded(l, e, rkb_encode_launch(&l->enc, e->req.has_id, e->req.id, l->info.backend_name,
                                               l->info.grid, l->info.block, l->info.smem));
}

/* ---- status ---------------------------------------------------------------- */

/* The operations that run as actors (the built-ins echo and vadd, then the
 * modules' actors) with NULL-terminated field lists; free() the result. */
static rkb_status_actor *rkb__actors(rk_runtime *rt, size_t *n_out)
{
    int n = rk_runtime_actor_count(rt);
    typedef const char *names[RK_FIELDS_MAX + 1];
    rkb_status_actor *a = calloc((size_t)n, sizeof *a + 2 * sizeof(names));
    if (!a)
        return NULL;
    names *lists = (names *)(a + n);
    for (int i = 0; i < n; i++) {
        const rk_actor_decl *d = rk_runtime_actor_at(rt, i, NULL, NULL);
        names *in = &lists[2 * i], *out = &lists[2 * i + 1];
        for (uint32_t k = 0; k < d->n_inputs; k++)
            (*in)[k] = d->inputs[k];
        for (uint32_t k = 0; k < d->n_outputs; k++)
            (*out)[k] = d->outputs[k];
        a[i] = (rkb_status_actor){d->name, *in, *out, (d->flags & RK_ACTOR_GPU) != 0,
                                    d->cpu || i < RK_BUILTIN_ACTORS};
    }
    *n_out = (size_t)n;
    return a;
}

/* Sums every thread's counters (self: the loop answering `status`, or
 * NULL: the status endpoint's thread, which holds no request loop's). */
static void rkb__sum(const rkb_shared *sh, const rkb_loop *self, rkb_status_counters *c)
{
    for (int i = 0; i <= sh->n_loops; i++) {
        const rkb_counters *t = i < sh->n_loops ? &sh->loops[i]->n : sh->front ? &sh->front->n : NULL;
        if (!t)
            continue;
#define RKB__TC_SUM(name) c->name += RKB_LD(t->name);
        RKB_THREAD_COUNTERS(RKB__TC_SUM)
#undef RKB__TC_SUM
        if (i < sh->n_loops) {
            const rkb_loop *l = sh->loops[i];
            c->in_flight += RKB_LD(l->pool.n_inflight);
            if (sh->front) {
                /* a worker's waiting requests are those in its ring too,
                 * as the bound counts them (frontend.c): pushed - left.
                 * Another worker's left is published once a pass (a pass
                 * late); this one's is its own, now (this status request
                 * left its ring) */
                const bool me = l == self;
                const uint64_t n = RKB_LD(l->pushed_n), b = RKB_LD(l->pushed_bytes);
                const uint64_t left = me ? l->taken_n - l->pool.n_parked : RKB_LD(l->left_n);
                const uint64_t left_b = me ? l->taken_bytes - l->pool.parked_bytes : RKB_LD(l->left_bytes);
                c->queued += n > left ? n - left : 0;
                c->queued_bytes += b > left_b ? b - left_b : 0;
            } else {
                c->queued += RKB_LD(l->pool.n_parked);
                c->queued_bytes += RKB_LD(l->pool.parked_bytes);
            }
        }
    }
    c->connections = c->accepted > c->disconnects ? c->accepted - c->disconnects : 0;
}

static void rkb__counters(const rkb_shared *sh, const rkb_loop *self, rkb_status_counters *c)
{
    const rkb_config *cfg = sh->cfg;
    rk_stats st;
    rk_runtime_stats(sh->rt, &st);
    rkb__sum(sh, self, c);
    c->restarts = st.restarts;
    c->log_suppressed = rkb_log_suppressed();
    c->deploys = RKB_LD(sh->deploys);
    c->deploy_failures = RKB_LD(sh->deploy_failures);
    c->ring_requests = st.requests;
    c->ring_replies = st.replies;
    c->ring_errors = st.errors;
    c->arena_used = st.arena_used;
    c->arena_peak = st.arena_peak;
    c->max_message_bytes = cfg->max_message_bytes;
    c->transport_cap_bytes = (uint64_t)cfg->max_message_bytes * 4;
    c->window = cfg->rk.actor_window;
    c->io_threads = (uint64_t)sh->n_loops;
    c->zmq_io_threads = (uint64_t)sh->zmq_io_threads;
    c->cpus = (uint64_t)sh->cpus;
    c->fd_limit = sh->fd_limit;
    /* the whole process (I/O threads, ZeroMQ's threads, the CPU backend's
     * worker): rk-bench bridge divides its growth by the messages */
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    c->cpu_user_us = (uint64_t)ru.ru_utime.tv_sec * 1000000 + (uint64_t)ru.ru_utime.tv_usec;
    c->cpu_sys_us = (uint64_t)ru.ru_stime.tv_sec * 1000000 + (uint64_t)ru.ru_stime.tv_usec;
}

/* The `worker` map from the runtime's supervisor (w must outlive s). */
static void rkb__worker(rkb_shared *sh, rk_worker_info *w, rkb_status *s)
{
    rk_runtime_worker(sh->rt, w);
    if (w->state == RK_WORKER_NONE)
        return;
    s->has_worker = true;
    s->worker_state = w->state_name;
    s->worker_backend = w->backend;
    s->worker_why = w->why;
    s->worker_pid = (uint64_t)w->pid;
    s->worker_restarts = w->restarts;
    s->worker_faults = w->faults;
    s->worker_poisoned = w->poisoned;
    s->standby_ready = w->standby_ready;
    s->standby_pid = (uint64_t)w->standby_pid;
    s->last_recovery_ns = (uint64_t)(w->last_recovery_ns > 0 ? w->last_recovery_ns : 0);
    if (w->last_fault.at_ns) {
        s->has_last_fault = true;
        s->fault_actor = w->last_fault.actor;
        s->fault_request = w->last_fault.request_id;
        s->fault_type = w->last_fault.type;
        s->fault_error = rk_err_name(w->last_fault.error);
        s->fault_detail = w->last_fault.detail;
        /* at_ns is the runtime's CLOCK_MONOTONIC, as rkb_now_ns */
        s->fault_age_ms = (uint64_t)((rkb_now_ns() - w->last_fault.at_ns) / 1000000);
    }
}

/* The `devices` list: each device's backend, worker and load. info and
 * w (n each) hold the strings and must outlive the list. */
static rkb_status_device *rkb__devices(rk_runtime *rt, rk_info *info, rk_worker_info *w, size_t *n_out)
{
    int n = rk_runtime_device_count(rt);
    rkb_status_device *d = calloc((size_t)n, sizeof *d);
    for (int i = 0; d && i < n; i++) {
        rk_runtime *dev = rk_runtime_device(rt, i);
        rk_stats st;
        rk_runtime_info(dev, &info[i]);
        rk_runtime_worker(dev, &w[i]);
        rk_runtime_stats(dev, &st);
        d[i] = (rkb_status_device){.backend = info[i].backend_name,
                                   .name = info[i].has_device ? info[i].device_name : "cpu",
                                   .state = w[i].state_name, .pid = (uint64_t)w[i].pid,
                                   .requests = st.requests, .replies = st.replies,
                                   .restarts = w[i].restarts, .faults = w[i].faults};
    }
    *n_out = d ? (size_t)n : 0;
    return d;
}

void rkb_do_retry_gpu(rkb_loop *l, rkb_entry *e)
{
    int rc = rk_runtime_retry_gpu(l->sh->rt);
    if (rc) {
        rkb_answer_error(l, e, -rc == RK_ENOTSUP ? RKB_E_INVALID_ARGUMENT : RKB_E_DEVICE_FAULT,
                         "retry_gpu: %s", rk_last_detail());
        return;
    }
    rk_runtime_info(l->sh->rt, &l->info);
    rkb_logk(RKB_LK_LAUNCH, RKB_LOG_WARN, "retry_gpu: the %s backend serves again", l->info.backend_name);
    rkb_answer_encoded(l, e, rkb_encode_ping(&l->enc, e->req.has_id, e->req.id, l->info.backend_name));
}

int rkb_status_encode(rkb_shared *sh, const rkb_loop *self, rk_info *info, rkb_encoder *enc,
                      bool has_id, uint64_t id)
{
    rk_runtime_info(sh->rt, info); /* another thread may have relaunched the kernel */
    const rk_info *in = info;
    rkb_status s = {
        .backend = in->backend_name, .backend_why = in->why,
        .has_device = in->has_device, .device_name = in->device_name,
        .sm_count = (uint64_t)in->sm_count, .cc_major = in->cc_major, .cc_minor = in->cc_minor,
        .grid = in->grid, .block = in->block, .smem = in->smem,
        .max_grid = in->max_grid, .max_block = in->max_block, .max_smem = in->max_smem,
        .endpoints = sh->endpoints,
        .status_endpoint = sh->status_endpoint[0] ? sh->status_endpoint : NULL,
        .allocator = RKB_ALLOCATOR,
        .ring_p50_ns = sh->ring_p50_ns, .ring_p99_ns = sh->ring_p99_ns, .ring_count = sh->ring_count,
        .warnings = sh->warnings, .n_warnings = (size_t)sh->n_warnings,
    };
    rk_worker_info w;
    rkb__worker(sh, &w, &s);
    rkb__counters(sh, self, &s.counters);
    rkb_status_actor *acts = rkb__actors(sh->rt, &s.n_actors);
    s.actors = acts;
    rk_info *dinfo = calloc(RK_MAX_DEVICES, sizeof *dinfo);
    rk_worker_info *dw = calloc(RK_MAX_DEVICES, sizeof *dw);
    rkb_status_device *devs = dinfo && dw ? rkb__devices(sh->rt, dinfo, dw, &s.n_devices) : NULL;
    s.devices = devs;
    int rc = acts && devs ? rkb_encode_status(enc, has_id, id, &s) : RKB_E_INTERNAL;
    free(devs);
    free(dw);
    free(dinfo);
    free(acts);
    return rc;
}

void rkb_do_status(rkb_loop *l, rkb_entry *e)
{
    if (rkb_status_encode(l->sh, l, &l->info, &l->enc, e->req.has_id, e->req.id) != 0) {
        rkb_answer_error(l, e, RKB_E_INTERNAL, "out of memory encoding the status");
        return;
    }
    rkb_answer_encoded(l, e, 0);
}
