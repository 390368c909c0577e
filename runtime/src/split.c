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
 * ba6327d: 6.2 -> 6.4 GB/s for 2^24 floats). A chunk goes in parts, a few
 * in flight, so that those copies overlap the device's adds. */
#include "internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* chunks of at least this many elements go in a thread each (below it a
 * thread's start costs more than the copies it shares out) */
#define RK__SPLIT_THREAD_MIN (1u << 16)
/* A chunk goes in parts of at most this many elements (4 MiB of each
 * operand), up to RK__SPLIT_WINDOW of them in flight: the host copies part
 * k + 1 in and part k - 1 out while the device adds part k, where one
 * request per chunk left the device idle through both copies. Smaller when
 * max_payload or the arena asks. */
#define RK__SPLIT_PART (1u << 20)
#define RK__SPLIT_WINDOW 4

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

/* What is left of the call's timeout, as a timeout (a negative one waits
 * for ever, 0 does not wait). */
static int rk__split_left(int timeout_ms, int64_t end)
{
    if (timeout_ms <= 0)
        return timeout_ms;
    const int64_t ns = end - rk__now_ns();
    return ns > 0 ? (int)((ns + 999999) / 1000000) : 0;
}

/* Waits for the reply to device k's request `id` and puts its bytes at dst
 * (want bytes). Replies to earlier calls' requests that timed out (they
 * stayed in flight) come first on the actor: they are dropped, not taken
 * for this call's. */
static int rk__split_take(rk_split *s, int k, uint64_t id, uint8_t *dst, size_t want, int timeout_ms,
                          int64_t end)
{
    rk_reply r;
    for (;;) {
        int rc = rk_actor_recv(s->act[k], &r, rk__split_left(timeout_ms, end));
        if (rc)
            return rk__split_fail(rc, k);
        if (r.id == id)
            break;
        rk_reply_release(s->act[k], &r); /* an abandoned call's */
    }
    int rc = r.status;
    if (rc == 0 && r.len != want)
        rc = rk__fail(RK_EPROTO, "rk_split_call: device %d answered %zu B for a %zu B part", k, r.len, want);
    else if (rc)
        rk__fail(rc, "rk_split_call: device %d: %s", k, rk_strerror(rc));
    else
        memcpy(dst, r.data, want);
    rk_reply_release(s->act[k], &r);
    return rc;
}

/* One device's chunk, elements [i, i + m): a[..] || b[..] sent in parts of
 * `part` elements, up to `window` in flight, each reply taken into o[..].
 * rc and detail: the first error (the thread's own detail is copied, as
 * rk_last_detail is per thread). */
typedef struct rk__chunk {
    rk_split *s;
    int k, timeout_ms;
    int64_t end; /* the call's deadline, for timeout_ms > 0 */
    const uint8_t *a, *b;
    uint8_t *o;
    size_t i, m, part;
    int window;
    uint64_t id; /* a single part's request (rk__chunk_send) */
    int rc;
    bool sent;
    char detail[512];
} rk__chunk;

static void rk__chunk_error(rk__chunk *c, int rc)
{
    if (rc && !c->rc) {
        c->rc = rc;
        snprintf(c->detail, sizeof c->detail, "%s", rk_last_detail());
    }
}

/* part [i, i + m) of the operands, as one request */
static int rk__part_send(rk__chunk *c, size_t i, size_t m, uint64_t *id)
{
    rk_iov iov[2] = {{c->a + i * 4, m * 4}, {c->b + i * 4, m * 4}};
    int rc = rk_actor_sendv(c->s->act[c->k], RK_OP_VADD, iov, 2, 0, id, rk__split_left(c->timeout_ms, c->end));
    if (rc) {
        rk__split_fail(rc, c->k);
        rk__chunk_error(c, rc);
    }
    return rc;
}

static void rk__part_take(rk__chunk *c, size_t i, size_t m, uint64_t id)
{
    rk__chunk_error(c, rk__split_take(c->s, c->k, id, c->o + i * 4, m * 4, c->timeout_ms, c->end));
}

/* a chunk of one part: sent here, taken by rk__chunk_take */
static void rk__chunk_send(rk__chunk *c)
{
    c->sent = rk__part_send(c, c->i, c->m, &c->id) == 0;
}

static void rk__chunk_take(rk__chunk *c)
{
    rk__part_take(c, c->i, c->m, c->id);
}

/* a chunk of any size, its parts pipelined; every part that went has its
 * reply taken, failed or not */
static void *rk__chunk_main(void *p)
{
    rk__chunk *c = p;
    uint64_t ids[RK__SPLIT_WINDOW];
    const size_t parts = (c->m + c->part - 1) / c->part;
    size_t sent = 0, taken = 0;
    while (taken < sent || (sent < parts && !c->rc)) {
        if (sent < parts && !c->rc && sent - taken < (size_t)c->window) {
            const size_t i = sent * c->part, m = c->m - i < c->part ? c->m - i : c->part;
            if (rk__part_send(c, c->i + i, m, &ids[sent % RK__SPLIT_WINDOW]) == 0)
                sent++;
            continue;
        }
        const size_t i = taken * c->part, m = c->m - i < c->part ? c->m - i : c->part;
        rk__part_take(c, c->i + i, m, ids[taken % RK__SPLIT_WINDOW]);
        taken++;
    }
    return NULL;
}

/* The part size and window for device k: parts within max_payload, and
 * the window's requests and replies within half the arena. */
static void rk__split_parts(rk_split *s, int k, size_t *part, int *window)
{
    rk_info in;
    rk_runtime_info(rk_runtime_device(s->rt, k), &in);
    size_t p = RK__SPLIT_PART;
    if (in.max_payload / 8 < p)
        p = in.max_payload / 8;
    int w = RK__SPLIT_WINDOW;
    while (w > 1 && (size_t)w * p * 12 > in.arena_size / 2)
        w--;
    *part = p ? p : 1;
    *window = w;
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
    const int64_t end = timeout_ms > 0 ? rk__now_ns() + (int64_t)timeout_ms * 1000000 : 0;
    rk__chunk c[RK_MAX_DEVICES];
    bool one_part = true; /* every chunk one request */
    for (int k = 0; k < k_max; k++) {
        size_t i = n * (size_t)k / (size_t)k_max, j = n * (size_t)(k + 1) / (size_t)k_max;
        c[k] = (rk__chunk){.s = s, .k = k, .timeout_ms = timeout_ms, .end = end, .a = data,
                           .b = (const uint8_t *)data + n * 4, .o = out, .i = i, .m = j - i};
        rk__split_parts(s, k, &c[k].part, &c[k].window);
        one_part &= c[k].m <= c[k].part;
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
    } else if (one_part) {
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
    } else { /* small chunks above a small max_payload: in turn */
        for (int k = 0; k < k_max; k++)
            rk__chunk_main(&c[k]);
    }
    for (int k = 0; k < k_max; k++)
        if (c[k].rc)
            return rk__fail(c[k].rc, "%s", c[k].detail[0] ? c[k].detail : rk_strerror(c[k].rc));
    *out_len = n * 4;
    return 0;
}
