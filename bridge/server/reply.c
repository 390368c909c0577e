/* bridge/server/reply.c - a request loop's replies: built by the codec,
 * sent on the port (--io-threads 1) or pushed to the worker's reply ring,
 * each with the envelope its request came with. Counts errors by code. */
#include "server.h"

#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The worker's reply ring is full. The frontend empties the rings on every
 * pass and never waits for a worker, so room comes soon; tell it first (it
 * may be asleep: the replies of this burst were not announced yet). */
static rkb_item *rkb__wait_reply_room(rkb_loop *l)
{
    l->owe_wake = false;
    rkb_spsc_sp_publish(l->repq);
    rkb_wake(&l->sh->front->wk);
    rkb_item *it;
    for (int k = 0; !(it = rkb_spsc_sp_slot(l->repq)); k++) {
        if (k < 64)
            rkb_relax();
        else
            sched_yield();
    }
    return it;
}

/* Sends e's envelope followed by *body: to the ROUTER, or moved into the
 * next slot of the worker's reply ring (the frontend sends and counts it).
 * Either way every frame is moved on (or closed); the entry is freed right
 * after. */
static void rkb__deliver(rkb_loop *l, rkb_entry *e, zmq_msg_t *body)
{
    if (l->port) {
        rkb_port_send(l->port, &e->env, body);
        return;
    }
    rkb_item *it = rkb_spsc_sp_slot(l->repq);
    if (__builtin_expect(!it, 0))
        it = rkb__wait_reply_room(l);
    it->body = *body;
    rkb_env_move(&it->env, &e->env);
    it->n_body = 1;
    /* published with the burst (the loop's rkb__announce), or now when
     * the burst is long */
    rkb_spsc_sp_push(l->repq, RKB_PUBLISH_EVERY);
    e->env.n = 0;
    e->env.more = NULL;
    l->owe_wake = true; /* the loop tells the frontend after this burst */
}

static void rkb__free_buf(void *data, void *hint)
{
    (void)hint;
    free(data);
}

int rkb_msg_encoded(rkb_encoder *enc, zmq_msg_t *m)
{
    size_t sz = rkb_encoder_size(enc);
    if (sz > 4096) {
        /* large (a status): hand the buffer to ZeroMQ without a copy */
        void *buf = rkb_encoder_release(enc);
        if (zmq_msg_init_data(m, buf, sz, rkb__free_buf, NULL) == 0)
            return 0;
        free(buf);
    } else if (zmq_msg_init_size(m, sz) == 0) {
        memcpy(zmq_msg_data(m), rkb_encoder_data(enc), sz);
        return 0;
    }
    zmq_msg_init(m); /* out of memory: an empty frame, never sent */
    return -1;
}

void rkb_answer_encoded(rkb_loop *l, rkb_entry *e, int rc)
{
    zmq_msg_t m;
    if (rc == 0 && rkb_msg_encoded(&l->enc, &m) == 0) {
        rkb__deliver(l, e, &m);
        return;
    }
    /* out of memory: never the part that was packed, nor the last reply;
     * a short INTERNAL error instead (it fits the buffer the encoder kept),
     * else the request goes unanswered, logged */
    rkb_count_error(&l->n, RKB_E_INTERNAL);
    bool sent = rkb_encode_error(&l->enc, e->req.has_id, e->req.id, RKB_E_INTERNAL,
                                 "out of memory for the reply") == 0 && rkb_msg_encoded(&l->enc, &m) == 0;
    rkb_logk(RKB_LK_INTERNAL, RKB_LOG_ERROR, "INTERNAL: out of memory for the reply to id %" PRIu64 " (op %s): %s",
             e->req.id, rkb_op_name(e->req.op), sent ? "answered INTERNAL" : "not answered");
    if (sent)
        rkb__deliver(l, e, &m);
}

void rkb_count_error(rkb_counters *n, int code)
{
    RKB_INC(n, errors);
    switch (code) {
    case RKB_E_BUSY: RKB_INC(n, busy); break;
    case RKB_E_TOO_LARGE: RKB_INC(n, too_large); break;
    case RKB_E_MALFORMED: RKB_INC(n, malformed); break;
    case RKB_E_SHUTTING_DOWN: RKB_INC(n, shutting_down); break;
    case RKB_E_DEVICE_FAULT: RKB_INC(n, device_fault); break;
    case RKB_E_PERMISSION_DENIED: RKB_INC(n, permission_denied); break;
    case RKB_E_INTERNAL: RKB_INC(n, internal); break;
    default: break;
    }
}

