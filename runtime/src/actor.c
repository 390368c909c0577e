/* actor.c - host actors: send into H2D, route replies out of D2H.
 *
 * Replies are routed by whoever waits: an actor waiting for a reply takes
 * the D2H lock (trylock, never blocks on it), drains the ring and puts each
 * reply into its owner's ready queue, waking owners that sleep. With one
 * actor this is just "the caller polls D2H": no router thread, no extra
 * hop, so the round trip is producer -> consumer -> caller.
 *
 * Per actor, a window of pending-request records (indexed by the tag the
 * message carries) holds what a reply needs: its id, its arena block and a
 * buffer for an inline reply. So a reply never allocates, and the number of
 * replies an actor can be owed is bounded by its window.
 */
#include <stdlib.h>
#include <string.h>

#include "barrier.h"
#include "internal.h"

enum { RK__P_FREE = 0, RK__P_SENT = 1, RK__P_DONE = 2, RK__P_STAGED = 3 };

struct rk__pending {
    uint64_t id;
    uint64_t arena_off; /* request + reply block in the arena ... */
    size_t arena_len;   /* ... or 0 when both travel inline */
    uint64_t out_off;
    size_t out_cap;
    int32_t status;
    uint32_t len;
    uint16_t type;
    uint8_t state; /* RK__P_*: atomic (relaxed) because the owner peeks at it
                    * while a router may set it under d2h_lock; the data
                    * fields are handed over by the ready queue's
                    * release/acquire */
    uint8_t *inline_buf;
};

struct rk_actor {
    rk_runtime *rt;
    uint16_t index;
    uint32_t window;
    rk__pending *pend;
    uint8_t *inline_bufs;
    /* free tags: owner-private stack */
    uint16_t *free_tags;
    uint32_t n_free;
    /* ready queue: tags of replied requests. Single producer at a time (the
     * router, serialised by d2h_lock), single consumer (the owner). */
    uint16_t *ready;
    uint32_t ready_mask;
    uint64_t ready_tail; /* router: store-release; owner: load-acquire */
    uint64_t ready_head; /* owner only */
    /* replies rk_actor_call set aside for rk_actor_recv: owner-private FIFO */
    uint16_t *stash;
    uint32_t stash_head, stash_n;
    uint64_t next_id;
    uint32_t awaiting;         /* owner-private: sent, reply not yet popped */
    _Atomic uint32_t inflight; /* records in use: sent and not yet released */
    bool closing; /* written under d2h_lock */
};

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
    free(a);
}

