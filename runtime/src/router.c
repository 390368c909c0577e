/* router.c - replies out of the D2H ring: drain, route, wait, and what a
 * backend fault means for waiters.
 *
 * Replies are routed by whoever waits: an actor waiting for a reply takes
 * the D2H lock (trylock, never blocks on it) and claims the next chunk of
 * complete replies (up to RK__D2H_CHUNK). The claim reads each reply's
 * header, checks it against its request and reserves the reply's entry in
 * its owner's ready queue: claims are in D2H order, so each actor's replies
 * keep their order. Then, without the lock, the router copies each reply
 * into its pending record and fills the entry, which makes it the owner's
 * (each entry carries its index: no tail to publish in order). Meanwhile
 * other waiters claim and route the next chunks. The slots go back to the
 * producer (cons_head) in claim order, by whoever finds the next chunk
 * routed, without the lock. Owners that sleep are woken. With one actor
 * this is just "the caller polls D2H": no router thread, no extra hop, so
 * the round trip is producer -> consumer -> caller (a claim of one or two
 * replies with nothing else out is routed and given back under the lock). */
#include <limits.h>
#include <sched.h>
#include <string.h>

#include "actor.h"
#include "barrier.h"

/* Claims of up to this many replies with nothing else out are routed
 * under the lock (nothing to gain from letting go of it: the round
 * trip's case); they prefetch no records either */
#define RK__ROUTE_LOCKED_MAX 2u
/* how many slots ahead of the one it checks a claim prefetches */
#define RK__CLAIM_AHEAD 6u

/* Fills the ready-queue entry reserved for tag (rk__claim_reply_locked):
 * the owner pops it once it carries its index. release: the record's
 * fields before the entry; pairs with rk__ready_pop's load-acquire. */
static void rk__ready_put(rk_actor *a, uint64_t entry, uint16_t tag)
{
    rk__st_release(&a->ready[entry & a->ready_mask], RK__READY_ENTRY(entry, tag));
}

void rk__answer_locked(rk_runtime *rt, rk_actor *a, uint16_t tag, int status)
{
    rk__pending *p = &a->pend[tag];
    p->status = status;
    p->len = 0;
    atomic_fetch_add(&rt->n_replies, 1);
    atomic_fetch_add(&rt->n_errors, 1);
    if (p->strikes)
        rk__suspect_release(rt, RK__RUN_WORD(a->index, tag, p->id));
    rk__st_relaxed(&p->state, (uint8_t)RK__P_DONE);
    rk__ready_put(a, a->ready_res++, tag); /* no chunk is out: the next entry is its */
}

/* Checks a complete reply (header h, len bytes) against its request: the
 * actor it goes to, with *tag and the ready-queue entry reserved for it in
 * *entry, its record marked ROUTING; or NULL when it matches no request
 * (dropped, counted as an error) or its actor is closing (the record is
 * given back here: nobody waits for it). Caller holds d2h_lock. */
static rk_actor *rk__claim_reply_locked(rk_runtime *rt, const rk_msg_hdr *h, uint32_t len, uint16_t *tag,
                                        uint64_t *entry)
{
    if (len < sizeof *h) {
        rk__log(RK__LOG_ERROR, "D2H: reply of %u B is shorter than a header; dropped", len);
        atomic_fetch_add(&rt->n_errors, 1);
        return NULL;
    }
    rk_actor *a = rk__actor_at(rt, h->actor);
    /* acquire: pairs with rk__post's store-release of SENT, so the id and
     * the rest of the record are the ones the owner wrote for it */
    if (!a || h->tag >= a->window || rk__ld_acquire(&a->pend[h->tag].state) != RK__P_SENT ||
        a->pend[h->tag].id != h->id) {
        rk__log(RK__LOG_ERROR, "D2H: reply id %llu for actor %u tag %u matches no request; dropped",
                (unsigned long long)h->id, h->actor, h->tag);
        atomic_fetch_add(&rt->n_errors, 1);
        return NULL;
    }
    rk__pending *p = &a->pend[h->tag];
    if (a->closing) { /* (closing is set under rk__d2h_lock: never while a chunk is out) */
        if (p->strikes)
            rk__suspect_release(rt, RK__RUN_WORD(a->index, h->tag, p->id));
        if (h->status)
            atomic_fetch_add(&rt->n_errors, 1);
        rk__pending_put(a, h->tag);
        if (atomic_load(&a->inflight) == 0)
            rk__actor_reap(a);
        return NULL;
    }
    /* relaxed: a duplicate of this reply now matches nothing; the owner
     * learns of it through the entry */
    rk__st_relaxed(&p->state, (uint8_t)RK__P_ROUTING);
    *tag = h->tag;
    *entry = a->ready_res++;
    return a;
}