void rkb_answer_error(rkb_loop *l, rkb_entry *e, int code, const char *fmt, ...)
{
    char msg[RKB_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rkb_count_error(&l->n, code);
    if (code == RKB_E_INTERNAL)
        rkb_logk(RKB_LK_INTERNAL, RKB_LOG_ERROR, "INTERNAL error answering id %" PRIu64 " (op %s): %s",
                 e->req.id, rkb_op_name(e->req.op), msg);
    rkb_answer_encoded(l, e, rkb_encode_error(&l->enc, e->req.has_id, e->req.id, code, msg));
}

/* Maps a runtime error of a send or a reply status onto the protocol. */
void rkb_answer_rk_error(rkb_loop *l, rkb_entry *e, int rc, const char *detail)
{
    int c = rc < 0 ? -rc : rc;
    const char *d = detail && detail[0] ? detail : rk_strerror(rc);
    const char *what = e->req.op == RKB_OP_ACTOR ? l->actors[e->req.u.actor.index].decl->name
                                                 : rkb_op_name(e->req.op);
    switch (c) {
    case RK_ENODEV: /* nothing failed: this backend cannot serve it (a GPU-only actor on the CPU) */
        rkb_answer_error(l, e, RKB_E_DEVICE_FAULT, "the %s backend cannot serve %s: %s",
                        l->info.backend_name, what, d);
        break;
    case RK_EDEVICE:
    case RK_ESELFTEST:
        rkb_answer_error(l, e, RKB_E_DEVICE_FAULT, "the %s backend failed with request %s in flight: %s",
                        l->info.backend_name, what, d);
        break;
    case RK_ECLOSED:
        rkb_answer_error(l, e, RKB_E_SHUTTING_DOWN, "the bridge is shutting down: %s", d);
        break;
    case RK_EMSGSIZE:
        rkb_answer_error(l, e, RKB_E_TOO_LARGE, "%s", d);
        break;
    case RK_EINVAL:
        rkb_answer_error(l, e, RKB_E_INVALID_ARGUMENT, "%s", d);
        break;
    default:
        rkb_answer_error(l, e, RKB_E_INTERNAL, "runtime error %s: %s", rk_err_name(rc), d);
        break;
    }
}

/* A runtime reply with data: the head (map, v, id, ok, key, bin header)
 * from the codec, then the payload copied once, from the runtime's reply
 * straight into the frame ZeroMQ sends. Releases r (its arena space goes
 * back before the send). */
/* One frame: head[0..hl) then r's payload; releases r. */
static void rkb__answer_frame(rkb_loop *l, rkb_entry *e, rk_reply *r, const uint8_t *head, size_t hl)
{
    zmq_msg_t m;
    if (zmq_msg_init_size(&m, hl + r->len) != 0) {
        size_t len = r->len;
        rk_reply_release(l->act, r);
        rkb_answer_error(l, e, RKB_E_INTERNAL, "out of memory for a reply of %zu B", len);
        return;
    }
    uint8_t *d = zmq_msg_data(&m);
    memcpy(d, head, hl);
    if (r->len)
        memcpy(d + hl, r->data, r->len);
    rk_reply_release(l->act, r);
    rkb__deliver(l, e, &m);
}

void rkb_answer_data(rkb_loop *l, rkb_entry *e, rk_reply *r)
{
    uint8_t head[RKB_DATA_HEAD_MAX];
    size_t hl = rkb_encode_data_head(&l->enc, head, e->req.has_id, e->req.id, e->req.op, r->len);
    rkb__answer_frame(l, e, r, head, hl);
}

void rkb_answer_actor(rkb_loop *l, rkb_entry *e, rk_reply *r)
{
    const rk_actor_decl *d = l->actors[e->req.u.actor.index].decl;
    if (r->status == -RK_EACTOR) {
        char words[200];
        int n = (int)(r->len < sizeof words - 1 ? r->len : sizeof words - 1);
        memcpy(words, r->data, (size_t)n);
        words[n] = '\0';
        for (int i = 0; i < n; i++) /* a sentence for a person, on one line */
            words[i] = (words[i] >= 0x20 && words[i] < 0x7f) ? words[i] : '?';
        rk_reply_release(l->act, r);
        rkb_answer_error(l, e, RKB_E_ACTOR_FAILED, "actor %s: %s", d->name, words);
        return;
    }
    if (d->n_outputs == 1) {
        uint8_t head[RKB_KEY_HEAD_MAX];
        size_t hl = rkb_encode_key_head(head, e->req.has_id, e->req.id, d->outputs[0], r->len);
        rkb__answer_frame(l, e, r, head, hl);
        return;
    }
    rk_field f[RK_FIELDS_MAX];
    int rc = rk_fields_parse(r->data, r->len, d->n_outputs, 0, f);
    if (rc == 0 && rkb_encode_fields(&l->enc, e->req.has_id, e->req.id, d->outputs, f, d->n_outputs) != 0)
        rc = -RK_ENOMEM;
    size_t len = r->len;
    rk_reply_release(l->act, r);
    if (rc == -RK_EPROTO)
        rkb_answer_error(l, e, RKB_E_ACTOR_FAILED, "actor %s: its %zu B reply is not its %u output fields "
                         "(rk/module.h: field layout)", d->name, len, d->n_outputs);
    else if (rc)
        rkb_answer_error(l, e, RKB_E_INTERNAL, "out of memory encoding a reply");
    else
        rkb_answer_encoded(l, e, 0);
}

void rkb_peek_into(rkb_request *req, const zmq_msg_t *body)
{
    uint64_t id;
    zmq_msg_t *b = (zmq_msg_t *)body; /* zmq_msg_data/size do not change it */
    if (rkb_peek_id(zmq_msg_data(b), zmq_msg_size(b), &id) == 0)
        req->has_id = true, req->id = id;
}
