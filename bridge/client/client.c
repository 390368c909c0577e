/* bridge/client/client.c - rkc, the C client library of rk-bridge. */
#include "client.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zmq.h>

typedef struct rkc_impl {
    zmq_msg_t msg;
    msgpack_unpacked up;
} rkc_impl;

struct rkc {
    void *ctx, *sock;
    int type;
    uint64_t next_id;
    char err[256];
    /* replies rkc_wait set aside: FIFO */
    rkc_reply *stash;
    size_t stash_n, stash_cap;
    msgpack_sbuffer sbuf;
    msgpack_packer pk;
};

static int rkc__fail(rkc *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int rkc__fail(rkc *c, int code, const char *fmt, ...)
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

static _Thread_local char rkc__connect_err[256];
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
    if (!opt)
        opt = &def;
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
    if (opt->server_public_key) {
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

void rkc_reply_free(rkc_reply *r)
{
    if (!r || !r->impl_)
        return;
    rkc_impl *im = r->impl_;
    msgpack_unpacked_destroy(&im->up);
    zmq_msg_close(&im->msg);
    free(im);
    r->impl_ = NULL;
    r->root = NULL;
    r->data = NULL;
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

const msgpack_object *rkc_map_get(const msgpack_object *map, const char *key)
{
    if (!map || map->type != MSGPACK_OBJECT_MAP)
        return NULL;
    size_t kl = strlen(key);
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object *k = &map->via.map.ptr[i].key;
        if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == kl && !memcmp(k->via.str.ptr, key, kl))
            return &map->via.map.ptr[i].val;
    }
    return NULL;
}

const msgpack_object *rkc_reply_get(const rkc_reply *r, const char *key)
{
    return r ? rkc_map_get(r->root, key) : NULL;
}

static void rkc__str(char *dst, size_t cap, const msgpack_object *o)
{
    dst[0] = 0;
    if (o && o->type == MSGPACK_OBJECT_STR) {
        size_t n = o->via.str.size < cap - 1 ? o->via.str.size : cap - 1;
        memcpy(dst, o->via.str.ptr, n);
        dst[n] = 0;
    }
}

/* Parses im->msg into *out (which takes im). */
static int rkc__parse(rkc *c, rkc_impl *im, rkc_reply *out)
{
    memset(out, 0, sizeof *out);
    out->impl_ = im;
    msgpack_unpacked_init(&im->up);
    size_t off = 0;
    if (msgpack_unpack_next(&im->up, zmq_msg_data(&im->msg), zmq_msg_size(&im->msg), &off) !=
            MSGPACK_UNPACK_SUCCESS ||
        im->up.data.type != MSGPACK_OBJECT_MAP) {
        rkc_reply_free(out);
        return rkc__fail(c, -EPROTO, "the reply (%zu B) is not a msgpack map", zmq_msg_size(&im->msg));
    }
    out->root = &im->up.data;
    const msgpack_object *o = rkc_reply_get(out, "id");
    if (o && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        out->has_id = true, out->id = o->via.u64;
    o = rkc_reply_get(out, "ok");
    out->ok = o && o->type == MSGPACK_OBJECT_BOOLEAN && o->via.boolean;
    o = rkc_reply_get(out, "error");
    if (o) {
        rkc__str(out->code, sizeof out->code, rkc_map_get(o, "code"));
        rkc__str(out->message, sizeof out->message, rkc_map_get(o, "message"));
    }
    o = rkc_reply_get(out, "data");
    if (!o)
        o = rkc_reply_get(out, "c");
    if (o && o->type == MSGPACK_OBJECT_BIN)
        out->data = (const uint8_t *)o->via.bin.ptr, out->len = o->via.bin.size;
    rkc__str(out->backend, sizeof out->backend, rkc_reply_get(out, "backend"));
    return 0;
}

static int rkc__poll(rkc *c, short ev, int timeout_ms)
{
    zmq_pollitem_t it = {c->sock, 0, ev, 0};
    int rc = zmq_poll(&it, 1, timeout_ms);
    if (rc < 0)
        return rkc__fail(c, -EIO, "zmq_poll: %s", zmq_strerror(errno));
    return rc ? 0 : rkc__fail(c, -ETIMEDOUT, "no reply within %d ms", timeout_ms);
}

/* Receives one message off the socket (the body is its last frame). */
static int rkc__recv_wire(rkc *c, rkc_reply *out, int timeout_ms)
{
    rkc_impl *im = malloc(sizeof *im);
    if (!im)
        return rkc__fail(c, -ENOMEM, "out of memory");
    zmq_msg_init(&im->msg);
    for (;;) {
        int rc = zmq_msg_recv(&im->msg, c->sock, ZMQ_DONTWAIT);
        if (rc < 0 && errno == EAGAIN) {
            rc = rkc__poll(c, ZMQ_POLLIN, timeout_ms);
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
    return rkc__recv_wire(c, out, timeout_ms);
}

int rkc_wait(rkc *c, uint64_t id, rkc_reply *out, int timeout_ms)
{
    if (!c || !out)
        return -EINVAL;
    for (size_t i = 0; i < c->stash_n; i++)
        if (c->stash[i].has_id && c->stash[i].id == id) {
            *out = c->stash[i];
            memmove(c->stash + i, c->stash + i + 1, (c->stash_n - i - 1) * sizeof *c->stash);
            c->stash_n--;
            return 0;
        }
    int64_t deadline = timeout_ms < 0 ? INT64_MAX : rkc__now_ns() + (int64_t)timeout_ms * 1000000;
    for (;;) {
        int64_t now = rkc__now_ns();
        int left = timeout_ms < 0 ? -1 : now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
        rkc_reply r;
        int rc = rkc__recv_wire(c, &r, left);
        if (rc)
            return rc;
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

static int rkc__send_buf(rkc *c, const void *buf, size_t len, int timeout_ms)
{
    for (;;) {
        if (zmq_send(c->sock, buf, len, ZMQ_DONTWAIT) >= 0)
            return 0;
        if (errno != EAGAIN)
            return rkc__fail(c, -EIO, "zmq_send: %s", zmq_strerror(errno));
        int rc = rkc__poll(c, ZMQ_POLLOUT, timeout_ms);
        if (rc)
            return rkc__fail(c, rc, "could not send within %d ms", timeout_ms);
    }
}

int rkc_send_raw(rkc *c, const void *frame, size_t len, int timeout_ms)
{
    if (!c || (!frame && len))
        return -EINVAL;
    return rkc__send_buf(c, frame, len, timeout_ms);
}

static void rkc__key(msgpack_packer *pk, const char *k)
{
    size_t n = strlen(k);
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, k, n);
}

int rkc_send(rkc *c, const rkc_request *rq, uint64_t *id_out, int timeout_ms)
{
    if (!c || !rq)
        return -EINVAL;
    static const char *names[] = {"", "ping", "echo", "vadd", "status", "launch"};
    if (rq->op < RKC_PING || rq->op > RKC_LAUNCH)
        return rkc__fail(c, -EINVAL, "unknown op %d", (int)rq->op);
    uint64_t id = c->next_id++;
    msgpack_packer *pk = &c->pk;
    c->sbuf.size = 0;
    uint32_t extra = rq->op == RKC_ECHO ? 1 : rq->op == RKC_VADD ? 2 : rq->op == RKC_LAUNCH ? 3 : 0;
    msgpack_pack_map(pk, 3 + extra);
    rkc__key(pk, "v");
    msgpack_pack_uint8(pk, 1);
    rkc__key(pk, "id");
    msgpack_pack_uint64(pk, id);
    rkc__key(pk, "op");
    rkc__key(pk, names[rq->op]);
    switch (rq->op) {
    case RKC_ECHO:
        rkc__key(pk, "data");
        msgpack_pack_bin(pk, rq->len);
        msgpack_pack_bin_body(pk, rq->data, rq->len);
        break;
    case RKC_VADD: /* float32 in memory is little-endian on every host this targets */
        rkc__key(pk, "a");
        msgpack_pack_bin(pk, rq->n * 4);
        msgpack_pack_bin_body(pk, rq->a, rq->n * 4);
        rkc__key(pk, "b");
        msgpack_pack_bin(pk, rq->n * 4);
        msgpack_pack_bin_body(pk, rq->b, rq->n * 4);
        break;
    case RKC_LAUNCH:
        rkc__key(pk, "grid");
        msgpack_pack_uint32(pk, rq->grid);
        rkc__key(pk, "block");
        msgpack_pack_uint32(pk, rq->block);
        rkc__key(pk, "smem");
        msgpack_pack_uint32(pk, rq->smem);
        break;
    default:
        break;
    }
    int rc = rkc__send_buf(c, c->sbuf.data, c->sbuf.size, timeout_ms);
    if (rc == 0 && id_out)
        *id_out = id;
    return rc;
}

int rkc_call(rkc *c, const rkc_request *rq, rkc_reply *out, int timeout_ms)
{
    uint64_t id;
    int64_t t0 = rkc__now_ns();
    int rc = rkc_send(c, rq, &id, timeout_ms);
    if (rc)
        return rc;
    rc = rkc_wait(c, id, out, timeout_ms);
    if (rc == 0)
        out->rtt_us = (double)(rkc__now_ns() - t0) / 1e3;
    return rc;
}
