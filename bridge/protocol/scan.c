/* bridge/protocol/scan.c - the bounded pre-scan of a request frame.
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
 * passes is handed to msgpack_unpack(), which still does the decoding; its
 * allocations are then bounded by max_elements and the frame size. The
 * scan also enforces the envelope rules that are about structure: the first
 * object is a map, its keys are strings, nothing follows it. */
#include "scan.h"

#include <inttypes.h>
#include <string.h>

typedef struct rkb__frame {
    uint64_t left; /* objects still to read in this container */
    bool is_map;
} rkb__frame;

/* One msgpack header: what it is and how big. */
typedef struct rkb__head {
    uint8_t b;     /* the type byte */
    int kind;      /* 0 scalar, 1 array, 2 map */
    unsigned hdr;  /* extra header bytes holding n */
    uint64_t n;    /* payload bytes (scalars) or children (containers) */
} rkb__head;

uint64_t rkb__be(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

static bool rkb__is_str(uint8_t b) { return (b >= 0xa0 && b <= 0xbf) || (b >= 0xd9 && b <= 0xdb); }

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
    if (rkb__is_str(b))
        return "a str";
    switch (b) {
    case 0xc0: return "nil";
    case 0xc2: case 0xc3: return "a bool";
    case 0xc4: case 0xc5: case 0xc6: return "a bin";
    case 0xca: case 0xcb: return "a float";
    default: return "an ext";
    }
}

/* Classifies type byte b (not 0xc1) into kind, extra header bytes and, for
 * types whose size is in the byte itself, n. */
static void rkb__classify(uint8_t b, rkb__head *h)
{
    *h = (rkb__head){.b = b};
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3)
        return;
    if (b <= 0x8f) {
        h->kind = 2, h->n = b & 0x0f;
        return;
    }
    if (b <= 0x9f) {
        h->kind = 1, h->n = b & 0x0f;
        return;
    }
    if (b <= 0xbf) {
        h->n = b & 0x1f;
        return;
    }
    switch (b) {
    case 0xc4: case 0xd9: case 0xc7: h->hdr = 1; break; /* bin8 str8 ext8 */
    case 0xc5: case 0xda: case 0xc8: h->hdr = 2; break; /* bin16 str16 ext16 */
    case 0xc6: case 0xdb: case 0xc9: h->hdr = 4; break; /* bin32 str32 ext32 */
    case 0xca: h->n = 4; break;
    case 0xcb: h->n = 8; break;
    case 0xcc: case 0xd0: h->n = 1; break;
    case 0xcd: case 0xd1: h->n = 2; break;
    case 0xce: case 0xd2: h->n = 4; break;
    case 0xcf: case 0xd3: h->n = 8; break;
    case 0xd4: h->n = 2; break; /* fixext: type byte + 1/2/4/8/16 */
    case 0xd5: h->n = 3; break;
    case 0xd6: h->n = 5; break;
    case 0xd7: h->n = 9; break;
    case 0xd8: h->n = 17; break;
    case 0xdc: h->kind = 1, h->hdr = 2; break;
    case 0xdd: h->kind = 1, h->hdr = 4; break;
    case 0xde: h->kind = 2, h->hdr = 2; break;
    case 0xdf: h->kind = 2, h->hdr = 4; break;
    default: break;
    }
}

/* Reads the header at p[*off] (the object starting at byte `at`). */
static int rkb__read_head(const uint8_t *p, size_t len, size_t *off, rkb__head *h,
                          rkb_error *err)
{
    size_t at = *off;
    uint8_t b = p[(*off)++];
    rkb__classify(b, h); /* first: *h is written on every path */
    if (b == 0xc1)
        return rkb_error_set(err, RKB_E_MALFORMED,
                             "the body is not msgpack (byte 0xc1 at offset %zu is never used)", at);
    if (h->hdr) {
        size_t rem = len - *off;
        if (rem < h->hdr)
            return rkb_error_set(err, RKB_E_MALFORMED,
                                 "the frame is truncated: the header at byte %zu needs %u more bytes but only %zu remain",
                                 at, h->hdr, rem);
        h->n = rkb__be(p + *off, h->hdr);
        *off += h->hdr;
        if (b >= 0xc7 && b <= 0xc9)
            h->n += 1; /* ext type byte */
    }
    return RKB_OK;
}

static int rkb__scalar_too_long(const rkb__head *h, size_t at, size_t rem, rkb_error *err)
{
    uint8_t b = h->b;
    const char *what = rkb__is_str(b)                                         ? "str"
                       : (b >= 0xc4 && b <= 0xc6)                             ? "bin"
                       : (b >= 0xc7 && b <= 0xc9) || (b >= 0xd4 && b <= 0xd8) ? "ext"
                                                                              : "number";
    return rkb_error_set(err, RKB_E_MALFORMED,
                         h->hdr ? "the %s at byte %zu claims %" PRIu64 " bytes but only %zu remain in the frame (truncated, or a bogus length)"
                                : "the frame is truncated: the %s at byte %zu needs %" PRIu64 " bytes but only %zu remain",
                         what, at, h->n, rem);
}

/* The value after the first top-level `id` key: a uint64 is the id (a
 * signed encoding of a non-negative value too: msgpack-c decodes it as a
 * positive integer, so do we). */
static void rkb__take_id(const rkb__head *h, const uint8_t *v, rkb__scan *out)
{
    uint8_t b = h->b;
    if (b <= 0x7f)
        out->has_id = true, out->id = b;
    else if ((b >= 0xcc && b <= 0xcf) || (b >= 0xd0 && b <= 0xd3 && !(v[0] & 0x80)))
        out->has_id = true, out->id = rkb__be(v, (unsigned)h->n);
}

