/* bridge/server/loop.c - the request loop (see server.h): one thread, one
 * runtime actor. It loops:
 *   1. drain replies (rk_actor_recv, timeout 0), encode, send;
 *   2. retry requests waiting for admission, oldest first;
 *   3. read up to 256 requests (from the socket, or a worker's ring),
 *      decode, answer ping/status/launch and every error at once, send
 *      echo/vadd into the runtime (rk_actor_send_batch, timeout 0);
 *   4. when nothing moved: spin, yield while replies are owed, then block
 *      (zmq_poll on the socket, or a worker's eventfd).
 * The loop that owns the socket also answers the status endpoint
 * (statusep.c) on every pass, whether or not step 3 may read.
 * Step 3 collects the burst's echo/vadd requests and posts them with one
 * rk_actor_send_batch (one ring reservation, one doorbell); step 1 reaps
 * replies RKB_ADMIT_BATCH at a time (rk_actor_recv_batch).
 * Stopping (a signal): requests read from then on, and those waiting for
 * admission, get SHUTTING_DOWN; replies in flight are waited for. The loop
 * that owns the socket keeps reading until it has been quiet for
 * --shutdown-quiet-ms (every request a client sent before the signal is
 * then read and answered) and --shutdown-grace-ms has passed; a worker
 * leaves when its ring is empty (the frontend stopped feeding it when the
 * signal came). Nothing waits past --drain-ms. */
#include "server.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int64_t rkb_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- admission ------------------------------------------------------------ */

/* A module actor's request as the runtime takes it (rk/module.h: field
 * layout): its fields themselves, or a table head (in `table`) and each
 * field padded to 16 bytes. Returns the iov count. */
static int rkb__actor_iov(rkb_loop *l, rkb_entry *e, uint16_t *type, rk_iov *iov, uint8_t *table)
{
    static const uint8_t zeros[16];
    const rkb_actor *a = &l->actors[e->req.u.actor.index];
    const rk_actor_decl *d = a->decl;
    const rkb_bytes *in = e->req.u.actor.in;
    *type = a->type;
    int n = 0;
    if (d->n_inputs == 1 || (d->flags & RK_ACTOR_EQUAL_INPUTS)) {
        for (uint32_t i = 0; i < d->n_inputs; i++)
            iov[n++] = (rk_iov){in[i].ptr, in[i].len};
        return n;
    }
    size_t lens[RK_FIELDS_MAX];
    for (uint32_t i = 0; i < d->n_inputs; i++)
        lens[i] = in[i].len;
    rk_fields_write_head(table, d->n_inputs, lens);
    iov[n++] = (rk_iov){table, rk_fields_head(d->n_inputs)};
    for (uint32_t i = 0; i < d->n_inputs; i++) {
        iov[n++] = (rk_iov){in[i].ptr, in[i].len};
        if (in[i].len % 16)
            iov[n++] = (rk_iov){zeros, 16 - in[i].len % 16};
    }
    return n;
}

/* The runtime request of entry e: its type and payload (iov: room for
 * RKB_REQ_IOV; table: 64 bytes for a module actor's field table). */
static void rkb__req_of(rkb_loop *l, rkb_entry *e, rk_send_req *q, rk_iov *iov, uint8_t *table)
{
    *q = (rk_send_req){.type = RK_OP_ECHO, .iov = iov, .iovcnt = 1};
    if (e->req.op == RKB_OP_ACTOR) {
        q->iovcnt = rkb__actor_iov(l, e, &q->type, iov, table);
    } else if (e->req.op == RKB_OP_ECHO) {
        iov[0] = (rk_iov){e->req.u.echo.data.ptr, e->req.u.echo.data.len};
    } else if (e->req.op == RKB_OP_FAULT || e->req.op == RKB_OP_HANG) {
        q->type = e->req.op == RKB_OP_FAULT ? RK_OP_FAULT : RK_OP_HANG; /* --test-faults only */
        q->iov = NULL;
        q->iovcnt = 0;
    } else {
        q->type = RK_OP_VADD;
        iov[0] = (rk_iov){e->req.u.vadd.a.ptr, e->req.u.vadd.a.len};
        iov[1] = (rk_iov){e->req.u.vadd.b.ptr, e->req.u.vadd.b.len};
        q->iovcnt = 2;
    }
}

