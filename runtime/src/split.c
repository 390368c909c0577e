/* runtime/src/split.c - one large operation split across the devices of a
 * runtime (rk_config.n_devices), its reply assembled in order.
 *
 * A split holds RK__SPLIT_LANES actors per device. rk_split_call cuts an
 * elementwise operation into one contiguous chunk per device and, when
 * large, each chunk into one per lane; it sends every chunk before waiting
 * for any (the devices work at once) and copies each reply to its place in
 * the caller's buffer. Only vadd is elementwise among the built-in
 * operations: its payload a || b is cut as a[i..j) || b[i..j), gathered
 * from the caller's buffer without an extra copy (rk_actor_sendv).
 *
 * What a large split waits for is the host's copies into each device's
 * arena and out of it: one thread doing all of them made 2 GPUs no faster
 * than one (H200 x2, ba6327d: 6.2 -> 6.4 GB/s for 2^24 floats), a thread
 * per device 1.4-2.0 x, and one thread still left each GPU idle most of the
 * time (it adds about 48 GB/s of vadd fed by four threads, rk-bench gpu
 * --devices). So large chunks go a thread per lane, and each in parts, a
 * few in flight, so the copies also overlap the device's adds. Replies come
 * in completion order (grid jobs finish in any order): each is matched to
 * its part by request id. */
#include "internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* chunks of at least this many elements go in a thread each (below it a
 * thread's start costs more than the copies it shares out) */
#define RK__SPLIT_THREAD_MIN (1u << 16)
/* actors (and, for large calls, threads) per device: four took a 2^24
 * split on one H200 from 6.0-6.9 GB/s to 19.0-29.2 (2f51007) */
#define RK__SPLIT_LANES 4
/* A chunk goes in parts of at most this many elements (1 MiB of each
 * operand), up to RK__SPLIT_WINDOW of them in flight; fewer where
 * max_payload or the arena asks. */
#ifndef RK__SPLIT_PART /* a define for A/B builds (-Dc_args=...) */
#define RK__SPLIT_PART (1u << 18)
#endif
#define RK__SPLIT_WINDOW 4

