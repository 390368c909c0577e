/* bridge/codec.c - protocol v1 codec (see codec.h for the API and the order
 * of checks, bridge/PROTOCOL.md for the wire format). */
#include "codec.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

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

static const char *const rkb__op_names[] = {
    [RKB_OP_NONE] = "",         [RKB_OP_PING] = "ping",
    [RKB_OP_ECHO] = "echo",     [RKB_OP_VADD] = "vadd",
    [RKB_OP_STATUS] = "status", [RKB_OP_LAUNCH] = "launch",
};

const char *rkb_op_name(rkb_op op)
{
    if ((unsigned)op >= sizeof rkb__op_names / sizeof rkb__op_names[0])
        return "";
    return rkb__op_names[op];
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

/* ---- bounded pre-scan --------------------------------------------------
 *
 * WHY: msgpack-c's C unpacker has no limits. For an array or map header that
 * claims n elements it allocates n * sizeof(msgpack_object) (or _kv) from
 * its zone BEFORE checking that n elements could possibly follow, so a
 * 5-byte header claiming 2^32 - 1 entries costs ~64 GiB of address space,
 * and a million-key map costs tens of MB per request. This scan walks the
 * msgpack HEADERS only (it never decodes a value, except the top-level `id`
 * it can report), iteratively with a fixed explicit stack, and refuses:
 * truncation, a str/bin/ext length or an array/map count that cannot fit in
 * the bytes that remain (every element is at least 1 byte), nesting beyond
 * max_depth, and more than max_elements objects in total. Only a frame that
 * passes is handed to msgpack_unpack_next(), which still does the decoding;
 * its allocations are then bounded by max_elements and the frame size.
 * The scan also enforces the envelope rules that are about structure: the
 * first object is a map, its keys are strings, nothing follows it. */

typedef struct rkb__scan {
    size_t end;   /* offset just past the first object (when it completed) */
    bool has_id;  /* first top-level `id` key holds a uint64 ... */
    uint64_t id;  /* ... of this value */
} rkb__scan;

typedef struct rkb__frame {
    uint64_t left; /* objects still to read in this container */
    bool is_map;
} rkb__frame;

static uint64_t rkb__be(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

static const char *rkb__type_of_byte(uint8_t b)
{
    if (b <= 0x7f || (b >= 0xcc && b <= 0xcf))
        return "an unsigned integer";
    if (b >= 0xe0 || (b >= 0xd0 && b <= 0xd3))
        return "an integer";
    if (b <= 0x8f || b == 0xde || b == 0xdf)
        return "a map";
    if (b <= 0x9f || b == 0xdc || b == 0xdd)
        return "an array";
    if (b <= 0xbf || (b >= 0xd9 && b <= 0xdb))
        return "a str";
    switch (b) {
    case 0xc0: return "nil";
    case 0xc2: case 0xc3: return "a bool";
    case 0xc4: case 0xc5: case 0xc6: return "a bin";
    case 0xca: case 0xcb: return "a float";
    default: return "an ext";
    }
}

/* Scan the first object of p[0..len). Returns RKB_OK (out->end set) or
 * RKB_E_MALFORMED (err set). out->has_id/id are set as soon as the id is
 * read, so they are valid even on failure. No allocation, no recursion. */
static int rkb__scan_frame(const uint8_t *p, size_t len, const rkb_limits *lim,
                           rkb__scan *out, rkb_error *err)
{
    rkb__frame stack[RKB_MAX_DEPTH_CAP + 1];
    uint32_t max_depth = lim->max_depth ? lim->max_depth : RKB_DEFAULT_MAX_DEPTH;
    uint32_t max_elements = lim->max_elements ? lim->max_elements : RKB_DEFAULT_MAX_ELEMENTS;
    if (max_depth > RKB_MAX_DEPTH_CAP)
        max_depth = RKB_MAX_DEPTH_CAP;
    uint64_t declared = 1; /* objects the frame has declared: the root */
    unsigned sp = 0;       /* stack[0] is a virtual root expecting 1 object */
    size_t off = 0;
    bool id_key_seen = false, next_is_id = false;

    out->end = 0;
    out->has_id = false;
    out->id = 0;
    if (len == 0)
        return rkb_error_set(err, RKB_E_MALFORMED,
                             "the body frame is empty; it must hold one msgpack map");
    /* The first byte decides "map or not" before anything else is read, so
     * an array or scalar body is named as such. */
    if (p[0] == 0xc1)
        return rkb_error_set(err, RKB_E_MALFORMED,
                             "the body is not msgpack (byte 0xc1 at offset 0 is never used)");
    if (!(p[0] >= 0x80 && p[0] <= 0x8f) && p[0] != 0xde && p[0] != 0xdf)
        return rkb_error_set(err, RKB_E_MALFORMED,
                             "the body is %s (first byte 0x%02x); it must be a msgpack map",
                             rkb__type_of_byte(p[0]), p[0]);

    stack[0].left = 1;
    stack[0].is_map = false;
    for (;;) {
        while (sp > 0 && stack[sp].left == 0)
            sp--;
        if (stack[sp].left == 0)
            break; /* root done */
        /* In a top-level map, an even count left means a key is next. */
        bool top_key = sp == 1 && stack[1].is_map && (stack[1].left & 1) == 0;
        bool top_value_is_id = next_is_id;
        next_is_id = false;
        stack[sp].left--;

        size_t at = off, rem = len - off;
        if (rem == 0)
            return rkb_error_set(err, RKB_E_MALFORMED,
                                 "the frame is truncated: it ends at byte %zu inside an unfinished %s",
                                 len, stack[sp].is_map ? "map" : "array");
        uint8_t b = p[off++];
        rem--;
        uint64_t n = 0;      /* payload bytes (scalars) or children (containers) */
        unsigned hdr = 0;    /* extra header bytes holding n */
        int kind = 0;        /* 0 scalar, 1 array, 2 map */
        if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
            n = 0;
        } else if (b <= 0x8f) {
            kind = 2, n = b & 0x0f;
        } else if (b <= 0x9f) {
            kind = 1, n = b & 0x0f;
        } else if (b <= 0xbf) {
            n = b & 0x1f;
        } else {
            switch (b) {
            case 0xc1:
                return rkb_error_set(err, RKB_E_MALFORMED,
                                     "the body is not msgpack (byte 0xc1 at offset %zu is never used)",
                                     at);
            case 0xc4: case 0xd9: hdr = 1; break;             /* bin8 str8 */
            case 0xc5: case 0xda: hdr = 2; break;             /* bin16 str16 */
            case 0xc6: case 0xdb: hdr = 4; break;             /* bin32 str32 */
            case 0xc7: hdr = 1; break;                        /* ext8 */
            case 0xc8: hdr = 2; break;                        /* ext16 */
            case 0xc9: hdr = 4; break;                        /* ext32 */
            case 0xca: n = 4; break;
            case 0xcb: n = 8; break;
            case 0xcc: case 0xd0: n = 1; break;
            case 0xcd: case 0xd1: n = 2; break;
            case 0xce: case 0xd2: n = 4; break;
            case 0xcf: case 0xd3: n = 8; break;
            case 0xd4: n = 2; break;  /* fixext: type byte + 1/2/4/8/16 */
            case 0xd5: n = 3; break;
            case 0xd6: n = 5; break;
            case 0xd7: n = 9; break;
            case 0xd8: n = 17; break;
            case 0xdc: kind = 1, hdr = 2; break;
            case 0xdd: kind = 1, hdr = 4; break;
            case 0xde: kind = 2, hdr = 2; break;
            case 0xdf: kind = 2, hdr = 4; break;
            default: break;
            }
        }
        if (hdr) {
            if (rem < hdr)
                return rkb_error_set(err, RKB_E_MALFORMED,
                                     "the frame is truncated: the header at byte %zu needs %u more bytes but only %zu remain",
                                     at, hdr, rem);
            n = rkb__be(p + off, hdr);
            off += hdr;
            rem -= hdr;
            if (b >= 0xc7 && b <= 0xc9)
                n += 1; /* ext type byte */
        }
        if (top_key && !(b >= 0xa0 && b <= 0xbf) && !(b >= 0xd9 && b <= 0xdb))
            return rkb_error_set(err, RKB_E_MALFORMED,
                                 "a key of the request map (byte %zu) is %s; keys must be strings",
                                 at, rkb__type_of_byte(b));

        if (kind == 0) {
            if (n > rem) {
                const char *what = (b >= 0xa0 && b <= 0xbf) || (b >= 0xd9 && b <= 0xdb) ? "str"
                                   : (b >= 0xc4 && b <= 0xc6)                          ? "bin"
                                   : (b >= 0xc7 && b <= 0xc9) || (b >= 0xd4 && b <= 0xd8) ? "ext"
                                                                                         : "number";
                return rkb_error_set(err, RKB_E_MALFORMED,
                                     hdr ? "the %s at byte %zu claims %" PRIu64 " bytes but only %zu remain in the frame (truncated, or a bogus length)"
                                         : "the frame is truncated: the %s at byte %zu needs %" PRIu64 " bytes but only %zu remain",
                                     what, at, n, rem);
            }
            if (top_key && !id_key_seen && n == 2 && p[off] == 'i' && p[off + 1] == 'd') {
                id_key_seen = true; /* only the first `id` counts */
                next_is_id = true;
            }
            if (top_value_is_id) {
                if (b <= 0x7f) {
                    out->has_id = true, out->id = b;
                } else if (b >= 0xcc && b <= 0xcf) {
                    out->has_id = true, out->id = rkb__be(p + off, (unsigned)n);
                } else if (b >= 0xd0 && b <= 0xd3 && !(p[off] & 0x80)) {
                    /* A signed encoding of a non-negative value: msgpack-c
                     * decodes it as a positive integer, so do we. */
                    out->has_id = true, out->id = rkb__be(p + off, (unsigned)n);
                }
            }
            off += (size_t)n;
            continue;
        }

        /* A container: children must fit in the bytes left (>= 1 byte each),
         * the total must stay within max_elements, the depth within max_depth. */
        uint64_t children = kind == 2 ? 2 * n : n;
        if (sp + 1 > max_depth)
            return rkb_error_set(err, RKB_E_MALFORMED,
                                 "nesting is deeper than the limit of %" PRIu32 " levels (max_depth) at byte %zu",
                                 max_depth, at);
        if (children > rem)
            return rkb_error_set(err, RKB_E_MALFORMED,
                                 "the %s at byte %zu claims %" PRIu64 " %s but only %zu bytes remain in the frame (truncated, or a bogus count)",
                                 kind == 2 ? "map" : "array", at, n,
                                 kind == 2 ? "entries" : "elements", rem);
        declared += children;
        if (declared > max_elements)
            return rkb_error_set(err, RKB_E_MALFORMED,
                                 "the %s at byte %zu brings the request to %" PRIu64 " msgpack objects; the limit is %" PRIu32 " (max_elements)",
                                 kind == 2 ? "map" : "array", at, declared, max_elements);
        sp++;
        stack[sp].left = children;
        stack[sp].is_map = kind == 2;
    }
    out->end = off;
    if (off != len)
        return rkb_error_set(err, RKB_E_MALFORMED,
                             "%zu trailing byte%s follow the request map (it ends at byte %zu); the frame must hold exactly one map",
                             len - off, len - off == 1 ? "" : "s", off);
    return RKB_OK;
}

static int rkb__peek(const uint8_t *p, size_t len, const rkb_limits *lim, uint64_t *id)
{
    rkb__scan sc;
    int rc = rkb__scan_frame(p, len, lim, &sc, NULL);
    if (sc.has_id) {
        *id = sc.id;
        return RKB_OK;
    }
    return rc != RKB_OK ? rc : RKB_E_INVALID_ARGUMENT;
}

int rkb_peek_id(const void *buf, size_t len, uint64_t *id)
{
    const rkb_limits lim = RKB_LIMITS_DEFAULT;
    if (!buf && len)
        return RKB_E_MALFORMED;
    return rkb__peek(buf ? buf : (const void *)"", len, &lim, id);
}

/* ---- decoding ---------------------------------------------------------- */

void rkb_decode_state_init(rkb_decode_state *st)
{
    memset(&st->obj, 0, sizeof st->obj);
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

int rkb_decode_request(const void *buf, size_t len, const rkb_limits *lim,
                       rkb_request *req, rkb_decode_state *st, rkb_error *err)
{
    const rkb_limits def = RKB_LIMITS_DEFAULT;
    const uint8_t *p = buf;
    rkb__scan sc;
    int rc;

    memset(req, 0, sizeof *req);
    if (!lim)
        lim = &def;
    if (!p) {
        if (len)
            return rkb_error_set(err, RKB_E_INTERNAL, "NULL frame buffer of %zu bytes", len);
        p = (const uint8_t *)"";
    }
    /* Release the previous tree now, not at the next success, so a state
     * never pins more than the zone's first chunk for a request that is
     * already answered. Clearing keeps that chunk: no malloc per request. */
    if (!st->zone_ok)
        st->zone_ok = msgpack_zone_init(&st->zone, MSGPACK_ZONE_CHUNK_SIZE);
    else
        msgpack_zone_clear(&st->zone);
    memset(&st->obj, 0, sizeof st->obj);

    if (lim->max_frame && len > lim->max_frame) {
        /* The id is still echoed: peek reads headers, not payloads. */
        uint64_t id;
        if (rkb__peek(p, len, lim, &id) == RKB_OK)
            req->has_id = true, req->id = id;
        return rkb_error_set(err, RKB_E_TOO_LARGE,
                             "the request is %zu bytes; the limit is %zu bytes", len,
                             lim->max_frame);
    }

    rc = rkb__scan_frame(p, len, lim, &sc, err);
    req->has_id = sc.has_id;
    req->id = sc.id;
    if (rc != RKB_OK)
        return rc;

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
    const msgpack_object_map *m = &st->obj.via.map;

    /* Version first: a future version may change every other field. */
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

    const msgpack_object *op = rkb__get(m, "op");
    if (!op)
        return rkb_error_set(err, RKB_E_UNKNOWN_OP,
                             "field `op` is missing; it must name an operation (ping, echo, vadd, status, launch)");
    if (op->type != MSGPACK_OBJECT_STR)
        return rkb_error_set(err, RKB_E_UNKNOWN_OP,
                             "field `op` is %s; it must be a str naming an operation (ping, echo, vadd, status, launch)",
                             rkb__type_name(op));
    for (int i = RKB_OP_PING; i <= RKB_OP_LAUNCH; i++) {
        const char *name = rkb__op_names[i];
        if (op->via.str.size == strlen(name) && memcmp(op->via.str.ptr, name, op->via.str.size) == 0) {
            req->op = (rkb_op)i;
            break;
        }
    }
    if (req->op == RKB_OP_NONE) {
        char q[48];
        rkb__quote(q, sizeof q, op->via.str.ptr, op->via.str.size);
        return rkb_error_set(err, RKB_E_UNKNOWN_OP,
                             "field `op` is \"%s\", which is not an operation; known: ping, echo, vadd, status, launch",
                             q);
    }

    switch (req->op) {
    case RKB_OP_ECHO:
        return rkb__bin(m, "echo", "data", "`data` (bin)", &req->u.echo.data, err);
    case RKB_OP_VADD: {
        rkb_bytes *a = &req->u.vadd.a, *b = &req->u.vadd.b;
        const char *need = "`a` and `b` (bin, little-endian float32)";
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
    case RKB_OP_LAUNCH:
        if ((rc = rkb__uint(m, "launch", "grid", &req->u.launch.grid, err)) != RKB_OK ||
            (rc = rkb__uint(m, "launch", "block", &req->u.launch.block, err)) != RKB_OK ||
            (rc = rkb__uint(m, "launch", "smem", &req->u.launch.smem, err)) != RKB_OK)
            return rc;
        return RKB_OK;
    case RKB_OP_PING:
    case RKB_OP_STATUS:
    case RKB_OP_NONE:
        break;
    }
    return RKB_OK;
}

/* ---- encoding ---------------------------------------------------------- */

int rkb_pack_key(msgpack_packer *pk, const char *key)
{
    size_t n = strlen(key);
    return msgpack_pack_str_with_body(pk, key, n) ? RKB_E_INTERNAL : RKB_OK;
}

static int rkb__head(msgpack_packer *pk, bool has_id, uint64_t id, bool ok, uint32_t n)
{
    int e = msgpack_pack_map(pk, n);
    e |= rkb_pack_key(pk, "v");
    e |= msgpack_pack_uint8(pk, RKB_PROTOCOL_VERSION);
    e |= rkb_pack_key(pk, "id");
    e |= has_id ? msgpack_pack_uint64(pk, id) : msgpack_pack_nil(pk);
    e |= rkb_pack_key(pk, "ok");
    e |= ok ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
    return e ? RKB_E_INTERNAL : RKB_OK;
}

int rkb_reply_begin_ok(msgpack_packer *pk, bool has_id, uint64_t id, uint32_t nfields)
{
    if (nfields > UINT32_MAX - 3)
        return RKB_E_INTERNAL;
    return rkb__head(pk, has_id, id, true, 3 + nfields);
}

int rkb_reply_error(msgpack_packer *pk, bool has_id, uint64_t id, int code,
                    const char *message)
{
    if (!message)
        message = "";
    int e = rkb__head(pk, has_id, id, false, 4);
    e |= rkb_pack_key(pk, "error");
    e |= msgpack_pack_map(pk, 2);
    e |= rkb_pack_key(pk, "code");
    e |= rkb_pack_key(pk, rkb_code_name(code));
    e |= rkb_pack_key(pk, "message");
    e |= msgpack_pack_str_with_body(pk, message, strlen(message));
    return e ? RKB_E_INTERNAL : RKB_OK;
}