int rk_actor_open(rk_runtime *rt, rk_actor **out)
{
    if (!rt || !out)
        return rk__fail(RK_EINVAL, "rk_actor_open: %s is NULL", rt ? "out" : "runtime");
    *out = NULL;
    if (atomic_load(&rt->closing))
        return rk__fail(RK_ECLOSED, "rk_actor_open: the runtime is closing");
    rk_actor *a = calloc(1, sizeof *a);
    if (!a)
        return rk__fail(RK_ENOMEM, "rk_actor_open: out of memory");
    a->rt = rt;
    a->window = rt->cfg.actor_window;
    uint32_t qcap = rk__pow2_at_least(a->window);
    /* 16-byte stride: reply data is as aligned as malloc's */
    size_t ibuf = (rk_ring_msg_max(rt->d2h) + 15u) & ~(size_t)15u;
    a->pend = calloc(a->window, sizeof *a->pend);
    a->inline_bufs = malloc((size_t)a->window * ibuf);
    a->free_tags = malloc(a->window * sizeof *a->free_tags);
    a->ready = malloc(qcap * sizeof *a->ready);
    a->stash = malloc(a->window * sizeof *a->stash);
    if (!a->pend || !a->inline_bufs || !a->free_tags || !a->ready || !a->stash) {
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
    /* release: a router that finds the actor sees it initialised */
    __atomic_store_n(&rt->actors[i], a, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&rt->actors_lock);
    *out = a;
    return 0;
}

/* Gives a pending record back (owner, or the router for a closing actor). */
static void rk__pending_put(rk_actor *a, uint16_t tag)
{
    rk__pending *p = &a->pend[tag];
    if (p->arena_len)
        rk__arena_free(&a->rt->arena, p->arena_off, p->arena_len);
    p->arena_len = 0;
    rk__st_relaxed(&p->state, (uint8_t)RK__P_FREE);
    a->free_tags[a->n_free++] = tag;
    atomic_fetch_sub(&a->inflight, 1);
}

/* Removes a closing actor whose last reply came back. Caller holds d2h_lock. */
static void rk__actor_reap(rk_actor *a)
{
    rk_runtime *rt = a->rt;
    pthread_mutex_lock(&rt->actors_lock);
    __atomic_store_n(&rt->actors[a->index], NULL, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&rt->actors_lock);
    rk__actor_free(a);
}

void rk_actor_close(rk_actor *a)
{
    if (!a)
        return;
    rk_runtime *rt = a->rt;
    /* d2h_lock keeps routers away while the replies are taken back */
    pthread_mutex_lock(&rt->d2h_lock);
    a->closing = true;
    for (uint32_t i = 0; i < a->window; i++) {
        uint8_t st = rk__ld_relaxed(&a->pend[i].state);
        if (st == RK__P_DONE || st == RK__P_STAGED)
            rk__pending_put(a, (uint16_t)i);
    }
    /* a stopped backend answers nothing more: drop what it still owed */
    if (atomic_load(&rt->closing))
        for (uint32_t i = 0; i < a->window; i++)
            if (rk__ld_relaxed(&a->pend[i].state) == RK__P_SENT)
                rk__pending_put(a, (uint16_t)i);
    if (atomic_load(&a->inflight) == 0)
        rk__actor_reap(a);
    /* else: the router reaps it when the last reply arrives */
    pthread_mutex_unlock(&rt->d2h_lock);
}

uint32_t rk_actor_inflight(const rk_actor *a) { return a->awaiting + a->stash_n; }

/* Routes one reply to its actor. Caller holds d2h_lock. Returns the actor
 * it went to, or NULL when it was dropped. */
static rk_actor *rk__route(rk_runtime *rt, const uint8_t *msg, uint32_t len)
{
    rk_msg_hdr h;
    if (len < sizeof h) {
        rk__log(RK__LOG_ERROR, "D2H: reply of %u B is shorter than a header; dropped", len);
        atomic_fetch_add(&rt->n_errors, 1);
        return NULL;
    }
    memcpy(&h, msg, sizeof h);
    rk_actor *a = h.actor < rt->n_actor_slots
                      ? __atomic_load_n(&rt->actors[h.actor], __ATOMIC_ACQUIRE)
                      : NULL;
    if (!a || h.tag >= a->window || rk__ld_relaxed(&a->pend[h.tag].state) != RK__P_SENT || a->pend[h.tag].id != h.id) {
        rk__log(RK__LOG_ERROR, "D2H: reply id %llu for actor %u tag %u matches no request; dropped",
                (unsigned long long)h.id, h.actor, h.tag);
        atomic_fetch_add(&rt->n_errors, 1);
        return NULL;
    }
    rk__pending *p = &a->pend[h.tag];
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
    if (p->status)
        atomic_fetch_add(&rt->n_errors, 1);
    atomic_fetch_add(&rt->n_replies, 1);
    rk__st_relaxed(&p->state, (uint8_t)RK__P_DONE);
    if (a->closing) {
        rk__pending_put(a, h.tag);
        if (atomic_load(&a->inflight) == 0)
            rk__actor_reap(a);
        return NULL;
    }
    a->ready[a->ready_tail & a->ready_mask] = h.tag;
    /* release: the pending record is complete before the owner sees the
     * tag; pairs with the owner's load-acquire of ready_tail */
    rk__st_release(&a->ready_tail, a->ready_tail + 1);
    return a;
}

/* Drains D2H if no one else is; returns the number of replies routed. */
static int rk__drain(rk_runtime *rt, const rk_actor *self)
{
    if (pthread_mutex_trylock(&rt->d2h_lock) != 0)
        return 0;
    _Alignas(16) uint8_t msg[RK_RING_SLOT_MAX / 2];
    uint32_t len;
    int n = 0, others = 0, rc;
    while ((rc = rk_ring_sc_peek(rt->d2h, msg, sizeof msg, &len)) == 0) {
        rk_ring_sc_release(rt->d2h);
        others += rk__route(rt, msg, len) != self;
        n++;
    }
    pthread_mutex_unlock(&rt->d2h_lock);
    if (rc != -RK_EAGAIN)
        rk__runtime_fault(rt, rc, rk_last_detail());
    if (others)
        rk__runtime_wake(rt);
    return n;
}

static bool rk__ready_pop(rk_actor *a, uint16_t *tag)
{
    /* acquire: pairs with the router's store-release of ready_tail */
    if (a->ready_head == rk__ld_acquire(&a->ready_tail))
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
}

/* After a backend fault, the owner answers its own unanswered requests
 * with the fault code: every request still gets exactly one reply. */
static bool rk__fault_reply(rk_actor *a, int want, int fault, uint16_t *tag)
{
    for (uint32_t i = 0; i < a->window; i++) {
        if (rk__ld_relaxed(&a->pend[i].state) != RK__P_SENT || (want >= 0 && (int)i != want))
            continue;
        pthread_mutex_lock(&a->rt->d2h_lock); /* against a late router */
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

/* Waits for a reply: the next one (want < 0) or the one with tag `want`
 * (others go to the stash). */
static int rk__wait(rk_actor *a, int want, rk_reply *out, int64_t deadline)
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
    for (uint32_t spins = 0;; spins++) {
        uint16_t tag;
        for (int pass = 0; pass < 2; pass++) {
            while (rk__ready_pop(a, &tag)) {
                if (want < 0 || tag == want) {
                    rk__fill_reply(a, tag, out);
                    return 0;
                }
                a->stash[(a->stash_head + a->stash_n) % a->window] = tag;
                a->stash_n++;
            }
            if (pass == 0 && rk__drain(rt, a) == 0)
                break;
        }
        int fault = atomic_load(&rt->fault);
        if (!fault && (spins & 1023) == 1023)
            fault = rk_runtime_health(rt);
        if (fault) {
            rk__drain(rt, a); /* replies posted before the fault are good */
            if (rk__ready_pop(a, &tag) && (want < 0 || tag == want)) {
                rk__fill_reply(a, tag, out);
                return 0;
            }
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
        int64_t now = rk__now_ns();
        if (now >= deadline)
            return rk__fail(RK_ETIMEDOUT, "no reply within the timeout (%u requests in flight)",
                            a->awaiting);
        if (rk__backoff_poll(&b))
            continue;
        /* block: the CPU backend (or another actor's router) wakes us; a
         * GPU producer cannot, so the sleep is bounded (50 us .. 1 ms) */
        int64_t sleep = rk__backoff_sleep_ns(&b);
        if (deadline - now < sleep)
            sleep = deadline - now;
        atomic_fetch_add(&rt->sleepers, 1);
        uint32_t seq = rk__ld_acquire(&rt->wake_seq);
        /* seq_cst: pairs with rk__runtime_wake's fence (Dekker) */
        rk__fence_seq_cst();
        bool pending = rk__ring_ready(rt->d2h) || a->ready_head != rk__ld_acquire(&a->ready_tail);
        if (!pending)
            rk__futex_wait(&rt->wake_seq, seq, sleep);
        atomic_fetch_sub(&rt->sleepers, 1);
    }
}

int rk_actor_recv(rk_actor *a, rk_reply *out, int timeout_ms)
{
    if (!a || !out)
        return rk__fail(RK_EINVAL, "rk_actor_recv: %s is NULL", a ? "out" : "actor");
    return rk__wait(a, -1, out, rk__deadline(timeout_ms));
}

void rk_reply_release(rk_actor *a, rk_reply *r)
{
    if (!a || !r || r->tag_ >= a->window || rk__ld_relaxed(&a->pend[r->tag_].state) != RK__P_DONE)
        return;
    rk__pending_put(a, (uint16_t)r->tag_);
    r->data = NULL;
    r->len = 0;
}

/* Send, part 1: validates, takes a pending record and reserves where the
 * payload goes: the record's staging buffer when it travels inline, the
 * arena otherwise. Returns the tag; *dst is where the caller writes the
 * `len` payload bytes. */
static int rk__prepare(rk_actor *a, uint16_t type, size_t len, size_t reply_cap, int64_t deadline,
                       uint16_t *tag_out, uint8_t **dst)
{
    if (!a)
        return rk__fail(RK_EINVAL, "send: actor is NULL");
    rk_runtime *rt = a->rt;
    if (type == RK_OP_NOP || (type > RK_OP_FAULT && type < RK_OP_USER))
        return rk__fail(RK_EINVAL, "send: message type %u is reserved", type);
    if (type >= RK_OP_USER && !rk__find_actor_def(rt, type))
        return rk__fail(RK_ENOTSUP, "send: no actor is registered for message type %u", type);
    if (len > rt->cfg.max_payload)
        return rk__fail(RK_EMSGSIZE, "send: payload %zu B exceeds max_payload %zu B", len,
                        rt->cfg.max_payload);
    if (type == RK_OP_VADD && (len == 0 || len % 8))
        return rk__fail(RK_EINVAL,
                        "vadd: payload %zu B is not two equal non-empty float32 vectors (a || b)",
                        len);
    if (atomic_load(&rt->closing))
        return rk__fail(RK_ECLOSED, "send: the runtime is closing");
    int fault = atomic_load(&rt->fault);
    if (fault)
        return rk__fail(fault, "send: the %s backend failed: %s", rt->info.backend_name,
                        rk_strerror(fault));
    if (!a->n_free)
        return rk__fail(RK_EBUSY, "send: actor has %u requests in flight, its window (actor_window)",
                        a->window);
    size_t out_cap = rk__reply_cap(rt, type, len, reply_cap);
    if (out_cap > rt->cfg.max_payload)
        return rk__fail(RK_EMSGSIZE, "send: reply capacity %zu B exceeds max_payload %zu B",
                        out_cap, rt->cfg.max_payload);

    uint16_t tag = a->free_tags[--a->n_free];
    rk__pending *p = &a->pend[tag];
    const uint32_t inline_max = rk_ring_msg_max(rt->h2d) - (uint32_t)sizeof(rk_msg_hdr);
    p->type = type;
    p->len = (uint32_t)len;
    p->arena_len = 0;
    if (len > inline_max || out_cap > inline_max) {
        size_t in_sz = (len + RK_ARENA_ALIGN - 1) / RK_ARENA_ALIGN * RK_ARENA_ALIGN;
        size_t out_sz = (out_cap + RK_ARENA_ALIGN - 1) / RK_ARENA_ALIGN * RK_ARENA_ALIGN;
        uint64_t off;
        int rc = rk__arena_alloc(&rt->arena, in_sz + out_sz, deadline, &off);
        if (rc) {
            a->free_tags[a->n_free++] = tag;
            atomic_fetch_add(&rt->n_errors, 1);
            return rc;
        }
        p->arena_off = off;
        p->arena_len = in_sz + out_sz;
        p->out_off = off + in_sz;
        p->out_cap = out_cap;
        *dst = rt->arena.base + off;
    } else {
        *dst = p->inline_buf; /* staged here, copied into the slot at post */
    }
    atomic_fetch_add(&a->inflight, 1);
    rk__st_relaxed(&p->state, (uint8_t)RK__P_STAGED);
    *tag_out = tag;
    return 0;
}

/* Send, part 2: builds the ring message for a prepared record and
 * enqueues it, waiting until deadline for ring space. On failure the
 * record (and its arena block) is given back. */
static int rk__post(rk_actor *a, uint16_t tag, int64_t deadline, uint64_t *id_out)
{
    rk_runtime *rt = a->rt;
    rk__pending *p = &a->pend[tag];
    _Alignas(16) uint8_t msg[RK_RING_SLOT_MAX / 2];
    rk_msg_hdr h = {.type = p->type, .actor = a->index, .tag = tag, .id = ++a->next_id,
                    .len = p->len};
    uint32_t mlen = sizeof h;
    if (p->arena_len) {
        rk_arena_ref ref = {.in_off = p->arena_off, .out_off = p->out_off, .out_cap = p->out_cap};
        h.flags = RK_MSG_ARENA;
        memcpy(msg + mlen, &ref, sizeof ref);
        mlen += sizeof ref;
    } else {
        memcpy(msg + mlen, p->inline_buf, p->len);
        mlen += p->len;
    }
    memcpy(msg, &h, sizeof h);
    p->id = h.id;
    rk__st_relaxed(&p->state, (uint8_t)RK__P_SENT);

    rk__backoff b;
    rk__backoff_reset(&b);
    int rc;
    while ((rc = rk_ring_mp_enqueue(rt->h2d, msg, mlen)) == -RK_EAGAIN) {
        /* H2D full: help drain D2H (the consumer may be stuck on a full
         * D2H that nobody else drains), then wait */
        rk__drain(rt, a);
        int fault = atomic_load(&rt->fault);
        if (fault || rk__now_ns() >= deadline) {
            rk__pending_put(a, tag);
            atomic_fetch_add(&rt->n_errors, 1);
            if (fault)
                return rk__fail(fault, "send: the %s backend failed: %s", rt->info.backend_name,
                                rk_strerror(fault));
            return rk__fail(RK_ETIMEDOUT, "send: the H2D ring stayed full (%u slots) for the timeout",
                            rt->h2d->slots);
        }
        if (!rk__backoff_poll(&b))
            rk__sleep_ns(rk__backoff_sleep_ns(&b));
    }
    if (rc) {
        rk__pending_put(a, tag);
        return rc;
    }
    a->awaiting++;
    atomic_fetch_add(&rt->n_requests, 1);
    if (id_out)
        *id_out = h.id;
    return 0;
}

static int rk__send(rk_actor *a, uint16_t type, const rk_iov *iov, int iovcnt, size_t reply_cap,
                    uint64_t *id_out, int timeout_ms, uint16_t *tag_out)
{
    if (iovcnt < 0 || (iovcnt > 0 && !iov))
        return rk__fail(RK_EINVAL, "send: iovcnt %d with iov %p", iovcnt, (const void *)iov);
    size_t len = 0;
    for (int i = 0; i < iovcnt; i++) {
        if (!iov[i].base && iov[i].len)
            return rk__fail(RK_EINVAL, "send: iov[%d] has %zu B at NULL", i, iov[i].len);
        len += iov[i].len;
    }
    int64_t deadline = rk__deadline(timeout_ms);
    uint16_t tag = 0;
    uint8_t *dst = NULL;
    int rc = rk__prepare(a, type, len, reply_cap, deadline, &tag, &dst);
    if (rc)
        return rc;
    for (int i = 0; i < iovcnt; i++) {
        if (iov[i].len)
            memcpy(dst, iov[i].base, iov[i].len);
        dst += iov[i].len;
    }
    rc = rk__post(a, tag, deadline, id_out);
    if (rc == 0 && tag_out)
        *tag_out = tag;
    return rc;
}

int rk_actor_buf_alloc(rk_actor *a, uint16_t type, size_t len, size_t reply_cap, rk_buf *buf,
                       int timeout_ms)
{
    if (!buf)
        return rk__fail(RK_EINVAL, "rk_actor_buf_alloc: buf is NULL");
    uint16_t tag = 0;
    uint8_t *dst = NULL;
    int rc = rk__prepare(a, type, len, reply_cap, rk__deadline(timeout_ms), &tag, &dst);
    if (rc)
        return rc;
    buf->data = dst;
    buf->len = len;
    buf->tag_ = tag;
    return 0;
}

static bool rk__buf_valid(const rk_actor *a, const rk_buf *buf)
{
    return a && buf && buf->tag_ < a->window &&
           rk__ld_relaxed(&a->pend[buf->tag_].state) == RK__P_STAGED;
}

int rk_actor_buf_send(rk_actor *a, rk_buf *buf, uint64_t *id, int timeout_ms)
{
    if (!rk__buf_valid(a, buf))
        return rk__fail(RK_EINVAL, "rk_actor_buf_send: not a buffer from rk_actor_buf_alloc");
    int rc = rk__post(a, (uint16_t)buf->tag_, rk__deadline(timeout_ms), id);
    buf->data = NULL;
    return rc;
}

void rk_actor_buf_abandon(rk_actor *a, rk_buf *buf)
{
    if (!rk__buf_valid(a, buf))
        return;
    rk__pending_put(a, (uint16_t)buf->tag_);
    buf->data = NULL;
}

int rk_actor_sendv(rk_actor *a, uint16_t type, const rk_iov *iov, int iovcnt, size_t reply_cap,
                   uint64_t *id, int timeout_ms)
{
    return rk__send(a, type, iov, iovcnt, reply_cap, id, timeout_ms, NULL);
}

int rk_actor_send(rk_actor *a, uint16_t type, const void *data, size_t len, size_t reply_cap,
                  uint64_t *id, int timeout_ms)
{
    rk_iov v = {data, len};
    return rk__send(a, type, &v, 1, reply_cap, id, timeout_ms, NULL);
}

int rk_actor_call(rk_actor *a, uint16_t type, const void *data, size_t len, size_t reply_cap,
                  rk_reply *out, int timeout_ms)
{
    if (!out)
        return rk__fail(RK_EINVAL, "rk_actor_call: out is NULL");
    int64_t deadline = rk__deadline(timeout_ms);
    rk_iov v = {data, len};
    uint16_t tag;
    int rc = rk__send(a, type, &v, 1, reply_cap, NULL, timeout_ms, &tag);
    if (rc)
        return rc;
    return rk__wait(a, tag, out, deadline);
}