/* Copies a claimed reply into its ROUTING record and makes it DONE.
 * Without d2h_lock: the record is its router's until it fills the entry,
 * because whoever else writes a record (the supervisor, a closing actor, a
 * fault reply) takes rk__d2h_lock, which waits until no chunk is out. */
static void rk__complete(rk_runtime *rt, rk_actor *a, uint16_t tag, const uint8_t *msg, uint32_t len, int rc)
{
    rk_msg_hdr h;
    rk__pending *p = &a->pend[tag];
    rk__tsan_acquire(p); /* the worker-process edge (barrier.h) */
    if (rc) { /* cannot happen to a complete slot: still, the owner gets an answer */
        h.status = -RK_EPROTO, h.len = 0;
    } else {
        memcpy(&h, msg, sizeof h);
        if (p->arena_len) {
            if (h.len > p->arena_len - (p->out_off - p->arena_off)) /* reply longer than reserved */
                h.status = -RK_EPROTO, h.len = 0;
        } else if (h.len > len - (uint32_t)sizeof h) {
            h.status = -RK_EPROTO, h.len = 0;
        } else {
            memcpy(p->inline_buf, msg + sizeof h, h.len);
        }
    }
    p->status = h.status;
    p->len = h.len;
    if (p->strikes)
        rk__suspect_release(rt, RK__RUN_WORD(a->index, tag, p->id));
    if (p->status)
        atomic_fetch_add(&rt->n_errors, 1);
    rk__st_relaxed(&p->state, (uint8_t)RK__P_DONE);
}

/* Claims the complete replies from d2h_claim on, up to RK__D2H_CHUNK, as
 * the chunk of the next ticket, and checks each against its request; NULL
 * when none is complete or RK__D2H_CHUNKS chunks are out. Caller holds
 * d2h_lock. *rc: -RK_EAGAIN, or the ring error that stopped the claim (a
 * slot that claims more than it holds). */
