/* router.c - replies out of the reply (D2H) rings: drain, route, publish;
 * the rings' locks, and a backend fault's wake-up (the waiting side is
 * recv.c).
 *
 * Each actor's replies come back on its own reply ring (rk__d2h_of:
 * actor index modulo the rings), so threads waiting for different actors
 * drain different rings. On a ring, replies are routed by whoever waits:
 * an actor waiting for a reply takes the ring's lock (trylock, never
 * blocks on it), claims the next chunk of
 * complete replies (up to RK__D2H_CHUNK), copies each into its pending
 * record without the lock, so that other waiters claim and route the
 * chunks after it meanwhile, and the chunks are published in claim order
 * (each reply into its owner's ready queue, then cons_head), by whoever's
 * turn it is: each actor's replies keep their order. Owners that sleep are
 * woken. With one actor this is just "the caller polls D2H": no router
 * thread, no extra hop, so the round trip is producer -> consumer ->
 * caller (a claim of one or two replies is routed under the lock, and
 * rk_actor_call's own reply at the head goes straight to it:
 * rk__take_own_locked). A ring whose actors nobody waits for is drained
 * by waiters of other rings once its replies sit unclaimed (rk__steal). */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "actor.h"
#include "barrier.h"

/* Makes the replies queued for a visible to its owner. Caller holds
 * its ring's lock. */
static void rk__publish(rk_actor *a)
{
    /* release: the records and the queued tags before the owner sees
     * them; pairs with the owner's load-acquire of ready_tail */
    if (a->ready_pub != a->ready_tail)
        rk__st_release(&a->ready_tail, a->ready_pub);
}

/* Marks a record answered: the suspect token it held given back, an
 * error status counted. Caller holds its ring's lock. */
static void rk__complete(rk_runtime *rt, rk_actor *a, uint16_t tag)
{
    rk__pending *p = &a->pend[tag];
    if (p->strikes)
        rk__suspect_release(rt, RK__RUN_WORD(a->index, tag, p->id));
    if (p->status)
        atomic_fetch_add(&rt->n_errors, 1);
    rk__st_relaxed(&p->state, (uint8_t)RK__P_DONE);
}

/* Hands a completed record to its owner (or gives it back for a closing
 * actor): queued, and published now, or (batch) by the caller's
 * rk__publish. Counts it as an error reply when its status says so (the
 * caller counts the replies). Caller holds its ring's lock. Returns whether it
 * was queued. */
static bool rk__deliver(rk_runtime *rt, rk_actor *a, uint16_t tag, bool batch)
{
    rk__complete(rt, a, tag);
    if (a->closing) {
        rk__pending_put(a, tag);
        if (a->n_free == a->window) /* its last record back */
            rk__actor_reap(a);
        return false;
    }
    a->ready[a->ready_pub & a->ready_mask] = tag;
    a->ready_pub++;
    if (!batch)
        rk__publish(a);
    return true;
}

/* Sets record p's status and length from its reply's header h, the
 * message holding `room` bytes after h; returns how many payload bytes
 * the caller copies into p->inline_buf (0 for an arena reply, whose data
 * the producer wrote there, and for one longer than reserved). */
static uint32_t rk__accept(rk__pending *p, const rk_msg_hdr *h, uint32_t room)
{
    rk__tsan_acquire(p); /* the worker-process edge (barrier.h) */
    p->status = h->status;
    p->len = h->len;
    const uint64_t cap = p->arena_len ? p->arena_len - (p->out_off - p->arena_off) : room;
    if (h->len > cap) { /* reply longer than reserved */
        p->status = -RK_EPROTO, p->len = 0;
        return 0;
    }
    return p->arena_len ? 0 : h->len;
}

/* Copies one reply of ring d into its pending record: the actor it is
 * for, or NULL when it matches no request of an actor of d (dropped,
 * counted as an error). Called with or without d's lock: a chunk's records
 * are its router's alone until it publishes them, because whoever else
 * writes a SENT record (the supervisor, a closing actor, a fault reply)
 * takes rk__d2h_lock, which waits until no chunk is out, and only d's
 * routers write the records of d's actors. */
