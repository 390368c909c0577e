/* bridge/server/deploy.c - deploying actor modules into the running bridge:
 * SIGHUP loads --actors again (files and directories read anew) without
 * closing a connection or losing a request.
 *
 * The port's thread (the one request loop, or the frontend) runs it:
 *   1. the signal: a thread of its own calls rk_runtime_reload_prepare
 *      (the set loaded and checked, its worker started beside the serving
 *      one: a CUDA context takes hundreds of milliseconds) while every loop
 *      serves as usual; a set refused there changes nothing;
 *   2. prepared: the port stops reading requests (they wait in ZeroMQ's
 *      queues, as under back-pressure) and the switch begins (deploy_gen
 *      odd); every loop answers what it holds (in the runtime, waiting for
 *      admission, in its ring); a worker that holds nothing says so
 *      (quiet_gen) and calls into the runtime no more until the switch
 *      ends (rk_runtime_reload_modules wants no other thread in it);
 *   3. then rk_runtime_reload_modules takes the prepared worker over, and
 *      every loop's actor table is made again from the runtime's; the
 *      switch ends (deploy_gen even), the workers wake, reading resumes,
 *      and the requests that waited are decoded against the new set.
 * A set whose prepared worker fails as it takes over leaves the previous
 * set serving (librk); the log says why. Requests still in flight after
 * --drain-ms give the deploy up (nothing changes); a stop signal ends it. */
#include "server.h"

#include <stdio.h>
#include <string.h>

