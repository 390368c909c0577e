/* backend_cpu.c - the CPU backend in this process: one thread runs the CPU
 * consumer (serve_cpu.c) over the runtime's rings. The supervisor also
 * uses such a thread to serve built-ins while a crash-looping GPU worker is
 * not restarted. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actor.h"
#include "barrier.h"
#include "internal.h"

static void *rk__cpu_main(void *arg)
{
    rk__serve_cpu_run(arg);
    return NULL;
}

int rk__cpu_thread_start(rk__cpu_thread *c, rk_runtime *rt, uint32_t flags)
{
    memset(c, 0, sizeof *c);
    c->s.v = rt->view;
    c->s.defs = rt->defs;
    c->s.n_defs = rt->n_defs;
    c->s.flags = flags;
    rk__st_relaxed(&rt->view.hdr->stop, 0u);
    int err = pthread_create(&c->thread, NULL, rk__cpu_main, &c->s);
    if (err)
        return rk__fail(RK_ESYS, "CPU backend: pthread_create failed: %s", strerror(err));
    c->running = true;
    return 0;
}

void rk__cpu_thread_stop(rk__cpu_thread *c, rk_runtime *rt)
{
    if (!c->running)
        return;
    /* release: pairs with the consumer's load-acquire of stop */
    rk__st_release(&rt->view.hdr->stop, 1u);
    /* it may be asleep on the doorbell: ring it */
    rk__fetch_add(&rt->h2d->doorbell, 1u);
    rk__futex_wake(&rt->h2d->doorbell, 1);
    /* it stops after the message at hand, whose reply may wait for room
     * on a ring nobody drains (a plain join hung rk_runtime_close) */
    rk__drainer dr;
    rk__drainer_start(&dr, rt);
    pthread_join(c->thread, NULL);
    rk__drainer_stop(&dr);
    c->running = false;
    rk__st_relaxed(&rt->view.hdr->stop, 0u);
}

static int rk__cpu_start(rk_runtime *rt)
{
    rk__cpu_thread *c = calloc(1, sizeof *c);
    if (!c)
        return rk__fail(RK_ENOMEM, "CPU backend: out of memory");
    int rc = rk__cpu_thread_start(c, rt, 0);
    if (rc) {
        free(c);
        return rc;
    }
    rt->backend_state = c;
    rk_info *in = &rt->info;
    in->backend = RK_BACKEND_CPU;
    strcpy(in->backend_name, "cpu");
    in->has_device = 0;
    in->grid = rt->cfg.grid;
    in->block = rt->cfg.block;
    in->smem = rt->cfg.smem;
    return 0;
}

static void rk__cpu_stop(rk_runtime *rt)
{
    rk__cpu_thread *c = rt->backend_state;
    if (!c)
        return;
    rk__cpu_thread_stop(c, rt);
    free(c);
    rt->backend_state = NULL;
}

static int rk__cpu_health(rk_runtime *rt)
{
    (void)rt;
    return 0;
}

/* The thread runs what rt->defs held when it started (rk__cpu_thread_start):
 * it stops at a message boundary, the set changes, a new one starts. */
static int rk__cpu_reload(rk_runtime *rt, rk__registry *next, bool back)
{
    rk__cpu_thread *c = rt->backend_state;
    rk__cpu_thread_stop(c, rt);
    rk__registry_swap(rt, next);
    int rc = rk__cpu_thread_start(c, rt, 0);
    if (rc) {
        char why[300];
        snprintf(why, sizeof why, "%s", rk_last_detail());
        if (!back) /* (going back, the set it leaves is the one the group left) */
            rk__registry_swap(rt, next);
        if (back || rk__cpu_thread_start(c, rt, 0)) {
            rk__runtime_fault(rt, -RK_ESYS, why);
            return rk__fail(rc, "the CPU backend's thread could not be started again: %s", why);
        }
        return rk__fail(rc, "the new modules' CPU thread did not start: %s; the previous modules serve again", why);
    }
    return 0;
}

const rk__backend_ops rk__cpu_backend = {
    .name = "cpu",
    .start = rk__cpu_start,
    .stop = rk__cpu_stop,
    .health = rk__cpu_health,
    .reload = rk__cpu_reload,
};
