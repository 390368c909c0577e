/* actor.c - host actors: the runtime's actor table and each actor's window
 * of pending-request records (actor.h). Requests go in through send.c,
 * replies come out through router.c. */
#include <stdlib.h>
#include <string.h>

#include "actor.h"
#include "barrier.h"

static uint32_t rk__pow2_at_least(uint32_t x)
{
    uint32_t p = 1;
    while (p < x)
        p <<= 1;
    return p;
}

static void rk__actor_free(rk_actor *a)
{
    free(a->pend);
    free(a->inline_bufs);
    free(a->free_tags);
    free(a->ready);
    free(a->stash);
    free(a->order);
    free(a->batch);
    free(a);
}

int rk_actor_device(const rk_actor *a) { return a ? a->rt->lane : -1; }

int rk_actor_open(rk_runtime *rt, rk_actor **out)
{
    if (out)
        *out = NULL; /* on every failure (runtime.h) */
    if (!rt || !out)
        return rk__fail(RK_EINVAL, "rk_actor_open: %s is NULL", rt ? "out" : "runtime");
    if (rt->lanes && !(rt = rk__group_place(rt))) /* several devices: group.c places it */
        return -RK_EDEVICE;
    if (atomic_load(&rt->closing))
        return rk__fail(RK_ECLOSED, "rk_actor_open: the runtime is closing");
    /* 64-byte aligned: the ready queue's router-written line is its own
     * (actor.h) */
    rk_actor *a = rk__zalloc_lines(1, sizeof *a);
    if (!a)
        return rk__fail(RK_ENOMEM, "rk_actor_open: out of memory");
    a->rt = rt;
    a->window = rt->cfg.actor_window;
    a->gen = atomic_load(&rt->gen);
    uint32_t qcap = rk__pow2_at_least(a->window);
    /* 16-byte stride: reply data is as aligned as malloc's */
    size_t ibuf = (rk_ring_msg_max(rt->d2h[0].ring) + 15u) & ~(size_t)15u;
    /* a record a line (64 B, actor.h): the owner fills one while a router
     * completes its neighbour */
    a->pend = rk__zalloc_lines(a->window, sizeof *a->pend);
    a->inline_bufs = malloc((size_t)a->window * ibuf);
    a->free_tags = malloc(a->window * sizeof *a->free_tags);
    a->ready = malloc(qcap * sizeof *a->ready);
    a->stash = malloc(a->window * sizeof *a->stash);
    a->order = malloc(a->window * sizeof *a->order);
    a->batch = malloc(a->window * sizeof *a->batch);
    if (!a->pend || !a->inline_bufs || !a->free_tags || !a->ready || !a->stash || !a->order ||
        !a->batch) {
        uint32_t window = a->window;
        rk__actor_free(a);
        return rk__fail(RK_ENOMEM, "rk_actor_open: out of memory for a window of %u", window);
    }
    a->ready_mask = qcap - 1;
    for (uint32_t i = 0; i < a->window; i++) {
        a->pend[i].inline_buf = a->inline_bufs + (size_t)i * ibuf;
        a->free_tags[i] = (uint16_t)(a->window - 1 - i); /* pop order 0, 1, 2... */
    }
    a->n_free = a->window;

    pthread_mutex_lock(&rt->actors_lock);
    uint32_t i = 0;
    while (i < rt->n_actor_slots && __atomic_load_n(&rt->actors[i], __ATOMIC_RELAXED))
        i++;
    if (i == rt->n_actor_slots) {
        pthread_mutex_unlock(&rt->actors_lock);
        rk__actor_free(a);
        return rk__fail(RK_EBUSY, "all %u actor slots are open (max_actors)", rt->n_actor_slots);
    }
    a->index = (uint16_t)i;
    a->d2h = rk__d2h_of(rt, i);
    /* release: a router that finds the actor sees it initialised */
    __atomic_store_n(&rt->actors[i], a, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&rt->actors_lock);
    *out = a;
    return 0;
}

void rk__pending_put(rk_actor *a, uint16_t tag)
{
    rk__pending *p = &a->pend[tag];
    if (p->arena_len)
        rk__arena_free(&a->rt->arena, p->arena_off, p->arena_len);
    p->arena_len = 0;
    p->strikes = 0;
    rk__st_relaxed(&p->state, (uint8_t)RK__P_FREE);
    a->free_tags[a->n_free++] = tag;
}

void rk__actor_reap(rk_actor *a)
{
    rk_runtime *rt = a->rt;
    pthread_mutex_lock(&rt->actors_lock);
    __atomic_store_n(&rt->actors[a->index], NULL, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&rt->actors_lock);
    rk__actor_free(a);
}

/* Gives back a SENT record whose reply will not come, and the suspect
 * token it may hold. Caller holds its ring's lock. */
static void rk__drop_sent(rk_actor *a, uint32_t tag)
{
    const rk__pending *p = &a->pend[tag];
    if (p->strikes)
        rk__suspect_release(a->rt, RK__RUN_WORD(a->index, tag, p->id));
    rk__pending_put(a, (uint16_t)tag);
}

void rk_actor_close(rk_actor *a)
{
    if (!a)
        return;
    rk_runtime *rt = a->rt;
    /* its ring's lock keeps routers (and the supervisor) away while the
     * replies are taken back */
    rk__d2h *d = a->d2h;
    rk__d2h_lock(d);
    a->closing = true;
    for (uint32_t i = 0; i < a->window; i++) {
        uint8_t st = rk__ld_relaxed(&a->pend[i].state);
        if (st == RK__P_DONE || st == RK__P_STAGED)
            rk__pending_put(a, (uint16_t)i);
    }
    /* a stopped or failed backend answers nothing more (no reply would
     * come to reclaim them, before rk_runtime_close); neither does a
     * worker that would have served requests this actor never re-posted:
     * drop them */
    bool lagging = !rk__in_step(a);
    const bool dead = atomic_load(&rt->closing) || atomic_load(&rt->fault);
    for (uint32_t i = 0; i < a->window; i++) {
        rk__pending *p = &a->pend[i];
        if (rk__ld_relaxed(&p->state) != RK__P_SENT ||
            !(dead || (lagging && p->gen != atomic_load(&rt->gen))))
            continue;
        rk__drop_sent(a, i);
    }
    if (a->n_free == a->window)
        rk__actor_reap(a);
    /* else: the router reaps it when the last reply arrives */
    rk__d2h_unlock(d);
}

void rk__reap_closed_locked(rk_runtime *rt)
{
    for (uint32_t i = 0; i < rt->n_actor_slots; i++) {
        rk_actor *a = rk__actor_at(rt, i);
        if (!a || !a->closing) /* (closing and reaping both hold a ring's lock: we hold them all) */
            continue;
        for (uint32_t t = 0; t < a->window; t++)
            if (rk__ld_relaxed(&a->pend[t].state) == RK__P_SENT)
                rk__drop_sent(a, t);
        if (a->n_free == a->window)
            rk__actor_reap(a);
    }
}

uint32_t rk_actor_inflight(const rk_actor *a) { return a ? a->awaiting + a->stash_n : 0; }