static rk__d2h_chunk *rk__claim_locked(rk_runtime *rt, int *rc)
{
    rk_ring *d = rt->d2h;
    *rc = -RK_EAGAIN;
    const uint64_t t = rt->d2h_tickets;
    /* acquire: the chunk of ticket t - RK__D2H_CHUNKS is given back, its
     * slot in d2h_chunks free; pairs with rk__publish's CAS */
    if (t - atomic_load_explicit(&rt->d2h_published, memory_order_acquire) == RK__D2H_CHUNKS)
        return NULL;
    /* relaxed: only the holder of d2h_lock moves it (a self-test and a
     * rings reset set it too, with no chunk out) */
    const uint64_t pos = atomic_load_explicit(&rt->d2h_claim, memory_order_relaxed);
    rk__d2h_chunk *c = &rt->d2h_chunks[t % RK__D2H_CHUNKS];
    /* Each slot and each record is a miss (the producer's writes took the
     * slot's lines, the owner's its record's). One after another, they
     * were most of the time d2h_lock was held, and the claims were what
     * 4 or 8 pipelining threads queued for (H100 host: 8-10 M replies/s
     * whatever the thread count, D2H ~90 % full). So the slots are
     * prefetched a few ahead, and the records all at once. */
    uint32_t n = 0, len[RK__D2H_CHUNK];
    while (n < RK__D2H_CHUNK && (*rc = rk__ring_complete_at(d, pos + n, &len[n])) == 0) {
        if (n == 0)
            for (uint32_t k = 1; k < RK__CLAIM_AHEAD; k++)
                rk__ring_prefetch(d, pos + k);
        rk__ring_prefetch(d, pos + n + RK__CLAIM_AHEAD);
        n++;
    }
    if (!n)
        return NULL;
    rk_msg_hdr h[RK__D2H_CHUNK];
    for (uint32_t k = 0; k < n; k++) {
        rk__ring_head_at(d, pos + k, &h[k], sizeof h[k]);
        rk_actor *a = n > RK__ROUTE_LOCKED_MAX && len[k] >= sizeof h[k] ? rk__actor_at(rt, h[k].actor) : NULL;
        if (a && h[k].tag < a->window) {
            __builtin_prefetch(&a->pend[h[k].tag], 1);
            __builtin_prefetch(&a->ready_res, 1); /* the last claimer's */
        }
    }
    for (uint32_t k = 0; k < n; k++)
        c->act[k] = rk__claim_reply_locked(rt, &h[k], len[k], &c->tag[k], &c->entry[k]);
    c->pos = pos;
    c->n = n;
    c->ticket = t;
    atomic_store_explicit(&c->end, pos + n, memory_order_relaxed); /* read by rk__publish */
    rt->d2h_tickets = t + 1;
    atomic_store_explicit(&rt->d2h_claim, pos + n, memory_order_relaxed);
    /* the first reply after a worker change ends the recovery's clock */
    int64_t t0 = atomic_load_explicit(&rt->recover_t0, memory_order_relaxed);
    if (t0 && atomic_compare_exchange_strong(&rt->recover_t0, &t0, 0)) {
        rt->first_reply_t0 = t0;
        rt->first_reply_at = rk__now_ns();
        atomic_store(&rt->last_recovery_ns, rt->first_reply_at - t0);
    }
    return c;
}

/* Copies a claimed chunk's replies into their records and fills their
 * entries (d2h_lock not needed: the positions and the records are its
 * claimer's until then). Returns how many went to another actor than
 * self. */
static int rk__route_chunk(rk_runtime *rt, const rk__d2h_chunk *c, const rk_actor *self)
{
    _Alignas(16) uint8_t msg[RK_RING_SLOT_MAX / 2];
    int others = 0;
    /* what it writes, all at once (a miss each: the owners' lines) */
    for (uint32_t k = 0; k < c->n && c->n > RK__ROUTE_LOCKED_MAX; k++) {
        const rk_actor *a = c->act[k];
        if (a) {
            __builtin_prefetch(rk__inline_buf(a, c->tag[k]), 1);
            __builtin_prefetch(&a->ready[c->entry[k] & a->ready_mask], 1);
        }
    }
    for (uint32_t k = 0; k < c->n; k++) {
        rk_actor *a = c->act[k];
        if (!a)
            continue;
        uint32_t len = 0;
        /* complete when claimed: the producer does not touch it again
         * before cons_head passes it */
        int rc = rk__ring_peek_at(rt->d2h, c->pos + k, msg, sizeof msg, &len);
        rk__complete(rt, a, c->tag[k], msg, len, rc);
        rk__ready_put(a, c->entry[k], c->tag[k]);
        others += a != self;
    }
    /* counted here, not in the claim: an atomic add on a line that moves
     * between claimers was a fifth of the time d2h_lock was held */
    atomic_fetch_add(&rt->n_replies, (uint64_t)c->n);
    return others;
}

/* Moves cons_head forward to end (never back: chunks are given back by
 * several threads, and one that gave back a later chunk covered this one).
 * release: the slots are read before the producer may reuse them; pairs
 * with its load-acquire of cons_head. */
