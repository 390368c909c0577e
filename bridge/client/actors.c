/* bridge/client/actors.c - librkc: the actors a bridge serves, from its
 * `status` reply (v1.1 `actors`), copied into one block the list owns. */
#include "impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Bytes one name array of an actor needs (pointers and strings), or -1
 * when arr is not an array of str. */
static long rkc__names_size(const msgpack_object *arr)
{
    if (!arr || arr->type != MSGPACK_OBJECT_ARRAY)
        return -1;
    long n = 0;
    for (uint32_t i = 0; i < arr->via.array.size; i++) {
        const msgpack_object *s = &arr->via.array.ptr[i];
        if (s->type != MSGPACK_OBJECT_STR)
            return -1;
        n += (long)sizeof(char *) + s->via.str.size + 1;
    }
    return n;
}

/* Copies a str into *pool and returns it (NUL-terminated). */
static const char *rkc__put(char **pool, const msgpack_object *s)
{
    char *p = *pool;
    memcpy(p, s->via.str.ptr, s->via.str.size);
    p[s->via.str.size] = 0;
    *pool += s->via.str.size + 1;
    return p;
}

/* Fills one name array: the pointers at *ptrs, the strings in *pool. */
static const char *const *rkc__put_names(const char ***ptrs, char **pool, const msgpack_object *arr,
                                         size_t *n)
{
    const char **first = *ptrs;
    *n = arr->via.array.size;
    for (uint32_t i = 0; i < arr->via.array.size; i++)
        *(*ptrs)++ = rkc__put(pool, &arr->via.array.ptr[i]);
    return first;
}

static bool rkc__flag(const msgpack_object *m, const char *key)
{
    const msgpack_object *o = rkc_map_get(m, key);
    return o && o->type == MSGPACK_OBJECT_BOOLEAN && o->via.boolean;
}

int rkc_status_actors(const rkc_reply *status, rkc_actor_list *out)
{
    if (!status || !out)
        return -EINVAL;
    memset(out, 0, sizeof *out);
    const msgpack_object *arr = rkc_reply_get(status, "actors");
    if (!arr)
        return -ENOENT;
    if (arr->type != MSGPACK_OBJECT_ARRAY)
        return -EPROTO;
    size_t n = arr->via.array.size, ptrs = 0, bytes = n * sizeof(rkc_actor_info);
    for (size_t i = 0; i < n; i++) {
        const msgpack_object *a = &arr->via.array.ptr[i], *name = rkc_map_get(a, "name");
        long in = rkc__names_size(rkc_map_get(a, "inputs"));
        long outs = rkc__names_size(rkc_map_get(a, "outputs"));
        if (!name || name->type != MSGPACK_OBJECT_STR || in < 0 || outs < 0)
            return -EPROTO;
        bytes += (size_t)(in + outs) + name->via.str.size + 1;
        ptrs += rkc_map_get(a, "inputs")->via.array.size + rkc_map_get(a, "outputs")->via.array.size;
    }
    /* the block: actors, then every name pointer, then the strings */
    char *block = malloc(bytes ? bytes : 1);
    if (!block)
        return -ENOMEM;
    rkc_actor_info *ai = (rkc_actor_info *)block;
    const char **pp = (const char **)(ai + n);
    char *pool = (char *)(pp + ptrs);
    for (size_t i = 0; i < n; i++) {
        const msgpack_object *a = &arr->via.array.ptr[i];
        ai[i].name = rkc__put(&pool, rkc_map_get(a, "name"));
        ai[i].inputs = rkc__put_names(&pp, &pool, rkc_map_get(a, "inputs"), &ai[i].n_inputs);
        ai[i].outputs = rkc__put_names(&pp, &pool, rkc_map_get(a, "outputs"), &ai[i].n_outputs);
        ai[i].gpu = rkc__flag(a, "gpu");
        ai[i].cpu = rkc__flag(a, "cpu");
    }
    out->actors = ai;
    out->n = n;
    out->impl_ = block;
    return 0;
}

int rkc_actors(rkc *c, rkc_actor_list *out, int timeout_ms)
{
    if (!c || !out)
        return rkc__fail(c, -EINVAL, "no client or no list");
    memset(out, 0, sizeof *out);
    rkc_request rq = {.op = RKC_STATUS};
    rkc_reply r;
    int rc = rkc_call(c, &rq, &r, timeout_ms);
    if (rc)
        return rc;
    if (!r.ok)
        rc = rkc__fail(c, rkc_reply_errno(&r), "status: %s: %s", r.code, r.message);
    else if ((rc = rkc_status_actors(&r, out)) == -ENOENT)
        rkc__fail(c, rc, "the bridge's status has no `actors` (a bridge older than protocol 1.1)");
    else if (rc == -EPROTO)
        rkc__fail(c, rc, "the bridge's status `actors` is not an array of {name, inputs, outputs}");
    else if (rc)
        rkc__fail(c, rc, "out of memory for the actor list");
    rkc_reply_free(&r);
    return rc;
}

const rkc_actor_info *rkc_actor_find(const rkc_actor_list *l, const char *name)
{
    for (size_t i = 0; l && name && i < l->n; i++)
        if (!strcmp(l->actors[i].name, name))
            return &l->actors[i];
    return NULL;
}

void rkc_actor_list_free(rkc_actor_list *l)
{
    if (!l)
        return;
    free(l->impl_);
    memset(l, 0, sizeof *l);
}