/* Entry idx was posted as runtime request id. */
static void rkb__admitted(rkb_loop *l, int32_t idx, uint64_t id)
{
    rkb_entry *e = &l->pool.e[idx];
    e->rk_id = id;
    e->state = RKB_INFLIGHT;
    rkb_pool_map_put(&l->pool, id, (uint32_t)idx);
    RKB_SET(l->pool.n_inflight, l->pool.n_inflight + 1);
    /* the payload is copied: give the frame back now */
    zmq_msg_close(&e->body);
    e->body_open = false;
}

/* No room now (window, ring or arena): wait for admission. */
static bool rkb__no_room(int rc)
{
    return rc == -RK_EBUSY || rc == -RK_ENOSPC || rc == -RK_ETIMEDOUT;
}

/* Tries to put entry idx into the ring. Returns 0 (in flight), 1 (no room
 * now: park or keep parked) or -1 (answered with an error; free it). */
static int rkb__admit(rkb_loop *l, int32_t idx)
{
    rkb_entry *e = &l->pool.e[idx];
    rk_send_req q;
    rk_iov iov[RKB_REQ_IOV];
    _Alignas(16) uint8_t table[64];
    rkb__req_of(l, e, &q, iov, table);
    uint64_t id;
    int rc = rk_actor_sendv(l->act, q.type, q.iov, q.iovcnt, 0, &id, 0);
    if (rc == 0) {
        rkb__admitted(l, idx, id);
        return 0;
    }
    if (rkb__no_room(rc))
        return 1;
    rkb_answer_rk_error(l, e, rc, rk_last_detail());
    return -1;
}

static void rkb__park(rkb_loop *l, int32_t idx)
{
    rkb_pool_park(&l->pool, idx, rkb_now_ns() + (int64_t)l->cfg->admission_ms * 1000000);
    RKB_INC(&l->n, queued_total);
}

/* Posts the requests a read burst admitted (l->adm, in the order read)
 * with rk_actor_send_batch: one ring reservation and one doorbell for the
 * lot. A request the runtime refuses is answered with its error; one that
 * finds no room is parked, and every one behind it too (FIFO). Returns how
 * many it handled. */
static int rkb__flush_admits(rkb_loop *l)
{
    int n = l->n_adm, done = 0;
    rk_send_req q[RKB_ADMIT_BATCH];
    rk_iov iov[RKB_ADMIT_BATCH][RKB_REQ_IOV];
    _Alignas(16) uint8_t table[RKB_ADMIT_BATCH][64];
    uint64_t ids[RKB_ADMIT_BATCH];
    for (int i = 0; i < n; i++)
        rkb__req_of(l, &l->pool.e[l->adm[i]], &q[i], iov[i], table[i]);
    while (done < n) {
        int k = rk_actor_send_batch(l->act, q + done, n - done, ids + done, 0);
        for (int i = 0; i < k; i++)
            rkb__admitted(l, l->adm[done + i], ids[done + i]);
        if (k > 0) {
            done += k;
            continue; /* k < n - done: the next call returns the error of the one that stopped it */
        }
        if (rkb__no_room(k)) {
            for (; done < n; done++)
                rkb__park(l, l->adm[done]);
            break;
        }
        rkb_entry *e = &l->pool.e[l->adm[done]];
        rkb_answer_rk_error(l, e, k, rk_last_detail());
        rkb_pool_put(&l->pool, l->adm[done++]);
    }
    l->n_adm = 0;
    l->adm_bytes = 0;
    return n;
}

