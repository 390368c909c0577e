/* router.c - replies out of the reply (D2H) rings: drain, route, wait, and
 * what a backend fault means for waiters.
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
 * caller (a claim of one or two replies is routed under the lock). A ring
 * whose actors nobody waits for is drained by waiters of other rings once
 * its replies sit unclaimed (rk__steal). */
#include <limits.h>
#include <sched.h>
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

/* Hands a completed record to its owner (or gives it back for a closing
 * actor): queued, and published now, or (batch) by the caller's
 * rk__publish. Counts it as an error reply when its status says so (the
 * caller counts the replies). Caller holds its ring's lock. Returns whether it
 * was queued. */
static bool rk__deliver(rk_runtime *rt, rk_actor *a, uint16_t tag, bool batch)
{
    rk__pending *p = &a->pend[tag];
    if (p->strikes)
        rk__suspect_release(rt, RK__RUN_WORD(a->index, tag, p->id));
    if (p->status)
        atomic_fetch_add(&rt->n_errors, 1);
    rk__st_relaxed(&p->state, (uint8_t)RK__P_DONE);
    if (a->closing) {
        rk__pending_put(a, tag);
        if (atomic_load(&a->inflight) == 0)
            rk__actor_reap(a);
        return false;
    }
    a->ready[a->ready_pub & a->ready_mask] = tag;
    a->ready_pub++;
    if (!batch)
        rk__publish(a);
    return true;
}

