/* runtime/src/split.c - one large operation split across the devices of a
 * runtime (rk_config.n_devices), its reply assembled in order.
 *
 * A split holds one actor per device. rk_split_call cuts an elementwise
 * operation into one contiguous chunk per device, sends every chunk before
 * waiting for any (the devices work at once), and copies each reply to its
 * place in the caller's buffer. Only vadd is elementwise among the built-in
 * operations: its payload a || b is cut as a[i..j) || b[i..j), gathered
 * from the caller's buffer without a copy (rk_actor_sendv). */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Waits for chunk k's reply and puts its bytes at dst (want bytes). */
static int rk__split_take(rk_split *s, int k, uint8_t *dst, size_t want, int timeout_ms)
{
    rk_reply r;
    int rc = rk_actor_recv(s->act[k], &r, timeout_ms);
    if (rc)
        return rk__split_fail(rc, k);
    rc = r.status;
    if (rc == 0 && r.len != want)
        rc = rk__fail(RK_EPROTO, "rk_split_call: device %d answered %zu B for a %zu B chunk", k, r.len, want);
    else if (rc)
        rk__fail(rc, "rk_split_call: device %d: %s", k, rk_strerror(rc));
    else
        memcpy(dst, r.data, want);
    rk_reply_release(s->act[k], &r);
    return rc;
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
    const uint8_t *a = data, *b = a + n * 4;
    uint8_t *o = out;
    int k_max = (size_t)s->n < n ? s->n : (int)n; /* no empty chunks */
    size_t at[RK_MAX_DEVICES + 1];
    for (int k = 0; k <= k_max; k++)
        at[k] = n * (size_t)k / (size_t)k_max;
    int sent = 0, rc = 0;
    char first[512] = ""; /* the first error's detail */
    for (; sent < k_max; sent++) {
        size_t i = at[sent], m = at[sent + 1] - i;
        rk_iov iov[2] = {{a + i * 4, m * 4}, {b + i * 4, m * 4}};
        rc = rk_actor_sendv(s->act[sent], RK_OP_VADD, iov, 2, 0, NULL, timeout_ms);
        if (rc) {
            rk__split_fail(rc, sent);
            snprintf(first, sizeof first, "%s", rk_last_detail());
            break;
        }
    }
    /* every chunk that went gets its reply taken, failed or not */
    for (int k = 0; k < sent; k++) {
        int e = rk__split_take(s, k, o + at[k] * 4, (at[k + 1] - at[k]) * 4, timeout_ms);
        if (e && !rc) {
            rc = e;
            snprintf(first, sizeof first, "%s", rk_last_detail());
        }
    }
    if (rc)
        return first[0] ? rk__fail(rc, "%s", first) : rc;
    *out_len = n * 4;
    return 0;
}