/* Retries the parked FIFO in order; BUSY for those whose admission time ran
 * out; SHUTTING_DOWN for all of them once stopping. */
static int rkb__retry_parked(rkb_loop *l)
{
    rkb_pool *p = &l->pool;
    int progress = 0;
    int64_t now = 0;
    while (p->park_head >= 0) {
        int32_t idx = p->park_head;
        rkb_entry *e = &p->e[idx];
        int rc = l->stopping ? 2 : rkb__admit(l, idx);
        if (rc == 1) {
            if (!now)
                now = rkb_now_ns();
            if (now < e->deadline)
                break; /* keep FIFO order: nothing behind it goes first */
        }
        rkb_pool_unpark(p);
        progress++;
        if (rc == 0)
            continue; /* in flight now */
        if (rc == 2)
            rkb_answer_error(l, e, RKB_E_SHUTTING_DOWN,
                            "the bridge is shutting down; the request was still waiting for admission");
        else if (rc == 1)
            rkb_answer_error(l, e, RKB_E_BUSY,
                            "the bridge could not queue the request within the admission time of "
                            "%u ms (%u requests in flight, %u waiting)",
                            l->cfg->admission_ms, p->n_inflight, p->n_parked);
        rkb_pool_put(p, idx);
    }
    return progress;
}

/* ---- replies from the runtime ------------------------------------------------ */

static void rkb__on_reply(rkb_loop *l, rk_reply *r)
{
    int32_t idx = rkb_pool_map_take(&l->pool, r->id);
    if (idx < 0) {
        rkb_logk(RKB_LK_INTERNAL, RKB_LOG_ERROR, "INTERNAL: runtime reply id %llu matches no request",
                 (unsigned long long)r->id);
        RKB_INC(&l->n, internal);
        rk_reply_release(l->act, r);
        return;
    }
    RKB_SET(l->pool.n_inflight, l->pool.n_inflight - 1);
    rkb_entry *e = &l->pool.e[idx];
    if (e->req.op == RKB_OP_ACTOR && (r->status == 0 || r->status == -RK_EACTOR)) {
        rkb_answer_actor(l, e, r);
    } else if (r->status) {
        int st = r->status;
        char why[512]; /* its own: rk_last_detail() is the batch's last failed reply's */
        if (rk_reply_detail(l->act, r, why, sizeof why))
            snprintf(why, sizeof why, "%s", rk_strerror(st));
        rk_reply_release(l->act, r);
        rkb_answer_rk_error(l, e, st, why);
    } else {
        rkb_answer_data(l, e, r);
    }
    rkb_pool_put(&l->pool, idx);
}

/* The runtime failed and no reply will come for what it held: every
 * request still owed gets its error here, so each still gets one reply.
 * rc 0: the drain time ran out; SHUTTING_DOWN (a late runtime reply is
 * discarded with the actor). */
static void rkb__fail_inflight(rkb_loop *l, int rc)
{
    rkb_pool *p = &l->pool;
    for (uint32_t i = 0; i < p->n && p->n_inflight; i++)
        if (p->e[i].state == RKB_INFLIGHT) {
            rkb_pool_map_take(p, p->e[i].rk_id);
            RKB_SET(p->n_inflight, p->n_inflight - 1);
            if (rc)
                rkb_answer_rk_error(l, &p->e[i], rc, rk_last_detail());
            else /* (rkb__done: the drain time ran out) */
                rkb_answer_error(l, &p->e[i], RKB_E_SHUTTING_DOWN,
                                "the bridge is shutting down, and its drain time (--drain-ms %u) ran out "
                                "before the runtime answered the request", l->cfg->drain_ms);
            rkb_pool_put(p, (int32_t)i);
        }
}

