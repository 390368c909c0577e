/* bridge/protocol/decode.c - decoding a request frame (see codec.h for the
 * API and the order of checks, bridge/PROTOCOL.md for the wire format). */
#include "codec.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "scan.h"

/* ---- codes, ops, errors ------------------------------------------------ */

const char *rkb_code_name(int code)
{
    switch (code) {
#define RKB__CODE_NAME(name, num)                                              \
    case RKB_E_##name:                                                         \
        return #name;
        RKB_CODE_MAP(RKB__CODE_NAME)
#undef RKB__CODE_NAME
    default:
        /* A reply must always carry a valid code; an unknown one is a bug. */
        return "INTERNAL";
    }
}

static const struct {
    const char *name;
    bool admin;
} rkb__ops[RKB_OP_COUNT] = {
    [RKB_OP_NONE] = {"", false},
#define RKB__OP_ROW(name, wire, admin) [RKB_OP_##name] = {wire, admin},
    RKB_OP_MAP(RKB__OP_ROW)
#undef RKB__OP_ROW
};

const char *rkb_op_name(rkb_op op)
{
    return (unsigned)op < RKB_OP_COUNT ? rkb__ops[op].name : "";
}

bool rkb_op_is_admin(rkb_op op)
{
    return (unsigned)op < RKB_OP_COUNT && rkb__ops[op].admin;
}

int rkb_error_set(rkb_error *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        err->code = code;
        va_start(ap, fmt);
        /* Truncation is fine: the message is for a person. */
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* ---- decoding ---------------------------------------------------------- */

void rkb_decode_state_init(rkb_decode_state *st)
{
    memset(&st->obj, 0, sizeof st->obj);
    st->zone_used = st->no_flat = false;
    st->zone_ok = msgpack_zone_init(&st->zone, MSGPACK_ZONE_CHUNK_SIZE);
}

void rkb_decode_state_destroy(rkb_decode_state *st)
{
    if (st->zone_ok)
        msgpack_zone_destroy(&st->zone);
    st->zone_ok = false;
}

static const char *rkb__type_name(const msgpack_object *o)
{
    switch (o->type) {
    case MSGPACK_OBJECT_NIL: return "nil";
    case MSGPACK_OBJECT_BOOLEAN: return "a bool";
    case MSGPACK_OBJECT_POSITIVE_INTEGER: return "an unsigned integer";
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return "a negative integer";
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: return "a float";
    case MSGPACK_OBJECT_STR: return "a str";
    case MSGPACK_OBJECT_BIN: return "a bin";
    case MSGPACK_OBJECT_ARRAY: return "an array";
    case MSGPACK_OBJECT_MAP: return "a map";
    case MSGPACK_OBJECT_EXT: return "an ext";
    }
    return "an unknown type";
}

/* First value under a str key equal to name (keys are strings: the scan
 * refused anything else), or NULL. First wins on duplicate keys, as in
 * rkb__scan_frame's id. */
static const msgpack_object *rkb__get(const msgpack_object_map *m, const char *name)
{
    size_t nlen = strlen(name);
    for (uint32_t i = 0; i < m->size; i++) {
        const msgpack_object *k = &m->ptr[i].key;
        if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == nlen &&
            memcmp(k->via.str.ptr, name, nlen) == 0)
            return &m->ptr[i].val;
    }
    return NULL;
}

/* A bin field, or INVALID_ARGUMENT naming it. ptr stays inside the frame:
 * msgpack-c's unpack_next references str/bin bytes in the input buffer. */
static int rkb__bin(const msgpack_object_map *m, const char *op, const char *name,
                    const char *need, rkb_bytes *out, rkb_error *err)
{
    const msgpack_object *o = rkb__get(m, name);
    if (!o)
        return rkb_error_set(err, RKB_E_INVALID_ARGUMENT,
                             "field `%s` is missing; %s needs %s", name, op, need);
    if (o->type != MSGPACK_OBJECT_BIN)
        return rkb_error_set(err, RKB_E_INVALID_ARGUMENT,
                             "field `%s` is %s; %s needs %s", name, rkb__type_name(o), op, need);
    out->ptr = (const uint8_t *)o->via.bin.ptr;
    out->len = o->via.bin.size;
    return RKB_OK;
}

