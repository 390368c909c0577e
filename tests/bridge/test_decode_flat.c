/* test_decode_flat.c - the decoder's flat-map path (maps of scalars built
 * without msgpack_unpack) against msgpack_unpack's path, frame by frame:
 * 300 000 generated requests (every scalar encoding, nested values that
 * must fall back, bad keys, truncation, flipped bytes, trailing bytes, a
 * small max_elements) must
 * decode to the same request, the same error code and the same message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return rng_state = x;
}

static unsigned pick(unsigned n) { return (unsigned)(rnd() % n); }

typedef struct {
    uint8_t b[512];
    size_t n;
} frame;

static void put(frame *f, const void *p, size_t n)
{
    if (f->n + n <= sizeof f->b)
        memcpy(f->b + f->n, p, n), f->n += n;
}

static void put_be(frame *f, uint64_t v, unsigned w)
{
    for (unsigned i = 0; i < w; i++) {
        uint8_t c = (uint8_t)(v >> (8 * (w - 1 - i)));
        put(f, &c, 1);
    }
}

static void put_byte(frame *f, unsigned c)
{
    uint8_t x = (uint8_t)c;
    put(f, &x, 1);
}

static void put_str(frame *f, const char *s)
{
    size_t n = strlen(s);
    if (n < 32 && pick(3))
        put_byte(f, 0xa0 | (unsigned)n);
    else
        put_byte(f, 0xd9), put_be(f, n, 1);
    put(f, s, n);
}

static const char *const words[] = {"v", "id", "op", "data", "a", "b", "grid", "block", "smem",
                                    "echo", "vadd", "ping", "status", "launch", "retry_gpu",
                                    "fault", "x", ""};

/* One value of any kind; depth > 0 may nest an array or a map. */
static void put_value(frame *f, int depth)
{
    static const uint8_t bytes[24] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
                                      13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24};
    unsigned len = pick(4) ? 4 * pick(5) : pick(24);
    switch (pick(depth ? 16 : 14)) {
    case 0: put_byte(f, pick(128)); break;                          /* positive fixint */
    case 1: put_byte(f, 0xe0 | pick(32)); break;                    /* negative fixint */
    case 2: { unsigned w = pick(4); put_byte(f, 0xcc + w); put_be(f, rnd(), 1u << w); break; }
    case 3: { unsigned w = pick(4); put_byte(f, 0xd0 + w); put_be(f, pick(2) ? rnd() : pick(300), 1u << w); break; }
    case 4: put_byte(f, pick(2) ? 0xc0 : 0xc2 + pick(2)); break;    /* nil, bool */
    case 5: put_byte(f, 0xca), put_be(f, rnd(), 4); break;
    case 6: put_byte(f, 0xcb), put_be(f, rnd(), 8); break;
    case 7: case 8: put_str(f, words[pick(sizeof words / sizeof *words)]); break;
    case 9: case 10: { unsigned w = pick(3); put_byte(f, 0xc4 + w); put_be(f, len, 1u << w); put(f, bytes, len); break; }
    case 11: { unsigned w = pick(3); put_byte(f, 0xc7 + w); put_be(f, len, 1u << w); put_byte(f, pick(256)); put(f, bytes, len); break; }
    case 12: { unsigned w = pick(5); put_byte(f, 0xd4 + w); put_byte(f, pick(256)); put(f, bytes, 1u << w); break; }
    case 13: put_byte(f, 0xda), put_be(f, 2, 2), put(f, "op", 2); break; /* str16 */
    case 14: { unsigned n = pick(3); put_byte(f, 0x90 | n); for (unsigned i = 0; i < n; i++) put_value(f, depth - 1); break; }
    default: { unsigned n = pick(2); put_byte(f, 0x80 | n); for (unsigned i = 0; i < n; i++) put_str(f, "k"), put_value(f, depth - 1); break; }
    }
}