static int rkb__drain_replies(rkb_loop *l)
{
    int n = 0;
    rk_reply r[RKB_ADMIT_BATCH];
    while (l->pool.n_inflight) {
        int rc = rk_actor_recv_batch(l->act, r, RKB_ADMIT_BATCH, 0);
        if (rc > 0) {
            for (int i = 0; i < rc; i++)
                rkb__on_reply(l, &r[i]);
            n += rc;
            continue;
        }
        if (rc != -RK_ETIMEDOUT && rc != -RK_EAGAIN) {
            rkb_logk(RKB_LK_RUNTIME, RKB_LOG_ERROR, "the runtime failed (%s): %s", rk_err_name(rc),
                     rk_last_detail());
            /* every request still owed comes back as a reply with that
             * status (rk_actor_recv's contract); if none does, answer them */
            if (rc == -RK_EDEVICE)
                rkb__fail_inflight(l, rc);
        }
        break;
    }
    return n;
}

/* ---- requests ----------------------------------------------------------------- */

/* The ops answered at once (ping, status, launch). */
static void rkb__answer_now(rkb_loop *l, rkb_entry *e)
{
    if (rkb_op_is_admin(e->req.op) && !rkb_is_admin(l, e)) {
        rkb_logk(RKB_LK_DENIED, RKB_LOG_WARN, "refused `%s` from a client that is not an admin",
                 rkb_op_name(e->req.op));
        rkb_answer_error(l, e, RKB_E_PERMISSION_DENIED,
                        "`%s` is an admin operation and this client is not an admin (the operator "
                        "names admins with --curve-admin-dir, or allows everyone with --allow-admin-ops)",
                        rkb_op_name(e->req.op));
        return;
    }
    if (e->req.op == RKB_OP_PING) {
        rkb_answer_encoded(l, e, rkb_encode_ping(&l->enc, e->req.has_id, e->req.id, l->info.backend_name));
    } else if (e->req.op == RKB_OP_STATUS) {
        rkb_do_status(l, e);
    } else if (e->req.op == RKB_OP_LAUNCH) {
        rkb_do_launch(l, e);
    } else if (e->req.op == RKB_OP_RETRY_GPU) {
        rkb_do_retry_gpu(l, e);
    } else {
        rkb_answer_error(l, e, RKB_E_INTERNAL, "decoder returned op %d", (int)e->req.op);
    }
}

/* Answers or admits the request whose frames were just put into entry idx
 * (taken from the pool): envelope in e->env, and when n_body > 0 the first
 * body frame in e->body. */
static inline __attribute__((always_inline)) void rkb__on_request(rkb_loop *l, int32_t idx,
                                                                  uint32_t n_body)
{
    rkb_entry *e = &l->pool.e[idx];
    memset(&e->req, 0, sizeof e->req);
    e->body_open = n_body > 0;
    if (l->stopping) { /* every request read once stopping (PROTOCOL.md), as the frontend's */
        if (n_body)
            rkb_peek_into(&e->req, &e->body);
        rkb_answer_error(l, e, RKB_E_SHUTTING_DOWN, "the bridge is shutting down");
    } else if (n_body != 1) {
        if (n_body > 1)
            rkb_peek_into(&e->req, &e->body);
        rkb_answer_error(l, e, RKB_E_MALFORMED,
                        "the request has %u body frames; the protocol allows exactly one (behind a "
                        "proxy, send an empty delimiter frame before the body)", n_body);
    } else {
        rkb_error err;
        int rc = rkb_decode_request(zmq_msg_data(&e->body), zmq_msg_size(&e->body), &l->lim,
                                    &e->req, &l->dec, &err);
        if (rc) {
            rkb_answer_error(l, e, err.code, "%s", err.message);
        } else if (e->req.op != RKB_OP_ECHO && e->req.op != RKB_OP_VADD && e->req.op != RKB_OP_FAULT &&
                   e->req.op != RKB_OP_HANG && e->req.op != RKB_OP_ACTOR) {
            rkb__answer_now(l, e);
        } else {
            /* FIFO: behind whatever already waits; else into this burst's
             * batch, posted at its end (or when the batch is full) */
            if (l->pool.park_head >= 0) {
                rkb__park(l, idx);
                return;
            }
            e->state = RKB_STAGED;
            l->adm[l->n_adm++] = idx;
            l->adm_bytes += zmq_msg_size(&e->body);
            if (l->n_adm == RKB_ADMIT_BATCH)
                rkb__flush_admits(l);
            return;
        }
    }
    rkb_pool_put(&l->pool, idx);
}

