/* supervisor.c - the worker backend: a worker process (rk-worker, CUDA or
 * CPU) serves the rings, and a supervisor thread of librk watches it and
 * replaces it when it fails, so a faulting actor costs its own request and
 * a short pause, never the runtime.
 *
 * It notices: the worker's exit (its control socket closes), a sticky
 * error it reports (FAULT), a heartbeat that stops (heartbeat_ms), and a
 * non-built-in request running past request_deadline_ms (an endless loop).
 * Then, holding the D2H lock:
 *   1. the worker is killed and reaped; replies it posted are delivered;
 *   2. the requests it was running (rk__region.running) are suspects: a
 *      strike each; one with two strikes faulted twice and is answered
 *      -RK_EDEVICE (the poison); with no running word at all a GPU fault
 *      makes every unanswered non-built-in request a suspect;
 *   3. D2H restarts two laps ahead (stale lines of the dead producer can
 *      never pass for new ones) and the generation goes up: the fresh
 *      worker drops whatever the old one left in H2D, and every actor
 *      re-posts, in id order, what it still owes (send.c), suspects one at
 *      a time runtime-wide;
 * then a fresh worker takes over: the warm standby when one waits (CUDA
 * initialised, region registered), else a cold start. After fault_limit
 * faults within fault_window_ms it stops restarting the GPU: a CPU thread
 * here serves the built-ins and answers the rest -RK_EDEVICE, until
 * rk_runtime_retry_gpu. The backend ops are worker_backend.c. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "actor.h"
#include "barrier.h"
#include "supervisor.h"

#define RK__TICK_MS 5
/* how long a suspect's retry waits for a warm standby (so that, if it
 * faults again, that recovery is warm too) */
#define RK__SUSPECT_HOLD_NS 2000000000ll

const char *const rk__state_names[] = {"none", "running", "recovering", "degraded", "failed"};

/* ---- starting workers ---- */

static rk__wmsg rk__init_msg(const rk__super *s, uint32_t kind)
{
    const rk_config *c = &s->rt->cfg;
    rk__wmsg m = {.kind = RK__WM_INIT, .abi = RK_ABI_VERSION, .backend = kind, .device = c->device};
    m.grid = s->rt->info.grid ? s->rt->info.grid : c->grid;
    m.block = s->rt->info.block ? s->rt->info.block : c->block;
    m.smem = s->rt->info.smem ? s->rt->info.smem : c->smem;
    m.flags = s->rt->wflags;
    m.level = (int32_t)rk_log_get_level(); /* the worker logs what we would */
    /* a CPU worker's control thread stamps the heartbeat while a handler
     * runs (device/worker.c): four times a period */
    m.hb_period_us = c->heartbeat_ms * 250u;
    return m;
}

/* Spawns a worker with INIT m and the modules mods, and waits for its
 * HELLO (validated, region registered). */
static int rk__spawn_hello(rk__super *s, rk__proc *w, rk__wmsg m, const struct rk__modset *mods)
{
    int rc = rk__proc_spawn(w, s->rt->region_fd, &m, mods);
    if (rc)
        return rc;
    rc = rk__proc_await(w, RK__WM_HELLO, &m, rk__proc_start_ms());
    if (rc == 0 && m.abi != RK_ABI_VERSION)
        rc = rk__fail(RK_EPROTO, "worker %d speaks ABI %u, librk ABI %u: install matching versions",
                      (int)w->pid, m.abi, RK_ABI_VERSION);
    if (rc) {
        char detail[512];
        snprintf(detail, sizeof detail, "%s", rk_last_detail());
        rk__proc_end(w, NULL, 0);
        return rk__fail(rc, "%s", detail);
    }
    w->ready = true;
    w->dev = m.dev;
    return 0;
}

int rk__spawn_ready(rk__super *s, rk__proc *w, uint32_t kind)
{
    return rk__spawn_ready_with(s, w, kind, s->rt->mods);
}