/* A request-like map: mostly the fields a request has, in any order. */
static void make_frame(frame *f)
{
    f->n = 0;
    unsigned n = pick(8) ? 2 + pick(6) : pick(19);
    unsigned hdr = pick(10);
    if (hdr < 8)
        put_byte(f, 0x80 | (n & 15));
    else if (hdr == 8)
        put_byte(f, 0xde), put_be(f, n, 2);
    else
        put_byte(f, 0xdf), put_be(f, n, 4);
    static const char *const ops[] = {"echo", "vadd", "ping", "launch", "status", "nope"};
    const char *op = ops[pick(6)];
    for (unsigned i = 0; i < n; i++) {
        unsigned what = pick(10);
        if (what == 0) {
            put_value(f, 1); /* a key that may not be a str */
            put_value(f, 1);
            continue;
        }
        const char *k = i == 0 ? "v" : i == 1 ? "id" : i == 2 ? "op" : words[pick(9)];
        put_str(f, k);
        if (!strcmp(k, "v") && pick(4))
            put_byte(f, 1);
        else if (!strcmp(k, "op") && pick(4))
            put_str(f, op);
        else if (!strcmp(k, "id") && pick(3))
            put_byte(f, 0xcf), put_be(f, rnd(), 8);
        else
            put_value(f, 2);
    }
    switch (pick(12)) { /* damage */
    case 0: f->n = pick((unsigned)f->n + 1); break;
    case 1: if (f->n) f->b[pick((unsigned)f->n)] ^= (uint8_t)(1u << pick(8)); break;
    case 2: put_byte(f, pick(256)); break;
    default: break;
    }
}

/* An empty bin's pointer says nothing (msgpack-c gives NULL or a byte of
 * the header, depending on the encoding): compare it as NULL. */
static void normalize(rkb_request *r)
{
    if (r->op != RKB_OP_ECHO && r->op != RKB_OP_VADD)
        return;
    if (!r->u.vadd.a.len)
        r->u.vadd.a.ptr = NULL;
    if (r->op == RKB_OP_VADD && !r->u.vadd.b.len)
        r->u.vadd.b.ptr = NULL;
}

static void test_flat_equals_unpack(void **state)
{
    (void)state;
    const char *seed = getenv("RK_TEST_SEED");
    if (seed)
        rng_state = strtoull(seed, NULL, 0) | 1;
    rkb_decode_state fast, slow;
    rkb_decode_state_init(&fast);
    rkb_decode_state_init(&slow);
    slow.no_flat = true;
    rkb_limits lim = RKB_LIMITS_DEFAULT;
    lim.test_ops = true;
    unsigned ok = 0, flat = 0;
    for (int i = 0; i < 300000; i++) {
        frame f;
        make_frame(&f);
        rkb_request rf, rs;
        rkb_error ef = {0}, es = {0};
        lim.max_elements = i % 3 ? 0 : 1 + pick(20); /* 0: the default; small: refused */
        int cf = rkb_decode_request(f.b, f.n, &lim, &rf, &fast, &ef);
        flat += cf == RKB_OK && fast.obj.via.map.ptr == fast.flat;
        int cs = rkb_decode_request(f.b, f.n, &lim, &rs, &slow, &es);
        normalize(&rf);
        normalize(&rs);
        if (cf != cs || memcmp(&rf, &rs, sizeof rf) != 0 || ef.code != es.code ||
            strcmp(ef.message, es.message) != 0) {
            char hex[3 * 64 + 1] = "";
            for (size_t k = 0; k < f.n && k < 64; k++)
                snprintf(hex + 3 * k, 4, "%02x ", f.b[k]);
            fail_msg("frame %d (%zu B: %s): flat %d \"%s\", unpack %d \"%s\"", i, f.n, hex, cf,
                     ef.message, cs, es.message);
        }
        ok += cf == RKB_OK;
    }
    print_message("300000 frames: %u decoded (%u through the flat path), the rest refused alike\n",
                  ok, flat);
    assert_true(flat > 1000); /* the generator does reach the flat path */
    rkb_decode_state_destroy(&fast);
    rkb_decode_state_destroy(&slow);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_flat_equals_unpack)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