/* The scan's position: the container stack and what it has counted. */
typedef struct rkb__walk {
    rkb__frame stack[RKB_MAX_DEPTH_CAP + 1];
    unsigned sp;        /* stack[0] is a virtual root expecting 1 object */
    uint64_t declared;  /* objects the frame has declared: the root ... */
    uint32_t max_depth, max_elements;
    bool id_key_seen, next_is_id;
} rkb__walk;

/* Pushes the container described by h (at byte `at`, rem bytes left). */
static int rkb__push(rkb__walk *w, const rkb__head *h, size_t at, size_t rem, rkb_error *err)
{
    /* children must fit in the bytes left (>= 1 byte each), the total must
     * stay within max_elements, the depth within max_depth */
    uint64_t children = h->kind == 2 ? 2 * h->n : h->n;
    const char *what = h->kind == 2 ? "map" : "array";
    if (w->sp + 1 > w->max_depth)
        return rkb_error_set(err, RKB_E_MALFORMED,
                             "nesting is deeper than the limit of %" PRIu32 " levels (max_depth) at byte %zu",
                             w->max_depth, at);
    if (children > rem)
        return rkb_error_set(err, RKB_E_MALFORMED,
                             "the %s at byte %zu claims %" PRIu64 " %s but only %zu bytes remain in the frame (truncated, or a bogus count)",
                             what, at, h->n, h->kind == 2 ? "entries" : "elements", rem);
    w->declared += children;
    if (w->declared > w->max_elements)
        return rkb_error_set(err, RKB_E_MALFORMED,
                             "the %s at byte %zu brings the request to %" PRIu64 " msgpack objects; the limit is %" PRIu32 " (max_elements)",
                             what, at, w->declared, w->max_elements);
    w->sp++;
    w->stack[w->sp].left = children;
    w->stack[w->sp].is_map = h->kind == 2;
    return RKB_OK;
}

/* The first byte decides "map or not" before anything else is read, so an
 * array or scalar body is named as such. */
static int rkb__check_first(const uint8_t *p, size_t len, rkb_error *err)
{
    if (len == 0)
        return rkb_error_set(err, RKB_E_MALFORMED,
                             "the body frame is empty; it must hold one msgpack map");
    if (p[0] == 0xc1)
        return rkb_error_set(err, RKB_E_MALFORMED,
                             "the body is not msgpack (byte 0xc1 at offset 0 is never used)");
    if (!(p[0] >= 0x80 && p[0] <= 0x8f) && p[0] != 0xde && p[0] != 0xdf)
        return rkb_error_set(err, RKB_E_MALFORMED,
                             "the body is %s (first byte 0x%02x); it must be a msgpack map",
                             rkb__type_of_byte(p[0]), p[0]);
    return RKB_OK;
}

int rkb__scan_frame(const uint8_t *p, size_t len, const rkb_limits *lim, rkb__scan *out,
                    rkb_error *err)
{
    rkb__walk w; /* not zeroed as a whole: its stack is written as it grows */
    w.sp = 0;
    w.declared = 1;
    w.id_key_seen = w.next_is_id = false;
    w.max_depth = lim->max_depth ? lim->max_depth : RKB_DEFAULT_MAX_DEPTH;
    w.max_elements = lim->max_elements ? lim->max_elements : RKB_DEFAULT_MAX_ELEMENTS;
    if (w.max_depth > RKB_MAX_DEPTH_CAP)
        w.max_depth = RKB_MAX_DEPTH_CAP;
    size_t off = 0;
    *out = (rkb__scan){0};
    int rc = rkb__check_first(p, len, err);
    if (rc)
        return rc;
    w.stack[0].left = 1;
    w.stack[0].is_map = false;
    for (;;) {
        while (w.sp > 0 && w.stack[w.sp].left == 0)
            w.sp--;
        if (w.stack[w.sp].left == 0)
            break; /* root done */
        /* In a top-level map, an even count left means a key is next. */
        bool top_key = w.sp == 1 && w.stack[1].is_map && (w.stack[1].left & 1) == 0;
        bool value_is_id = w.next_is_id;
        w.next_is_id = false;
        w.stack[w.sp].left--;
        size_t at = off;
        if (off == len)
            return rkb_error_set(err, RKB_E_MALFORMED,
                                 "the frame is truncated: it ends at byte %zu inside an unfinished %s",
                                 len, w.stack[w.sp].is_map ? "map" : "array");
        rkb__head h;
        if ((rc = rkb__read_head(p, len, &off, &h, err)))
            return rc;
        if (top_key && !rkb__is_str(h.b))
            return rkb_error_set(err, RKB_E_MALFORMED,
                                 "a key of the request map (byte %zu) is %s; keys must be strings",
                                 at, rkb__type_of_byte(h.b));
        if (h.kind) {
            if ((rc = rkb__push(&w, &h, at, len - off, err)))
                return rc;
            continue;
        }
        if (h.n > len - off)
            return rkb__scalar_too_long(&h, at, len - off, err);
        if (top_key && !w.id_key_seen && h.n == 2 && p[off] == 'i' && p[off + 1] == 'd')
            w.id_key_seen = w.next_is_id = true; /* only the first `id` counts */
        if (value_is_id)
            rkb__take_id(&h, p + off, out);
        off += (size_t)h.n;
    }
    out->end = off;
    if (off != len)
        return rkb_error_set(err, RKB_E_MALFORMED,
                             "%zu trailing byte%s follow the request map (it ends at byte %zu); the frame must hold exactly one map",
                             len - off, len - off == 1 ? "" : "s", off);
    return RKB_OK;
}

int rkb__peek(const uint8_t *p, size_t len, const rkb_limits *lim, uint64_t *id)
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