int rk__spawn_ready_with(rk__super *s, rk__proc *w, uint32_t kind, const struct rk__modset *mods)
{
    /* (also called without s->lock: a relaunch may rewrite the shape) */
    rk__info_lock(s->rt);
    const rk__wmsg m = rk__init_msg(s, kind);
    rk__info_unlock(s->rt);
    return rk__spawn_hello(s, w, m, mods);
}

int rk__check_launch(rk__super *s, uint32_t grid, uint32_t block, uint32_t smem, rk__wdev *dev)
{
    rk__wmsg m = rk__init_msg(s, RK__WB_CUDA);
    m.grid = grid;
    m.block = block;
    m.smem = smem;
    rk__proc w = RK__PROC_NONE;
    const int rc = rk__spawn_hello(s, &w, m, s->rt->mods);
    if (rc)
        return rc;
    *dev = w.dev;
    rk__proc_end(&w, NULL, 0);
    return 0;
}

/* Lets a ready worker serve: GO with the current generation and D2H
 * position, then RUNNING. *served: GO went out (from then on it may
 * consume requests, so its failure is a fault, not a failed start). */
int rk__go(rk__super *s, rk__proc *w, bool *served)
{
    rk_runtime *rt = s->rt;
    rk__wmsg m = {.kind = RK__WM_GO, .gen = atomic_load(&rt->gen), .flags = rt->wflags};
    m.grid = rt->info.grid ? rt->info.grid : rt->cfg.grid;
    m.block = rt->info.block ? rt->info.block : rt->cfg.block;
    m.smem = rt->info.smem ? rt->info.smem : rt->cfg.smem;
    /* the kernel polls H2D and never sleeps on its doorbell: producers may
     * skip the doorbell's fence. A CPU consumer sleeps there. */
    rk__ring_set_flags(rt->h2d, w->kind == RK__WB_CUDA ? RK_RING_F_NO_SLEEP : 0u);
    rk__log(RK__LOG_DEBUG, "GO worker %d: gen %u, reply ring 0 from %llu, H2D %llu..%llu", (int)w->pid, m.gen,
            (unsigned long long)rk__ld_acquire(&rt->d2h[0].ring->prod_tail),
            (unsigned long long)rk__ld_acquire(&rt->h2d->cons_head),
            (unsigned long long)rk__ld_acquire(&rt->h2d->prod_tail));
    int rc = rk__proc_send(w, &m);
    if (rc)
        return rc;
    *served = true;
    w->live = true;
    /* a launch takes milliseconds: a third of the start budget (10 s) is
     * plenty, and a worker stuck in it is treated as a fault, not waited on */
    rc = rk__proc_await(w, RK__WM_RUNNING, &m, rk__proc_start_ms() / 3);
    if (rc)
        return rc;
    w->dev = m.dev;
    s->hb_seen = rk__ld_relaxed(&rt->view.hdr->heartbeat);
    s->hb_change = rk__now_ns();
    memset(s->run_word, 0, sizeof s->run_word);
    s->replies_at_go = rk__replies(rt);
    return 0;
}

static void rk__fill_info_locked(rk__super *s, const rk__proc *w)
{
    rk_info *in = &s->rt->info;
    if (w->kind != RK__WB_CUDA) {
        in->backend = RK_BACKEND_CPU;
        strcpy(in->backend_name, "cpu");
        in->has_device = 0;
        /* no kernel: what was configured, as the in-process CPU backend says */
        in->grid = s->rt->cfg.grid;
        in->block = s->rt->cfg.block;
        in->smem = s->rt->cfg.smem;
        return;
    }
    in->backend = RK_BACKEND_CUDA;
    strcpy(in->backend_name, "cuda");
    in->has_device = 1;
    snprintf(in->device_name, sizeof in->device_name, "%s", w->dev.name);
    in->sm_count = w->dev.sm_count;
    in->cc_major = w->dev.cc_major;
    in->cc_minor = w->dev.cc_minor;
    in->grid = w->dev.grid;
    in->block = w->dev.block;
    in->smem = w->dev.smem;
    in->max_grid = w->dev.max_grid;
    in->max_block = w->dev.max_block;
    in->max_smem = w->dev.max_smem;
}

