/* ops.c - the operations as the host runs them (the CPU consumer, and the
 * reference the GPU actors must match bit for bit). */
#include <signal.h>
#include <string.h>

#include "internal.h"
#include "modules.h"
#include "worker_proto.h"

/* Plain IEEE float32 adds, one per element: nothing to contract into an
 * FMA and no reassociation, so the result equals the GPU's __fadd_rn
 * (NaN payloads aside). Built without -ffast-math. */
void rk__vadd_f32(const float *restrict a, const float *restrict b, float *restrict c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        c[i] = a[i] + b[i];
}

const rk_actor_def *rk__find_def(const rk_actor_def *defs, size_t n, uint16_t type)
{
    for (size_t i = 0; i < n; i++)
        if (defs[i].type == type)
            return &defs[i];
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
    case RK_OP_HANG:
        return 0;
    default: {
        const rk_actor_def *d = rk__find_def(rt->defs, rt->n_defs, type);
        if (d && d->reply_size)
            return d->reply_size(len);
        /* a module actor's rules (a send has sized it from the payload's
         * fields already; rk_actor_buf_alloc cannot: its bound) */
        const rk_actor_decl *decl = type >= RK_OP_USER ? rk__modules_decl(rt->mods, type) : NULL;
        return decl ? rk__decl_reply_bound(decl, len, len < RK__SENTENCE_ROOM ? len : RK__SENTENCE_ROOM) : len;
    }
    }
}

/* The test-only ops: what a buggy actor does to its worker process (and
 * a slow one: RK_OP_HANG with a length, rk/msg.h). */
static int rk__test_op(uint16_t type, uint32_t flags, const void *in, size_t in_len)
{
    if (!(flags & RK__WF_TEST_FAULTS))
        return -RK_ENOTSUP;
    if (type == RK_OP_FAULT) {
        /* the SIGSEGV a wild pointer in a CPU actor makes, with the default
         * action (a sanitizer's handler would turn it into an abort) */
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
    }
    if (in_len >= 4) {
        uint32_t ms;
        memcpy(&ms, in, sizeof ms);
        rk__sleep_ns((int64_t)ms * 1000000);
        return 0;
    }
    for (;;) /* RK_OP_HANG: an endless loop (sleeping, so CI keeps its cores) */
        rk__sleep_ns(1000000);
}

int rk__ops_execute(const rk_actor_def *defs, size_t n_defs, uint32_t flags, uint16_t type,
                    const void *in, size_t in_len, void *out, size_t out_cap, size_t *out_len)
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
    default:
        break;
    }
    /* a CPU standing in for a crash-looping GPU serves built-ins only */
    if (flags & RK__WF_BUILTINS_ONLY)
        return -RK_EDEVICE;
    if (type == RK_OP_FAULT || type == RK_OP_HANG)
        return rk__test_op(type, flags, in, in_len);
    const rk_actor_def *d = rk__find_def(defs, n_defs, type);
    if (!d || !d->cpu)
        return -RK_ENOTSUP;
    int rc = d->cpu(in, in_len, out, out_cap, out_len, d->cpu_user);
    rc = rc > 0 ? -rc : rc;
    if ((rc == 0 || rc == -RK_EACTOR) && *out_len > out_cap) {
        *out_len = 0;
        return -RK_EINTERNAL; /* the user actor overran its buffer */
    }
    if (rc && rc != -RK_EACTOR)
        *out_len = 0;
    return rc;
}