static rk_actor *rk__route(rk_runtime *rt, const rk__d2h *d, const uint8_t *msg, uint32_t len, uint16_t *tag)
{
    rk_msg_hdr h;
    if (len < sizeof h) {
        rk__log(RK__LOG_ERROR, "D2H: reply of %u B is shorter than a header; dropped", len);
        atomic_fetch_add(&rt->n_errors, 1);
        return NULL;
    }
    memcpy(&h, msg, sizeof h);
    rk_actor *a = rk__actor_at(rt, h.actor);
    /* acquire: pairs with rk__post's store-release of SENT, so the id and
     * the rest of the record are the ones the owner wrote for it */
    if (!a || a->d2h != d || h.tag >= a->window || rk__ld_acquire(&a->pend[h.tag].state) != RK__P_SENT ||
        a->pend[h.tag].id != h.id) {
        rk__log(RK__LOG_ERROR, "D2H ring %u: reply id %llu for actor %u tag %u matches no request; dropped",
                d->index, (unsigned long long)h.id, h.actor, h.tag);
        atomic_fetch_add(&rt->n_errors, 1);
        return NULL;
    }
    rk__pending *p = &a->pend[h.tag];
    const uint32_t n = rk__accept(p, &h, len - (uint32_t)sizeof h);
    if (n)
        memcpy(p->inline_buf, msg + sizeof h, n);
    *tag = h.tag;
    return a;
}

/* Claims the complete replies from d->claim on, up to RK__D2H_CHUNK,
 * into the chunk of the next ticket; NULL when none is complete or
 * RK__D2H_CHUNKS chunks are out. Caller holds d's lock. *rc: -RK_EAGAIN,
 * or the ring error that stopped the claim (a slot that claims more than
 * it holds). */
static rk__d2h_chunk *rk__claim_locked(rk__d2h *d, int *rc)
{
    *rc = -RK_EAGAIN;
    if (d->out == RK__D2H_CHUNKS)
        return NULL;
    /* relaxed: only the holder of the lock moves it (and a self-test and
     * a rings reset, with cons_head: the waiters' look reads it too) */
    const uint64_t pos = atomic_load_explicit(&d->claim, memory_order_relaxed);
    uint32_t n = 0, len;
    while (n < RK__D2H_CHUNK && (*rc = rk__ring_complete_at(d->ring, pos + n, &len)) == 0)
        n++;
    if (!n)
        return NULL;
    const uint64_t t = d->tickets++;
    rk__d2h_chunk *c = &d->chunks[t % RK__D2H_CHUNKS];
    c->pos = pos;
    c->n = n;
    c->ticket = t;
    d->out++;
    atomic_store_explicit(&d->claim, pos + n, memory_order_relaxed);
    return c;
}

/* Reads and routes a claimed chunk of d (its lock not needed: the
 * positions and the chunk are its claimer's until it marks it routed).
 * Returns how many went to another actor than self. */
static int rk__route_chunk(rk_runtime *rt, rk__d2h *d, rk__d2h_chunk *c, const rk_actor *self)
{
    _Alignas(16) uint8_t msg[RK_RING_SLOT_MAX / 2];
    int others = 0;
    for (uint32_t k = 0; k < c->n; k++) {
        uint32_t len = 0;
        /* complete when claimed: the producer does not touch it again
         * before cons_head passes it */
        int rc = rk__ring_peek_at(d->ring, c->pos + k, msg, sizeof msg, &len);
        c->act[k] = rc ? NULL : rk__route(rt, d, msg, len, &c->tag[k]);
        others += c->act[k] && c->act[k] != self;
    }
    /* seq_cst: against rk__publish_locked's store of d2h_published
     * (Dekker): either this router sees its turn has come and publishes,
     * or the publisher before it sees the chunk routed and publishes it */
    atomic_store(&c->routed, c->ticket + 1);
    return others;
}

/* Counts n replies routed from d to their actors; the first after a
 * worker change ends the recovery's clock. Caller holds d's lock: the
 * count is a load and a store, not a locked add. */