void rk__fill_info(rk__super *s, const rk__proc *w)
{
    rk__info_lock(s->rt);
    rk__fill_info_locked(s, w);
    rk__info_unlock(s->rt);
}

/* A fresh active worker: the standby if one waits, else a cold start.
 * Returns 0, or the error with *served set when the worker got GO (and
 * may have run requests) before it failed: then it is a fault. */
int rk__take_over(rk__super *s, uint32_t kind, bool *served, bool *warm)
{
    *served = false;
    *warm = s->standby.ready && s->standby.kind == kind;
    if (*warm) {
        s->active = s->standby;
        s->standby = RK__PROC_NONE;
        int rc = rk__go(s, &s->active, served);
        if (rc == 0 || *served)
            return rc;
        rk__log(RK__LOG_WARN, "standby worker failed to take over: %s", rk_last_detail());
        rk__proc_end(&s->active, NULL, 0);
        *warm = false;
    }
    int rc = rk__spawn_ready(s, &s->active, kind);
    if (rc == 0)
        rc = rk__go(s, &s->active, served);
    if (rc) {
        char detail[512];
        snprintf(detail, sizeof detail, "%s", rk_last_detail());
        rk__proc_end(&s->active, NULL, 0);
        return rk__fail(rc, "%s", detail);
    }
    return 0;
}

/* ---- recovery ---- */

/* Gives the request named by running word w (rk_abi.h) a strike, if it
 * is still owed; answers it -RK_EDEVICE at two. Caller holds every reply ring's lock. */
static bool rk__strike_locked(rk__super *s, uint64_t w)
{
    rk_runtime *rt = s->rt;
    rk_actor *a = (w & RK__RUN_BIT) ? rk__actor_at(rt, RK__RUN_ACTOR(w)) : NULL;
    uint16_t tag = RK__RUN_TAG(w);
    if (!a || tag >= a->window)
        return false;
    rk__pending *p = &a->pend[tag];
    /* acquire: pairs with rk__post's store-release of SENT */
    if (rk__ld_acquire(&p->state) != RK__P_SENT || (uint32_t)(p->id & 0x7fffffffu) != RK__RUN_ID31(w))
        return false;
    p->strikes++;
    s->last.actor = a->index;
    s->last.type = p->type;
    s->last.request_id = p->id;
    if (p->strikes >= 2) {
        s->poisoned++;
        rk__log(RK__LOG_ERROR, "request %llu (%s, type %u) of actor %u faulted its worker twice: answered RK_EDEVICE",
                (unsigned long long)p->id, rk__type_name(rt, p->type), p->type, a->index);
        rk__answer_locked(rt, a, tag, -RK_EDEVICE);
    }
    return true;
}

/* Gives the requests a dead worker was running a strike (and `extra`, a
 * running word the supervisor blames itself); answers those with two.
 * Caller holds every reply ring's lock. Returns how many it blamed. */
static uint32_t rk__blame_locked(rk__super *s, uint32_t kind, uint64_t extra)
{
    rk_runtime *rt = s->rt;
    uint32_t blamed = 0;
    for (uint32_t i = 0; i < RK__RUNNING_SLOTS; i++) {
        uint64_t w = rk__ld_relaxed(&rt->view.hdr->running[i]);
        if (w == extra)
            extra = 0;
        blamed += rk__strike_locked(s, w);
    }
    if (extra)
        blamed += rk__strike_locked(s, extra);
    if (blamed || kind != RK__WB_CUDA)
        return blamed;
    /* a GPU fault that left no running word (the store did not reach host
     * memory before the context died): every unanswered non-built-in
     * request is a suspect, retried alone */
    for (uint32_t i = 0; i < rt->n_actor_slots; i++) {
        rk_actor *a = rk__actor_at(rt, i);
        for (uint32_t t = 0; a && t < a->window; t++)
            if (rk__ld_acquire(&a->pend[t].state) == RK__P_SENT && !rk__op_builtin(a->pend[t].type) &&
                !a->pend[t].strikes) {
                a->pend[t].strikes = 1;
                blamed++;
            }
    }
    return blamed;
}

