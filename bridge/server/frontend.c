/* bridge/server/frontend.c - the frontend (--io-threads > 1). It owns the
 * port and does only ZeroMQ work: it reads a request (all its frames, split
 * into envelope and body as the single loop does) straight into the next
 * slot of a worker's request ring, fill-first; when every ring is full it
 * stops reading its ROUTER, so back-pressure reaches the clients through
 * ZeroMQ's high-water marks. It sends every reply the workers push to
 * their reply rings (envelope, then body, ZMQ_DONTWAIT), and answers the
 * status endpoint (statusep.c) on every pass, full rings or not. Frames
 * are moved, never copied. It counts requests, replies, dropped_replies,
 * unroutable and the socket's events; the workers count the rest.
 *
 * Stopping: on the signal the frontend stops feeding the workers (each
 * answers what its ring holds, SHUTTING_DOWN, and leaves once its replies
 * are in) and answers every request it reads from then on itself, with
 * SHUTTING_DOWN, until the socket has been quiet for --shutdown-quiet-ms,
 * --shutdown-grace-ms has passed and every worker is gone. */
#include "server.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

/* Requests the frontend gives one worker before it moves to the next. */
#define RKB_FILL 32

/* Wakes the workers that got requests in this burst, if they sleep. */
static void rkb__wake_workers(rkb_front *f)
{
    /* P1 once for the burst: every tail store above before the loads of
     * `sleeping` below (handoff.c) */
    rkb__fence_seq_cst();
    for (uint64_t m = f->wake_mask; m; m &= m - 1)
        rkb_wake_after_fence(&f->sh->loops[__builtin_ctzll(m)]->wk);
    f->wake_mask = 0;
}

/* The lines of an item a DEALER client's message uses (body, a two-frame
 * envelope, the counts), asked for ahead of use (rw: 0 to read, 1 to
 * write; a constant, as __builtin_prefetch wants): the other thread's core
 * wrote them last and each is a cross-core miss on the one thread every
 * message passes twice. */
#define RKB__PREFETCH_ITEM(it, rw)                                                                 \
    do {                                                                                           \
        __builtin_prefetch(&(it)->body, rw);                                                       \
        __builtin_prefetch(&(it)->env.in[0], rw);                                                  \
        __builtin_prefetch(&(it)->env.in[1], rw);                                                  \
        __builtin_prefetch(&(it)->env.more, rw);                                                   \
    } while (0)

static int rkb__replies(rkb_front *f)
{
    rkb_shared *sh = f->sh;
    int n = 0;
    for (int i = 0; i < sh->n_loops; i++) {
        rkb_spsc *q = sh->loops[i]->repq;
        rkb_item *it, *next;
        for (int k = 0; k < 256 && (it = rkb_spsc_sc_peek(q)); k++, n++) {
            if ((next = rkb_spsc_sc_ahead(q, 2)))
                RKB__PREFETCH_ITEM(next, 0);
            rkb_port_send(&sh->port, &it->env, &it->body);
            rkb_spsc_sc_pop(q, RKB_PUBLISH_EVERY);
        }
        rkb_spsc_sc_publish(q);
    }
    return n;
}

static bool rkb__replies_ready(rkb_front *f)
{
    for (int i = 0; i < f->sh->n_loops; i++)
        if (rkb_spsc_sc_peek(f->sh->loops[i]->repq))
            return true;
    return false;
}

/* How many of worker l's requests wait, and their bodies' bytes: in its
 * ring, staged or parked (rkb_loop: pushed - left). Relaxed loads of the
 * worker's once-a-pass stores (rkb__publish_left): no data hangs on them,
 * and an older value is a smaller one, so the frontend may stop early for
 * a pass but never lets more in than the bound. */
static inline uint64_t rkb__waiting_bytes(const rkb_loop *l)
{
    return l->pushed_bytes - RKB_LD(l->left_bytes);
}