static void rk__count_replies(rk_runtime *rt, rk__d2h *d, uint64_t n)
{
    atomic_store_explicit(&d->n_replies, atomic_load_explicit(&d->n_replies, memory_order_relaxed) + n,
                          memory_order_relaxed);
    int64_t t0 = atomic_load_explicit(&rt->recover_t0, memory_order_relaxed);
    if (t0 && atomic_compare_exchange_strong(&rt->recover_t0, &t0, 0)) {
        /* the one router that ends the clock (several rings may race for
         * it); the supervisor reads t0, at, t0 */
        const int64_t at = rk__now_ns();
        atomic_store_explicit(&rt->first_reply_at, at, memory_order_relaxed);
        atomic_store(&rt->first_reply_t0, t0); /* seq_cst: after `at` */
        atomic_store(&rt->last_recovery_ns, at - t0);
    }
}

void rk__answer_locked(rk_runtime *rt, rk_actor *a, uint16_t tag, int status)
{
    rk__pending *p = &a->pend[tag];
    p->status = status;
    p->len = 0;
    rk__count_replies(rt, a->d2h, 1);
    rk__deliver(rt, a, tag, false);
}

/* Queues a routed chunk's replies for their owners, publishes each
 * owner's queue once, and gives the chunk's slots back to the producer.
 * Caller holds d's lock; every earlier ticket of d is published. Returns
 * whether any reply was queued. */
static bool rk__publish_chunk_locked(rk_runtime *rt, rk__d2h *d, const rk__d2h_chunk *c)
{
    /* the actors with replies queued, published once at the end: a
     * publication per reply made each owner's load wait for the line */
    enum { TOUCHED = 16 };
    rk_actor *touched[TOUCHED];
    int nt = 0, n = 0;
    for (uint32_t k = 0; k < c->n; k++) {
        rk_actor *a = c->act[k];
        if (!a)
            continue;
        n++;
        if (!rk__deliver(rt, a, c->tag[k], true))
            continue;
        int i = 0;
        while (i < nt && touched[i] != a)
            i++;
        if (i == nt) {
            if (nt == TOUCHED)
                rk__publish(touched[--nt]); /* many actors: make room */
            touched[nt++] = a;
        }
    }
    for (int i = 0; i < nt; i++)
        rk__publish(touched[i]);
    if (n)
        rk__count_replies(rt, d, (uint64_t)n);
    /* release: the chunk's slots are read before the producer may reuse
     * them; pairs with its load-acquire of cons_head. Chunks publish in
     * claim order, so cons_head only moves forward. */
    rk__st_release(&d->ring->cons_head, c->pos + c->n);
    d->out--;
    return nt > 0;
}

/* Publishes d's routed chunks whose turn it is, in claim order. Caller
 * holds d's lock. Returns whether any reply was queued. */
static bool rk__publish_locked(rk_runtime *rt, rk__d2h *d)
{
    bool queued = false;
    while (d->out) {
        const uint64_t t = atomic_load_explicit(&d->published, memory_order_relaxed);
        rk__d2h_chunk *c = &d->chunks[t % RK__D2H_CHUNKS];
        /* seq_cst: pairs with rk__route_chunk's store (Dekker, there);
         * it also makes the router's records visible here */
        if (atomic_load(&c->routed) != t + 1)
            break;
        queued |= rk__publish_chunk_locked(rt, d, c);
        atomic_store(&d->published, t + 1); /* seq_cst: as above */
    }
    return queued;
}

int rk__drain_some(rk_runtime *rt, rk__d2h *d, const rk_actor *self, bool yield, int *others, int *rc)
{
    int n = 0;
    *others = 0;
    /* holding the lock throughout: claim, route and publish chunk after
     * chunk (the supervisor's drain; no chunk is out when it runs) */
    for (rk__d2h_chunk *c; (c = rk__claim_locked(d, rc)) != NULL;) {
        *others += rk__route_chunk(rt, d, c, self);
        n += (int)c->n;
        rk__publish_locked(rt, d);
        if (*rc != 0 && *rc != -RK_EAGAIN)
            break;
        /* relaxed: a late look costs the blocked thread one more chunk */
        if (yield && (atomic_load_explicit(&d->wanted, memory_order_relaxed) || (uint32_t)n >= d->ring->slots)) {
            *rc = -RK_EAGAIN;
            break;
        }
    }
    return n;
}

/* Claims of up to this many replies with no chunk out are routed under
 * the lock (nothing to gain from letting go of it: the round trip's case) */
#define RK__ROUTE_LOCKED_MAX 2u

