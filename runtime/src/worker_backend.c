/* worker_backend.c - the worker backend's ops (internal.h rk__backend_ops):
 * open (the first worker, the per-GPU lock, the self-test, the supervisor
 * thread), close, health, relaunch, the worker's state and its recovery
 * history, and the operator's retry after a crash loop. The supervising
 * itself is supervisor.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "actor.h"
#include "barrier.h"
#include "supervisor.h"

#define RK__STOP_MS 5000

static int rk__super_alive(void *arg)
{
    rk__super *s = arg;
    rk__wmsg m;
    int rc = rk__proc_recv(&s->active, &m, 0);
    if (rc == -RK_ETIMEDOUT)
        return 0;
    if (rc == 0 && m.kind == RK__WM_FAULT)
        return rk__fail(m.rc ? m.rc : -RK_EDEVICE, "the worker faulted: %s", m.text);
    if (rc == 0)
        return 0;
    char why[200];
    rk__proc_end(&s->active, why, sizeof why);
    return rk__fail(RK_EDEVICE, "%s", why);
}

static void rk__super_free(rk__super *s)
{
    rk__proc_end(&s->active, NULL, 0);
    rk__proc_end(&s->standby, NULL, 0);
    rk__proc_end(&s->next, NULL, 0);
    if (s->lock_fd >= 0)
        close(s->lock_fd);
    if (s->evfd >= 0)
        close(s->evfd);
    pthread_mutex_destroy(&s->lock);
    free(s->fault_at);
    free(s);
}

static int rk__super_start(rk_runtime *rt)
{
    rk__super *s = calloc(1, sizeof *s);
    if (!s)
        return rk__fail(RK_ENOMEM, "worker backend: out of memory");
    s->rt = rt;
    s->active = s->standby = s->next = RK__PROC_NONE;
    s->lock_fd = -1;
    s->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    s->fault_at = calloc(rt->cfg.fault_limit, sizeof *s->fault_at);
    pthread_mutex_init(&s->lock, NULL);
    const uint32_t kind = rt->worker_kind;
#ifndef RK_HAVE_CUDA
    if (kind == RK__WB_CUDA) {
        rk__super_free(s);
        return rk__fail(RK_ENOCUDA, "librk was built without the CUDA backend (%s)", RK_NO_CUDA_WHY);
    }
#endif
    rt->wflags = rt->cfg.test_faults ? RK__WF_TEST_FAULTS : 0;
    int rc = s->evfd < 0 || !s->fault_at ? rk__fail(RK_ENOMEM, "worker backend: out of memory") : 0;
    if (rc == 0)
        rc = rk__spawn_ready(s, &s->active, kind);
    if (rc == 0 && kind == RK__WB_CUDA && !rt->cfg.share_gpu) {
        s->lock_fd = rk__gpu_lock(s->active.dev.uuid, s->active.dev.name);
        rc = s->lock_fd < 0 ? s->lock_fd : 0;
    }
    bool served;
    if (rc == 0)
        rc = rk__go(s, &s->active, &served);
    if (rc == 0)
        rc = rk__selftest(rt, (int)rk__env_range("RK_CUDA_SELFTEST_MS", 5000, 1, RK__ENV_MS_MAX), rk__super_alive, s);
    if (rc) {
        char detail[512];
        snprintf(detail, sizeof detail, "%s", rk_last_detail());
        rk__proc_stop(&s->active, 1000, rt);
        rk__super_free(s);
        /* leave clean rings for the backend a fallback starts */
        rk__rings_clean(rt);
        rk__st_relaxed(&rt->view.hdr->state, (int32_t)RK__STATE_INIT);
        rt->wflags = 0;
        return rk__fail(rc, "%s", detail);
    }
    rk__fill_info(s, &s->active);
    snprintf(rt->info.why, sizeof rt->info.why, "%s",
             kind == RK__WB_CUDA ? "" : "CPU backend in a worker process");
    if (kind == RK__WB_CUDA)
        snprintf(rt->info.why, sizeof rt->info.why,
                 "CUDA device %d (%s) passed launch validation and the self-test in worker %d: grid %u x "
                 "block %u, smem %u B",
                 rt->cfg.device, s->active.dev.name, (int)s->active.pid, rt->info.grid, rt->info.block,
                 rt->info.smem);
    s->state = RK_WORKER_RUNNING;
    s->standby_after = rt->cfg.standby ? rk__now_ns() : 0;
    rt->backend_state = s;
    if (pthread_create(&s->thread, NULL, rk__super_main, s) != 0) {
        rt->backend_state = NULL;
        rk__proc_stop(&s->active, 1000, rt);
        rk__super_free(s);
        return rk__fail(RK_ESYS, "worker backend: the supervisor thread could not be started");
    }
    s->thread_on = true;
    return 0;
}

