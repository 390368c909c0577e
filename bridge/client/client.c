/* bridge/client/client.c - librkc's socket: connect, send (any op by name
 * with named fields), receive and match replies by id. Replies: reply.c. */
#include "impl.h"

#include "endpoint.h" /* bridge/protocol: the check rk-bridge's binds use */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int rkc__fail(rkc *c, int code, const char *fmt, ...)
{
    if (c) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, sizeof c->err, fmt, ap);
        va_end(ap);
    }
    return code;
}

static int64_t rkc__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

const char *rkc_errmsg(const rkc *c) { return c ? c->err : "no client"; }

static _Thread_local char rkc__connect_err[512];
const char *rkc_last_error(void) { return rkc__connect_err; }

static int rkc__connect_fail(rkc *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int rkc__connect_fail(rkc *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rkc__connect_err, sizeof rkc__connect_err, fmt, ap);
    va_end(ap);
    rkc_close(c);
    return code;
}
void *rkc_socket(rkc *c) { return c->sock; }

int rkc_connect(rkc **out, const char *endpoint, const rkc_options *opt)
{
    static const rkc_options def = {0};
    rkc__connect_err[0] = 0;
    if (!out || !endpoint)
        return rkc__connect_fail(NULL, -EINVAL, "no endpoint");
    *out = NULL;
    /* ZeroMQ says only EINVAL for a malformed endpoint: say what is wrong */
    char why[256];
    if (rkb_endpoint_problem(endpoint, false, why, sizeof why))
        return rkc__connect_fail(NULL, -EINVAL, "cannot connect to %s: %s", endpoint, why);
    if (!opt)
        opt = &def;
    if (opt->socket_type != RKC_DEALER && opt->socket_type != RKC_REQ)
        return rkc__connect_fail(NULL, -EINVAL, "socket type %d: expected RKC_DEALER (%d) or RKC_REQ (%d)",
                                 opt->socket_type, RKC_DEALER, RKC_REQ);
    rkc *c = calloc(1, sizeof *c);
    if (!c)
        return rkc__connect_fail(NULL, -ENOMEM, "out of memory");
    c->type = opt->socket_type;
    c->next_id = 1;
    msgpack_sbuffer_init(&c->sbuf);
    msgpack_packer_init(&c->pk, &c->sbuf, msgpack_sbuffer_write);
    c->ctx = zmq_ctx_new();
    c->sock = c->ctx ? zmq_socket(c->ctx, c->type == RKC_REQ ? ZMQ_REQ : ZMQ_DEALER) : NULL;
    if (!c->sock)
        return rkc__connect_fail(c, -EIO, "zmq_socket: %s", zmq_strerror(errno));
    int linger = 0;
    zmq_setsockopt(c->sock, ZMQ_LINGER, &linger, sizeof linger);
    int hwm = 100000;
    zmq_setsockopt(c->sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(c->sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
    if (c->type == RKC_REQ) {
        /* a request that got no reply (a bridge gone mid-call) must not
         * leave plain REQ refusing every later send (EFSM); a late reply
         * to it is dropped by its request-id frame (an envelope frame the
         * bridge hands back, PROTOCOL.md "Transport") */
        int on = 1;
        zmq_setsockopt(c->sock, ZMQ_REQ_RELAXED, &on, sizeof on);
        zmq_setsockopt(c->sock, ZMQ_REQ_CORRELATE, &on, sizeof on);
    }
    if (opt->server_public_key) {
        /* ZeroMQ reads 40 bytes of a key whatever its length, and
         * zmq_curve_public decodes a longer secret key past its buffer */
        size_t sl = strlen(opt->server_public_key), kl = opt->secret_key ? strlen(opt->secret_key) : 40;
        if (sl != 40 || kl != 40)
            return rkc__connect_fail(c, -EINVAL, "CURVE keys refused: the %s key is %zu characters; a Z85 key is 40",
                                     sl != 40 ? "server's public" : "client's secret", sl != 40 ? sl : kl);
        char pub[41];
        if (!opt->secret_key || zmq_curve_public(pub, opt->secret_key) != 0 ||
            zmq_setsockopt(c->sock, ZMQ_CURVE_SERVERKEY, opt->server_public_key, 40) != 0 ||
            zmq_setsockopt(c->sock, ZMQ_CURVE_PUBLICKEY, pub, 40) != 0 ||
            zmq_setsockopt(c->sock, ZMQ_CURVE_SECRETKEY, opt->secret_key, 40) != 0)
            return rkc__connect_fail(c, -EINVAL, "CURVE keys refused: %s",
                                     opt->secret_key ? zmq_strerror(errno) : "no client secret key");
    }
    if (zmq_connect(c->sock, endpoint) != 0)
        return rkc__connect_fail(c, -EINVAL, "cannot connect to %s: %s", endpoint,
                                 zmq_strerror(errno));
    *out = c;
    return 0;
}

void rkc_close(rkc *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->stash_n; i++)
        rkc_reply_free(&c->stash[i]);
    free(c->stash);
    if (c->sock)
        zmq_close(c->sock);
    if (c->ctx)
        zmq_ctx_term(c->ctx);
    msgpack_sbuffer_destroy(&c->sbuf);
    free(c);
}

/* The end of a wait of timeout_ms (-1: none) that starts now: one
 * deadline for all of a call, its send and its wait, and every poll. */
static int64_t rkc__deadline(int timeout_ms)
{
    return timeout_ms < 0 ? INT64_MAX : rkc__now_ns() + (int64_t)timeout_ms * 1000000;
}

/* What is left of deadline, in ms rounded up for zmq_poll (-1: forever). */
static int rkc__left_ms(int64_t deadline)
{
    if (deadline == INT64_MAX)
        return -1;
    int64_t now = rkc__now_ns();
    return now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
}

/* timeout_ms: the caller's, for the message. A handled signal is -EINTR
 * (rk/client.h): zmq_poll is never restarted, and the caller decides. */
static int rkc__poll(rkc *c, short ev, int64_t deadline, int timeout_ms)
{
    zmq_pollitem_t it = {c->sock, 0, ev, 0};
    int rc = zmq_poll(&it, 1, rkc__left_ms(deadline));
    if (rc < 0 && errno == EINTR)
        return rkc__fail(c, -EINTR, "a signal came while waiting %s (zmq_poll: %s)",
                         ev == ZMQ_POLLIN ? "for a reply" : "to send", zmq_strerror(EINTR));
    if (rc < 0)
        return rkc__fail(c, -EIO, "zmq_poll: %s", zmq_strerror(errno));
    return rc ? 0 : rkc__fail(c, -ETIMEDOUT, "no reply within %d ms", timeout_ms);
}

/* Receives one message off the socket (the body is its last frame). */
static int rkc__recv_wire(rkc *c, rkc_reply *out, int64_t deadline, int timeout_ms)
{
    rkc_impl *im = malloc(sizeof *im);
    if (!im)
        return rkc__fail(c, -ENOMEM, "out of memory");
    zmq_msg_init(&im->msg);
    im->text = NULL;
    for (;;) {
        int rc = zmq_msg_recv(&im->msg, c->sock, ZMQ_DONTWAIT);
        if (rc < 0 && errno == EAGAIN) {
            rc = rkc__poll(c, ZMQ_POLLIN, deadline, timeout_ms);
            if (rc) {
                zmq_msg_close(&im->msg);
                free(im);
                return rc;
            }
            continue;
        }
        if (rc < 0) {
            int e = errno;
            zmq_msg_close(&im->msg);
            free(im);
            return rkc__fail(c, e == EINTR ? -EINTR : -EIO, "zmq_msg_recv: %s", zmq_strerror(e));
        }
        if (!zmq_msg_more(&im->msg))
            break;
        /* leading frames (an envelope on odd setups): keep the last one */
    }
    return rkc__parse(c, im, out);
}

/* A late reply to an rkc_call that gave up on it: true, and r is freed. */
static bool rkc__drop_gone(rkc *c, rkc_reply *r)
{
    for (size_t i = 0; r->has_id && r->id && i < sizeof c->gone / sizeof *c->gone; i++)
        if (c->gone[i] == r->id) {
            c->gone[i] = 0;
            rkc_reply_free(r);
            return true;
        }
    return false;
}

int rkc_recv(rkc *c, rkc_reply *out, int timeout_ms)
{
    if (!c || !out)
        return -EINVAL;
    if (c->stash_n) {
        *out = c->stash[0];
        memmove(c->stash, c->stash + 1, (c->stash_n - 1) * sizeof *c->stash);
        c->stash_n--;
        return 0;
    }
    const int64_t deadline = rkc__deadline(timeout_ms);
    int rc;
    while ((rc = rkc__recv_wire(c, out, deadline, timeout_ms)) == 0 && rkc__drop_gone(c, out))
        ;
    return rc;
}

/* rkc_wait until deadline (timeout_ms: the caller's, for the message). */
static int rkc__wait(rkc *c, uint64_t id, rkc_reply *out, int64_t deadline, int timeout_ms)
{
    for (size_t i = 0; i < c->stash_n; i++)
        if (c->stash[i].has_id && c->stash[i].id == id) {
            *out = c->stash[i];
            memmove(c->stash + i, c->stash + i + 1, (c->stash_n - i - 1) * sizeof *c->stash);
            c->stash_n--;
            return 0;
        }
    for (;;) {
        rkc_reply r;
        int rc = rkc__recv_wire(c, &r, deadline, timeout_ms);
        if (rc)
            return rc;
        if (rkc__drop_gone(c, &r))
            continue;
        /* an id-less reply (the bridge could not read the id) is the
         * answer when nothing else is owed: REQ, or a single call */
        if ((r.has_id && r.id == id) || (!r.has_id && c->type == RKC_REQ)) {
            *out = r;
            return 0;
        }
        if (c->stash_n == c->stash_cap) {
            size_t cap = c->stash_cap ? c->stash_cap * 2 : 16;
            rkc_reply *s = realloc(c->stash, cap * sizeof *s);
            if (!s) {
                rkc_reply_free(&r);
                return rkc__fail(c, -ENOMEM, "out of memory");
            }
            c->stash = s;
            c->stash_cap = cap;
        }
        c->stash[c->stash_n++] = r;
    }
}

int rkc_wait(rkc *c, uint64_t id, rkc_reply *out, int timeout_ms)
{
    if (!c || !out)
        return -EINVAL;
    return rkc__wait(c, id, out, rkc__deadline(timeout_ms), timeout_ms);
}

/* delim (DEALER): the empty delimiter frame first, as REQ sends it, so that the
 * reply finds its way back through any broker (bridge/PROTOCOL.md). */
static int rkc__send_buf(rkc *c, const void *buf, size_t len, int64_t deadline, int timeout_ms, bool delim)
{
    for (;;) {
        /* the rest of a message whose first frame went is always taken */
        if (delim && zmq_send(c->sock, "", 0, ZMQ_DONTWAIT | ZMQ_SNDMORE) >= 0)
            return zmq_send(c->sock, buf, len, 0) >= 0 ? 0
                   : rkc__fail(c, -EIO, "zmq_send: %s", zmq_strerror(errno));
        if (!delim && zmq_send(c->sock, buf, len, ZMQ_DONTWAIT) >= 0)
            return 0;
        if (errno != EAGAIN)
            return rkc__fail(c, -EIO, "zmq_send: %s", zmq_strerror(errno));
        int rc = rkc__poll(c, ZMQ_POLLOUT, deadline, timeout_ms);
        if (rc == -ETIMEDOUT)
            return rkc__fail(c, rc, "could not send within %d ms", timeout_ms);
        if (rc)
            return rc;
    }
}

int rkc_send_raw(rkc *c, const void *frame, size_t len, int timeout_ms)
{
    if (!c || (!frame && len))
        return -EINVAL;
    return rkc__send_buf(c, frame, len, rkc__deadline(timeout_ms), timeout_ms, false);
}

static void rkc__key(msgpack_packer *pk, const char *k)
{
    size_t n = strlen(k);
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, k, n);
}