static inline uint64_t rkb__waiting_n(const rkb_loop *l)
{
    return l->pushed_n - RKB_LD(l->left_n);
}

/* Worker l may take another request: below its share of --queue-bytes and
 * of --queue. The next frame is taken whatever its size, as with
 * --io-threads 1, so a frame larger than the share gets in alone. */
static inline bool rkb__has_room(const rkb_front *f, const rkb_loop *l)
{
    return rkb__waiting_bytes(l) < f->share_bytes && rkb__waiting_n(l) < f->share_n;
}

/* The ring of the worker that takes the next request, or NULL when every
 * ring is full. Fill-first, not round-robin: the current worker takes
 * requests until RKB_FILL of them wait in its ring, then the next one
 * does. Under light load every request goes to the same worker, which is
 * then awake (spinning) when the next one comes; handed round the workers,
 * each request found its worker asleep past the spin window and paid an
 * eventfd wake-up (H200 host: bridge echo p50 8 us over raw ZeroMQ with 3
 * workers, 2 us with 1 thread). Under load the workers get runs of RKB_FILL.
 * A ring also counts as full once its worker holds its share of the
 * waiting bound (its slots alone would hold 1 024 frames of any size: a
 * stalled worker let one client park gigabytes here), so a stalled worker
 * holds no more than that and the others go on. */
static rkb_item *rkb__slot(rkb_front *f, int *wout)
{
    rkb_shared *sh = f->sh;
    int nw = sh->n_loops, w = f->fill;
    rkb_item *it = NULL;
    for (int k = 0; k < nw && !it; k++) {
        rkb_loop *l = sh->loops[w];
        if (rkb_spsc_sp_pending(l->reqq, RKB_FILL) < RKB_FILL && rkb__has_room(f, l) &&
            (it = rkb_spsc_sp_slot(l->reqq)))
            break;
        w = w + 1 == nw ? 0 : w + 1;
    }
    for (int k = 0; k < nw && !it; k++) {
        /* every worker has RKB_FILL or more waiting: any with room */
        rkb_loop *l = sh->loops[w];
        if (rkb__has_room(f, l) && (it = rkb_spsc_sp_slot(l->reqq)))
            break;
        w = w + 1 == nw ? 0 : w + 1;
    }
    *wout = w;
    return it;
}

/* Reads up to 256 requests into the workers' rings; *room = false when
 * every ring was full, or the bridge holds --queue-bytes or --queue of
 * waiting requests (all workers together: the shares round up, and a
 * worker's frame may pass its share). */
static int rkb__requests(rkb_front *f, bool *room)
{
    rkb_shared *sh = f->sh;
    const rkb_config *c = sh->cfg;
    /* the whole bridge's, once per burst (nw loads), then counted up here:
     * only ever more than what waits (the workers take some meanwhile) */
    uint64_t held_bytes = 0, held_n = 0;
    for (int i = 0; i < sh->n_loops; i++) {
        held_bytes += rkb__waiting_bytes(sh->loops[i]);
        held_n += rkb__waiting_n(sh->loops[i]);
    }
    int n = 0;
    while (n < 256) {
        int w;
        rkb_item *it = held_bytes < c->queue_bytes && held_n < c->queue ? rkb__slot(f, &w) : NULL;
        if (!it) {
            *room = false; /* back-pressure: leave the rest in the ROUTER */
            break;
        }
        int r = rkb_port_recv(&sh->port, &it->env, &it->body, &it->n_body);
        if (r == 0)
            break;
        n++;
        if (r < 0)
            continue; /* dropped and counted; the slot was not used */
        rkb_loop *l = sh->loops[w];
        rkb_spsc *q = l->reqq;
        const uint64_t len = it->n_body ? zmq_msg_size(&it->body) : 0;
        /* (the worker counts the same when it pops it). The frontend's alone:
         * relaxed stores only for `status` (admin.c), which reads them */
        RKB_SET(l->pushed_bytes, l->pushed_bytes + len);
        RKB_SET(l->pushed_n, l->pushed_n + 1);
        held_bytes += len;
        held_n++;
        rkb_spsc_sp_push(q, RKB_PUBLISH_EVERY);
        const rkb_item *next = rkb_spsc_sp_next(q);
        RKB__PREFETCH_ITEM(next, 1);
        f->wake_mask |= UINT64_C(1) << w;
        f->fill = w; /* stay with it (fill-first) */
    }
    /* every ring this burst pushed to, before the wake-up's P1 */
    for (uint64_t m = f->wake_mask; m; m &= m - 1)
        rkb_spsc_sp_publish(sh->loops[__builtin_ctzll(m)]->reqq);
    return n;
}