void rk__answer_locked(rk_runtime *rt, rk_actor *a, uint16_t tag, int status)
{
    rk__pending *p = &a->pend[tag];
    p->status = status;
    p->len = 0;
    atomic_fetch_add(&rt->n_replies, 1);
    rk__deliver(rt, a, tag, false);
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
    rk__tsan_acquire(p); /* the worker-process edge (barrier.h) */
    p->status = h.status;
    p->len = h.len;
    if (p->arena_len) {
        if (h.len > p->arena_len - (p->out_off - p->arena_off)) /* reply longer than reserved */
            p->status = -RK_EPROTO, p->len = 0;
    } else {
        uint32_t room = len - (uint32_t)sizeof h;
        if (h.len > room)
            p->status = -RK_EPROTO, p->len = 0;
        else
            memcpy(p->inline_buf, msg + sizeof h, h.len);
    }
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
    if (n) {
        atomic_fetch_add(&rt->n_replies, (uint64_t)n);
        /* the first reply after a worker change ends the recovery's clock */
        int64_t t0 = atomic_load_explicit(&rt->recover_t0, memory_order_relaxed);
        if (t0 && atomic_compare_exchange_strong(&rt->recover_t0, &t0, 0)) {
            /* the one router that ends the clock (several rings may race
             * for it); the supervisor reads t0, at, t0 */
            const int64_t at = rk__now_ns();
            atomic_store_explicit(&rt->first_reply_at, at, memory_order_relaxed);
            atomic_store(&rt->first_reply_t0, t0); /* seq_cst: after `at` */
            atomic_store(&rt->last_recovery_ns, at - t0);
        }
    }
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

int rk__drain(rk_runtime *rt, rk__d2h *d, const rk_actor *self)
{
    /* nothing there: no lock taken (the waiter's loop asks this at every
     * spin; a trylock and unlock are two locked instructions). relaxed:
     * a stale position costs one more look */
    if (!rk__ring_ready_at(d->ring, atomic_load_explicit(&d->claim, memory_order_relaxed)))
        return 0;
    /* relaxed: a stale 0 costs the blocked thread one more holder */
    if (atomic_load_explicit(&d->wanted, memory_order_relaxed) || pthread_mutex_trylock(&d->lock) != 0)
        return 0;
    int rc;
    const bool alone = d->out == 0; /* no earlier chunk to publish first */
    rk__d2h_chunk *c = rk__claim_locked(d, &rc);
    if (!c) {
        pthread_mutex_unlock(&d->lock);
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
        pthread_mutex_unlock(&d->lock);
        rk__route_chunk(rt, d, c, self);
        if (atomic_load(&d->published) != t) /* seq_cst: Dekker, rk__route_chunk */
            return n;
        pthread_mutex_lock(&d->lock);
        wake = rk__publish_locked(rt, d);
    }
    pthread_mutex_unlock(&d->lock);
    if (wake)
        rk__ring_wake(d->ring);
    return n;
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

static bool rk__ready_pop(rk_actor *a, uint16_t *tag)
{
    /* the router's line is read only when what it published last is used
     * up. acquire: pairs with the router's store-release of ready_tail */
    if (a->ready_head == a->ready_seen && a->ready_head == (a->ready_seen = rk__ld_acquire(&a->ready_tail)))
        return false;
    *tag = a->ready[a->ready_head & a->ready_mask];
    a->ready_head++;
    a->awaiting--;
    return true;
}

static void rk__fill_reply(rk_actor *a, uint16_t tag, rk_reply *out)
{
    rk__pending *p = &a->pend[tag];
    out->id = p->id;
    out->type = p->type;
    out->status = p->status;
    out->len = p->len;
    out->data = p->arena_len ? (const void *)(a->rt->arena.base + p->out_off) : p->inline_buf;
    out->tag_ = tag;
    /* The receiving thread's detail says why a failed reply failed (the
     * status alone cannot tell a poison request from a dead backend). */
    if (p->status == -RK_EDEVICE && p->strikes >= 2)
        rk__fail(RK_EDEVICE, "request %llu (type %u) of actor %u faulted its worker twice: answered "
                 "RK_EDEVICE instead of being retried again",
                 (unsigned long long)p->id, p->type, a->index);
    else if (p->status == -RK_EACTOR)
        rk__fail(RK_EACTOR, "request %llu (type %u) of actor %u: the actor failed: %.*s", (unsigned long long)p->id,
                 p->type, a->index, (int)(out->len < 200 ? out->len : 200), (const char *)out->data);
    else if (p->status)
        rk__fail(p->status, "request %llu (type %u) of actor %u answered %s: %s",
                 (unsigned long long)p->id, p->type, a->index, rk_err_name(p->status),
                 rk_strerror(p->status));
}

/* After a fatal backend fault, the owner answers its own unanswered
 * requests with the fault code: every request still gets exactly one reply. */
static bool rk__fault_reply(rk_actor *a, int want, int fault, uint16_t *tag)
{
    for (uint32_t i = 0; i < a->window; i++) {
        if (rk__ld_relaxed(&a->pend[i].state) != RK__P_SENT || (want >= 0 && (int)i != want))
            continue;
        rk__d2h_lock(a->d2h); /* against a late router */
        bool still = rk__ld_relaxed(&a->pend[i].state) == RK__P_SENT;
        if (still) {
            rk__st_relaxed(&a->pend[i].state, (uint8_t)RK__P_DONE);
            a->pend[i].status = fault;
            a->pend[i].len = 0;
            atomic_fetch_add(&a->rt->n_errors, 1);
        }
        rk__d2h_unlock(a->d2h);
        if (still) {
            a->awaiting--;
            *tag = (uint16_t)i;
            return true;
        }
    }
    return false;
}

/* Pops a ready reply: the next one, or the one with tag `want` (others go
 * to the stash). */
static bool rk__take(rk_actor *a, int want, rk_reply *out)
{
    uint16_t tag;
    while (rk__ready_pop(a, &tag)) {
        if (want < 0 || tag == want) {
            rk__fill_reply(a, tag, out);
            return true;
        }
        a->stash[(a->stash_head + a->stash_n) % a->window] = tag;
        a->stash_n++;
    }
    return false;
}

/* Sleeps on the doorbell of a's reply ring: the CPU consumer (in this
 * process or a worker) and routers working for other actors ring it; a
 * GPU producer cannot, so the sleep is bounded by the caller (50 us ..
 * 1 ms). */
static void rk__sleep_for_reply(rk_actor *a, int64_t sleep_ns)
{
    rk_ring *d2h = a->d2h->ring;
    __atomic_fetch_add(&d2h->cons_sleeping, 1u, __ATOMIC_RELAXED);
    uint32_t seq = rk__ld_acquire(&d2h->doorbell);
    /* seq_cst: pairs with rk__ring_wake's fence (Dekker): either we see
     * the reply here, or the waker sees us sleeping */
    rk__fence_seq_cst();
    bool pending = rk__ring_ready_at(d2h, atomic_load_explicit(&a->d2h->claim, memory_order_relaxed)) ||
                   a->ready_head != rk__ld_acquire(&a->ready_tail);
    if (!pending)
        rk__futex_wait(&d2h->doorbell, seq, sleep_ns);
    __atomic_fetch_sub(&d2h->cons_sleeping, 1u, __ATOMIC_RELAXED);
}

/* A wait that made no progress for 10 s says, at debug level, what it
 * waits for: the positions, the generations, the suspect token and hold. */
static void rk__wait_report(rk_actor *a, int want)
{
    rk_runtime *rt = a->rt;
    const rk__region *reg = rt->view.hdr;
    rk__log(RK__LOG_DEBUG,
            "actor %u waits (tag %d) 10 s: %u awaited; actor gen %u, runtime gen %u, region gen %u; suspect "
            "%#llx, hold %lld; H2D %llu..%llu, D2H ring %u %llu..%llu; heartbeat %llu, state %d",
            a->index, want, a->awaiting, a->gen, atomic_load(&rt->gen), rk__ld_relaxed(&reg->gen),
            (unsigned long long)atomic_load(&rt->suspect), (long long)atomic_load(&rt->suspect_hold),
            (unsigned long long)rk__ld_relaxed(&rt->h2d->cons_head),
            (unsigned long long)rk__ld_relaxed(&rt->h2d->prod_tail), a->d2h->index,
            (unsigned long long)rk__ld_relaxed(&a->d2h->ring->cons_head),
            (unsigned long long)rk__ld_relaxed(&a->d2h->ring->prod_tail),
            (unsigned long long)rk__ld_relaxed(&reg->heartbeat), rk__ld_relaxed(&reg->state));
    for (uint32_t i = 0; i < rt->n_d2h; i++) {
        const rk__d2h *d = &rt->d2h[i];
        const uint64_t c = atomic_load_explicit(&d->claim, memory_order_relaxed);
        rk__log(RK__LOG_DEBUG, "  reply ring %u: claim %llu, cons_head %llu, %s there", i, (unsigned long long)c,
                (unsigned long long)rk__ld_relaxed(&d->ring->cons_head),
                rk__ring_ready_at(d->ring, c) ? "a reply" : "nothing");
    }
    for (uint32_t i = 0; i < a->window; i++)
        if (rk__ld_relaxed(&a->pend[i].state) == RK__P_SENT)
            rk__log(RK__LOG_DEBUG, "  tag %u: request %llu type %u gen %u strikes %u", i,
                    (unsigned long long)a->pend[i].id, a->pend[i].type, a->pend[i].gen, a->pend[i].strikes);
}

int rk__wait(rk_actor *a, int want, rk_reply *out, int64_t deadline)
{
    rk_runtime *rt = a->rt;
    rk__backoff b;
    rk__backoff_reset(&b);
    if (want < 0 && a->stash_n) {
        uint16_t tag = a->stash[a->stash_head];
        a->stash_head = (a->stash_head + 1) % a->window;
        a->stash_n--;
        rk__fill_reply(a, tag, out);
        return 0;
    }
    int64_t report_at = 0;
    for (uint32_t spins = 0;; spins++) {
        if (rk__take(a, want, out))
            return 0;
        if (rk__drain(rt, a->d2h, a) && rk__take(a, want, out))
            return 0;
        if (!rk__in_step(a))
            rk__repost(a); /* a worker was replaced: re-post what we owe */
        int fault = atomic_load(&rt->fault);
        if (!fault && (spins & 1023) == 1023)
            fault = rk_runtime_health(rt);
        if (fault) {
            rk__drain(rt, a->d2h, a); /* replies posted before the fault are good */
            uint16_t tag;
            if (rk__take(a, want, out))
                return 0;
            if (rk__fault_reply(a, want, fault, &tag)) {
                rk__fill_reply(a, tag, out);
                return 0;
            }
            return rk__fail(fault, "the %s backend failed: %s", rt->info.backend_name,
                            rk_strerror(fault));
        }
        if (want < 0 && a->awaiting == 0)
            return rk__fail(RK_EAGAIN, "actor %u has no request in flight", a->index);
        if (atomic_load(&rt->closing))
            return rk__fail(RK_ECLOSED, "the runtime is closing");
        if (deadline == 0) { /* a poll: cheap, it runs in every bridge loop */
            if ((++a->polls & 1023) == 0)
                rk__steal(a, rk__now_ns());
            return rk__fail_str(RK_ETIMEDOUT, "no reply ready (polled with timeout 0)");
        }
        /* the clock every 256th spin while busy-polling (a few us): a
         * deadline is milliseconds away, and a read (40-50 ns on the GPU
         * hosts' VMs) delays noticing the reply and so the next request
         * (device/README.md, "The host's turn") */
        const bool keep_polling = rk__backoff_poll(&b);
        if (keep_polling && (spins & 255) != 255)
            continue;
        int64_t now = rk__now_ns();
        if (now >= deadline)
            return rk__fail(RK_ETIMEDOUT, "no reply within the timeout (%u requests in flight)",
                            a->awaiting);
        rk__steal(a, now);
        if (!report_at)
            report_at = now + 10000000000ll;
        else if (now >= report_at && rk_log_get_level() >= RK_LOG_DEBUG) {
            rk__wait_report(a, want);
            report_at = INT64_MAX;
        }
        if (keep_polling)
            continue;
        int64_t sleep = rk__backoff_sleep_ns(&b);
        rk__sleep_for_reply(a, deadline - now < sleep ? deadline - now : sleep);
    }
}

int rk_actor_recv(rk_actor *a, rk_reply *out, int timeout_ms)
{
    if (!a || !out)
        return rk__fail(RK_EINVAL, "rk_actor_recv: %s is NULL", a ? "out" : "actor");
    return rk__wait(a, -1, out, rk__deadline(timeout_ms));
}

/* The next reply already here, without draining D2H: the stash first
 * (what rk_actor_call set aside: older), then the ready queue. */
static bool rk__take_ready(rk_actor *a, rk_reply *out)
{
    uint16_t tag;
    if (a->stash_n) {
        tag = a->stash[a->stash_head];
        a->stash_head = (a->stash_head + 1) % a->window;
        a->stash_n--;
    } else if (!rk__ready_pop(a, &tag)) {
        return false;
    }
    rk__fill_reply(a, tag, out);
    return true;
}

int rk_actor_recv_batch(rk_actor *a, rk_reply *out, int max, int timeout_ms)
{
    if (!a || !out || max <= 0)
        return rk__fail(RK_EINVAL, "rk_actor_recv_batch: %s", !a ? "actor is NULL"
                        : !out ? "out is NULL" : "max is not positive");
    int rc = rk__wait(a, -1, &out[0], rk__deadline(timeout_ms));
    if (rc)
        return rc;
    int k = 1;
    bool drained = false;
    while (k < max) {
        if (rk__take_ready(a, &out[k])) {
            k++;
            continue;
        }
        /* one more look at D2H (what arrived meanwhile), then stop */
        if (drained || !rk__drain(a->rt, a->d2h, a))
            break;
        drained = true;
    }
    return k;
}

void rk_reply_release_batch(rk_actor *a, rk_reply *r, int n)
{
    for (int i = 0; r && i < n; i++)
        rk_reply_release(a, &r[i]);
}

void rk_reply_release(rk_actor *a, rk_reply *r)
{
    if (!a || !r || r->tag_ >= a->window || rk__ld_relaxed(&a->pend[r->tag_].state) != RK__P_DONE)
        return;
    rk__pending_put(a, (uint16_t)r->tag_);
    r->data = NULL;
    r->len = 0;
}

void rk__runtime_fault(rk_runtime *rt, int code, const char *why)
{
    int expected = 0;
    if (atomic_compare_exchange_strong(&rt->fault, &expected, code < 0 ? code : -code))
        rk__log(RK__LOG_ERROR, "backend %s failed (%s): %s", rt->info.backend_name,
                rk_err_name(code), why ? why : "");
    rk__runtime_wake(rt);
}

void rk__d2h_lock(rk__d2h *d)
{
    atomic_fetch_add(&d->wanted, 1);
    pthread_mutex_lock(&d->lock);
    /* no chunk may be out: whoever takes the lock this way may touch any
     * pending record of d's actors. Routed ones are published here; those
     * still being routed are waited for (`wanted` keeps new claims away) */
    while (rk__publish_locked(d->rt, d), d->out) {
        pthread_mutex_unlock(&d->lock);
        sched_yield();
        pthread_mutex_lock(&d->lock);
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