/* Fields a request can carry: the bridge decodes at most 4096 msgpack
 * objects (PROTOCOL.md, "Decoder limits"), the map and a key and a value
 * for v, id, op and each field. Beyond, its MALFORMED has id nil, a reply
 * rkc_wait on a DEALER does not take for its request's. */
#define RKC_MAX_FIELDS ((4096 - 1) / 2 - 3)

/* Checks rq's named fields (and the n_own of its op); 0 or -EINVAL /
 * -E2BIG with c's message set. */
static int rkc__check_fields(rkc *c, const rkc_request *rq, size_t n_own)
{
    if (rq->n_fields && !rq->fields)
        return rkc__fail(c, -EINVAL, "%zu fields and no field array", rq->n_fields);
    if (rq->n_fields > RKC_MAX_FIELDS - n_own)
        return rkc__fail(c, -EINVAL, "%zu fields: a request carries at most %d (the bridge decodes at most 4096 "
                         "msgpack objects)", rq->n_fields + n_own, RKC_MAX_FIELDS);
    for (size_t i = 0; i < rq->n_fields; i++) {
        const rkc_field *f = &rq->fields[i];
        if (!f->name || !*f->name)
            return rkc__fail(c, -EINVAL, "field %zu has no name", i);
        if (!strcmp(f->name, "v") || !strcmp(f->name, "id") || !strcmp(f->name, "op"))
            return rkc__fail(c, -EINVAL, "field `%s` is the protocol's own key", f->name);
        if (f->type != RKC_BIN && f->type != RKC_STR && f->type != RKC_UINT)
            return rkc__fail(c, -EINVAL, "field `%s` has type %d: expected RKC_BIN, RKC_STR or RKC_UINT",
                             f->name, (int)f->type);
        if (f->type != RKC_UINT && f->len && !f->data)
            return rkc__fail(c, -EINVAL, "field `%s` has %zu bytes at NULL", f->name, f->len);
        if (f->type != RKC_UINT && f->len > UINT32_MAX)
            return rkc__fail(c, -E2BIG, "field `%s` is %zu bytes: msgpack carries at most %u", f->name,
                             f->len, UINT32_MAX);
        for (size_t j = 0; j < i; j++)
            if (!strcmp(rq->fields[j].name, f->name))
                return rkc__fail(c, -EINVAL, "field `%s` is given twice", f->name);
    }
    return 0;
}