/* Takes one request (from the socket, or a worker's ring) into the free
 * entry and answers or admits it. Returns 1 when a message was taken. */
static int rkb__read_one(rkb_loop *l)
{
    int32_t idx = l->pool.free_head;
    rkb_entry *e = &l->pool.e[idx];
    uint32_t n_body;
    if (l->port) {
        /* straight into the free entry; it is taken only once filled */
        int r = rkb_port_recv(l->port, &e->env, &e->body, &n_body);
        if (r <= 0)
            return r < 0;
    } else {
        rkb_item *it = rkb_spsc_sc_peek(l->reqq);
        if (!it)
            return 0;
        /* what the frontend counted when it pushed it (rkb__publish_left) */
        l->taken_bytes += it->n_body ? zmq_msg_size(&it->body) : 0;
        l->taken_n++;
        /* move the frames out; the slot goes back to the frontend (the
         * burst's last at the latest: rkb_loop_run) */
        rkb_env_move(&e->env, &it->env);
        n_body = it->n_body;
        if (n_body)
            e->body = it->body;
        rkb_spsc_sc_pop(l->reqq, RKB_PUBLISH_EVERY);
    }
    rkb_pool_take(&l->pool);
    rkb__on_request(l, idx, n_body);
    return 1;
}

/* A request has somewhere to go: a free entry, and room to wait. With
 * --io-threads 1 that is --queue and --queue-bytes, a burst's staged
 * requests included (the flush parks them all when the runtime has no
 * room: a burst of large frames overshot --queue-bytes by up to 64); the
 * next frame is taken below the bound whatever its size, so one larger
 * than --queue-bytes still gets in, alone. A worker's requests were
 * counted when the frontend pushed them (frontend.c, rkb__slot): taking
 * one from its ring adds nothing. */
static bool rkb__can_read(const rkb_loop *l)
{
    if (!l->port)
        return l->pool.n_free != 0;
    return l->pool.n_free && !rkb_deploying(l->sh) && l->pool.n_parked + (uint32_t)l->n_adm < l->cfg->queue &&
           l->pool.parked_bytes + l->adm_bytes < l->cfg->queue_bytes;
}

/* A worker tells the frontend which of the requests it popped wait no
 * longer: all but those parked (none is staged here, after the flush), so
 * their part of the bound is free again. Once per pass, and only when it
 * changed (the frontend reads the line for every request it pushes).
 * Relaxed: it carries no data, only a count that grows; the frontend's
 * relaxed load may see an older, smaller one, which makes it stop early
 * for a pass, never go past the bound. */
static void rkb__publish_left(rkb_loop *l)
{
    uint64_t b = l->taken_bytes - l->pool.parked_bytes, n = l->taken_n - l->pool.n_parked;
    if (b != l->left_bytes)
        RKB_SET(l->left_bytes, b);
    if (n != l->left_n)
        RKB_SET(l->left_n, n);
}

/* ---- running and stopping ------------------------------------------------------- */

static void rkb__begin_stop(rkb_loop *l, int64_t at)
{
    rkb_deploy_cancel(l->sh);
    l->stopping = true;
    l->stop_at = at;
    rkb_log(RKB_LOG_INFO, "stopping: %u request(s) in flight, %u waiting; answering new ones "
            "with SHUTTING_DOWN", l->pool.n_inflight, l->pool.n_parked);
}

