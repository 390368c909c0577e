/* recv.c - the waiting side of the replies: an actor's thread waits for a
 * reply (rk_actor_call's, or rk_actor_recv's next), draining its reply
 * ring itself (router.c) while it waits, then takes it from its ready
 * queue or straight from the ring; a backend that died answers what is
 * still owed with its fault. */
#include <stdint.h>
#include <stdio.h>

#include "actor.h"
#include "barrier.h"

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

/* Whether r is a reply a holds: its record done, for its id, at its data.
 * The data too: every actor's first request is tag 0, id 1, so another
 * actor's reply would pass for a's own */
static bool rk__held(const rk_actor *a, const rk_reply *r)
{
    if (r->tag_ >= a->window)
        return false;
    const rk__pending *p = &a->pend[r->tag_];
    return rk__ld_relaxed(&p->state) == RK__P_DONE && p->id == r->id && rk__reply_data(a->rt, p) == r->data;
}

/* Why the reply in record tag failed, into buf (empty when it did not). */
static void rk__reply_why(const rk_actor *a, uint16_t tag, char *buf, size_t cap)
{
    const rk__pending *p = &a->pend[tag];
    const void *data = rk__reply_data(a->rt, p);
    const char *name = rk__type_name(a->rt, p->type);
    buf[0] = '\0';
    if (p->status == -RK_EDEVICE && p->strikes >= 2)
        snprintf(buf, cap, "request %llu (%s, type %u) of actor %u faulted its worker twice: answered "
                 "RK_EDEVICE instead of being retried again",
                 (unsigned long long)p->id, name, p->type, a->index);
    else if (p->status == -RK_EDEVICE && atomic_load(&a->rt->degraded))
        snprintf(buf, cap, "request %llu (%s, type %u) of actor %u answered RK_EDEVICE: not served, the worker "
                 "crash-looped (fault_limit) and only the built-ins run, on the CPU, until the GPU is retried "
                 "(rk_runtime_retry_gpu; rk_runtime_worker says why)",
                 (unsigned long long)p->id, name, p->type, a->index);
    else if (p->status == -RK_EACTOR)
        snprintf(buf, cap, "request %llu (%s, type %u) of actor %u: the actor failed: %.*s",
                 (unsigned long long)p->id, name, p->type, a->index, (int)(p->len < 200 ? p->len : 200),
                 (const char *)data);
    else if (p->status)
        snprintf(buf, cap, "request %llu (%s, type %u) of actor %u answered %s: %s", (unsigned long long)p->id,
                 name, p->type, a->index, rk_err_name(p->status), rk_strerror(p->status));
}

static void rk__fill_reply(rk_actor *a, uint16_t tag, rk_reply *out)
{
    rk__pending *p = &a->pend[tag];
    out->id = p->id;
    out->type = p->type;
    out->status = p->status;
    out->len = p->len;
    out->data = rk__reply_data(a->rt, p);
    out->tag_ = tag;
    /* The receiving thread's detail says why a failed reply failed (the
     * status alone cannot tell a poison request from a dead backend). */
    if (p->status) {
        char why[512];
        rk__reply_why(a, tag, why, sizeof why);
        rk__fail_str(-p->status, why);
    }
}

int rk_reply_detail(const rk_actor *a, const rk_reply *r, char *buf, size_t cap)
{
    if (!a || !r || !buf || !cap)
        return rk__fail(RK_EINVAL, "rk_reply_detail: a NULL argument or no room");
    if (!rk__held(a, r))
        return rk__fail(RK_EINVAL, "rk_reply_detail: reply %llu is not held by actor %u (released, or "
                        "another actor's?)", (unsigned long long)r->id, a->index);
    rk__reply_why(a, (uint16_t)r->tag_, buf, cap);
    return 0;
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

int rk__wait(rk_actor *a, int want, rk_reply *out, int64_t deadline, int timeout_ms)
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
        /* own: the reply came straight from the ring into its record
         * (rk_actor_call's round trip), not through the ready queue */
        bool own;
        uint16_t tag;
        if (rk__drain_own(rt, a, want, &own, &tag) && (own || rk__take(a, want, out))) {
            if (own)
                rk__fill_reply(a, tag, out);
            return 0;
        }
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
            /* a router that held the ring's lock when the fault reply
             * looked may have queued the reply it was looking for */
            if (rk__take(a, want, out))
                return 0;
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
         * (device/NOTES.md, "The host's turn") */
        const bool keep_polling = rk__backoff_poll(&b);
        if (keep_polling && (spins & 255) != 255)
            continue;
        int64_t now = rk__now_ns();
        if (now >= deadline)
            return rk__fail(RK_ETIMEDOUT, "no reply within the timeout of %d ms (%u requests in flight)",
                            timeout_ms, a->awaiting);
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
    return rk__wait(a, -1, out, rk__deadline(timeout_ms), timeout_ms);
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
        return !a || !out ? rk__fail(RK_EINVAL, "rk_actor_recv_batch: %s is NULL", !a ? "actor" : "out")
                          : rk__fail(RK_EINVAL, "rk_actor_recv_batch: max is %d; it must be 1 or more", max);
    int rc = rk__wait(a, -1, &out[0], rk__deadline(timeout_ms), timeout_ms);
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
    /* the id too: a reply released twice (or a copy of it) must not give
     * back the record of a later reply that reuses its tag (nor another
     * actor's reply the record of this one's: rk__held) */
    if (!a || !r || !rk__held(a, r))
        return;
    rk__pending_put(a, (uint16_t)r->tag_);
    r->data = NULL;
    r->len = 0;
    r->tag_ = UINT32_MAX;
}