/* New positions for a new consumer. Caller holds every reply ring's lock,
 * the rings drained. */
void rk__rings_reset_locked(rk_runtime *rt)
{
    for (uint32_t i = 0; i < rt->n_d2h; i++) {
        rk_ring *d = rt->d2h[i].ring;
        /* two laps past everything the dead producer could have written:
         * its late or torn lines carry older flags and never pass for
         * replies */
        uint64_t pos = ((rk__ld_relaxed(&d->cons_head) >> d->order) + 2) << d->order;
        rk__st_relaxed(&d->prod_tail, pos);
        /* release: pairs with producers' load-acquire of cons_head */
        rk__st_release(&d->cons_head, pos);
        /* where the waiters look for replies (router.c); relaxed: a stale
         * look costs one more spin */
        atomic_store_explicit(&rt->d2h[i].claim, pos, memory_order_relaxed);
    }
    rk__region *reg = rt->view.hdr;
    for (uint32_t i = 0; i < RK__RUNNING_SLOTS; i++)
        rk__st_relaxed(&reg->running[i], 0ull);
    rk__st_relaxed(&reg->stop, 0u);
    rk__st_relaxed(&reg->state, (int32_t)RK__STATE_INIT);
    /* release: the positions and the cleared words before the new gen;
     * pairs with the consumer's load-acquire of reg->gen */
    rk__st_release(&reg->gen, reg->gen + 1);
}

/* Counts a fault; true when it makes fault_limit within fault_window_ms. */
static bool rk__crash_loop(rk__super *s, int64_t now)
{
    const rk_config *c = &s->rt->cfg;
    s->faults++;
    s->fault_at[s->fault_next] = now;
    s->fault_next = (s->fault_next + 1) % c->fault_limit;
    int64_t oldest = s->fault_at[s->fault_next]; /* the fault_limit-th most recent */
    return oldest && now - oldest <= (int64_t)c->fault_window_ms * 1000000;
}

void rk__degrade(rk__super *s, const char *why)
{
    rk_runtime *rt = s->rt;
    s->state = RK_WORKER_DEGRADED;
    snprintf(s->why, sizeof s->why, "%s", why);
    atomic_store(&rt->suspect_hold, 0); /* no standby will come: let them go */
    rk__proc_end(&s->standby, NULL, 0);
    s->standby_after = 0;
    rk__ring_set_flags(rt->h2d, 0u); /* a CPU consumer sleeps on the doorbell */
    int rc = rk__cpu_thread_start(&s->cpu, rt, RK__WF_BUILTINS_ONLY);
    if (rc) {
        s->state = RK_WORKER_FAILED;
        snprintf(s->why, sizeof s->why, "%s; and no CPU thread could stand in: %s", why, rk_last_detail());
        rk__runtime_fault(rt, -RK_EDEVICE, s->why);
        return;
    }
    atomic_store(&rt->degraded, true);
    rk__log(RK__LOG_ERROR, "%s: the worker is not restarted; built-ins are served on the CPU, every other "
            "request fails with RK_EDEVICE until the GPU is retried (rk_runtime_retry_gpu)", why);
}

/* Ends the failed worker, delivers its replies, blames what it ran, and
 * moves the rings and the generation on. */