/* Packs one field; nonzero when the buffer could not grow. */
static int rkc__pack_field(msgpack_packer *pk, const rkc_field *f)
{
    size_t n = strlen(f->name);
    int e = msgpack_pack_str(pk, n) | msgpack_pack_str_body(pk, f->name, n);
    if (f->type == RKC_UINT)
        return e | msgpack_pack_uint64(pk, f->u);
    if (f->type == RKC_STR)
        return e | msgpack_pack_str(pk, f->len) | msgpack_pack_str_body(pk, f->data, f->len);
    return e | msgpack_pack_bin(pk, f->len) | msgpack_pack_bin_body(pk, f->data, f->len);
}

/* The fields of the enum's ops, as named fields (vadd: float32 in memory is
 * little-endian on every host this targets). Returns how many. */
static size_t rkc__op_fields(const rkc_request *rq, rkc_field f[3])
{
    switch (rq->op) {
    case RKC_ECHO:
        f[0] = (rkc_field){"data", rq->data, rq->len, RKC_BIN, 0};
        return 1;
    case RKC_VADD:
        f[0] = (rkc_field){"a", rq->a, rq->n * 4, RKC_BIN, 0};
        f[1] = (rkc_field){"b", rq->b, rq->n * 4, RKC_BIN, 0};
        return 2;
    case RKC_LAUNCH:
        f[0] = (rkc_field){.name = "grid", .type = RKC_UINT, .u = rq->grid};
        f[1] = (rkc_field){.name = "block", .type = RKC_UINT, .u = rq->block};
        f[2] = (rkc_field){.name = "smem", .type = RKC_UINT, .u = rq->smem};
        return 3;
    default:
        return 0;
    }
}

