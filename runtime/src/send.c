/* send.c - requests into the H2D ring: validate, reserve a pending record
 * and the payload's place (slot or arena), build the ring message, enqueue;
 * and, after a worker was replaced, re-post in order what is still owed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "actor.h"
#include "barrier.h"
#include "modules.h"

/* 0 while the runtime takes requests: not closing, its backend not failed. */
static int rk__live(rk_runtime *rt)
{
    if (atomic_load(&rt->closing))
        return rk__fail(RK_ECLOSED, "send: the runtime is closing");
    int fault = atomic_load(&rt->fault);
    if (fault)
        return rk__fail(fault, "send: the %s backend failed: %s", rt->info.backend_name,
                        rk_strerror(fault));
    return 0;
}

/* While a sender waits for arena space: routes what every reply ring
 * holds. A closed actor's space comes back only when its replies are
 * routed, and with no other thread waiting for a reply nobody would. */
static void rk__arena_help(void *arg)
{
    rk_actor *a = arg;
    rk_runtime *rt = a->rt;
    for (uint32_t i = 0; i < rt->n_d2h; i++)
        for (uint32_t n = 0, k; n < rt->d2h[i].ring->slots && (k = (uint32_t)rk__drain(rt, &rt->d2h[i], a)) > 0;
             n += k)
            ;
}

/* Part 1: validates, takes a pending record and reserves where the payload
 * goes: the record's staging buffer when it travels inline, the arena
 * otherwise. Returns the tag; *dst is where the caller writes the `len`
 * payload bytes. count: an arena failure counts as a failed send (a batch's
 * no-wait attempt, retried with a wait, does not). *deadline: lazy
 * (rk__deadline_lazy), read off the clock only when the arena is used. */
static int rk__prepare(rk_actor *a, uint16_t type, size_t len, size_t reply_cap, int64_t *deadline,
                       bool count, uint16_t *tag_out, uint8_t **dst)
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
    int live = rk__live(rt);
    if (live)
        return live;
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
        int rc = rk__arena_alloc_help(&rt->arena, in_sz + out_sz, rk__deadline_at(deadline), &off,
                                      rk__arena_help, a);
        if (rc) {
            a->free_tags[a->n_free++] = tag;
            if (count)
                atomic_fetch_add(&rt->n_errors, 1);
            return rc;
        }
        p->arena_off = off;
        p->arena_len = in_sz + out_sz;
        p->out_off = off + in_sz;
        p->out_cap = out_cap;
    }
    *dst = rk__request_data(rt, p);
    rk__st_relaxed(&p->state, (uint8_t)RK__P_STAGED);
    *tag_out = tag;
    return 0;
}

/* The ring message of record `tag` for generation gen: its head (the
 * header, and the arena reference) here, its inline payload taken from
 * the record by the ring write. */
typedef struct rk__message {
    _Alignas(8) uint8_t head[sizeof(rk_msg_hdr) + sizeof(rk_arena_ref)];
    rk__ring_msg m;
} rk__message;

static const rk__ring_msg *rk__message_of(const rk_actor *a, uint16_t tag, uint32_t gen, rk__message *msg)
{
    const rk__pending *p = &a->pend[tag];
    rk_msg_hdr h = {.type = p->type, .actor = a->index, .tag = tag, .id = p->id, .len = p->len};
    h.gen = gen;
    /* edge: the record (the worker-process edge, barrier.h; the router
     * acquires it) */
    msg->m = (rk__ring_msg){.head = msg->head, .hlen = sizeof h, .edge = p};
    if (p->arena_len) {
        rk_arena_ref ref = {.in_off = p->arena_off, .out_off = p->out_off, .out_cap = p->out_cap};
        h.flags = RK_MSG_ARENA;
        memcpy(msg->head + sizeof h, &ref, sizeof ref);
        msg->m.hlen += sizeof ref;
    } else {
        msg->m.body = p->inline_buf;
        msg->m.blen = p->len;
    }
    memcpy(msg->head, &h, sizeof h);
    return &msg->m;
}