/* rk_actor_call's round trip, under d's lock with no chunk out: the
 * reply at claim is complete and is the one `a` waits for (tag want).
 * It goes from the slot straight into its record (rk__accept), read
 * once, and straight to the waiter: no chunk, no ready queue, no seq_cst
 * edges (with no chunk out nobody routes without the lock), and the next
 * slot is not read. The host's turn decides whether the kernel's next
 * read finds the next request (device/NOTES.md, "Where the late round
 * trips come from"); this took seeing a reply to returning it from
 * 133-181 to 103-127 ns on an H200 host. Not for rk_actor_recv (want <
 * 0): a pipelined receiver gets chunks of replies per lock. Returns
 * whether it took it (*tag); a reply that matches no request is left
 * where it is, for the chunk path that follows (rk__drain_held) to drop
 * and report (rk__route). */
static bool rk__take_own_locked(rk_runtime *rt, rk__d2h *d, rk_actor *a, int want, uint16_t *tag)
{
    if (want < 0 || d->out || a->closing)
        return false;
    /* relaxed: only the holder of the lock moves it */
    const uint64_t pos = atomic_load_explicit(&d->claim, memory_order_relaxed);
    const uint64_t *slot = rk_ring_slot(d->ring, pos);
    const uint32_t flag = rk_ring_flag(d->ring, pos);
    /* whose it is first, from its actor | tag line (rk_abi.h RK__W_ACTOR):
     * another's reply is read once, by the chunk path. acquire: pairs with
     * the producer's store-release of the line, as the check's loads do */
    const uint64_t who = rk__ld_acquire(slot + RK__W_ACTOR);
    if ((uint32_t)(who >> 32) != flag || (uint32_t)who != ((uint32_t)want << 16 | a->index))
        return false;
    /* then every line there, and it is read once, straight into the
     * record: checked first, so that the record's inline request (what a
     * re-post sends) is never half overwritten by a reply whose lines are
     * not all there (a GPU writes them in any order). acquire: as above.
     * A slot that claims more than it holds is the claim's error to report */
    const uint64_t l0 = rk__ld_acquire(slot);
    const uint32_t len = (uint32_t)l0;
    if ((uint32_t)(l0 >> 32) != flag || len < sizeof(rk_msg_hdr) || len > rk_ring_msg_max(d->ring) ||
        !rk__slot_lines_there(slot, flag, len))
        return false;
    rk_msg_hdr h;
    rk__slot_copy(slot + 1, &h, sizeof h);
    /* its actor and tag are a's and want (the who line): the record's
     * state and id say whether it is this request's reply. acquire: pairs
     * with rk__post's store-release of SENT. Another reply (a stale one)
     * is the chunk path's to drop and report */
    rk__pending *p = &a->pend[want];
    if (rk__ld_acquire(&p->state) != RK__P_SENT || p->id != h.id)
        return false;
    const uint32_t n = rk__accept(p, &h, len - (uint32_t)sizeof h);
    if (n)
        rk__slot_copy(slot + 1 + sizeof h / 4, p->inline_buf, n);
    *tag = (uint16_t)want;
    atomic_store_explicit(&d->claim, pos + 1, memory_order_relaxed);
    rk__complete(rt, a, *tag);
    a->awaiting--; /* owner-private, and a is the caller's */
    rk__count_replies(rt, d, 1);
    /* release: the slot is read before the producer may reuse it; pairs
     * with its load-acquire of cons_head (no chunk is out: every position
     * below pos is published) */
    rk__st_release(&d->ring->cons_head, pos + 1);
    return true;
}

/* The part of a drain after the lock is taken: claims, routes and
 * publishes a chunk. Returns the replies claimed. */