static void rk__super_stop(rk_runtime *rt)
{
    rk__super *s = rt->backend_state;
    if (!s)
        return;
    atomic_store(&s->quit, true);
    uint64_t one = 1;
    if (write(s->evfd, &one, sizeof one) < 0) { /* the thread also wakes every tick */
    }
    if (s->thread_on)
        pthread_join(s->thread, NULL);
    rk__cpu_thread_stop(&s->cpu, rt);
    rk__proc_stop(&s->active, RK__STOP_MS, rt);
    rk__proc_stop(&s->standby, RK__STOP_MS, NULL);
    rk__proc_reap_deferred(RK__STOP_MS);
    rt->backend_state = NULL;
    rk__super_free(s);
}

static int rk__super_health(rk_runtime *rt)
{
    rk__super *s = rt->backend_state;
    return s && s->state == RK_WORKER_FAILED ? -RK_EDEVICE : 0;
}

static int rk__super_relaunch(rk_runtime *rt, uint32_t grid, uint32_t block, uint32_t smem)
{
    rk__super *s = rt->backend_state;
    pthread_mutex_lock(&s->lock);
    int rc = 0;
    if (s->state != RK_WORKER_RUNNING && rt->worker_kind == RK__WB_CUDA) {
        /* no kernel to relaunch (degraded: the CPU stands in; failed):
         * the GPU's next worker runs what is recorded, so it is checked
         * first, by a worker that checks it and exits. (Until 2026-11-27
         * any configuration was recorded; rk_runtime_retry_gpu then
         * failed on it, and a group relaunch was not all or none.) */
        rk__wdev dev;
        rc = rk__check_launch(s, grid, block, smem, &dev);
        if (rc == 0)
            rk__info_record(rt, dev.grid, dev.block, dev.smem);
    } else if (s->state != RK_WORKER_RUNNING || s->active.kind != RK__WB_CUDA) {
        rk__info_record(rt, grid, block, smem); /* a CPU consumer has no kernel */
    } else {
        rk__wmsg m = {.kind = RK__WM_RELAUNCH, .grid = grid, .block = block, .smem = smem};
        rc = rk__proc_send(&s->active, &m);
        if (rc == 0)
            rc = rk__proc_await_draining(&s->active, RK__WM_RELAUNCHED, &m, rk__proc_start_ms(), rt);
        if (rc == 0) {
            s->active.dev = m.dev;
            rk__fill_info(s, &s->active);
            s->hb_change = rk__now_ns();
            /* the standby was validated for the old configuration: replace it */
            rk__proc_end(&s->standby, NULL, 0);
            s->standby_after = rt->cfg.standby ? rk__now_ns() : 0;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static void rk__super_worker(rk_runtime *rt, rk_worker_info *out)
{
    rk__super *s = rt->backend_state;
    pthread_mutex_lock(&s->lock);
    out->state = s->state;
    snprintf(out->state_name, sizeof out->state_name, "%s", rk__state_names[s->state]);
    out->pid = s->active.pid;
    snprintf(out->backend, sizeof out->backend, "%s",
             s->state == RK_WORKER_DEGRADED ? "cpu" : rk__kind_name(rt->worker_kind));
    out->restarts = s->restarts;
    out->faults = s->faults;
    out->poisoned = s->poisoned;
    out->last_recovery_ns = atomic_load(&rt->last_recovery_ns);
    out->standby_ready = s->standby.ready;
    out->standby_pid = s->standby.pid;
    out->last_fault = s->last;
    snprintf(out->why, sizeof out->why, "%s", s->why);
    pthread_mutex_unlock(&s->lock);
}

/* The consumer is gone (stopped, or failed to start): its replies are
 * delivered, closed actors reaped, and the rings and the generation move
 * on for the next one, as after a fault (rk__bury). s->lock held. */
static void rk__super_clear_locked(rk_runtime *rt)
{
    rk__d2h_lock_all(rt);
    rk__drain_locked(rt);
    rk__reap_closed_locked(rt);
    rk__rings_reset_locked(rt);
    rk__d2h_unlock_all(rt);
    /* release: pairs with owners' acquire of gen (send.c) */
    atomic_store_explicit(&rt->gen, rt->view.hdr->gen, memory_order_release);
}

static int rk__super_retry(rk_runtime *rt)
{
    rk__super *s = rt->backend_state;
    pthread_mutex_lock(&s->lock);
    int rc = 0;
    if (s->state == RK_WORKER_DEGRADED) {
        /* the CPU stops at a message boundary: all it consumed is answered */
        rk__cpu_thread_stop(&s->cpu, rt);
        /* what closed actors still have in H2D is dropped by the fresh
         * worker (a new generation) and nobody re-posts it: their records,
         * arena space and slots come back now, as after a fault (rk__bury) */
        rk__super_clear_locked(rt);
        bool served, warm;
        rc = rk__take_over(s, rt->worker_kind, &served, &warm);
        if (rc == 0) {
            memset(s->fault_at, 0, rt->cfg.fault_limit * sizeof *s->fault_at);
            s->no_progress = 0;
            s->state = RK_WORKER_RUNNING;
            s->why[0] = '\0';
            s->restarts++;
            s->standby_after = rt->cfg.standby ? rk__now_ns() : 0;
            atomic_store(&rt->degraded, false);
            rk__log(RK__LOG_WARN, "GPU retried: worker %d serves again", (int)s->active.pid);
        } else {
            char why[256];
            snprintf(why, sizeof why, "retry failed: %s", rk_last_detail());
            /* a worker that failed after it began serving may have
             * posted replies: they are good, as before any reset */
            rk__super_clear_locked(rt);
            rk__degrade(s, why);
            rc = rk__fail(rc, "%s", why);
        }
        rk__runtime_wake(rt);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* Stops the serving worker at a message boundary (its kernel gone once
 * it says STOPPED) and returns it, still alive: its exit, a CUDA context's
 * teardown (~60 ms on an H100), is left until its successor runs, so that
 * it cannot hold up that kernel's launch. s->lock held. */
static rk__proc rk__super_stop_active(rk__super *s, rk_runtime *rt)
{
    rk__wmsg m = {.kind = RK__WM_STOP};
    if (!s->active.live || rk__proc_send(&s->active, &m) != 0 ||
        rk__proc_await_draining(&s->active, RK__WM_STOPPED, &m, RK__STOP_MS, rt) != 0)
        rk__proc_end(&s->active, NULL, 0); /* it had its time: not twice */
    rk__proc old = s->active;
    s->active = RK__PROC_NONE;
    return old;
}

/* A group's device whose worker did not start on *next, the set its
 * other devices went back to: the serving worker stops and *next is
 * installed all the same, degraded (rk_runtime_retry_gpu starts that
 * set), so no device serves the set the others left. s->lock held. */
static void rk__super_degrade_on(rk__super *s, rk_runtime *rt, rk__registry *next, const char *why)
{
    rk__proc old = rk__super_stop_active(s, rt);
    rk__super_clear_locked(rt);
    rk__registry_swap(rt, next);
    rk__proc_abandon(&old, NULL, 0);
    rk__degrade(s, why);
}

/* A fresh worker on *next's modules (internal.h, rk__backend_ops.reload).
 * It is started first, while the old one serves: its cold start (a CUDA
 * context, the module loaded, the region registered) is most of a reload,
 * and a set whose worker does not start then changes nothing (unless
 * back: rk__super_degrade_on). Then the old one stops and the new one
 * gets GO, as a warm standby would. */
static int rk__super_reload(rk_runtime *rt, rk__registry *next, bool back)
{
    rk__super *s = rt->backend_state;
    pthread_mutex_lock(&s->lock);
    if (s->state != RK_WORKER_RUNNING) {
        int rc = rk__fail(RK_EDEVICE, "no modules were reloaded: the worker is %s%s%s; a reload needs a serving "
                          "worker (after a crash loop: rk_runtime_retry_gpu first)",
                          rk__state_names[s->state], s->why[0] ? ": " : "", s->why);
        pthread_mutex_unlock(&s->lock);
        return rc;
    }
    const int64_t t0 = rk__now_ns();
    /* the old set's standby never ran a kernel: no need to wait for its
     * context's teardown (~60 ms on an H100) */
    rk__proc_abandon(&s->standby, NULL, 0);
    s->standby_after = rt->cfg.standby ? rk__now_ns() : 0;
    rk__proc fresh = RK__PROC_NONE;
    int rc = 0;
    if (s->next.ready && s->next_for == next->mods) { /* rk_runtime_reload_prepare started it */
        fresh = s->next;
        s->next = RK__PROC_NONE;
    } else {
        rk__proc_end(&s->next, NULL, 0);
        rc = rk__spawn_ready_with(s, &fresh, rt->worker_kind, next->mods);
    }
    s->next_for = NULL;
    if (rc) {
        char d[700];
        snprintf(d, sizeof d, "the %s modules' %s worker did not start: %s; %s", back ? "previous" : "new",
                 rk__kind_name(rt->worker_kind), rk_last_detail(), back ? "degraded on them" : "nothing was changed");
        if (back) /* (its stop may write the detail) */
            rk__super_degrade_on(s, rt, next, d);
        rc = rk__fail(rc, "%s", d);
        rk__log(RK__LOG_WARN, "%s", d);
        pthread_mutex_unlock(&s->lock);
        return rc;
    }
    const int64_t t1 = rk__now_ns();
    rk__proc old = rk__super_stop_active(s, rt);
    rk__super_clear_locked(rt);
    rk__registry_swap(rt, next);
    s->standby = fresh;
    bool served, warm;
    rc = rk__take_over(s, rt->worker_kind, &served, &warm);
    rk__proc_abandon(&old, NULL, 0); /* its kernel stopped: reaped in the background */
    if (rc) {
        char why[600];
        snprintf(why, sizeof why, "the %s modules' %s worker failed as it started to serve: %s",
                 back ? "previous" : "new", rk__kind_name(rt->worker_kind), rk_last_detail());
        /* one that got GO and then failed (no RUNNING in time, a FAULT)
         * may still run on the rings: ended before they move on, as
         * rk__bury ends a faulted one (take_over left it in active) */
        rk__proc_end(&s->active, NULL, 0);
        rk__super_clear_locked(rt);
        int again = back ? rc : 0; /* going back, it stays on *next's set */
        if (!back) {
            rk__registry_swap(rt, next); /* the previous modules, on a fresh worker */
            again = rk__take_over(s, rt->worker_kind, &served, &warm);
        }
        if (again) {
            char d[900];
            if (back)
                snprintf(d, sizeof d, "%s; degraded on them", why);
            else
                snprintf(d, sizeof d, "%s; nor did one on the previous modules: %s", why, rk_last_detail());
            rk__super_clear_locked(rt);
            rk__degrade(s, d);
            rc = rk__fail(rc, "%s", d);
        } else {
            rc = rk__fail(rc, "%s; the previous modules serve again (worker %d)", why, (int)s->active.pid);
        }
    }
    if (s->state == RK_WORKER_RUNNING) {
        s->restarts++;
        s->standby_after = rt->cfg.standby ? rk__now_ns() : 0;
    }
    if (rc)
        rk__log(RK__LOG_WARN, "%s", rk_last_detail());
    else
        rk__log(RK__LOG_INFO, "modules reloaded: worker %d serves %zu user actor(s); its start took %.1f ms "
                "beside the old one, the switch %.1f ms", (int)s->active.pid, rt->n_defs,
                (double)(t1 - t0) / 1e6, (double)(rk__now_ns() - t1) / 1e6);
    rk__runtime_wake(rt);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* rk_runtime_reload_prepare: next's worker, cold-started into s->next
 * without the lock (a CUDA context takes hundreds of milliseconds, and
 * the supervisor and rk_runtime_worker take the lock meanwhile). */
static int rk__super_prepare(rk_runtime *rt, const rk__registry *next)
{
    rk__super *s = rt->backend_state;
    pthread_mutex_lock(&s->lock);
    rk__proc_end(&s->next, NULL, 0);
    s->next_for = NULL;
    pthread_mutex_unlock(&s->lock);
    rk__proc w = RK__PROC_NONE;
    int rc = rk__spawn_ready_with(s, &w, rt->worker_kind, next->mods);
    if (rc) {
        char d[512];
        snprintf(d, sizeof d, "%s", rk_last_detail());
        return rk__fail(rc, "the new modules' %s worker did not start: %s; nothing was changed",
                        rk__kind_name(rt->worker_kind), d);
    }
    pthread_mutex_lock(&s->lock);
    s->next = w;
    s->next_for = next->mods;
    pthread_mutex_unlock(&s->lock);
    return 0;
}

static void rk__super_unprepare(rk_runtime *rt)
{
    rk__super *s = rt->backend_state;
    pthread_mutex_lock(&s->lock);
    rk__proc_end(&s->next, NULL, 0);
    s->next_for = NULL;
    pthread_mutex_unlock(&s->lock);
}

static int rk__super_recoveries(rk_runtime *rt, rk_recovery *out, int max)
{
    rk__super *s = rt->backend_state;
    pthread_mutex_lock(&s->lock);
    uint32_t n = s->n_hist < RK__HIST ? s->n_hist : RK__HIST;
    if ((uint32_t)max < n)
        n = (uint32_t)max;
    rk__note_first_reply(s);
    for (uint32_t i = 0; i < n; i++)
        out[i] = s->hist[(s->n_hist - n + i) % RK__HIST];
    pthread_mutex_unlock(&s->lock);
    return (int)n;
}

const rk__backend_ops rk__worker_backend = {
    .name = "worker",
    .start = rk__super_start,
    .stop = rk__super_stop,
    .health = rk__super_health,
    .relaunch = rk__super_relaunch,
    .worker = rk__super_worker,
    .recoveries = rk__super_recoveries,
    .retry = rk__super_retry,
    .reload = rk__super_reload,
    .prepare = rk__super_prepare,
    .unprepare = rk__super_unprepare,
};