void rk__suspect_release(rk_runtime *rt, uint64_t word)
{
    /* its clock goes too (a CAS: a next holder's start stays), so that the
     * watch never reads a next holder's word with this one's start */
    int64_t since = atomic_load(&rt->suspect_since);
    uint64_t w = word;
    if (atomic_compare_exchange_strong(&rt->suspect, &w, 0ull))
        atomic_compare_exchange_strong(&rt->suspect_since, &since, 0);
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
    const bool fresh = atomic_compare_exchange_strong(&rt->suspect, &w, word);
    if (!fresh && w != word)
        return false;
    atomic_store(&rt->suspect_pos, UINT64_MAX); /* not sent yet (rk__repost_locked) */
    if (fresh) {
        atomic_store(&rt->suspect_since, rk__now_ns());
        return true;
    }
    /* ours already: retried again after a recovery. Its watch (supervisor
     * rk__watch) starts over, as it did for the first retry */
    int64_t zero = 0;
    atomic_compare_exchange_strong(&rt->suspect_since, &zero, rk__now_ns());
    return true;
}

static int rk__by_id(const void *x, const void *y, void *arg)
{
    const rk__pending *pend = arg;
    uint64_t a = pend[*(const uint16_t *)x].id, b = pend[*(const uint16_t *)y].id;
    return a < b ? -1 : a > b;
}

/* rk__repost's work, under its reply ring's lock: the supervisor answers
 * records (a second strike: RK_EDEVICE) under every ring's lock, so a record is either
 * answered before this looks at it (then it is no longer SENT) or
 * re-posted before the supervisor sees it (TSan, CI at ab9ec2d: an answer
 * raced with a re-post reading the record). Ids grow per actor: by id is
 * the send order. */
