/* runtime/src/split.c - one large operation split across the devices of a
 * runtime (rk_config.n_devices), its reply assembled in order.
 *
 * A split holds one actor per device. rk_split_call cuts an elementwise
 * operation into one contiguous chunk per device, sends every chunk before
 * waiting for any (the devices work at once), and copies each reply to its
 * place in the caller's buffer. Only vadd is elementwise among the built-in
 * operations: its payload a || b is cut as a[i..j) || b[i..j), gathered
 * from the caller's buffer without an extra copy (rk_actor_sendv). Large
 * chunks are sent and taken by a thread each: the host's copies into each
 * device's arena and out of it are what a large split waits for, and one
 * thread doing all of them made 2 GPUs no faster than one (H200 x2,
 * ba6327d: 6.2 -> 6.4 GB/s for 2^24 floats). */
#include "internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* chunks of at least this many elements go in a thread each (below it a
 * thread's start costs more than the copies it shares out) */
#define RK__SPLIT_THREAD_MIN (1u << 16)

struct rk_split {
    rk_runtime *rt;
    int n;
    rk_actor *act[RK_MAX_DEVICES];
};

int rk_split_open(rk_runtime *rt, rk_split **out)
{
    if (!rt || !out)
        return rk__fail(RK_EINVAL, "rk_split_open: %s is NULL", rt ? "out" : "runtime");
    *out = NULL;
    rk_split *s = calloc(1, sizeof *s);
    if (!s)
        return rk__fail(RK_ENOMEM, "rk_split_open: out of memory");
    s->rt = rt;
    s->n = rk_runtime_device_count(rt);
    for (int i = 0; i < s->n; i++) {
        int rc = rk_actor_open_on(rt, i, &s->act[i]);
        if (rc) {
            rk_split_close(s);
            return rc;
        }
    }
    *out = s;
    return 0;
}

void rk_split_close(rk_split *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n; i++)
        rk_actor_close(s->act[i]);
    free(s);
}

/* The detail of the last error, prefixed with the device (a copy first:
 * the detail is the buffer rk__fail writes). */
static int rk__split_fail(int rc, int k)
{
    char d[512];
    snprintf(d, sizeof d, "%s", rk_last_detail());
    return rk__fail(rc, "rk_split_call: device %d: %s", k, d[0] ? d : rk_strerror(rc));
}

/* Waits for the reply to chunk k's request `id` and puts its bytes at dst
 * (want bytes). Replies to earlier calls' chunks that timed out (their
 * requests stayed in flight) come first on the actor: they are dropped,
 * not taken for this call's. */
static int rk__split_take(rk_split *s, int k, uint64_t id, uint8_t *dst, size_t want, int timeout_ms)
{
    const int64_t end = timeout_ms > 0 ? rk__now_ns() + (int64_t)timeout_ms * 1000000 : 0;
    rk_reply r;
    for (;;) {
        int left = timeout_ms;
        if (timeout_ms > 0) {
            const int64_t ns = end - rk__now_ns();
            left = ns > 0 ? (int)((ns + 999999) / 1000000) : 0;
        }
        int rc = rk_actor_recv(s->act[k], &r, left);
        if (rc)
            return rk__split_fail(rc, k);
        if (r.id == id)
            break;
        rk_reply_release(s->act[k], &r); /* an abandoned call's */
    }
    int rc = r.status;
    if (rc == 0 && r.len != want)
        rc = rk__fail(RK_EPROTO, "rk_split_call: device %d answered %zu B for a %zu B chunk", k, r.len, want);
    else if (rc)
        rk__fail(rc, "rk_split_call: device %d: %s", k, rk_strerror(rc));
    else
        memcpy(dst, r.data, want);
    rk_reply_release(s->act[k], &r);
    return rc;
}

/* One chunk's round: send a[i..i+m) || b[i..i+m), take its reply into
 * o[i..i+m). rc and detail: the first error (the thread's own detail is
 * copied, as rk_last_detail is per thread). */