static void rk__give_back(rk_ring *d, uint64_t end)
{
    uint64_t cur = rk__ld_relaxed(&d->cons_head);
    while ((int64_t)(end - cur) > 0 &&
           !__atomic_compare_exchange_n(&d->cons_head, &cur, end, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
        ;
}

/* Gives the routed chunks' slots back to the producer, in claim order:
 * whoever finds the next ticket's chunk routed takes it (CAS), so nobody
 * waits for a slower router. Lock-free. */
static void rk__publish(rk_runtime *rt)
{
    for (;;) {
        /* seq_cst: against rk__chunk_routed's store of routed (Dekker):
         * either its router sees its turn here, or the publisher before it
         * sees the chunk routed */
        uint64_t t = atomic_load(&rt->d2h_published);
        const rk__d2h_chunk *c = &rt->d2h_chunks[t % RK__D2H_CHUNKS];
        if (atomic_load(&c->routed) != t + 1)
            return;
        /* before the CAS: after it the slot may be claimed again */
        const uint64_t end = atomic_load_explicit(&c->end, memory_order_relaxed);
        if (atomic_compare_exchange_strong(&rt->d2h_published, &t, t + 1))
            rk__give_back(rt->d2h, end);
    }
}

/* A routed chunk: marked so, and given back by whoever's turn it is.
 * seq_cst: Dekker with rk__publish's load of d2h_published; it also
 * releases this router's reads of the slots to the publisher. */
static void rk__chunk_routed(rk_runtime *rt, rk__d2h_chunk *c)
{
    atomic_store(&c->routed, c->ticket + 1);
    rk__publish(rt);
}

/* A chunk claimed with nothing else out, routed under d2h_lock: given
 * back directly (no other router can publish before it, and no claim can
 * follow it until the lock is let go). */
static void rk__chunk_routed_alone(rk_runtime *rt, const rk__d2h_chunk *c)
{
    atomic_store_explicit(&rt->d2h_published, c->ticket + 1, memory_order_release);
    rk__give_back(rt->d2h, c->pos + c->n);
}

int rk__drain_some(rk_runtime *rt, const rk_actor *self, bool yield, int *others, int *rc)
{
    int n = 0;
    *others = 0;
    /* holding the lock throughout: claim and route chunk after chunk (the
     * supervisor's drain; no chunk is out when it runs) */
    for (rk__d2h_chunk *c; (c = rk__claim_locked(rt, rc)) != NULL;) {
        *others += rk__route_chunk(rt, c, self);
        n += (int)c->n;
        rk__chunk_routed_alone(rt, c);
        if (*rc != 0 && *rc != -RK_EAGAIN)
            break;
        /* relaxed: a late look costs the blocked thread one more chunk */
        if (yield && (atomic_load_explicit(&rt->d2h_wanted, memory_order_relaxed) || (uint32_t)n >= rt->d2h->slots)) {
            *rc = -RK_EAGAIN;
            break;
        }
    }
    return n;
}

int rk__drain(rk_runtime *rt, const rk_actor *self)
{
    /* nothing there: no lock taken (the waiter's loop asks this at every
     * spin; a trylock and unlock are two locked instructions). relaxed:
     * a stale position costs one more look */
    if (!rk__ring_ready_at(rt->d2h, atomic_load_explicit(&rt->d2h_claim, memory_order_relaxed)))
        return 0;
    /* relaxed: d2h_busy and d2h_wanted are hints; a stale value costs one
     * more look or one failed trylock. Reading them first keeps the
     * waiters off the lock's line while a router claims (with every
     * waiter trying the lock, the trylocks took 37 % of 8 pipelining
     * threads' time on an H100 host) */
    if (atomic_load_explicit(&rt->d2h_busy, memory_order_relaxed) ||
        atomic_load_explicit(&rt->d2h_wanted, memory_order_relaxed) || pthread_mutex_trylock(&rt->d2h_lock) != 0)
        return 0;
    atomic_store_explicit(&rt->d2h_busy, true, memory_order_relaxed);
    int rc;
    const bool alone = rt->d2h_tickets == atomic_load_explicit(&rt->d2h_published, memory_order_acquire);
    rk__d2h_chunk *c = rk__claim_locked(rt, &rc);
    if (!c) {
        atomic_store_explicit(&rt->d2h_busy, false, memory_order_relaxed);
        pthread_mutex_unlock(&rt->d2h_lock);
        if (rc != -RK_EAGAIN)
            rk__runtime_fault(rt, rc, rk_last_detail());
        return 0;
    }
    const int n = (int)c->n;
    int others;
    if (alone && c->n <= RK__ROUTE_LOCKED_MAX) {
        others = rk__route_chunk(rt, c, self);
        rk__chunk_routed_alone(rt, c);
        atomic_store_explicit(&rt->d2h_busy, false, memory_order_relaxed);
        pthread_mutex_unlock(&rt->d2h_lock);
    } else {
        /* route without the lock, so that other waiters claim and route
         * the next chunks meanwhile (one router at a time topped out at
         * ~7 M replies/s on an H100 host, however many threads waited:
         * routing another actor's reply moves that actor's record and
         * queue lines from its core) */
        atomic_store_explicit(&rt->d2h_busy, false, memory_order_relaxed);
        pthread_mutex_unlock(&rt->d2h_lock);
        others = rk__route_chunk(rt, c, self);
        rk__chunk_routed(rt, c);
    }
    if (others)
        rk__runtime_wake(rt);
    return n;
}

void rk__drain_locked(rk_runtime *rt)
{
    int others = 0, rc;
    rk__drain_some(rt, NULL, false, &others, &rc);
    if (rc != -RK_EAGAIN) /* a torn or corrupt slot of a dead producer: skipped by the reset */
        rk__log(RK__LOG_WARN, "D2H drain after a worker fault stopped: %s", rk_last_detail());
}

static bool rk__ready_pop(rk_actor *a, uint16_t *tag)
{
    /* acquire: pairs with rk__ready_put's store-release */
    const uint64_t e = rk__ld_acquire(&a->ready[a->ready_head & a->ready_mask]);
    if (e != RK__READY_ENTRY(a->ready_head, (uint16_t)e))
        return false; /* not filled yet (it holds an older lap, or nothing) */
    *tag = (uint16_t)e;
    a->ready_head++;
    a->awaiting--;
    return true;
}

/* Prefetches the records of the next (up to n) filled entries, and their
 * inline buffers: a miss each (their router wrote them), taken together
 * instead of one by one, for writing (the record is written when it is
 * released, the buffer when the tag is used again). */
static void rk__ready_prefetch(const rk_actor *a, uint32_t n)
{
    for (uint64_t i = a->ready_head; i < a->ready_head + n; i++) {
        /* relaxed: only a hint; the pop load-acquires it */
        const uint64_t e = rk__ld_relaxed(&a->ready[i & a->ready_mask]);
        if (e != RK__READY_ENTRY(i, (uint16_t)e))
            return;
        __builtin_prefetch(&a->pend[(uint16_t)e], 1);
        __builtin_prefetch(rk__inline_buf(a, (uint16_t)e), 1);
    }
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
        rk__d2h_lock(a->rt); /* against a late router */
        bool still = rk__ld_relaxed(&a->pend[i].state) == RK__P_SENT;
        if (still) {
            rk__st_relaxed(&a->pend[i].state, (uint8_t)RK__P_DONE);
            a->pend[i].status = fault;
            a->pend[i].len = 0;
            atomic_fetch_add(&a->rt->n_errors, 1);
        }
        pthread_mutex_unlock(&a->rt->d2h_lock);
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

/* Sleeps on the D2H doorbell: the CPU consumer (in this process or a
 * worker) and routers working for other actors ring it; a GPU producer
 * cannot, so the sleep is bounded by the caller (50 us .. 1 ms). */
static void rk__sleep_for_reply(rk_actor *a, int64_t sleep_ns)
{
    rk_ring *d2h = a->rt->d2h;
    __atomic_fetch_add(&d2h->cons_sleeping, 1u, __ATOMIC_RELAXED);
    uint32_t seq = rk__ld_acquire(&d2h->doorbell);
    /* seq_cst: pairs with rk__ring_wake's fence (Dekker): either we see
     * the reply here, or the waker sees us sleeping */
    rk__fence_seq_cst();
    const uint64_t e = rk__ld_acquire(&a->ready[a->ready_head & a->ready_mask]);
    bool pending = rk__ring_ready_at(d2h, atomic_load_explicit(&a->rt->d2h_claim, memory_order_relaxed)) ||
                   e == RK__READY_ENTRY(a->ready_head, (uint16_t)e);
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
            "%#llx, hold %lld; H2D %llu..%llu, D2H %llu..%llu; heartbeat %llu, state %d",
            a->index, want, a->awaiting, a->gen, atomic_load(&rt->gen), rk__ld_relaxed(&reg->gen),
            (unsigned long long)atomic_load(&rt->suspect), (long long)atomic_load(&rt->suspect_hold),
            (unsigned long long)rk__ld_relaxed(&rt->h2d->cons_head),
            (unsigned long long)rk__ld_relaxed(&rt->h2d->prod_tail),
            (unsigned long long)rk__ld_relaxed(&rt->d2h->cons_head),
            (unsigned long long)rk__ld_relaxed(&rt->d2h->prod_tail),
            (unsigned long long)rk__ld_relaxed(&reg->heartbeat), rk__ld_relaxed(&reg->state));
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
        if (rk__drain(rt, a) && rk__take(a, want, out))
            return 0;
        if (!rk__in_step(a))
            rk__repost(a); /* a worker was replaced: re-post what we owe */
        int fault = atomic_load(&rt->fault);
        if (!fault && (spins & 1023) == 1023)
            fault = rk_runtime_health(rt);
        if (fault) {
            rk__drain(rt, a); /* replies posted before the fault are good */
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
        if (deadline == 0) /* a poll: cheap, it runs in every bridge loop */
            return rk__fail_str(RK_ETIMEDOUT, "no reply ready (polled with timeout 0)");
        /* the clock every 16th spin while busy-polling: a deadline is
         * milliseconds away, and each read would delay noticing the reply */
        const bool keep_polling = rk__backoff_poll(&b);
        if (keep_polling && (spins & 15) != 15)
            continue;
        int64_t now = rk__now_ns();
        if (now >= deadline)
            return rk__fail(RK_ETIMEDOUT, "no reply within the timeout (%u requests in flight)",
                            a->awaiting);
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
    rk__ready_prefetch(a, (uint32_t)max - 1);
    int k = 1;
    bool drained = false;
    while (k < max) {
        if (rk__take_ready(a, &out[k])) {
            k++;
            continue;
        }
        /* one more look at D2H (what arrived meanwhile), then stop */
        if (drained || !rk__drain(a->rt, a))
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

void rk__d2h_lock(rk_runtime *rt)
{
    atomic_fetch_add(&rt->d2h_wanted, 1);
    pthread_mutex_lock(&rt->d2h_lock);
    /* no chunk may be out: whoever takes the lock this way may touch any
     * pending record. Routers finish without the lock (d2h_wanted keeps
     * new claims away). seq_cst (acquire would do): pairs with the
     * publishers' CAS of d2h_published, so their records are visible here.
     * (cons_head may still lag by a chunk whose CAS is on its way: only
     * forward, so a reset's jump wins: supervisor.c) */
    while (rt->d2h_tickets != atomic_load(&rt->d2h_published))
        sched_yield();
    atomic_fetch_sub(&rt->d2h_wanted, 1);
}

void rk__runtime_wake(rk_runtime *rt) { rk__ring_wake(rt->d2h); }