static bool rk__repost_locked(rk_actor *a, uint32_t g)
{
    rk_runtime *rt = a->rt;
    /* everything still SENT for an older generation: its copy in H2D is
     * dropped by the new worker (or was lost with the old one) */
    uint32_t n = 0;
    for (uint32_t i = 0; i < a->window; i++)
        if (rk__ld_relaxed(&a->pend[i].state) == RK__P_SENT && a->pend[i].gen != g)
            a->order[n++] = (uint16_t)i;
    qsort_r(a->order, n, sizeof *a->order, rk__by_id, a->pend);
    rk__message m;
    for (uint32_t k = 0; k < n; k++) {
        rk__pending *p = &a->pend[a->order[k]];
        const uint64_t word = RK__RUN_WORD(a->index, a->order[k], p->id);
        if (p->strikes && !rk__suspect_take(rt, word))
            return false; /* another suspect is being retried: the rest waits, in order */
        uint64_t at;
        int rc = rk__ring_mp_enqueue2(rt->h2d, rk__message_of(a, a->order[k], g, &m), &at);
        if (rc && p->strikes) /* not sent: nothing for the suspect watch to time (it would
                               * give a request never retried its second strike) */
            rk__suspect_release(rt, word);
        if (rc == 0 && p->strikes) /* where the watch sees it taken (supervisor.c) */
            atomic_store(&rt->suspect_pos, at);
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

bool rk__repost(rk_actor *a)
{
    rk_runtime *rt = a->rt;
    /* acquire: pairs with the supervisor's release of gen; the strikes it
     * gave and the records it answered are visible */
    const uint32_t g = atomic_load_explicit(&rt->gen, memory_order_acquire);
    if (a->gen == g)
        return true;
    rk__d2h_lock(a->d2h);
    bool done = rk__repost_locked(a, g);
    rk__d2h_unlock(a->d2h);
    return done;
}

/* The H2D ring is full: helps drain the reply rings (the consumer may be
 * stuck on a full one that nobody else drains), then waits a little.
 * Returns 0 to try again, or the error that ends the wait (counted as a
 * failed send). */
static int rk__ring_full_wait(rk_actor *a, int64_t deadline, rk__backoff *b)
{
    rk_runtime *rt = a->rt;
    rk__drain(rt, a->d2h, a);
    rk__steal(a, rk__now_ns());
    int fault = atomic_load(&rt->fault);
    if (fault || rk__now_ns() >= deadline) {
        atomic_fetch_add(&rt->n_errors, 1);
        if (fault)
            return rk__fail(fault, "send: the %s backend failed: %s", rt->info.backend_name,
                            rk_strerror(fault));
        return rk__fail(RK_ETIMEDOUT, "send: the H2D ring stayed full (%u slots) for the timeout",
                        rt->h2d->slots);
    }
    if (!rk__backoff_poll(b))
        rk__sleep_ns(rk__backoff_sleep_ns(b));
    return 0;
}

/* Part 2: builds the ring message for a prepared record and enqueues it,
 * waiting until *deadline (lazy: rk__deadline_lazy) for ring space. On
 * failure the record (and its arena block) is given back. While the actor
 * still owes re-posts from a worker change, a new request joins them
 * instead (same order). */
static int rk__post(rk_actor *a, uint16_t tag, int64_t *deadline, uint64_t *id_out)
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
        rk__message msg;
        const rk__ring_msg *m = rk__message_of(a, tag, a->gen, &msg);
        rk__backoff b;
        rk__backoff_reset(&b);
        int rc;
        while ((rc = rk__ring_mp_enqueue2(rt->h2d, m, NULL)) == -RK_EAGAIN)
            if ((rc = rk__ring_full_wait(a, rk__deadline_at(deadline), &b)))
                break;
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

/* A declared actor's reply size follows from its input fields: fills
 * *reply_cap when it is 0; -RK_EINVAL when the payload is not its inputs. */
static int rk__decl_cap(const rk_runtime *rt, uint16_t type, const rk_iov *iov, int iovcnt, size_t len,
                        size_t *reply_cap)
{
    const rk_actor_decl *decl = type >= RK_OP_USER ? rk__modules_decl(rt->mods, type) : NULL;
    /* room for an ACTOR_FAILED sentence: RK__SENTENCE_ROOM, but no more
     * than an inline reply holds for a request that travels inline: a
     * larger cap sends request and reply through the arena, host memory,
     * where every access of the actor is a PCIe read (H100 at 3043c43: a
     * 64-B user actor took 8.4 us against echo's 2.3 us) */
    const size_t inline_max = rk_ring_msg_max(rt->h2d) - sizeof(rk_msg_hdr);
    const size_t room = len <= inline_max && inline_max < RK__SENTENCE_ROOM ? inline_max : RK__SENTENCE_ROOM;
    if (decl && !*reply_cap && !(*reply_cap = rk__decl_reply_cap(decl, iov, iovcnt, room ? room : 1)))
        return rk__fail(RK_EINVAL, "send: the %zu B payload is not the %u input fields of actor \"%s\" "
                        "(rk/module.h: field layout)", len, decl->n_inputs, decl->name);
    return 0;
}

/* Checks a gather list; stores the payload's length in *len. */
static int rk__iov_len(const rk_iov *iov, int iovcnt, size_t *len)
{
    *len = 0;
    if (iovcnt < 0 || (iovcnt > 0 && !iov))
        return rk__fail(RK_EINVAL, "send: iovcnt %d with iov %p", iovcnt, (const void *)iov);
    for (int i = 0; i < iovcnt; i++) {
        if (!iov[i].base && iov[i].len)
            return rk__fail(RK_EINVAL, "send: iov[%d] has %zu B at NULL", i, iov[i].len);
        /* a sum that wraps would pass the max_payload check small and be
         * gathered at its real size */
        if (iov[i].len > SIZE_MAX - *len)
            return rk__fail(RK_EMSGSIZE, "send: iov[%d]'s %zu B take the payload past %zu B (SIZE_MAX)", i,
                            iov[i].len, (size_t)SIZE_MAX);
        *len += iov[i].len;
    }
    return 0;
}

static void rk__gather(uint8_t *dst, const rk_iov *iov, int iovcnt)
{
    for (int i = 0; i < iovcnt; i++) {
        if (iov[i].len)
            memcpy(dst, iov[i].base, iov[i].len);
        dst += iov[i].len;
    }
}

/* *deadline: rk__deadline_lazy of the caller's timeout, resolved here only
 * if the send waits (rk_actor_call's wait then shares it) */
static int rk__send(rk_actor *a, uint16_t type, const rk_iov *iov, int iovcnt, size_t reply_cap,
                    uint64_t *id_out, int64_t *deadline, uint16_t *tag_out)
{
    size_t len;
    int rc = rk__iov_len(iov, iovcnt, &len);
    if (rc == 0 && a) /* a NULL actor is rk__prepare's error to name */
        rc = rk__decl_cap(a->rt, type, iov, iovcnt, len, &reply_cap);
    if (rc)
        return rc;
    uint16_t tag = 0;
    uint8_t *dst = NULL;
    rc = rk__prepare(a, type, len, reply_cap, deadline, true, &tag, &dst);
    if (rc)
        return rc;
    rk__gather(dst, iov, iovcnt);
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
    int64_t deadline = rk__deadline_lazy(timeout_ms);
    int rc = rk__prepare(a, type, len, reply_cap, &deadline, true, &tag, &dst);
    if (rc)
        return rc;
    buf->data = dst;
    buf->len = len;
    buf->tag_ = tag;
    return 0;
}

/* A staged record of a, at buf's data: every actor's first buffer is tag
 * 0, so the tag alone took another actor's buffer for a's own */
static bool rk__buf_valid(const rk_actor *a, const rk_buf *buf)
{
    if (!a || !buf || buf->tag_ >= a->window)
        return false;
    const rk__pending *p = &a->pend[buf->tag_];
    return rk__ld_relaxed(&p->state) == RK__P_STAGED &&
           buf->data == rk__request_data(a->rt, p);
}

int rk_actor_buf_send(rk_actor *a, rk_buf *buf, uint64_t *id, int timeout_ms)
{
    if (!rk__buf_valid(a, buf))
        return rk__fail(RK_EINVAL, "rk_actor_buf_send: not a buffer from rk_actor_buf_alloc");
    int64_t deadline = rk__deadline_lazy(timeout_ms);
    /* a closing or failed runtime takes no request, as rk_actor_sendv's
     * and a batch's buf: the buffer goes back, as after a failed post */
    int rc = rk__live(a->rt);
    if (rc)
        rk__pending_put(a, (uint16_t)buf->tag_);
    else
        rc = rk__post(a, (uint16_t)buf->tag_, &deadline, id);
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
    int64_t deadline = rk__deadline_lazy(timeout_ms);
    return rk__send(a, type, iov, iovcnt, reply_cap, id, &deadline, NULL);
}

int rk_actor_send(rk_actor *a, uint16_t type, const void *data, size_t len, size_t reply_cap,
                  uint64_t *id, int timeout_ms)
{
    rk_iov v = {data, len};
    int64_t deadline = rk__deadline_lazy(timeout_ms);
    return rk__send(a, type, &v, 1, reply_cap, id, &deadline, NULL);
}

int rk_actor_call(rk_actor *a, uint16_t type, const void *data, size_t len, size_t reply_cap,
                  rk_reply *out, int timeout_ms)
{
    if (!out)
        return rk__fail(RK_EINVAL, "rk_actor_call: out is NULL");
    /* the clock is read once, after the request went out (or when the
     * send had to wait): the send and the wait share one deadline */
    int64_t deadline = rk__deadline_lazy(timeout_ms);
    rk_iov v = {data, len};
    uint16_t tag;
    int rc = rk__send(a, type, &v, 1, reply_cap, NULL, &deadline, &tag);
    if (rc)
        return rc;
    return rk__wait(a, tag, out, rk__deadline_at(&deadline), timeout_ms);
}

/* ---- batches (runtime.h: rk_actor_send_batch) ---- */

/* Stages one request of a batch: a copied payload gets its record and its
 * room (rk__prepare, waiting until deadline for arena space) and is
 * copied; a buf is checked. The record is then QUEUED, so a buf given twice
 * fails the check. Returns 0 or the error that stops the batch. */
static int rk__batch_stage(rk_actor *a, const rk_send_req *q, int64_t *deadline, bool count,
                           uint16_t *tag)
{
    if (q->buf) {
        if (!rk__buf_valid(a, q->buf))
            return rk__fail(RK_EINVAL, "send batch: buf is not a staged buffer of this actor from "
                                       "rk_actor_buf_alloc (or is given twice)");
        int live = rk__live(a->rt);
        if (live)
            return live;
        *tag = (uint16_t)q->buf->tag_;
    } else {
        rk_iov one = {q->data, q->len};
        const rk_iov *iov = q->iovcnt ? q->iov : &one;
        int iovcnt = q->iovcnt ? q->iovcnt : 1;
        size_t len, cap = q->reply_cap;
        uint8_t *dst = NULL;
        int rc = rk__iov_len(iov, iovcnt, &len);
        if (!rc)
            rc = rk__decl_cap(a->rt, q->type, iov, iovcnt, len, &cap);
        if (!rc)
            rc = rk__prepare(a, q->type, len, cap, deadline, count, tag, &dst);
        if (rc)
            return rc;
        rk__gather(dst, iov, iovcnt);
    }
    rk__st_relaxed(&a->pend[*tag].state, (uint8_t)RK__P_QUEUED);
    return 0;
}

/* Gives back what a batch staged and did not post: copied requests'
 * records and arena space; buffers go back to the caller, still staged. */
static void rk__batch_unstage(rk_actor *a, const rk_send_req *reqs, const uint16_t *tags, int n)
{
    for (int i = 0; i < n; i++) {
        if (reqs[i].buf)
            rk__st_relaxed(&a->pend[tags[i]].state, (uint8_t)RK__P_STAGED);
        else
            rk__pending_put(a, tags[i]);
    }
}

/* Marks a staged record sent: its id, its generation. */
static uint64_t rk__mark_sent(rk_actor *a, uint16_t tag)
{
    rk__pending *p = &a->pend[tag];
    p->id = ++a->next_id;
    p->gen = a->gen;
    /* release: the record's fields before SENT; pairs with the load-acquire
     * of state by a router (or the supervisor) that matches a reply to it */
    rk__st_release(&p->state, (uint8_t)RK__P_SENT);
    return p->id;
}

/* Posts m staged records in order: each burst takes as many free H2D
 * slots as it can with one reservation, writes them, rings the doorbell
 * once. Returns how many were posted; *err: why the rest was not. */
static int rk__post_burst(rk_actor *a, const uint16_t *tags, int m, int64_t *deadline,
                          uint64_t *ids, int *err)
{
    rk_runtime *rt = a->rt;
    int done = 0;
    if (!rk__in_step(a) && !rk__repost(a)) {
        /* a->gen lags rt->gen: rk__repost sends them later, in id order
         * (as rk__post's deferred request) */
        for (; done < m; done++) {
            uint64_t id = rk__mark_sent(a, tags[done]);
            if (ids)
                ids[done] = id;
        }
    }
    rk__message msg;
    rk__backoff b;
    rk__backoff_reset(&b);
    while (done < m) {
        uint64_t pos;
        uint32_t k = rk__ring_mp_reserve(rt->h2d, (uint32_t)(m - done), &pos);
        if (!k) {
            if ((*err = rk__ring_full_wait(a, rk__deadline_at(deadline), &b)))
                break;
            continue;
        }
        for (uint32_t j = 0; j < k; j++) {
            uint16_t tag = tags[done + (int)j];
            uint64_t id = rk__mark_sent(a, tag);
            rk__ring_write2(rt->h2d, pos + j, rk__message_of(a, tag, a->gen, &msg));
            if (ids)
                ids[done + (int)j] = id;
        }
        rk__ring_doorbell(rt->h2d); /* once for the burst */
        done += (int)k;
    }
    a->awaiting += (uint32_t)done;
    atomic_fetch_add(&rt->n_requests, (uint64_t)done);
    return done;
}

int rk_actor_send_batch(rk_actor *a, const rk_send_req *reqs, int n, uint64_t *ids, int timeout_ms)
{
    if (!a || !reqs || n <= 0)
        return !a || !reqs ? rk__fail(RK_EINVAL, "rk_actor_send_batch: %s is NULL", !a ? "actor" : "reqs")
                           : rk__fail(RK_EINVAL, "rk_actor_send_batch: n is %d; it must be 1 or more", n);
    int64_t deadline = rk__deadline_lazy(timeout_ms);
    int posted = 0, rc = 0;
    while (posted < n && !rc) {
        /* A chunk: its first request may wait for arena space; the others
         * take only what is free now, so that the chunk never holds arena
         * space while it waits for more. The chunk ends there, is posted,
         * and the next one starts with the request that must wait. */
        int m = 0;
        for (int i = posted; i < n; i++) {
            int64_t no_wait = 0; /* the chunk's later requests do not wait */
            rc = rk__batch_stage(a, &reqs[i], m ? &no_wait : &deadline, m == 0, &a->batch[m]);
            if (rc)
                break;
            m++;
        }
        if (rc == -RK_ENOSPC && m)
            rc = 0; /* not a failure yet: the next chunk waits for it */
        if (!m)
            break;
        int err = 0;
        int k = rk__post_burst(a, a->batch, m, &deadline, ids ? ids + posted : NULL, &err);
        for (int j = posted; j < posted + k; j++)
            if (reqs[j].buf)
                reqs[j].buf->data = NULL;
        if (k < m) {
            rk__batch_unstage(a, reqs + posted + k, a->batch + k, m - k);
            rc = err;
        }
        posted += k;
    }
    return posted ? posted : rc;
}