/* True when the loop may leave (see the top of this file). */
static bool rkb__done(rkb_loop *l, int64_t now, int64_t last_read)
{
    const rkb_config *c = l->cfg;
    if (now >= l->stop_at + (int64_t)c->drain_ms * 1000000) {
        if (l->pool.n_inflight) {
            /* every request read before the signal still gets a reply */
            rkb_log(RKB_LOG_WARN, "stopping: %u request(s) still in flight after --drain-ms %u; "
                    "answering them SHUTTING_DOWN", l->pool.n_inflight, c->drain_ms);
            rkb__fail_inflight(l, 0);
        }
        /* what waits for admission, or in a worker's ring, costs no wait
         * to answer: SHUTTING_DOWN now, not left unanswered (the drain
         * time can run out in the pass that saw the signal: --drain-ms 0,
         * or a worker that saw it late) */
        if (l->pool.n_parked)
            rkb__retry_parked(l);
        while (!l->port && rkb__can_read(l) && rkb__read_one(l))
            ;
        return true;
    }
    if (l->pool.n_inflight || l->pool.n_parked)
        return false;
    if (!l->port)
        return !rkb_spsc_sc_peek(l->reqq);
    /* quiet since the signal at least: a request on its way when it came
     * (an idle bridge's last read may be long past) is still read */
    int64_t quiet_from = last_read > l->stop_at ? last_read : l->stop_at;
    return now >= l->stop_at + (int64_t)c->shutdown_grace_ms * 1000000 &&
           now - quiet_from >= (int64_t)c->shutdown_quiet_ms * 1000000;
}

/* What stopped or may stop the loop: a signal on the port, or the
 * frontend's word to a worker. */
static void rkb__check_stop(rkb_loop *l, int64_t now, bool watch)
{
    if (l->port) {
        if (watch && rkb_port_watch(l->port, now) && !l->stopping) {
            rkb_notify("STOPPING=1");
            rkb__begin_stop(l, now);
        }
    } else if (!l->stopping && __atomic_load_n(&l->sh->stopping, __ATOMIC_ACQUIRE)) {
        /* acquire: pairs with the release in rkb_stop_workers (stop_at, and
         * every request the frontend pushed before it) */
        l->stopping = true;
        l->stop_at = l->sh->stop_at;
    }
}

/* A worker blocks on its eventfd (tmo ms, -1 = until woken). */
static void rkb__worker_sleep(rkb_loop *l, long tmo, bool can_read)
{
    rkb_sleep_prepare(&l->wk);
    /* the re-check after S1: a request the frontend published before P1 */
    if (can_read && rkb_spsc_sc_peek(l->reqq)) {
        rkb_sleep_end(&l->wk, false);
        return;
    }
    struct pollfd p = {l->wk.efd, POLLIN, 0};
    int np = poll(&p, 1, (int)tmo);
    if (np < 0 && errno != EINTR)
        rkb_logk(RKB_LK_SYSTEM, RKB_LOG_ERROR, "poll: %s", strerror(errno));
    rkb_sleep_end(&l->wk, np > 0 && (p.revents & POLLIN));
}

/* Blocks until something may have happened: tmo ms, -1 = no limit. */
static void rkb__block(rkb_loop *l, long tmo, int64_t now)
{
    bool can_read = rkb__can_read(l);
    if (!l->port) {
        rkb__worker_sleep(l, l->stopping && tmo < 0 ? 10 : tmo, can_read);
        return;
    }
    long ptmo = rkb_port_timeout(l->port, now);
    if (ptmo >= 0 && (tmo < 0 || ptmo < tmo))
        tmo = ptmo;
    /* stop reading when the queue is full: poll only signals, events and
     * the status endpoint */
    zmq_pollitem_t items[1 + RKB_PORT_POLL_MAX] = {{l->port->router, 0, ZMQ_POLLIN, 0}};
    int ni = rkb_port_poll_items(l->port, items + 1);
    int np = zmq_poll(can_read ? items : items + 1, can_read ? ni + 1 : ni, tmo);
    if (np < 0 && errno != EINTR)
        rkb_logk(RKB_LK_SYSTEM, RKB_LOG_ERROR, "zmq_poll: %s", zmq_strerror(errno));
    rkb__check_stop(l, rkb_now_ns(), true);
}