/* The enum's ops by name (rkc_op: RKC_PING is 1). */
static const char *const rkc__op_names[] = {"", "ping", "echo", "vadd", "status", "launch"};

/* The request's body: {v, id, op, the op's own fields, rq's fields}.
 * Nonzero when the packer's buffer could not grow. */
static int rkc__pack_request(msgpack_packer *pk, const char *op, const rkc_field *own, size_t n_own,
                             const rkc_request *rq, uint64_t id)
{
    int e = msgpack_pack_map(pk, (uint32_t)(3 + n_own + rq->n_fields));
    rkc__key(pk, "v");
    e |= msgpack_pack_uint8(pk, 1);
    rkc__key(pk, "id");
    e |= msgpack_pack_uint64(pk, id);
    rkc__key(pk, "op");
    rkc__key(pk, op);
    for (size_t i = 0; i < n_own; i++)
        e |= rkc__pack_field(pk, &own[i]);
    for (size_t i = 0; i < rq->n_fields; i++)
        e |= rkc__pack_field(pk, &rq->fields[i]);
    return e;
}

/* A packer's writer that counts the bytes and stores none (nor reads them) */
static int rkc__count_write(void *data, const char *buf, size_t len)
{
    (void)buf;
    *(size_t *)data += len;
    return 0;
}

size_t rkc_request_bytes(const rkc_request *rq)
{
    if (!rq || (!rq->name && (rq->op < RKC_PING || rq->op > RKC_LAUNCH)))
        return 0;
    rkc_field own[3];
    const size_t n_own = rq->name ? 0 : rkc__op_fields(rq, own);
    size_t n = 0;
    msgpack_packer pk;
    msgpack_packer_init(&pk, &n, rkc__count_write);
    /* the largest id: nine bytes, as a long-lived connection's */
    rkc__pack_request(&pk, rq->name ? rq->name : rkc__op_names[rq->op], own, n_own, rq, UINT64_MAX);
    return n;
}