static int rkb__uint(const msgpack_object_map *m, const char *op, const char *name,
                     uint64_t *out, rkb_error *err)
{
    const msgpack_object *o = rkb__get(m, name);
    if (!o)
        return rkb_error_set(err, RKB_E_INVALID_ARGUMENT,
                             "field `%s` is missing; %s needs `grid`, `block` and `smem` (uint)",
                             name, op);
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        return rkb_error_set(err, RKB_E_INVALID_ARGUMENT,
                             "field `%s` is negative (%" PRId64 "); %s needs a uint",
                             name, o->via.i64, op);
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return rkb_error_set(err, RKB_E_INVALID_ARGUMENT,
                             "field `%s` is %s; %s needs a uint", name, rkb__type_name(o), op);
    *out = o->via.u64;
    return RKB_OK;
}

/* Printable, bounded copy of a client string for a message. */
static void rkb__quote(char *dst, size_t cap, const char *s, size_t n)
{
    size_t j = 0;
    size_t max = n < cap - 4 ? n : cap - 4;
    for (size_t i = 0; i < max; i++) {
        unsigned char c = (unsigned char)s[i];
        dst[j++] = (c >= 0x20 && c < 0x7f && c != '"') ? (char)c : '?';
    }
    if (max < n) {
        dst[j++] = '.', dst[j++] = '.', dst[j++] = '.';
    }
    dst[j] = '\0';
}

/* `v` first: a future version may change every other field. */
static int rkb__version(const msgpack_object_map *m, rkb_error *err)
{
    const msgpack_object *v = rkb__get(m, "v");
    if (!v)
        return rkb_error_set(err, RKB_E_UNSUPPORTED_VERSION,
                             "field `v` is missing; this bridge speaks protocol version 1");
    if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER && v->type != MSGPACK_OBJECT_NEGATIVE_INTEGER)
        return rkb_error_set(err, RKB_E_UNSUPPORTED_VERSION,
                             "field `v` is %s; it must be the integer 1", rkb__type_name(v));
    if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        return rkb_error_set(err, RKB_E_UNSUPPORTED_VERSION,
                             "field `v` is %" PRId64 "; this bridge speaks protocol version 1 only",
                             v->via.i64);
    if (v->via.u64 != RKB_PROTOCOL_VERSION)
        return rkb_error_set(err, RKB_E_UNSUPPORTED_VERSION,
                             "field `v` is %" PRIu64 "; this bridge speaks protocol version 1 only",
                             v->via.u64);
    return RKB_OK;
}