static uint32_t rk__bury(rk__super *s, uint32_t kind, int code, const char *what, int64_t t0, bool dead,
                         uint64_t blame)
{
    rk_runtime *rt = s->rt;
    char how[200] = "";
    /* a worker that reported a sticky error has no kernel left that could
     * touch the rings: its exit (the driver tearing the context down,
     * ~60 ms on an H100) is reaped in the background. Any other may still
     * run one (an endless loop, a silent heartbeat): it is waited for
     * (bounded, RK_WORKER_REAP_MS), so that nothing of the old kernel runs
     * beside the fresh one. (The retries that not waiting seemed to lose,
     * once in fifteen, were re-posts starved of the reply ring's lock: router.c.) */
    if (dead)
        rk__proc_abandon(&s->active, how, sizeof how);
    else
        rk__proc_end(&s->active, how, sizeof how);
    s->state = RK_WORKER_RECOVERING;
    bool progress = rk__replies(rt) != s->replies_at_go;
    s->no_progress = progress ? 1 : s->no_progress + 1;
    rk__d2h_lock_all(rt);
    rk__drain_locked(rt); /* replies it posted are good */
    s->last = (rk_fault_info){.at_ns = t0, .error = code, .actor = 0xffff};
    uint32_t blamed = rk__blame_locked(s, kind, blame);
    if (blamed) /* a request's fault, not the worker's: no back-off for it */
        s->no_progress = 0;
    /* a suspect that still holds the token was not running (else it had
     * its second strike above and was answered): its retry went with this
     * worker (the generation moves on); its owner re-posts it and takes
     * the token again, its time starting over. (Until 2026-11-27 the token
     * and the clock stayed, and the dropped retry got its second strike.) */
    atomic_store(&rt->suspect, 0ull);
    atomic_store(&rt->suspect_since, 0);
    atomic_store(&rt->suspect_pos, UINT64_MAX);
    rk__reap_closed_locked(rt); /* (until 2026-11-26 they stayed open for good) */
    snprintf(s->last.detail, sizeof s->last.detail, "%.120s%s%.120s%s", what, how[0] ? " (" : "", how, how[0] ? ")" : "");
    rk__rings_reset_locked(rt);
    rk__d2h_unlock_all(rt);
    rk__runtime_wake(rt);
    rk__log(RK__LOG_WARN, "%s; %u request(s) blamed; starting a fresh worker", s->last.detail, blamed);
    return blamed;
}

/* Lets held suspects go (the standby is ready, or the hold ran out). */
static void rk__release_suspects(rk__super *s, int64_t now)
{
    if (!atomic_load(&s->rt->suspect_hold))
        return;
    atomic_store(&s->rt->suspect_hold, 0);
    rk_recovery *h = &s->hist[(s->n_hist - 1) % RK__HIST];
    if (s->n_hist && !h->suspects_ns)
        h->suspects_ns = now - h->detected_at;
    rk__runtime_wake(s->rt);
}

/* The worker failed: replace it (see the top of the file). s->lock held. */
static void rk__recover(rk__super *s, int code, const char *what, bool dead, uint64_t blame)
{
    rk_runtime *rt = s->rt;
    const uint32_t kind = s->active.pid ? s->active.kind : rt->worker_kind; /* (ended already: main loop) */
    char why[400];
    snprintf(why, sizeof why, "%s", what);
    for (;;) {
        const int64_t detected_at = rk__now_ns(); /* before anything that may wait */
        rk__note_first_reply(s); /* the last recovery's, before this one's entry */
        rk_recovery *h = &s->hist[s->n_hist++ % RK__HIST];
        *h = (rk_recovery){.detected_at = detected_at, .error = code};
        h->blamed = rk__bury(s, kind, code, why, h->detected_at, dead, blame);
        dead = false;
        blame = 0;
        h->teardown_ns = rk__now_ns() - h->detected_at;
        atomic_store(&rt->recover_t0, h->detected_at);
        if (rk__crash_loop(s, rk__now_ns())) {
            char d[512];
            snprintf(d, sizeof d, "%u worker faults within %u ms (fault_limit), the last: %s", rt->cfg.fault_limit,
                     rt->cfg.fault_window_ms, why);
            atomic_store(&rt->gen, rt->view.hdr->gen);
            rk__degrade(s, d);
            return;
        }
        /* a worker that dies again before serving anything, and not on a
         * request it was running: back off */
        if (s->no_progress >= 3) {
            int64_t ms = 50ll << (s->no_progress - 3 < 6 ? s->no_progress - 3 : 6);
            rk__sleep_ns((ms < 2000 ? ms : 2000) * 1000000);
        }
        /* suspects stay back until the fresh worker serves (below), so a
         * poison cannot kill it before it even says RUNNING */
        atomic_store(&rt->suspect_hold, INT64_MAX);
        /* release: owners re-post for this generation from now on */
        atomic_store_explicit(&rt->gen, rt->view.hdr->gen, memory_order_release);
        bool served, warm;
        int64_t t1 = rk__now_ns();
        int rc = rk__take_over(s, kind, &served, &warm);
        h->start_ns = rk__now_ns() - t1;
        h->warm = warm;
        if (rc == 0)
            break;
        if (!served) {
            snprintf(why, sizeof why, "no fresh %s worker could be started: %s", rk__kind_name(kind),
                     rk_last_detail());
            rk__degrade(s, why);
            return;
        }
        /* it died on what it was given: another fault */
        code = -RK_EDEVICE;
        snprintf(why, sizeof why, "the fresh worker failed as it started to serve: %s", rk_last_detail());
    }
    s->state = RK_WORKER_RUNNING;
    s->restarts++;
    atomic_fetch_add(&rt->n_restarts, 1);
    if (rt->cfg.standby && !s->standby.ready) {
        /* a suspect that faults again should meet a warm standby too */
        s->standby_after = rk__now_ns();
        atomic_store(&rt->suspect_hold, rk__now_ns() + RK__SUSPECT_HOLD_NS);
    } else {
        rk__release_suspects(s, rk__now_ns());
    }
    rk__runtime_wake(rt); /* sleepers re-post for the new generation */
}

