/* bridge/client/reply.c - librkc's replies: what a reply owns, its fields
 * by name, its error code as an errno value. */
#include "impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void rkc_reply_free(rkc_reply *r)
{
    if (!r || !r->impl_)
        return;
    rkc_impl *im = r->impl_;
    msgpack_unpacked_destroy(&im->up);
    zmq_msg_close(&im->msg);
    free(im->text);
    free(im);
    r->impl_ = NULL;
    r->root = NULL;
    r->data = NULL;
    r->code = r->message = "";
}

const msgpack_object *rkc_map_get(const msgpack_object *map, const char *key)
{
    if (!map || !key || map->type != MSGPACK_OBJECT_MAP)
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

int rkc_reply_bin(const rkc_reply *r, const char *name, const void **data, size_t *len)
{
    if (!r || !name || !data || !len)
        return -EINVAL;
    const msgpack_object *o = rkc_reply_get(r, name);
    if (!o)
        return -ENOENT;
    if (o->type != MSGPACK_OBJECT_BIN)
        return -EPROTO;
    *data = o->via.bin.ptr;
    *len = o->via.bin.size;
    return 0;
}

int rkc_reply_errno(const rkc_reply *r)
{
    static const struct { const char *code; int err; } map[] = {
        {"MALFORMED", EBADMSG},       {"UNSUPPORTED_VERSION", EPROTONOSUPPORT},
        {"UNKNOWN_OP", ENOSYS},       {"INVALID_ARGUMENT", EINVAL},
        {"TOO_LARGE", EMSGSIZE},      {"BUSY", EBUSY},
        {"LAUNCH_INVALID", ERANGE},   {"DEVICE_FAULT", EIO},
        {"ACTOR_FAILED", ECANCELED},  {"PERMISSION_DENIED", EPERM},
        {"SHUTTING_DOWN", ESHUTDOWN},
    };
    if (!r)
        return -EINVAL;
    if (r->ok)
        return 0;
    for (size_t i = 0; i < sizeof map / sizeof *map; i++)
        if (r->code && !strcmp(r->code, map[i].code))
            return -map[i].err;
    return -EREMOTEIO;
}

/* A str object's bytes, or "" (NULL o, another type). */
static const char *rkc__str(const msgpack_object *o, size_t *n)
{
    *n = o && o->type == MSGPACK_OBJECT_STR ? o->via.str.size : 0;
    return *n ? o->via.str.ptr : "";
}

/* code and message as C strings in one allocation the reply owns. */
static int rkc__error_text(rkc_impl *im, rkc_reply *out)
{
    const msgpack_object *e = rkc_reply_get(out, "error");
    size_t cn, mn;
    const char *code = rkc__str(rkc_map_get(e, "code"), &cn);
    const char *msg = rkc__str(rkc_map_get(e, "message"), &mn);
    if (!out->ok && !cn)
        code = "INTERNAL", cn = 8, msg = "the bridge's error reply has no code", mn = strlen(msg);
    im->text = malloc(cn + mn + 2);
    if (!im->text)
        return -ENOMEM;
    memcpy(im->text, code, cn);
    im->text[cn] = 0;
    memcpy(im->text + cn + 1, msg, mn);
    im->text[cn + 1 + mn] = 0;
    out->code = im->text;
    out->message = im->text + cn + 1;
    return 0;
}

int rkc__parse(rkc *c, rkc_impl *im, rkc_reply *out)
{
    memset(out, 0, sizeof *out);
    out->code = out->message = "";
    out->impl_ = im;
    msgpack_unpacked_init(&im->up);
    size_t off = 0;
    if (msgpack_unpack_next(&im->up, zmq_msg_data(&im->msg), zmq_msg_size(&im->msg), &off) !=
            MSGPACK_UNPACK_SUCCESS ||
        im->up.data.type != MSGPACK_OBJECT_MAP) {
        size_t n = zmq_msg_size(&im->msg);
        rkc_reply_free(out);
        return rkc__fail(c, -EPROTO, "the reply (%zu B) is not a msgpack map", n);
    }
    out->root = &im->up.data;
    const msgpack_object *o = rkc_reply_get(out, "id");
    if (o && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        out->has_id = true, out->id = o->via.u64;
    o = rkc_reply_get(out, "ok");
    out->ok = o && o->type == MSGPACK_OBJECT_BOOLEAN && o->via.boolean;
    if (rkc__error_text(im, out)) {
        rkc_reply_free(out);
        return rkc__fail(c, -ENOMEM, "out of memory for a reply's error text");
    }
    o = rkc_reply_get(out, "data");
    if (!o)
        o = rkc_reply_get(out, "c");
    if (o && o->type == MSGPACK_OBJECT_BIN)
        out->data = (const uint8_t *)o->via.bin.ptr, out->len = o->via.bin.size;
    size_t bn;
    const char *be = rkc__str(rkc_reply_get(out, "backend"), &bn);
    bn = bn < sizeof out->backend - 1 ? bn : sizeof out->backend - 1;
    memcpy(out->backend, be, bn);
    out->backend[bn] = 0;
    return 0;
}