/* How long to block when nothing moved (ms, -1 = until something happens). */
static long rkb__block_ms(const rkb_loop *l, int64_t now, int64_t last_read)
{
    bool busy = l->pool.n_inflight || l->pool.n_parked;
    if (busy)
        return 1;
    if (l->port && rkb_deploy_busy(l->sh)) /* a deploy's prepare thread tells nobody it is done */
        return 10;
    if (!l->stopping || !l->port)
        return -1;
    const rkb_config *c = l->cfg;
    int64_t until = l->stop_at + (int64_t)c->shutdown_grace_ms * 1000000;
    int64_t quiet = (last_read > l->stop_at ? last_read : l->stop_at) +
                    (int64_t)c->shutdown_quiet_ms * 1000000; /* as rkb__done */
    if (quiet > until)
        until = quiet;
    return until > now ? (long)((until - now) / 1000000) + 1 : 0;
}

/* A worker hands the replies of its burst to the frontend (and wakes it
 * if it sleeps). */
static void rkb__announce(rkb_loop *l)
{
    l->owe_wake = false;
    rkb_spsc_sp_publish(l->repq);
    rkb_wake(&l->sh->front->wk);
}

void rkb_loop_run(rkb_loop *l)
{
    int64_t last_progress = rkb_now_ns(), last_read = 0;
    /* while replies are owed: spin (pause) this long, then yield, then poll */
    int64_t spin_ns = rkb_spin_ns(l->sh->cpus);
    int64_t yield_ns = getenv("RKB_YIELD_NS") ? atoll(getenv("RKB_YIELD_NS")) : 2000000;
    for (;;) {
        if (!l->port && rkb_deploy_hold(l)) { /* a deploy runs: hands off the runtime */
            rkb__worker_sleep(l, 10, false);
            continue;
        }
        int progress = rkb__drain_replies(l);
        if (l->pool.n_parked)
            progress += rkb__retry_parked(l);
        /* a worker announces its replies before the (longer) read burst */
        if (l->owe_wake)
            rkb__announce(l);
        int reads = 0;
        for (int k = 0; k < 256 && rkb__can_read(l) && rkb__read_one(l); k++)
            reads++;
        if (!l->port)
            rkb_spsc_sc_publish(l->reqq); /* the slots of the burst's requests */
        if (l->n_adm)
            rkb__flush_admits(l);
        if (!l->port)
            rkb__publish_left(l);
        else if (l->port->st.router) /* whatever the bound (rkb__can_read) */
            progress += rkb_statusep_serve(l->port);
        progress += reads;
        int64_t now = rkb_now_ns();
        if (reads)
            last_read = now;
        if (l->owe_wake)
            rkb__announce(l);
        rkb__check_stop(l, now, l->port && now >= l->port->next_watch);
        if (l->port && rkb_deploy_busy(l->sh))
            progress += rkb_deploy_step(l->sh, l, now); /* the switch ended: read at once */
        if (l->stopping && rkb__done(l, now, last_read))
            break;
        if (progress) {
            last_progress = now;
            continue;
        }
        /* spin also for a while after the last request, not only while
         * replies are owed: a client that sends its next request right
         * after a reply (or a frontend handing one over) finds this thread
         * awake, not asleep (a wake-up costs more than the whole relay) */
        int64_t idle = now - last_progress;
        if (idle < spin_ns) {
            for (int k = 0; k < 16; k++)
                rkb_relax();
            continue;
        }
        bool busy = l->pool.n_inflight || l->pool.n_parked;
        if (busy && idle < yield_ns) {
            sched_yield();
            continue;
        }
        rkb__block(l, rkb__block_ms(l, now, last_read), now);
    }
}