void rk__note_first_reply(rk__super *s)
{
    rk_recovery *h = &s->hist[(s->n_hist - 1) % RK__HIST];
    if (!s->n_hist || h->first_reply_ns)
        return;
    rk_runtime *rt = s->rt;
    /* seq_cst: pairs with the router's store of t0 after `at`
     * (router.c); t0 read again: `at` is this recovery's, not a later's */
    if (atomic_load(&rt->first_reply_t0) != h->detected_at)
        return;
    const int64_t at = atomic_load_explicit(&rt->first_reply_at, memory_order_relaxed);
    if (atomic_load(&rt->first_reply_t0) == h->detected_at)
        h->first_reply_ns = at - h->detected_at;
}


/* ---- watching ---- */

/* When the suspect's retry started to count (since, or now): its time
 * restarts while it is not sent yet, or waits in H2D while the consumer
 * moves on (a retry queued behind slow requests is not late; until
 * 2026-11-27 it was timed from its send and poisoned there). A consumer
 * that stops short of it does not restart its time: a wedged ring, or a
 * retry that vanished, still gets its second strike. */
static int64_t rk__suspect_start(rk__super *s, int64_t now, int64_t since)
{
    rk_runtime *rt = s->rt;
    const uint64_t pos = atomic_load(&rt->suspect_pos);
    /* relaxed: an older head only makes it look stopped one tick longer */
    const uint64_t head = rk__ld_relaxed(&rt->h2d->cons_head);
    if (pos != UINT64_MAX && head > pos)
        return since; /* taken: its answer is due */
    if (pos != UINT64_MAX && head == s->sus_head)
        return since; /* the consumer stopped short of it */
    s->sus_head = head;
    /* (a CAS: a suspect taken meanwhile keeps its own start) */
    atomic_compare_exchange_strong(&rt->suspect_since, &since, now);
    return now;
}