static int rkb__id(const msgpack_object_map *m, rkb_error *err)
{
    const msgpack_object *id = rkb__get(m, "id");
    if (!id)
        return rkb_error_set(err, RKB_E_INVALID_ARGUMENT,
                             "field `id` is missing; every request needs a uint64 `id`");
    if (id->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        return rkb_error_set(err, RKB_E_INVALID_ARGUMENT,
                             "field `id` is negative (%" PRId64 "); it must be a uint64",
                             id->via.i64);
    if (id->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return rkb_error_set(err, RKB_E_INVALID_ARGUMENT,
                             "field `id` is %s; it must be a uint64", rkb__type_name(id));
    return RKB_OK;
}

#define RKB__KNOWN_OPS "ping, echo, vadd, status, launch, retry_gpu"

/* The status endpoint's op: `status`, and nothing else (rkb_limits). */
static int rkb__status_only(const msgpack_object *op, rkb_request *req, rkb_error *err)
{
    if (!op)
        return rkb_error_set(err, RKB_E_UNKNOWN_OP,
                             "field `op` is missing; the status endpoint serves only `status`");
    if (op->type != MSGPACK_OBJECT_STR)
        return rkb_error_set(err, RKB_E_UNKNOWN_OP,
                             "field `op` is %s; the status endpoint serves only the str `status`",
                             rkb__type_name(op));
    if (op->via.str.size == 6 && memcmp(op->via.str.ptr, "status", 6) == 0) {
        req->op = RKB_OP_STATUS;
        return RKB_OK;
    }
    char q[48];
    rkb__quote(q, sizeof q, op->via.str.ptr, op->via.str.size);
    return rkb_error_set(err, RKB_E_UNKNOWN_OP,
                         "op \"%s\" is not served here: the status endpoint serves only `status` "
                         "(send other operations to the bridge's main endpoint)", q);
}

static int rkb__op(const msgpack_object_map *m, const rkb_limits *lim, rkb_request *req, rkb_error *err)
{
    const msgpack_object *op = rkb__get(m, "op");
    if (lim->status_only)
        return rkb__status_only(op, req, err);
    if (!op)
        return rkb_error_set(err, RKB_E_UNKNOWN_OP,
                             "field `op` is missing; it must name an operation (" RKB__KNOWN_OPS ")");
    if (op->type != MSGPACK_OBJECT_STR)
        return rkb_error_set(err, RKB_E_UNKNOWN_OP,
                             "field `op` is %s; it must be a str naming an operation (" RKB__KNOWN_OPS ")",
                             rkb__type_name(op));
    for (int i = RKB_OP_NONE + 1; i < RKB_OP_COUNT; i++) {
        const char *name = rkb__ops[i].name;
        if (((i == RKB_OP_FAULT || i == RKB_OP_HANG) && !lim->test_ops) || i == RKB_OP_ACTOR)
            continue; /* test-only: not an operation unless the operator asked */
        if (op->via.str.size == strlen(name) && memcmp(op->via.str.ptr, name, op->via.str.size) == 0) {
            req->op = (rkb_op)i;
            return RKB_OK;
        }
    }
    for (size_t i = 0; i < lim->n_actors; i++) {
        const char *name = lim->actors[i].decl->name;
        if (op->via.str.size == strlen(name) && memcmp(op->via.str.ptr, name, op->via.str.size) == 0) {
            req->op = RKB_OP_ACTOR;
            req->u.actor.index = (uint32_t)i;
            return RKB_OK;
        }
    }
    char q[48], known[160] = "";
    rkb__quote(q, sizeof q, op->via.str.ptr, op->via.str.size);
    for (size_t i = 0, k = 0; i < lim->n_actors && k < sizeof known - 40; i++)
        k += (size_t)snprintf(known + k, sizeof known - k, ", %s", lim->actors[i].decl->name);
    return rkb_error_set(err, RKB_E_UNKNOWN_OP,
                         "field `op` is \"%s\", which is not an operation; known: " RKB__KNOWN_OPS "%s", q, known);
}

/* A module actor's inputs: each declared field a bin; equal lengths where
 * the actor declares RK_ACTOR_EQUAL_INPUTS. */
static int rkb__actor_args(const msgpack_object_map *m, const rkb_limits *lim, rkb_request *req, rkb_error *err)
{
    const rk_actor_decl *d = lim->actors[req->u.actor.index].decl;
    for (uint32_t i = 0; i < d->n_inputs; i++) {
        char need[48];
        snprintf(need, sizeof need, "`%s` (bin)", d->inputs[i]);
        int rc = rkb__bin(m, d->name, d->inputs[i], need, &req->u.actor.in[i], err);
        if (rc != RKB_OK)
            return rc;
        if ((d->flags & RK_ACTOR_EQUAL_INPUTS) && req->u.actor.in[i].len != req->u.actor.in[0].len)
            return rkb_error_set(err, RKB_E_INVALID_ARGUMENT,
                                 "field `%s` is %zu bytes and `%s` is %zu bytes; %s needs inputs of one length",
                                 d->inputs[i], req->u.actor.in[i].len, d->inputs[0], req->u.actor.in[0].len,
                                 d->name);
    }
    return RKB_OK;
}

static int rkb__vadd_args(const msgpack_object_map *m, rkb_request *req, rkb_error *err)
{
    rkb_bytes *a = &req->u.vadd.a, *b = &req->u.vadd.b;
    const char *need = "`a` and `b` (bin, little-endian float32)";
    int rc;
    if ((rc = rkb__bin(m, "vadd", "a", need, a, err)) != RKB_OK ||
        (rc = rkb__bin(m, "vadd", "b", need, b, err)) != RKB_OK)
        return rc;
    if (a->len != b->len)
        return rkb_error_set(err, RKB_E_INVALID_ARGUMENT,
                             "field `a` is %zu bytes and `b` is %zu bytes; vadd needs equal lengths",
                             a->len, b->len);
    if (a->len % 4 != 0)
        return rkb_error_set(err, RKB_E_INVALID_ARGUMENT,
                             "fields `a` and `b` are %zu bytes, not a multiple of 4; vadd needs float32 elements",
                             a->len);
    if (a->len == 0)
        return rkb_error_set(err, RKB_E_INVALID_ARGUMENT,
                             "fields `a` and `b` are empty; vadd needs at least 1 element");
    req->u.vadd.n = a->len / 4;
    return RKB_OK;
}

static int rkb__args(const msgpack_object_map *m, const rkb_limits *lim, rkb_request *req, rkb_error *err)
{
    int rc;
    switch (req->op) {
    case RKB_OP_ACTOR:
        return rkb__actor_args(m, lim, req, err);
    case RKB_OP_ECHO:
        return rkb__bin(m, "echo", "data", "`data` (bin)", &req->u.echo.data, err);
    case RKB_OP_VADD:
        return rkb__vadd_args(m, req, err);
    case RKB_OP_LAUNCH:
        if ((rc = rkb__uint(m, "launch", "grid", &req->u.launch.grid, err)) != RKB_OK ||
            (rc = rkb__uint(m, "launch", "block", &req->u.launch.block, err)) != RKB_OK ||
            (rc = rkb__uint(m, "launch", "smem", &req->u.launch.smem, err)) != RKB_OK)
            return rc;
        return RKB_OK;
    default:
        return RKB_OK;
    }
}

/* Releases the previous tree now, not at the next success, so a state never
 * pins more than the zone's first chunk for a request that is already
 * answered. Clearing keeps that chunk: no malloc per request. */
static void rkb__state_reset(rkb_decode_state *st)
{
    if (!st->zone_ok)
        st->zone_ok = msgpack_zone_init(&st->zone, MSGPACK_ZONE_CHUNK_SIZE);
    else if (st->zone_used)
        msgpack_zone_clear(&st->zone);
    st->zone_used = false;
    memset(&st->obj, 0, sizeof st->obj);
}

/* ---- flat maps without the scan and msgpack_unpack ------------------------
 * Every request the protocol defines is one map of scalars (ints, strs,
 * bins). For such a map of up to RKB_FLAT_MAX entries that fills the frame
 * exactly, has string keys and stays within max_elements, the decoder
 * builds the msgpack_object entries itself in one pass, checking every
 * length against the frame as it goes: the objects msgpack-c would build,
 * so every check after reads them alike; the zone is not touched. Anything
 * else (a nested value, more entries, any flaw at all) goes through the
 * bounded scan and msgpack_unpack, which name the problem.
 * test_decode_flat compares the two paths. */

/* A signed value as msgpack-c types it: non-negative ones are positive. */
static void rkb__flat_int(msgpack_object *o, int64_t v)
{
    if (v < 0)
        o->type = MSGPACK_OBJECT_NEGATIVE_INTEGER, o->via.i64 = v;
    else
        o->type = MSGPACK_OBJECT_POSITIVE_INTEGER, o->via.u64 = (uint64_t)v;
}

/* Sized values: str, bin, ext (hdr: length bytes; ext: a type byte). */
static bool rkb__flat_sized(const uint8_t *p, size_t end, size_t *off, unsigned hdr, size_t n_fix,
                            int kind, msgpack_object *o)
{
    size_t at = *off + 1;
    if (at + hdr + (kind == 2) > end)
        return false;
    size_t n = hdr ? (size_t)rkb__be(p + at, hdr) : n_fix;
    at += hdr;
    int8_t ext_type = 0;
    if (kind == 2)
        ext_type = (int8_t)p[at++];
    if (n > end - at)
        return false;
    const char *ptr = (const char *)p + at;
    if (kind == 0)
        o->type = MSGPACK_OBJECT_STR, o->via.str.ptr = ptr, o->via.str.size = (uint32_t)n;
    else if (kind == 1)
        o->type = MSGPACK_OBJECT_BIN, o->via.bin.ptr = ptr, o->via.bin.size = (uint32_t)n;
    else
        o->type = MSGPACK_OBJECT_EXT, o->via.ext.type = ext_type, o->via.ext.ptr = ptr,
        o->via.ext.size = (uint32_t)n;
    *off = at + n;
    return true;
}

/* Fixed-width numbers after the type byte b. */
static bool rkb__flat_number(const uint8_t *p, size_t end, size_t *off, uint8_t b, msgpack_object *o)
{
    static const uint8_t width[16] = {4, 8, 1, 2, 4, 8, 1, 2, 4, 8}; /* 0xca..0xd3 */
    unsigned w = width[b - 0xca];
    if (*off + 1 + w > end)
        return false;
    uint64_t v = rkb__be(p + *off + 1, w);
    *off += 1 + w;
    if (b == 0xca) {
        uint32_t u = (uint32_t)v;
        float f;
        memcpy(&f, &u, 4);
        o->type = MSGPACK_OBJECT_FLOAT32, o->via.f64 = f;
    } else if (b == 0xcb) {
        double d;
        memcpy(&d, &v, 8);
        o->type = MSGPACK_OBJECT_FLOAT64, o->via.f64 = d;
    } else if (b <= 0xcf) {
        o->type = MSGPACK_OBJECT_POSITIVE_INTEGER, o->via.u64 = v;
    } else {
        unsigned sh = 64 - 8 * w; /* sign-extend the w-byte value */
        rkb__flat_int(o, (int64_t)(v << sh) >> sh);
    }
    return true;
}

/* One scalar at p[*off]; false for a container (or anything unexpected). */
static bool rkb__flat_value(const uint8_t *p, size_t end, size_t *off, msgpack_object *o)
{
    uint8_t b = p[*off];
    if (b <= 0x7f || b >= 0xe0) {
        rkb__flat_int(o, (int8_t)b);
        (*off)++;
        return true;
    }
    if (b >= 0xa0 && b <= 0xbf)
        return rkb__flat_sized(p, end, off, 0, b & 0x1f, 0, o);
    switch (b) {
    case 0xc0: o->type = MSGPACK_OBJECT_NIL; (*off)++; return true;
    case 0xc2: case 0xc3:
        o->type = MSGPACK_OBJECT_BOOLEAN, o->via.boolean = b == 0xc3;
        (*off)++;
        return true;
    case 0xc4: case 0xc5: case 0xc6: return rkb__flat_sized(p, end, off, 1u << (b - 0xc4), 0, 1, o);
    case 0xc7: case 0xc8: case 0xc9: return rkb__flat_sized(p, end, off, 1u << (b - 0xc7), 0, 2, o);
    case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8:
        return rkb__flat_sized(p, end, off, 0, 1u << (b - 0xd4), 2, o);
    case 0xd9: case 0xda: case 0xdb: return rkb__flat_sized(p, end, off, 1u << (b - 0xd9), 0, 0, o);
    default: break;
    }
    if (b >= 0xca && b <= 0xd3)
        return rkb__flat_number(p, end, off, b, o);
    return false; /* a map or an array (0xc1 never passes the scan) */
}

/* Builds st->obj from p[0..end) when it is a flat map (see above); sets
 * the request's id as the scan would (the first `id` key's uint64). */
static bool rkb__flat_map(const uint8_t *p, size_t end, const rkb_limits *lim,
                          rkb_decode_state *st, rkb_request *req)
{
    size_t off = 1;
    size_t n;
    if (end && p[0] >= 0x80 && p[0] <= 0x8f)
        n = p[0] & 0x0f;
    else if (end && ((p[0] == 0xde && end >= 3) || (p[0] == 0xdf && end >= 5)))
        off += p[0] == 0xde ? 2 : 4, n = (size_t)rkb__be(p + 1, p[0] == 0xde ? 2 : 4);
    else
        return false;
    uint32_t max_el = lim->max_elements ? lim->max_elements : RKB_DEFAULT_MAX_ELEMENTS;
    if (n > RKB_FLAT_MAX || 1 + 2 * n > max_el)
        return false;
    bool id_seen = false;
    for (size_t i = 0; i < n; i++) {
        msgpack_object *k = &st->flat[i].key, *v = &st->flat[i].val;
        if (off >= end || !rkb__flat_value(p, end, &off, k) || k->type != MSGPACK_OBJECT_STR ||
            off >= end || !rkb__flat_value(p, end, &off, v))
            return false;
        if (!id_seen && k->via.str.size == 2 && !memcmp(k->via.str.ptr, "id", 2)) {
            id_seen = true; /* only the first `id` counts */
            if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
                req->has_id = true, req->id = v->via.u64;
        }
    }
    if (off != end) {
        req->has_id = false, req->id = 0;
        return false;
    }
    st->obj.type = MSGPACK_OBJECT_MAP;
    st->obj.via.map.size = (uint32_t)n;
    st->obj.via.map.ptr = st->flat;
    return true;
}

/* Scans p[0..len) and unpacks the map into st (TOO_LARGE, MALFORMED or
 * INTERNAL on failure); req->has_id/id are set whenever the id was read. */
static int rkb__unpack(const uint8_t *p, size_t len, const rkb_limits *lim, rkb_request *req,
                       rkb_decode_state *st, rkb_error *err)
{
    if (lim->max_frame && len > lim->max_frame) {
        /* The id is still echoed: peek reads headers, not payloads. */
        uint64_t id;
        if (rkb__peek(p, len, lim, &id) == RKB_OK)
            req->has_id = true, req->id = id;
        return rkb_error_set(err, RKB_E_TOO_LARGE,
                             "the request is %zu bytes; the limit is %zu bytes", len,
                             lim->max_frame);
    }
    if (!st->no_flat && rkb__flat_map(p, len, lim, st, req))
        return RKB_OK;
    req->has_id = false, req->id = 0; /* the scan says how far it got */
    rkb__scan sc;
    int rc = rkb__scan_frame(p, len, lim, &sc, err);
    req->has_id = sc.has_id;
    req->id = sc.id;
    if (rc != RKB_OK)
        return rc;
    memset(&st->obj, 0, sizeof st->obj);
    st->zone_used = true;
    size_t off = 0;
    msgpack_unpack_return ur = st->zone_ok
        ? msgpack_unpack((const char *)p, sc.end, &off, &st->zone, &st->obj)
        : MSGPACK_UNPACK_NOMEM_ERROR;
    if (ur == MSGPACK_UNPACK_NOMEM_ERROR)
        return rkb_error_set(err, RKB_E_INTERNAL,
                             "out of memory decoding a %zu-byte request", len);
    if (ur != MSGPACK_UNPACK_SUCCESS || off != sc.end || st->obj.type != MSGPACK_OBJECT_MAP)
        /* The scan accepted it, so msgpack-c should too: a codec bug. */
        return rkb_error_set(err, RKB_E_INTERNAL,
                             "msgpack-c refused a request the scan accepted (rc %d, %zu of %zu bytes)",
                             (int)ur, off, sc.end);
    return RKB_OK;
}

int rkb_decode_request(const void *buf, size_t len, const rkb_limits *lim,
                       rkb_request *req, rkb_decode_state *st, rkb_error *err)
{
    const rkb_limits def = RKB_LIMITS_DEFAULT;
    const uint8_t *p = buf;
    int rc;

    memset(req, 0, sizeof *req);
    if (!lim)
        lim = &def;
    if (!p) {
        if (len)
            return rkb_error_set(err, RKB_E_INTERNAL, "NULL frame buffer of %zu bytes", len);
        p = (const uint8_t *)"";
    }
    rkb__state_reset(st);
    if ((rc = rkb__unpack(p, len, lim, req, st, err)) != RKB_OK)
        return rc;
    const msgpack_object_map *m = &st->obj.via.map;
    if ((rc = rkb__version(m, err)) != RKB_OK || (rc = rkb__id(m, err)) != RKB_OK ||
        (rc = rkb__op(m, lim, req, err)) != RKB_OK)
        return rc;
    return rkb__args(m, lim, req, err);
}