/* After the signal: every request read is answered here, SHUTTING_DOWN. */
static int rkb__refuse(rkb_front *f)
{
    int n = 0;
    rkb_env env = {0};
    zmq_msg_t body;
    uint32_t n_body;
    for (int r; n < 256 && (r = rkb_port_recv(&f->sh->port, &env, &body, &n_body)); n++) {
        if (r < 0)
            continue;
        rkb_request req = {0};
        if (n_body)
            rkb_peek_into(&req, &body);
        RKB_INC(&f->n, errors);
        RKB_INC(&f->n, shutting_down);
        zmq_msg_t m;
        int rc = rkb_encode_error(&f->enc, req.has_id, req.id, RKB_E_SHUTTING_DOWN,
                                  "the bridge is shutting down");
        if (n_body)
            zmq_msg_close(&body);
        if (rc == 0 && rkb_msg_encoded(&f->enc, &m) == 0) {
            rkb_port_send(&f->sh->port, &env, &m);
            continue;
        }
        /* out of memory: no part of a reply goes out (nothing shorter to say) */
        rkb_env_close(&env);
        RKB_INC(&f->n, internal);
        rkb_logk(RKB_LK_INTERNAL, RKB_LOG_ERROR, "INTERNAL: out of memory for a SHUTTING_DOWN reply: "
                 "a request read while stopping is not answered");
    }
    return n;
}

void rkb_stop_workers(rkb_shared *sh)
{
    sh->stop_at = rkb_now_ns();
    /* release: pairs with the workers' acquire of stopping (stop_at, and
     * every request pushed before it) */
    __atomic_store_n(&sh->stopping, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < sh->n_loops; i++)
        rkb_wake_always(&sh->loops[i]->wk); /* unconditionally: it stays readable until read */
}

static void rkb__signal(rkb_front *f)
{
    rkb_deploy_cancel(f->sh);
    f->stopping = true;
    rkb_notify("STOPPING=1");
    rkb_stop_workers(f->sh);
    rkb_log(RKB_LOG_INFO, "stopping: %d request loops answer what they hold; new requests get "
            "SHUTTING_DOWN", f->sh->n_loops);
}

/* True when the frontend may leave: every worker gone (acquire: pairs with
 * each worker's release when it leaves; its replies are then all in its
 * ring), their replies sent, the socket quiet, the grace over. */
static bool rkb__done(rkb_front *f, int64_t now, int64_t last_read)
{
    rkb_shared *sh = f->sh;
    if (!f->stopping || __atomic_load_n(&sh->live, __ATOMIC_ACQUIRE) != 0)
        return false;
    while (rkb__replies(f))
        ;
    const rkb_config *c = sh->cfg;
    /* quiet since the signal at least, as a single loop (loop.c) */
    const int64_t quiet_from = last_read > sh->stop_at ? last_read : sh->stop_at;
    return now >= sh->stop_at + (int64_t)c->drain_ms * 1000000 ||
           (now >= sh->stop_at + (int64_t)c->shutdown_grace_ms * 1000000 &&
            now - quiet_from >= (int64_t)c->shutdown_quiet_ms * 1000000);
}