/* Heartbeat and deadlines; returns true (after recovering) when it acted. */
static bool rk__watch(rk__super *s, int64_t now)
{
    rk_runtime *rt = s->rt;
    uint64_t hb = rk__ld_relaxed(&rt->view.hdr->heartbeat);
    if (hb != s->hb_seen) {
        s->hb_seen = hb;
        s->hb_change = now;
    } else if (now - s->hb_change > (int64_t)rt->cfg.heartbeat_ms * 1000000) {
        char what[128];
        snprintf(what, sizeof what, "worker heartbeat silent for %lld ms (heartbeat_ms %u)",
                 (long long)((now - s->hb_change) / 1000000), rt->cfg.heartbeat_ms);
        rk__recover(s, -RK_EDEVICE, what, false, 0);
        return true;
    }
    for (uint32_t i = 0; i < RK__RUNNING_SLOTS; i++) {
        uint64_t w = rk__ld_relaxed(&rt->view.hdr->running[i]);
        if (!(w & RK__RUN_BIT)) {
            s->run_word[i] = 0;
        } else if (w != s->run_word[i]) {
            s->run_word[i] = w;
            s->run_since[i] = now;
        } else if (rt->cfg.request_deadline_ms &&
                   now - s->run_since[i] > (int64_t)rt->cfg.request_deadline_ms * 1000000) {
            char what[160];
            snprintf(what, sizeof what, "request %u of actor %u ran past its deadline (request_deadline_ms %u)",
                     RK__RUN_ID31(w), RK__RUN_ACTOR(w), rt->cfg.request_deadline_ms);
            rk__recover(s, -RK_ETIMEDOUT, what, false, 0);
            return true;
        }
    }
    /* a suspect retried alone that gets no answer within the deadline is
     * that request's fault too (it either hangs or its retry was lost:
     * seen once per ~40 retries of a faulting actor on an H100, cause not
     * found); either way it gets its second strike and one answer */
    const uint64_t sw = atomic_load(&rt->suspect);
    int64_t since = atomic_load(&rt->suspect_since);
    const int64_t limit = (int64_t)(rt->cfg.request_deadline_ms ? rt->cfg.request_deadline_ms : 10000) * 1000000;
    bool running = false; /* then the request deadline above is its watch */
    for (uint32_t i = 0; sw && i < RK__RUNNING_SLOTS; i++)
        running |= rk__ld_relaxed(&rt->view.hdr->running[i]) == sw;
    /* a hold past its time counts as released (the main loop releases it
     * a little later; a watch that waited for that could wait forever if
     * the release never came) */
    const int64_t hold = atomic_load(&rt->suspect_hold);
    const bool held = hold && now < hold;
    if (sw && since && !running && !held)
        since = rk__suspect_start(s, now, since);
    if (sw && since && !running && !held && now - since > limit) {
        /* its reply may be in a ring that nobody drains (its owner does
         * not wait): routing it releases the token. Before 2026-11-26 a
         * healthy worker was replaced for that. A full reply ring also
         * stops the consumer short of the retry (it waits for room): its
         * time starts over once the drain made room */
        bool full = false;
        for (uint32_t i = 0; i < rt->n_d2h; i++)
            full |= rk_ring_count(rt->d2h[i].ring) >= rt->d2h[i].ring->slots;
        rk__drain_all(rt);
        if (atomic_load(&rt->suspect) != sw)
            return false;
        if (full) {
            atomic_compare_exchange_strong(&rt->suspect_since, &since, now);
            return false;
        }
        char what[160];
        snprintf(what, sizeof what, "suspect request %u of actor %u was not answered within %lld ms of its retry",
                 RK__RUN_ID31(sw), RK__RUN_ACTOR(sw), (long long)(limit / 1000000));
        atomic_store(&rt->suspect_since, 0);
        rk__recover(s, -RK_ETIMEDOUT, what, false, sw);
        return true;
    }
    return false;
}

/* A message or hang-up on the active worker's control socket. */
static void rk__on_active(rk__super *s)
{
    rk__wmsg m;
    int rc = rk__proc_recv(&s->active, &m, 0);
    if (rc == -RK_ETIMEDOUT)
        return;
    if (rc == 0 && m.kind == RK__WM_FAULT) {
        /* dead: a sticky error ended its kernel; else (a stop that gave
         * up on it) the worker is ended and waited for */
        rk__recover(s, m.rc ? m.rc : -RK_EDEVICE, m.text, !(m.flags & RK__WF_MAY_RUN), 0);
    } else if (rc == 0 && m.kind >= RK__WM_INIT && m.kind <= RK__WM_LOG) {
        /* (a late answer to a stop or relaunch that gave up waiting) */
        rk__log(RK__LOG_WARN, "worker %d: unexpected control message %u", (int)s->active.pid, m.kind);
    } else {
        /* closed (its exit follows in the detail), a message of the wrong
         * size or of no kind of the protocol: a worker that cannot be trusted */
        char what[200];
        if (rc == 0)
            snprintf(what, sizeof what, "worker %d sent control message %u, which is none of the protocol",
                     (int)s->active.pid, m.kind);
        else
            snprintf(what, sizeof what, "%s", rc == -RK_EDEVICE ? "the worker exited" : rk_last_detail());
        rk__recover(s, -RK_EDEVICE, what, false, 0);
    }
}