struct rk_split {
    rk_runtime *rt;
    int n;     /* devices */
    int lanes; /* actors per device: RK__SPLIT_LANES, fewer where max_actors said no */
    rk_actor *act[RK_MAX_DEVICES][RK__SPLIT_LANES];
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
    s->lanes = RK__SPLIT_LANES;
    for (int j = 0; j < s->lanes; j++)
        for (int i = 0; i < s->n; i++) {
            int rc = rk_actor_open_on(rt, i, &s->act[i][j]);
            if (rc == -RK_EBUSY && j > 0) { /* max_actors: fewer lanes */
                for (int k = 0; k < i; k++) {
                    rk_actor_close(s->act[k][j]);
                    s->act[k][j] = NULL; /* rk_split_close closes every lane's */
                }
                s->lanes = j;
                break;
            }
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
        for (int j = 0; j < RK__SPLIT_LANES; j++)
            rk_actor_close(s->act[i][j]);
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

/* One lane's chunk, elements [i, i + m) on device k's actor `act`: a[..] ||
 * b[..] sent in parts of `part` elements, up to `window` in flight, each
 * reply copied to o[..]. rc and detail: the first error (the thread's own
 * detail is copied, as rk_last_detail is per thread). */
typedef struct rk__chunk {
    rk_actor *act;
    int k, timeout_ms;
    int64_t end; /* the call's deadline, for timeout_ms > 0 */
    const uint8_t *a, *b;
    uint8_t *o;
    size_t i, m, part;
    int window;
    uint32_t act_window; /* the actor's window (actor_window) */
    int n_fl; /* parts in flight: their request ids and indexes */
    uint64_t fl_id[RK__SPLIT_WINDOW];
    size_t fl_part[RK__SPLIT_WINDOW];
    int rc;
    char detail[512];
} rk__chunk;

static void rk__chunk_error(rk__chunk *c, int rc)
{
    if (rc && !c->rc) {
        c->rc = rc;
        snprintf(c->detail, sizeof c->detail, "%s", rk_last_detail());
    }
}

/* elements [at, at + len) of part p of c */
static void rk__part_range(const rk__chunk *c, size_t p, size_t *at, size_t *len)
{
    *at = c->i + p * c->part;
    *len = c->m - p * c->part < c->part ? c->m - p * c->part : c->part;
}

static int rk__part_take(rk__chunk *c);

/* sends part p as one request; on success it is in flight */
static int rk__part_send(rk__chunk *c, size_t p)
{
    /* an earlier call's parts (it timed out) may fill the actor's window:
     * their replies are taken (dropped) first, or the send is -RK_EBUSY */
    while (rk_actor_inflight(c->act) >= c->act_window)
        if (rk__part_take(c))
            return c->rc;
    size_t at, len;
    rk__part_range(c, p, &at, &len);
    rk_iov iov[2] = {{c->a + at * 4, len * 4}, {c->b + at * 4, len * 4}};
    uint64_t id;
    int rc = rk_actor_sendv(c->act, RK_OP_VADD, iov, 2, 0, &id, rk__split_left(c->timeout_ms, c->end));
    if (rc) {
        rk__split_fail(rc, c->k);
        rk__chunk_error(c, rc);
        return rc;
    }
    c->fl_id[c->n_fl] = id;
    c->fl_part[c->n_fl++] = p;
    return 0;
}

/* Takes the next reply to one of c's parts in flight and puts its bytes in
 * place (a failed one's status becomes c's error); replies to an earlier
 * call's requests that timed out are dropped (with none of c's in flight,
 * one is enough: it made room). 0, or -1 when no reply came (c's error
 * set: the parts still in flight are left to a later call). */
static int rk__part_take(rk__chunk *c)
{
    for (;;) {
        rk_reply r;
        int rc = rk_actor_recv(c->act, &r, rk__split_left(c->timeout_ms, c->end));
        if (rc) {
            rk__split_fail(rc, c->k);
            rk__chunk_error(c, rc);
            return -1;
        }
        int f = 0;
        while (f < c->n_fl && c->fl_id[f] != r.id)
            f++;
        if (f == c->n_fl) {
            rk_reply_release(c->act, &r); /* an abandoned call's */
            if (!c->n_fl)
                return 0;
            continue;
        }
        size_t at, len;
        rk__part_range(c, c->fl_part[f], &at, &len);
        rc = r.status;
        if (rc == 0 && r.len != len * 4)
            rc = rk__fail(RK_EPROTO, "rk_split_call: device %d answered %zu B for a %zu B part", c->k, r.len,
                          len * 4);
        else if (rc)
            rk__fail(rc, "rk_split_call: device %d: %s", c->k, rk_strerror(rc));
        else
            memcpy(c->o + at * 4, r.data, len * 4);
        rk_reply_release(c->act, &r);
        rk__chunk_error(c, rc);
        c->fl_id[f] = c->fl_id[c->n_fl - 1];
        c->fl_part[f] = c->fl_part[--c->n_fl];
        return 0;
    }
}

/* a chunk of any size, its parts pipelined; every part that went has its
 * reply taken, failed or not, unless one never came */
static void *rk__chunk_main(void *arg)
{
    rk__chunk *c = arg;
    const size_t parts = (c->m + c->part - 1) / c->part;
    size_t next = 0;
    while (c->n_fl > 0 || (next < parts && !c->rc)) {
        if (next < parts && !c->rc && c->n_fl < c->window)
            rk__part_send(c, next++);
        else if (rk__part_take(c))
            break;
    }
    return NULL;
}

/* The part size and window for one of `lanes` chunks on device k: parts
 * within max_payload, no more in flight than an actor's window (a send
 * past it is -RK_EBUSY), and the device's requests and replies in flight
 * within half its arena. */
static void rk__split_parts(rk_split *s, int k, int lanes, size_t *part, int *window, uint32_t *act_window)
{
    rk_info in;
    rk_runtime *dev = rk_runtime_device(s->rt, k);
    rk_runtime_info(dev, &in);
    size_t p = RK__SPLIT_PART;
    if (in.max_payload / 8 < p)
        p = in.max_payload / 8;
    *act_window = dev->cfg.actor_window;
    int w = dev->cfg.actor_window < RK__SPLIT_WINDOW ? (int)dev->cfg.actor_window : RK__SPLIT_WINDOW;
    while (w > 1 && (size_t)(w * lanes) * p * 12 > in.arena_size / 2)
        w--;
    *part = p ? p : 1;
    *window = w;
}

int rk_split_call(rk_split *s, uint16_t type, const void *data, size_t len, void *out, size_t out_cap,
                  size_t *out_len, int timeout_ms)
{
    if (!s || !out || !out_len)
        return rk__fail(RK_EINVAL, "rk_split_call: %s is NULL", !s ? "split" : !out ? "out" : "out_len");
    if (!data && len)
        return rk__fail(RK_EINVAL, "rk_split_call: data is NULL with len %zu", len);
    if (type != RK_OP_VADD)
        return rk__fail(RK_ENOTSUP, "rk_split_call: type %u cannot be split (only vadd is elementwise)", type);
    if (len == 0 || len % 8)
        return rk__fail(RK_EINVAL, "rk_split_call: a vadd payload is a || b of float32: %zu B is not a "
                        "multiple of 8", len);
    size_t n = len / 8;
    if (out_cap < n * 4)
        return rk__fail(RK_EMSGSIZE, "rk_split_call: the reply needs %zu B; out has %zu", n * 4, out_cap);
    const int k_max = (size_t)s->n < n ? s->n : (int)n; /* no empty chunks */
    /* large calls: a chunk per lane (each of at least the minimum), each
     * in a thread but the first */
    const size_t fit = n / (size_t)k_max / RK__SPLIT_THREAD_MIN;
    const bool large = fit > 0;
    const int lanes = !large ? 1 : fit < (size_t)s->lanes ? (int)fit : s->lanes;
    const int units = k_max * lanes;
    const int64_t end = timeout_ms > 0 ? rk__now_ns() + (int64_t)timeout_ms * 1000000 : 0;
    rk__chunk *c = calloc((size_t)units, sizeof *c);
    if (!c)
        return rk__fail(RK_ENOMEM, "rk_split_call: out of memory");
    bool one_part = true; /* every chunk one request */
    for (int u = 0; u < units; u++) {
        const int k = u / lanes; /* device k's chunk [i, j) of n, then lane u % lanes's share of it */
        const size_t i = n * (size_t)k / (size_t)k_max, j = n * (size_t)(k + 1) / (size_t)k_max;
        const size_t li = i + (j - i) * (size_t)(u % lanes) / (size_t)lanes;
        const size_t lj = i + (j - i) * (size_t)(u % lanes + 1) / (size_t)lanes;
        c[u] = (rk__chunk){.act = s->act[k][u % lanes], .k = k, .timeout_ms = timeout_ms, .end = end, .a = data,
                           .b = (const uint8_t *)data + n * 4, .o = out, .i = li, .m = lj - li};
        rk__split_parts(s, k, lanes, &c[u].part, &c[u].window, &c[u].act_window);
        one_part &= c[u].m <= c[u].part;
    }
    pthread_t th[RK_MAX_DEVICES * RK__SPLIT_LANES];
    bool threaded[RK_MAX_DEVICES * RK__SPLIT_LANES] = {false};
    if (large) {
        for (int u = 1; u < units; u++)
            threaded[u] = pthread_create(&th[u], NULL, rk__chunk_main, &c[u]) == 0;
        rk__chunk_main(&c[0]);
        for (int u = 1; u < units; u++) {
            if (threaded[u])
                pthread_join(th[u], NULL);
            else
                rk__chunk_main(&c[u]); /* no thread to be had: here, after the others */
        }
    } else if (one_part) {
        /* every chunk sent before any is waited for (the devices work at
         * once); every chunk that went gets its reply taken, failed or not */
        int sent = 0;
        while (sent < units && rk__part_send(&c[sent], 0) == 0)
            sent++;
        for (int u = 0; u < sent; u++)
            rk__part_take(&c[u]);
    } else { /* small chunks above a small max_payload: in turn */
        for (int u = 0; u < units; u++)
            rk__chunk_main(&c[u]);
    }
    int rc = 0;
    for (int u = 0; u < units && !rc; u++)
        if (c[u].rc)
            rc = rk__fail(c[u].rc, "%s", c[u].detail[0] ? c[u].detail : rk_strerror(c[u].rc));
    free(c);
    if (rc)
        return rc;
    *out_len = n * 4;
    return 0;
}