typedef struct rk__chunk {
    rk_split *s;
    int k, timeout_ms;
    const uint8_t *a, *b;
    uint8_t *o;
    size_t i, m;
    uint64_t id; /* the request's */
    int rc;
    bool sent;
    char detail[512];
} rk__chunk;

static void rk__chunk_send(rk__chunk *c)
{
    rk_iov iov[2] = {{c->a + c->i * 4, c->m * 4}, {c->b + c->i * 4, c->m * 4}};
    c->rc = rk_actor_sendv(c->s->act[c->k], RK_OP_VADD, iov, 2, 0, &c->id, c->timeout_ms);
    c->sent = c->rc == 0;
    if (c->rc) {
        rk__split_fail(c->rc, c->k);
        snprintf(c->detail, sizeof c->detail, "%s", rk_last_detail());
    }
}

static void rk__chunk_take(rk__chunk *c)
{
    int e = rk__split_take(c->s, c->k, c->id, c->o + c->i * 4, c->m * 4, c->timeout_ms);
    if (e && !c->rc) {
        c->rc = e;
        snprintf(c->detail, sizeof c->detail, "%s", rk_last_detail());
    }
}

static void *rk__chunk_main(void *p)
{
    rk__chunk *c = p;
    rk__chunk_send(c);
    if (c->sent)
        rk__chunk_take(c);
    return NULL;
}

int rk_split_call(rk_split *s, uint16_t type, const void *data, size_t len, void *out, size_t out_cap,
                  size_t *out_len, int timeout_ms)
{
    if (!s || (!data && len) || !out || !out_len)
        return rk__fail(RK_EINVAL, "rk_split_call: a NULL argument");
    if (type != RK_OP_VADD)
        return rk__fail(RK_ENOTSUP, "rk_split_call: type %u cannot be split (only vadd is elementwise)", type);
    if (len == 0 || len % 8)
        return rk__fail(RK_EINVAL, "rk_split_call: a vadd payload is a || b of float32: %zu B is not a "
                        "multiple of 8", len);
    size_t n = len / 8;
    if (out_cap < n * 4)
        return rk__fail(RK_EMSGSIZE, "rk_split_call: the reply needs %zu B; out has %zu", n * 4, out_cap);
    int k_max = (size_t)s->n < n ? s->n : (int)n; /* no empty chunks */
    rk__chunk c[RK_MAX_DEVICES];
    for (int k = 0; k < k_max; k++) {
        size_t i = n * (size_t)k / (size_t)k_max, j = n * (size_t)(k + 1) / (size_t)k_max;
        c[k] = (rk__chunk){.s = s, .k = k, .timeout_ms = timeout_ms, .a = data, .b = (const uint8_t *)data + n * 4,
                           .o = out, .i = i, .m = j - i};
    }
    /* large chunks: chunks 1.. in threads of their own, chunk 0 here */
    pthread_t th[RK_MAX_DEVICES];
    bool threaded[RK_MAX_DEVICES] = {false};
    if (k_max > 1 && n / (size_t)k_max >= RK__SPLIT_THREAD_MIN) {
        for (int k = 1; k < k_max; k++)
            threaded[k] = pthread_create(&th[k], NULL, rk__chunk_main, &c[k]) == 0;
        rk__chunk_main(&c[0]);
        for (int k = 1; k < k_max; k++) {
            if (threaded[k])
                pthread_join(th[k], NULL);
            else
                rk__chunk_main(&c[k]); /* no thread to be had: here, after the others */
        }
    } else {
        /* every chunk sent before any is waited for (the devices work at
         * once); every chunk that went gets its reply taken, failed or not */
        int sent = 0;
        for (; sent < k_max; sent++) {
            rk__chunk_send(&c[sent]);
            if (!c[sent].sent)
                break;
        }
        for (int k = 0; k < sent; k++)
            rk__chunk_take(&c[k]);
    }
    for (int k = 0; k < k_max; k++)
        if (c[k].rc)
            return rk__fail(c[k].rc, "%s", c[k].detail[0] ? c[k].detail : rk_strerror(c[k].rc));
    *out_len = n * 4;
    return 0;
}