static int rk__drain_held(rk_runtime *rt, rk__d2h *d, const rk_actor *self)
{
    int rc;
    const bool alone = d->out == 0; /* no earlier chunk to publish first */
    rk__d2h_chunk *c = rk__claim_locked(d, &rc);
    if (!c) {
        rk__unlock(&d->lock);
        if (rc != -RK_EAGAIN)
            rk__runtime_fault(rt, rc, rk_last_detail());
        return 0;
    }
    const int n = (int)c->n;
    bool wake;
    if (alone && c->n <= RK__ROUTE_LOCKED_MAX) {
        /* only replies for others need a wake (a fence, on the round trip) */
        wake = rk__route_chunk(rt, d, c, self) > 0;
        rk__publish_locked(rt, d);
    } else {
        /* route without the lock, so that other waiters claim and route
         * the next chunks meanwhile (one router at a time topped out at
         * ~7 M replies/s on an H100 host, however many threads waited:
         * routing another actor's reply moves that actor's record and
         * queue lines from its core). The chunk is published in claim
         * order: by this router if its turn has come, else by the one
         * whose turn it is (no waiting for it here) */
        const uint64_t t = c->ticket;
        rk__unlock(&d->lock);
        rk__route_chunk(rt, d, c, self);
        if (atomic_load(&d->published) != t) /* seq_cst: Dekker, rk__route_chunk */
            return n;
        rk__lock_take(&d->lock);
        wake = rk__publish_locked(rt, d);
    }
    rk__unlock(&d->lock);
    if (wake)
        rk__ring_wake(d->ring);
    return n;
}

/* Whether d has a reply to claim and its lock is free to take (trylock):
 * the waiter's loop asks at every spin. */
static bool rk__drain_lock(rk__d2h *d)
{
    /* nothing there: no lock taken (a trylock and unlock are two locked
     * instructions). relaxed: a stale position costs one more look */
    rk_ring *r = d->ring;
    const uint64_t pos = atomic_load_explicit(&d->claim, memory_order_relaxed);
    uint32_t len;
    if (!rk__ring_there(r, pos, &len))
        return false;
    /* the message's other lines, on their way while the lock is taken
     * (the producer wrote them before line 0) */
    rk__ring_prefetch_r(r, pos, len);
    /* relaxed: a stale 0 costs the blocked thread one more holder */
    return !atomic_load_explicit(&d->wanted, memory_order_relaxed) && rk__lock_try(&d->lock);
}

int rk__drain(rk_runtime *rt, rk__d2h *d, const rk_actor *self)
{
    return rk__drain_lock(d) ? rk__drain_held(rt, d, self) : 0;
}

int rk__drain_own(rk_runtime *rt, rk_actor *a, int want, bool *own, uint16_t *tag)
{
    rk__d2h *d = a->d2h;
    *own = false;
    if (!rk__drain_lock(d))
        return 0;
    if (rk__take_own_locked(rt, d, a, want, tag)) {
        rk__unlock(&d->lock);
        *own = true;
        return 1;
    }
    return rk__drain_held(rt, d, a);
}

void rk__drain_locked(rk_runtime *rt)
{
    for (uint32_t i = 0; i < rt->n_d2h; i++) {
        int others = 0, rc;
        rk__drain_some(rt, &rt->d2h[i], NULL, false, &others, &rc);
        if (rc != -RK_EAGAIN) /* a torn or corrupt slot of a dead producer: skipped by the reset */
            rk__log(RK__LOG_WARN, "drain of reply ring %u after a worker fault stopped: %s", i, rk_last_detail());
    }
}

void rk__drain_all(rk_runtime *rt)
{
    rk__d2h_lock_all(rt);
    rk__drain_locked(rt);
    rk__d2h_unlock_all(rt);
    rk__runtime_wake(rt);
}

