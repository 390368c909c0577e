/* send.c - requests into the H2D ring: validate, reserve a pending record
 * and the payload's place (slot or arena), build the ring message, enqueue;
 * and, after a worker was replaced, re-post in order what is still owed. */
#include <stdlib.h>
#include <string.h>

#include "actor.h"
#include "barrier.h"
#include "modules.h"

/* Part 1: validates, takes a pending record and reserves where the payload
 * goes: the record's staging buffer when it travels inline, the arena
 * otherwise. Returns the tag; *dst is where the caller writes the `len`
 * payload bytes. */
static int rk__prepare(rk_actor *a, uint16_t type, size_t len, size_t reply_cap, int64_t deadline,
                       uint16_t *tag_out, uint8_t **dst)
{
    if (!a)
        return rk__fail(RK_EINVAL, "send: actor is NULL");
    rk_runtime *rt = a->rt;
    if (type == RK_OP_NOP || (type > RK_OP_HANG && type < RK_OP_USER))
        return rk__fail(RK_EINVAL, "send: message type %u is reserved", type);
    if ((type == RK_OP_FAULT || type == RK_OP_HANG) && !rt->wflags)
        return rk__fail(RK_EINVAL,
                        "send: message type %u is a test-only op: it needs rk_config.test_faults and a "
                        "worker process or GPU to crash%s",
                        type, rt->cfg.test_faults ? " (this runtime serves on the CPU in this process)" : "");
    if (type >= RK_OP_USER) {
        int rc = rk__registry_check(rt, type);
        if (rc)
            return rc;
    }
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
    p->strikes = 0;
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

/* The ring message of record `tag` for generation gen; returns its bytes. */
static uint32_t rk__message(const rk_actor *a, uint16_t tag, uint32_t gen, uint8_t *msg)
{
    const rk__pending *p = &a->pend[tag];
    rk_msg_hdr h = {.type = p->type, .actor = a->index, .tag = tag, .id = p->id, .len = p->len};
    h.gen = gen;
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
    return mlen;
}

void rk__suspect_release(rk_runtime *rt, uint64_t word)
{
    uint64_t w = word;
    atomic_compare_exchange_strong(&rt->suspect, &w, 0ull);
}

/* Suspects are retried one at a time (runtime-wide): true when this one
 * holds the token. */
static bool rk__suspect_take(rk_runtime *rt, uint64_t word)
{
    /* held until the standby is ready (supervisor.c): the rest of this
     * actor waits behind it, in order */
    int64_t hold = atomic_load_explicit(&rt->suspect_hold, memory_order_relaxed);
    if (hold && rk__now_ns() < hold)
        return false;
    uint64_t w = 0;
    if (atomic_compare_exchange_strong(&rt->suspect, &w, word)) {
        atomic_store(&rt->suspect_since, rk__now_ns());
        return true;
    }
    return w == word;
}

static int rk__by_id(const void *x, const void *y, void *arg)
{
    const rk__pending *pend = arg;
    uint64_t a = pend[*(const uint16_t *)x].id, b = pend[*(const uint16_t *)y].id;
    return a < b ? -1 : a > b;
}

bool rk__repost(rk_actor *a)
{
    rk_runtime *rt = a->rt;
    /* acquire: pairs with the supervisor's release of gen; the strikes it
     * gave and the records it answered are visible */
    const uint32_t g = atomic_load_explicit(&rt->gen, memory_order_acquire);
    if (a->gen == g)
        return true;
    /* everything still SENT for an older generation: its copy in H2D is
     * dropped by the new worker (or was lost with the old one). No reply
     * can come for such a record until it is re-posted, so the owner reads
     * it without the lock. Ids grow per actor: by id is the send order. */
    uint32_t n = 0;
    for (uint32_t i = 0; i < a->window; i++)
        if (rk__ld_relaxed(&a->pend[i].state) == RK__P_SENT && a->pend[i].gen != g)
            a->order[n++] = (uint16_t)i;
    qsort_r(a->order, n, sizeof *a->order, rk__by_id, a->pend);
    _Alignas(16) uint8_t msg[RK_RING_SLOT_MAX / 2];
    for (uint32_t k = 0; k < n; k++) {
        rk__pending *p = &a->pend[a->order[k]];
        if (p->strikes && !rk__suspect_take(rt, RK__RUN_WORD(a->index, a->order[k], p->id)))
            return false; /* another suspect is being retried: the rest waits, in order */
        uint32_t mlen = rk__message(a, a->order[k], g, msg);
        rk__tsan_release(p); /* the worker-process edge (barrier.h) */
        int rc = rk_ring_mp_enqueue(rt->h2d, msg, mlen);
        if (rc == -RK_EAGAIN)
            return false; /* ring full: later, from the same point */
        if (rc) {
            rk__log(RK__LOG_ERROR, "re-posting request %llu of actor %u failed: %s",
                    (unsigned long long)p->id, a->index, rk_last_detail());
            return false;
        }
        p->gen = g;
    }
    a->gen = g;
    return true;
}

/* Part 2: builds the ring message for a prepared record and enqueues it,
 * waiting until deadline for ring space. On failure the record (and its
 * arena block) is given back. While the actor still owes re-posts from a
 * worker change, a new request joins them instead (same order). */
static int rk__post(rk_actor *a, uint16_t tag, int64_t deadline, uint64_t *id_out)
{
    rk_runtime *rt = a->rt;
    rk__pending *p = &a->pend[tag];
    p->id = ++a->next_id;
    /* (p is not SENT yet, so a re-post here does not take it along) */
    const bool deferred = !rk__in_step(a) && !rk__repost(a);
    p->gen = a->gen;
    /* release: the record's fields before SENT; pairs with the load-acquire
     * of state by a router (or the supervisor) that matches a reply to it */
    rk__st_release(&p->state, (uint8_t)RK__P_SENT);
    if (!deferred) {
        /* (deferred: a->gen lags rt->gen, rk__repost sends it later, in id order) */
        _Alignas(16) uint8_t msg[RK_RING_SLOT_MAX / 2];
        uint32_t mlen = rk__message(a, tag, a->gen, msg);
        rk__tsan_release(p); /* the worker-process edge (barrier.h) */
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
    }
    a->awaiting++;
    atomic_fetch_add(&rt->n_requests, 1);
    if (id_out)
        *id_out = p->id;
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
    /* a declared actor's reply size follows from its input fields */
    const rk_actor_decl *decl = type >= RK_OP_USER ? rk__modules_decl(a->rt->mods, type) : NULL;
    if (decl && !reply_cap && !(reply_cap = rk__decl_reply_cap(decl, iov, iovcnt)))
        return rk__fail(RK_EINVAL, "send: the %zu B payload is not the %u input fields of actor \"%s\" "
                        "(rk/module.h: field layout)", len, decl->n_inputs, decl->name);
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