/* Nothing moved: poll the ROUTER (when a ring has room), the eventfd the
 * workers write, the signalfd and the socket monitor. */
static void rkb__block(rkb_front *f, bool room, int64_t now)
{
    rkb_port *p = &f->sh->port;
    rkb_sleep_prepare(&f->wk);
    /* the re-check after S1: replies published, or a worker gone, before
     * that worker's P1 */
    if (rkb__replies_ready(f) || (f->stopping && __atomic_load_n(&f->sh->live, __ATOMIC_ACQUIRE) == 0)) {
        rkb_sleep_end(&f->wk, false);
        return;
    }
    zmq_pollitem_t items[2 + RKB_PORT_POLL_MAX];
    int ni = 0;
    if (room)
        items[ni++] = (zmq_pollitem_t){p->router, 0, ZMQ_POLLIN, 0};
    int ei = ni;
    items[ni++] = (zmq_pollitem_t){NULL, f->wk.efd, ZMQ_POLLIN, 0};
    ni += rkb_port_poll_items(p, items + ni);
    /* stopping: look at `live` and the quiet time every 10 ms; every ring
     * full: look for room every 1 ms (taking a request wakes nobody) */
    long tmo = f->stopping ? 10 : room ? -1 : 1;
    if (tmo < 0 && f->sh->preparing) /* a deploy's prepare thread tells nobody it is done */
        tmo = 10;
    long ptmo = rkb_port_timeout(p, now);
    if (ptmo >= 0 && (tmo < 0 || ptmo < tmo))
        tmo = ptmo;
    int np = zmq_poll(items, ni, tmo);
    int err = np < 0 ? errno : 0;
    rkb_sleep_end(&f->wk, np > 0 && (items[ei].revents & ZMQ_POLLIN));
    if (np < 0 && err != EINTR) {
        /* workers may wait for reply room: keep emptying the rings until
         * they are gone */
        rkb_logk(RKB_LK_SYSTEM, RKB_LOG_ERROR, "zmq_poll: %s", zmq_strerror(err));
        usleep(1000);
    }
}

void rkb_front_run(rkb_front *f)
{
    rkb_port *p = &f->sh->port;
    /* each worker's share of the waiting bound, rounded up (at least one
     * request: --queue 2 with 3 workers must not stop them all) */
    const uint64_t nw = (uint64_t)f->sh->n_loops, qb = f->sh->cfg->queue_bytes, qn = f->sh->cfg->queue;
    f->share_bytes = qb / nw + (qb % nw != 0);
    f->share_n = qn / nw + (qn % nw != 0);
    int64_t spin_ns = rkb_spin_ns(f->sh->cpus);
    int64_t last_progress = rkb_now_ns(), last_read = 0;
    for (;;) {
        bool room = !rkb_deploying(f->sh); /* a deploy: requests wait in ZeroMQ */
        int progress = rkb__replies(f);
        int reads = f->stopping ? rkb__refuse(f) : room ? rkb__requests(f, &room) : 0;
        progress += reads;
        if (p->st.router) /* whatever the rings hold; it does not count as a read */
            progress += rkb_statusep_serve(p);
        if (f->wake_mask)
            rkb__wake_workers(f);
        int64_t now = rkb_now_ns();
        if (reads)
            last_read = now;
        if (now >= p->next_watch && rkb_port_watch(p, now) && !f->stopping)
            rkb__signal(f);
        if (rkb_deploy_busy(f->sh))
            progress += rkb_deploy_step(f->sh, NULL, now); /* the switch ended: read at once */
        if (rkb__done(f, now, last_read))
            break;
        if (progress) {
            last_progress = now;
            continue;
        }
        if (now - last_progress < spin_ns) {
            for (int k = 0; k < 16; k++)
                rkb_relax();
            continue;
        }
        rkb__block(f, room, now);
        if (rkb_port_watch(p, rkb_now_ns()) && !f->stopping)
            rkb__signal(f);
    }
}