static void *rk__drainer_main(void *arg)
{
    rk__drainer *d = arg;
    pthread_mutex_lock(&d->lock);
    while (!d->quit) {
        pthread_mutex_unlock(&d->lock);
        rk__drain_all(d->rt);
        /* every 20 ms; a stop ends the wait at once (a plain sleep put up
         * to 20 ms into every worker stop, relaunch and module reload) */
        struct timespec at;
        clock_gettime(CLOCK_MONOTONIC, &at);
        at.tv_nsec += 20 * 1000000;
        at.tv_sec += at.tv_nsec / 1000000000;
        at.tv_nsec %= 1000000000;
        pthread_mutex_lock(&d->lock);
        if (!d->quit)
            pthread_cond_timedwait(&d->wake, &d->lock, &at);
    }
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

void rk__drainer_start(rk__drainer *d, rk_runtime *rt)
{
    d->rt = rt;
    d->quit = false;
    pthread_mutex_init(&d->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the deadline above */
    pthread_cond_init(&d->wake, &ca);
    pthread_condattr_destroy(&ca);
    /* tests (gpu_stop): a host that stopped draining, so that a stopping
     * kernel's replies find no room and the stop ends in its abort */
    const char *wedge = getenv("RK_TEST_NO_DRAIN");
    if (wedge && *wedge == '1') {
        d->on = false;
        return;
    }
    d->on = pthread_create(&d->thread, NULL, rk__drainer_main, d) == 0;
    if (!d->on)
        rk__log(RK__LOG_WARN, "no thread to drain the reply rings while the backend stops");
}

void rk__drainer_stop(rk__drainer *d)
{
    pthread_mutex_lock(&d->lock);
    d->quit = true;
    pthread_cond_signal(&d->wake);
    pthread_mutex_unlock(&d->lock);
    if (d->on)
        pthread_join(d->thread, NULL);
    d->on = false;
    pthread_cond_destroy(&d->wake);
    pthread_mutex_destroy(&d->lock);
}

/* A reply ring whose actors nobody waits for is drained by nobody, and a
 * full ring stops its producer (the kernel waits for room in every ring
 * before a busy poll; the CPU worker before each reply), and with it every
 * other ring. So a waiter that found its own ring quiet long enough to
 * read the clock looks, every RK__STEAL_NS, at the other rings: one whose
 * next reply was already there at its last look and is still unclaimed
 * has no router; it drains that ring for its owners (they find their
 * replies in their ready queues). Owner-only state: the actor's. */
#define RK__STEAL_NS 100000
void rk__steal(rk_actor *a, int64_t now)
{
    rk_runtime *rt = a->rt;
    if (rt->n_d2h == 1 || now - a->steal_at < RK__STEAL_NS)
        return;
    a->steal_at = now;
    for (uint32_t i = 0; i < rt->n_d2h; i++) {
        rk__d2h *d = &rt->d2h[i];
        if (d == a->d2h)
            continue;
        /* relaxed: a stale claim costs one period of delay */
        const uint64_t c = atomic_load_explicit(&d->claim, memory_order_relaxed);
        const bool ready = rk__ring_ready_at(d->ring, c);
        const bool stale = ready && a->steal_ready[i] && a->steal_seen[i] == c;
        a->steal_seen[i] = c;
        a->steal_ready[i] = ready;
        if (!stale)
            continue;
        rk__log(RK__LOG_DEBUG, "actor %u drains reply ring %u: its reply at %llu waited %d us unclaimed",
                a->index, i, (unsigned long long)c, RK__STEAL_NS / 1000);
        for (uint32_t n = 0, k; n < d->ring->slots && (k = (uint32_t)rk__drain(rt, d, NULL)) > 0; n += k)
            ;
    }
}

void rk__runtime_fault(rk_runtime *rt, int code, const char *why)
{
    int expected = 0;
    if (atomic_compare_exchange_strong(&rt->fault, &expected, code < 0 ? code : -code))
        rk__log(RK__LOG_ERROR, "backend %s failed (%s): %s", rt->info.backend_name,
                rk_err_name(code), why ? why : "");
    /* a send waiting for arena space that only replies would free */
    rk__arena_fail(&rt->arena, atomic_load(&rt->fault));
    rk__runtime_wake(rt);
}

void rk__d2h_lock(rk__d2h *d)
{
    atomic_fetch_add(&d->wanted, 1);
    rk__lock_take(&d->lock);
    /* no chunk may be out: whoever takes the lock this way may touch any
     * pending record of d's actors. Routed ones are published here; those
     * still being routed are waited for (`wanted` keeps new claims away) */
    while (rk__publish_locked(d->rt, d), d->out) {
        rk__unlock(&d->lock);
        sched_yield();
        rk__lock_take(&d->lock);
    }
    atomic_fetch_sub(&d->wanted, 1);
}

void rk__d2h_lock_all(rk_runtime *rt)
{
    for (uint32_t i = 0; i < rt->n_d2h; i++)
        rk__d2h_lock(&rt->d2h[i]);
}

void rk__d2h_unlock_all(rk_runtime *rt)
{
    for (uint32_t i = rt->n_d2h; i-- > 0;)
        rk__d2h_unlock(&rt->d2h[i]);
}

void rk__runtime_wake(rk_runtime *rt)
{
    for (uint32_t i = 0; i < rt->n_d2h; i++)
        rk__ring_wake(rt->d2h[i].ring);
}