/* rkc_send until deadline (timeout_ms: the caller's, for the message). */
static int rkc__send(rkc *c, const rkc_request *rq, uint64_t *id_out, int64_t deadline, int timeout_ms)
{
    if (!c || !rq)
        return rkc__fail(c, -EINVAL, "no request");
    const char *op = rq->name;
    rkc_field own[3];
    size_t n_own = 0;
    if (!op) {
        if (rq->op < RKC_PING || rq->op > RKC_LAUNCH)
            return rkc__fail(c, -EINVAL, "no op name, and op %d is none of RKC_PING..RKC_LAUNCH", (int)rq->op);
        op = rkc__op_names[rq->op];
        n_own = rkc__op_fields(rq, own);
        if ((rq->op == RKC_ECHO && rq->len && !rq->data) ||
            (rq->op == RKC_VADD && rq->n && (!rq->a || !rq->b)))
            return rkc__fail(c, -EINVAL, "%s: %s bytes at NULL", op, rq->op == RKC_ECHO ? "data" : "vector");
        /* before n * 4 wraps, or a bin header truncates the length */
        if ((rq->op == RKC_ECHO && rq->len > UINT32_MAX) || (rq->op == RKC_VADD && rq->n > UINT32_MAX / 4))
            return rkc__fail(c, -E2BIG, "%s: %zu %s: msgpack carries at most %u bytes a field", op,
                             rq->op == RKC_ECHO ? rq->len : rq->n, rq->op == RKC_ECHO ? "bytes" : "elements",
                             UINT32_MAX);
    }
    if (!*op)
        return rkc__fail(c, -EINVAL, "an empty op name");
    int rc = rkc__check_fields(c, rq, n_own);
    if (rc)
        return rc;
    for (size_t i = 0; i < n_own; i++)
        for (size_t j = 0; j < rq->n_fields; j++)
            if (!strcmp(own[i].name, rq->fields[j].name))
                return rkc__fail(c, -EINVAL, "field `%s` is %s's own", own[i].name, op);
    uint64_t id = c->next_id++;
    c->sbuf.size = 0;
    int e = rkc__pack_request(&c->pk, op, own, n_own, rq, id);
    if (e || !c->sbuf.data)
        return rkc__fail(c, -ENOMEM, "out of memory for a %s request", op);
    rc = rkc__send_buf(c, c->sbuf.data, c->sbuf.size, deadline, timeout_ms,
                       c->type != RKC_REQ); /* REQ adds its own */
    if (rc == 0 && id_out)
        *id_out = id;
    return rc;
}

int rkc_send(rkc *c, const rkc_request *rq, uint64_t *id_out, int timeout_ms)
{
    return rkc__send(c, rq, id_out, rkc__deadline(timeout_ms), timeout_ms);
}

int rkc_call(rkc *c, const rkc_request *rq, rkc_reply *out, int timeout_ms)
{
    uint64_t id;
    if (!out) /* before the request goes: nobody would take its reply */
        return rkc__fail(c, -EINVAL, "no reply to fill");
    int64_t t0 = rkc__now_ns(), deadline = rkc__deadline(timeout_ms);
    int rc = rkc__send(c, rq, &id, deadline, timeout_ms);
    if (rc)
        return rc;
    rc = rkc__wait(c, id, out, deadline, timeout_ms);
    if (rc == 0)
        out->rtt_us = (double)(rkc__now_ns() - t0) / 1e3;
    else if (c->type == RKC_DEALER) /* REQ drops a late reply itself (REQ_CORRELATE) */
        c->gone[c->gone_next++ % (sizeof c->gone / sizeof *c->gone)] = id;
    return rc;
}

/* A NULL actor is refused by rkc_send ("no name"), like an empty one. */
int rkc_actor_send(rkc *c, const char *actor, const rkc_field *fields, size_t n, uint64_t *id,
                   int timeout_ms)
{
    rkc_request rq = {.name = actor, .fields = fields, .n_fields = n};
    return rkc_send(c, &rq, id, timeout_ms);
}

int rkc_actor_call(rkc *c, const char *actor, const rkc_field *fields, size_t n, rkc_reply *out,
                   int timeout_ms)
{
    rkc_request rq = {.name = actor, .fields = fields, .n_fields = n};
    return rkc_call(c, &rq, out, timeout_ms);
}