void *rkb_worker_main(void *arg)
{
    rkb_loop *l = arg;
    char name[16]; /* what top -H and perf show: which thread saturates */
    snprintf(name, sizeof name, "rkb-worker-%d", l->index);
    pthread_setname_np(pthread_self(), name);
    rkb_loop_run(l);
    /* every reply pushed and every slot popped is published before `live`
     * drops (the loop's last pass did; this keeps it true whatever the
     * loop's exits) */
    rkb_spsc_sp_publish(l->repq);
    rkb_spsc_sc_publish(l->reqq);
    /* release: pairs with the frontend's acquire of live == 0, after which
     * it owns both rings (every reply of this worker is published) */
    __atomic_sub_fetch(&l->sh->live, 1, __ATOMIC_RELEASE);
    rkb_wake(&l->sh->front->wk); /* it need not wait for its next look */
    return NULL;
}

/* ---- one loop's state ------------------------------------------------------------ */

int rkb_loop_init(rkb_loop *l)
{
    const rkb_config *c = l->cfg;
    rkb_decode_state_init(&l->dec);
    rk_runtime_info(l->sh->rt, &l->info);
    if (rkb_encoder_init(&l->enc)) {
        fprintf(stderr, "rk-bridge: out of memory for the reply encoder\n");
        return -1;
    }
    /* several devices (--devices): loop i serves device i mod n, so each
     * device has a loop of its own (run.c makes enough) */
    int nd = rk_runtime_device_count(l->sh->rt);
    if (rk_actor_open_on(l->sh->rt, l->index % nd, &l->act)) {
        fprintf(stderr, "rk-bridge: rk_actor_open: %s\n", rk_last_detail());
        return -1;
    }
    if (rkb_pool_init(&l->pool, c->rk.actor_window + c->queue, c->rk.actor_window)) {
        fprintf(stderr, "rk-bridge: out of memory for %u request entries\n",
                c->rk.actor_window + c->queue);
        return -1;
    }
    l->lim = RKB_LIMITS_DEFAULT;
    l->lim.max_frame = c->max_message_bytes;
    l->lim.test_ops = c->rk.test_faults;
    if (rkb_loop_actors(l)) {
        fprintf(stderr, "rk-bridge: out of memory for the actor table\n");
        return -1;
    }
    return 0;
}

int rkb_loop_actors(rkb_loop *l)
{
    /* the module actors (after the built-ins echo and vadd, decoded as ops) */
    int n = rk_runtime_actor_count(l->sh->rt) - RK_BUILTIN_ACTORS;
    rkb_actor *a = calloc(n > 0 ? (size_t)n : 1, sizeof *a);
    free(l->actors); /* its declarations are gone after a deploy: never kept */
    l->actors = a;
    l->lim.actors = a;
    l->lim.n_actors = 0;
    if (!a)
        return -1;
    for (int i = 0; i < n; i++)
        a[i].decl = rk_runtime_actor_at(l->sh->rt, i + RK_BUILTIN_ACTORS, &a[i].type, NULL);
    l->lim.n_actors = n > 0 ? (size_t)n : 0;
    return 0;
}

/* After the sockets are closed. */
void rkb_loop_fini(rkb_loop *l)
{
    free(l->actors);
    l->actors = NULL;
    rkb_pool_fini(&l->pool);
    rkb_decode_state_destroy(&l->dec);
    rkb_encoder_destroy(&l->enc);
    rk_actor_close(l->act);
    l->act = NULL;
    rkb_waker_fini(&l->wk);
    free(l->reqq);
    free(l->repq);
    l->reqq = l->repq = NULL;
}