static void *rkb__prepare_main(void *arg)
{
    rkb_shared *sh = arg;
    sh->prep_rc = rk_runtime_reload_prepare(sh->rt, sh->cfg->actors, (size_t)sh->cfg->n_actors);
    snprintf(sh->prep_detail, sizeof sh->prep_detail, "%s", rk_last_detail());
    /* release: pairs with rkb_deploy_step's acquire (the result above) */
    __atomic_store_n(&sh->prep_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

void rkb_deploy_ask(rkb_shared *sh, int64_t now)
{
    if (rkb_deploy_busy(sh)) {
        rkb_log(RKB_LOG_INFO, "SIGHUP: a deploy is under way; it reads the files as it prepares");
        return;
    }
    if (!sh->cfg->n_actors) {
        rkb_log(RKB_LOG_INFO, "SIGHUP: no --actors to deploy; nothing to do");
        return;
    }
    sh->deploy_at = now;
    sh->prep_done = 0;
    if (pthread_create(&sh->prep_thread, NULL, rkb__prepare_main, sh) != 0) {
        rkb_logk(RKB_LK_SYSTEM, RKB_LOG_ERROR, "SIGHUP: no thread to prepare the deploy in; nothing changed");
        RKB_SET(sh->deploy_failures, sh->deploy_failures + 1);
        return;
    }
    sh->preparing = true;
    rkb_notify("RELOADING=1");
    rkb_log(RKB_LOG_INFO, "SIGHUP: preparing --actors again while serving");
}

/* The prepare thread is done: 0 (go on to the switch), or -1 (refused). */
static int rkb__prepared(rkb_shared *sh)
{
    pthread_join(sh->prep_thread, NULL);
    sh->preparing = false;
    if (sh->prep_rc == 0)
        return 0;
    RKB_SET(sh->deploy_failures, sh->deploy_failures + 1);
    rkb_log(RKB_LOG_ERROR, "deploy failed (%s): %s; the modules are unchanged", rk_err_name(sh->prep_rc),
            sh->prep_detail);
    rkb_notify("READY=1");
    return -1;
}

/* Every loop stops calling the runtime once it holds nothing. */
static void rkb__begin_switch(rkb_shared *sh, int64_t now)
{
    sh->drain_at = now;
    /* release: pairs with the workers' acquire in rkb_deploy_hold */
    __atomic_store_n(&sh->deploy_gen, sh->deploy_gen + 1, __ATOMIC_RELEASE);
    for (int i = 0; sh->front && i < sh->n_loops; i++)
        rkb_wake_always(&sh->loops[i]->wk); /* an idle worker says it is quiet now */
}

/* Ends the deploy: the workers may call the runtime again. */
static void rkb__end(rkb_shared *sh)
{
    /* release: pairs with the workers' acquire in rkb_deploy_hold (the
     * actor tables made for them, and the runtime's new set) */
    __atomic_store_n(&sh->deploy_gen, sh->deploy_gen + 1, __ATOMIC_RELEASE);
    for (int i = 0; sh->front && i < sh->n_loops; i++)
        rkb_wake_always(&sh->loops[i]->wk);
    rkb_notify("READY=1");
}

void rkb_deploy_cancel(rkb_shared *sh)
{
    if (!rkb_deploy_busy(sh))
        return;
    if (sh->preparing) { /* its worker goes with the runtime's close */
        pthread_join(sh->prep_thread, NULL);
        sh->preparing = false;
    }
    rkb_log(RKB_LOG_WARN, "deploy given up: the bridge is stopping");
    RKB_SET(sh->deploy_failures, sh->deploy_failures + 1);
    if (rkb_deploying(sh))
        rkb__end(sh);
}

/* The module actors' names, for the log: "a, b, c" (cut to fit). */
static void rkb__names(rk_runtime *rt, char *out, size_t cap)
{
    size_t at = 0;
    out[0] = '\0';
    const int n = rk_runtime_actor_count(rt);
    for (int i = RK_BUILTIN_ACTORS; i < n && at + 1 < cap; i++) {
        const rk_actor_decl *d = rk_runtime_actor_at(rt, i, NULL, NULL);
        int w = snprintf(out + at, cap - at, "%s%s", i > RK_BUILTIN_ACTORS ? ", " : "", d->name);
        at += w > 0 ? (size_t)w : 0;
    }
    if (at >= cap && cap > 4)
        memcpy(out + cap - 4, "...", 4);
}

/* Every loop holds nothing: the reload itself, and new actor tables
 * (now: when requests began to wait). */
static void rkb__run(rkb_shared *sh, int64_t now)
{
    const rkb_config *c = sh->cfg;
    const int64_t t0 = rkb_now_ns();
    int rc = rk_runtime_reload_modules(sh->rt, c->actors, (size_t)c->n_actors);
    char detail[1024];
    snprintf(detail, sizeof detail, "%s", rk_last_detail());
    /* made again whatever came of it: after a reload the old declarations
     * are gone, after a refusal these are the same */
    bool tables = true;
    for (int i = 0; i < sh->n_loops; i++)
        tables &= rkb_loop_actors(sh->loops[i]) == 0;
    char names[512];
    rkb__names(sh->rt, names, sizeof names);
    const int n = rk_runtime_actor_count(sh->rt) - RK_BUILTIN_ACTORS;
    if (rc) {
        RKB_SET(sh->deploy_failures, sh->deploy_failures + 1);
        rkb_log(RKB_LOG_ERROR, "deploy failed (%s): %s; serving %d module actor(s): %s", rk_err_name(rc), detail,
                n, n ? names : "none");
    } else {
        RKB_SET(sh->deploys, sh->deploys + 1);
        rkb_log(RKB_LOG_INFO, "deployed %.0f ms after the signal, requests held %.1f ms (the switch %.1f): "
                "%d module actor(s): %s", (double)(rkb_now_ns() - sh->deploy_at) / 1e6,
                (double)(rkb_now_ns() - now) / 1e6, (double)(rkb_now_ns() - t0) / 1e6, n, n ? names : "none");
    }
    if (!tables)
        rkb_logk(RKB_LK_SYSTEM, RKB_LOG_ERROR, "deploy: out of memory for an actor table: that loop serves "
                 "no module actor (UNKNOWN_OP) until the next deploy");
}

/* Loop l holds a request: in the runtime, waiting for admission, staged
 * in its burst, or in its ring (a worker's). */
static bool rkb__holds(const rkb_loop *l)
{
    return l->pool.n_inflight || l->pool.n_parked || l->n_adm || (l->reqq && rkb_spsc_sc_peek(l->reqq));
}

int rkb_deploy_step(rkb_shared *sh, rkb_loop *own, int64_t now)
{
    if (sh->preparing) {
        /* acquire: pairs with the prepare thread's release */
        if (!__atomic_load_n(&sh->prep_done, __ATOMIC_ACQUIRE) || rkb__prepared(sh))
            return 0;
        rkb__begin_switch(sh, now);
    }
    if (!rkb_deploying(sh))
        return 0;
    bool quiet = !own || !rkb__holds(own);
    for (int i = 0; quiet && sh->front && i < sh->n_loops; i++)
        /* acquire: pairs with the worker's release (its calls into the
         * runtime come before) */
        quiet = __atomic_load_n(&sh->loops[i]->quiet_gen, __ATOMIC_ACQUIRE) == sh->deploy_gen;
    if (quiet) {
        rkb__run(sh, sh->drain_at);
        rkb__end(sh);
        return 1;
    }
    if (now - sh->drain_at > (int64_t)sh->cfg->drain_ms * 1000000) {
        rkb_log(RKB_LOG_ERROR, "deploy given up: requests still in flight after --drain-ms %u; the modules "
                "are unchanged", sh->cfg->drain_ms);
        RKB_SET(sh->deploy_failures, sh->deploy_failures + 1);
        rkb__end(sh);
        return 1;
    }
    return 0;
}

bool rkb_deploy_hold(rkb_loop *l)
{
    /* acquire: pairs with the port thread's releases (rkb__begin_switch, rkb__end) */
    const uint32_t gen = __atomic_load_n(&l->sh->deploy_gen, __ATOMIC_ACQUIRE);
    if (!(gen & 1u) || l->stopping)
        return false;
    if (l->quiet_gen == gen)
        return true;
    if (rkb__holds(l))
        return false;
    /* release: pairs with rkb_deploy_step's acquire */
    __atomic_store_n(&l->quiet_gen, gen, __ATOMIC_RELEASE);
    rkb_wake(&l->sh->front->wk);
    return true;
}