/* The standby: its HELLO, its death, and (re)spawning it. */
static void rk__on_standby(rk__super *s, bool readable, int64_t now)
{
    rk__proc *w = &s->standby;
    if (readable) {
        rk__wmsg m;
        int rc = rk__proc_recv(w, &m, 0);
        if (rc == 0 && m.kind == RK__WM_HELLO && m.rc == 0) {
            w->ready = true;
            w->dev = m.dev;
            s->standby_fails = 0;
            rk__release_suspects(s, now);
            rk__log(RK__LOG_INFO, "standby worker %d ready after %.1f ms", (int)w->pid,
                    (double)(now - w->spawned_ns) / 1e6);
        } else if (rc != -RK_ETIMEDOUT) {
            rk__log(RK__LOG_WARN, "standby worker %d failed: %s", (int)w->pid,
                    rc == 0 ? m.text : rk_last_detail());
            rk__proc_end(w, NULL, 0);
            s->standby_fails++;
            uint32_t f = s->standby_fails < 5 ? s->standby_fails : 5;
            s->standby_after = now + (1000000000ll << f);
        }
    }
    if (!w->pid && s->standby_after && now >= s->standby_after && s->state == RK_WORKER_RUNNING) {
        rk__wmsg m = rk__init_msg(s, s->active.kind);
        if (rk__proc_spawn(w, s->rt->region_fd, &m, s->rt->mods) != 0) {
            rk__log(RK__LOG_WARN, "standby worker not started: %s", rk_last_detail());
            s->standby_after = now + 5000000000ll;
        }
    }
}

void *rk__super_main(void *arg)
{
    rk__super *s = arg;
    while (!atomic_load(&s->quit)) {
        pthread_mutex_lock(&s->lock); /* a retry or relaunch may change them */
        struct pollfd p[3] = {{.fd = s->evfd, .events = POLLIN},
                              {.fd = s->active.ctl, .events = POLLIN},
                              {.fd = s->standby.ctl, .events = POLLIN}};
        pthread_mutex_unlock(&s->lock);
        poll(p, 3, RK__TICK_MS);
        /* runtimes this GPU refused (gpu_lock.c); each tick, not polled:
         * one it cannot take (out of descriptors) must not spin the loop */
        rk__gpu_lock_drain(s->lock_fd);
        if (atomic_load(&s->quit))
            break;
        pthread_mutex_lock(&s->lock);
        int64_t now = rk__now_ns();
        /* (the fds may have changed while we polled: a retry or relaunch) */
        if (p[1].revents && p[1].fd == s->active.ctl && s->active.live)
            rk__on_active(s);
        else if (s->active.live)
            rk__watch(s, now);
        else if (s->state == RK_WORKER_RUNNING && !s->active.pid)
            /* it exited while a relaunch awaited its answer (rk__proc_await
             * ended it): nothing else would replace it */
            rk__recover(s, -RK_EDEVICE, "the worker exited during a relaunch", true, 0);
        rk__on_standby(s, p[2].revents && p[2].fd == s->standby.ctl && s->standby.pid, now);
        int64_t hold = atomic_load(&s->rt->suspect_hold);
        if (hold && now >= hold)
            rk__release_suspects(s, now);
        rk__note_first_reply(s);
        rk__proc_reap_deferred(0);
        pthread_mutex_unlock(&s->lock);
    }
    return NULL;
}

