/* ops.c - the operations as the host runs them (CPU backend, and the
 * reference the GPU actors must match bit for bit). */
#include <string.h>

#include "internal.h"

/* Plain IEEE float32 adds, one per element: nothing to contract into an
 * FMA and no reassociation, so the result equals the GPU's __fadd_rn
 * (NaN payloads aside). Built without -ffast-math. */
void rk__vadd_f32(const float *restrict a, const float *restrict b, float *restrict c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        c[i] = a[i] + b[i];
}

const rk_actor_def *rk__find_actor_def(const rk_runtime *rt, uint16_t type)
{
    for (size_t i = 0; i < rt->cfg.n_actors; i++)
        if (rt->cfg.actors[i].type == type)
            return &rt->cfg.actors[i];
    return NULL;
}

size_t rk__reply_cap(const rk_runtime *rt, uint16_t type, size_t len, size_t reply_cap)
{
    if (reply_cap)
        return reply_cap;
    switch (type) {
    case RK_OP_ECHO:
        return len;
    case RK_OP_VADD:
        return len / 2;
    case RK_OP_NOP:
    case RK_OP_FAULT:
        return 0;
    default: {
        const rk_actor_def *d = rk__find_actor_def(rt, type);
        return d && d->reply_size ? d->reply_size(len) : len;
    }
    }
}

int rk__cpu_execute(const rk_runtime *rt, uint16_t type, const void *in, size_t in_len, void *out,
                    size_t out_cap, size_t *out_len)
{
    *out_len = 0;
    switch (type) {
    case RK_OP_NOP:
        return 0;
    case RK_OP_ECHO:
        if (in_len > out_cap)
            return -RK_EMSGSIZE;
        memcpy(out, in, in_len);
        *out_len = in_len;
        return 0;
    case RK_OP_VADD: {
        if (in_len == 0 || in_len % 8)
            return -RK_EINVAL;
        size_t n = in_len / 8;
        if (out_cap < n * 4)
            return -RK_EMSGSIZE;
        const float *a = in;
        rk__vadd_f32(a, a + n, out, n);
        *out_len = n * 4;
        return 0;
    }
    case RK_OP_FAULT:
        return -RK_ENOTSUP; /* the faulting actor exists only on the GPU */
    default: {
        const rk_actor_def *d = rk__find_actor_def(rt, type);
        if (!d || !d->cpu)
            return -RK_ENOTSUP;
        int rc = d->cpu(in, in_len, out, out_cap, out_len, d->cpu_user);
        if (rc == 0 && *out_len > out_cap)
            return -RK_EINTERNAL; /* the user actor overran its buffer */
        return rc > 0 ? -rc : rc;
    }
    }
}
