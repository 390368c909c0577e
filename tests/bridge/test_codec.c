/* tests/bridge/test_codec.c - protocol v1 codec: one test per error row the
 * codec decides (code AND a message naming the field or limit), valid
 * requests for every op, and replies decoded back with msgpack-c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec.h"

/* ---- helpers ----------------------------------------------------------- */

typedef struct buf {
    msgpack_sbuffer sb;
    msgpack_packer pk;
} buf;

static void b_init(buf *b)
{
    msgpack_sbuffer_init(&b->sb);
    msgpack_packer_init(&b->pk, &b->sb, msgpack_sbuffer_write);
}

static void b_free(buf *b) { msgpack_sbuffer_destroy(&b->sb); }

static void s(buf *b, const char *str) { msgpack_pack_str_with_body(&b->pk, str, strlen(str)); }
static void kv_u(buf *b, const char *k, uint64_t u) { s(b, k), msgpack_pack_uint64(&b->pk, u); }
static void kv_i(buf *b, const char *k, int64_t i) { s(b, k), msgpack_pack_int64(&b->pk, i); }
static void kv_s(buf *b, const char *k, const char *v) { s(b, k), s(b, v); }
static void kv_bin(buf *b, const char *k, const void *p, size_t n)
{
    s(b, k), msgpack_pack_bin_with_body(&b->pk, p, n);
}

/* A request map: v=1, id, op, plus `extra` more pairs the caller packs. */
static void req_head(buf *b, uint64_t id, const char *op, uint32_t extra)
{
    b_init(b);
    msgpack_pack_map(&b->pk, 3 + extra);
    kv_u(b, "v", 1);
    kv_u(b, "id", id);
    kv_s(b, "op", op);
}

typedef struct result {
    int rc;
    rkb_request req;
    rkb_error err;
} result;

static result decode_lim(const void *p, size_t n, const rkb_limits *lim)
{
    result r;
    rkb_decode_state st;
    memset(&r, 0, sizeof r);
    rkb_decode_state_init(&st);
    r.rc = rkb_decode_request(p, n, lim, &r.req, &st, &r.err);
    rkb_decode_state_destroy(&st);
    if (r.rc != RKB_OK)
        print_message("  -> %s: %s\n", rkb_code_name(r.rc), r.err.message);
    return r;
}

static result decode(const void *p, size_t n) { return decode_lim(p, n, NULL); }

/* Decode, expect code and every needle in the message; frees b. */
static result expect(buf *b, int code, const char *needle1, const char *needle2)
{
    result r = decode(b->sb.data, b->sb.size);
    b_free(b);
    assert_int_equal(r.rc, code);
    assert_int_equal(r.err.code, code);
    if (needle1)
        assert_non_null(strstr(r.err.message, needle1));
    if (needle2)
        assert_non_null(strstr(r.err.message, needle2));
    return r;
}

static result expect_raw(const void *p, size_t n, int code, const char *needle)
{
    result r = decode(p, n);
    assert_int_equal(r.rc, code);
    if (needle)
        assert_non_null(strstr(r.err.message, needle));
    return r;
}

/* ---- MALFORMED --------------------------------------------------------- */

static void t_malformed_garbage(void **state)
{
    (void)state;
    static const char g[] = "\xc1\xff\x00garbage";
    expect_raw(g, sizeof g - 1, RKB_E_MALFORMED, "not msgpack");
    static const char text[] = "hello, bridge";
    expect_raw(text, sizeof text - 1, RKB_E_MALFORMED, "must be a msgpack map");
}

static void t_malformed_empty(void **state)
{
    (void)state;
    result r = expect_raw("", 0, RKB_E_MALFORMED, "empty");
    assert_false(r.req.has_id);
}

static void t_malformed_array(void **state)
{
    (void)state;
    buf b;
    b_init(&b);
    msgpack_pack_array(&b.pk, 3);
    for (int i = 0; i < 3; i++)
        msgpack_pack_int(&b.pk, i);
    expect(&b, RKB_E_MALFORMED, "array", "map");
}

static void t_malformed_int(void **state)
{
    (void)state;
    buf b;
    b_init(&b);
    msgpack_pack_int(&b.pk, 42);
    expect(&b, RKB_E_MALFORMED, "integer", "map");
}

static void t_malformed_trailing(void **state)
{
    (void)state;
    buf b;
    req_head(&b, 33, "ping", 0);
    msgpack_pack_nil(&b.pk);
    result r = expect(&b, RKB_E_MALFORMED, "trailing", NULL);
    /* The map itself was readable, so its id is echoed. */
    assert_true(r.req.has_id);
    assert_int_equal(r.req.id, 33);
}

static void t_malformed_bin_4gib(void **state)
{
    (void)state;
    /* {"v":1,"id":3,"op":"echo","data": bin32 of 0xffffffff bytes} + 3 bytes */
    buf b;
    req_head(&b, 3, "echo", 1);
    s(&b, "data");
    static const char hdr[] = "\xc6\xff\xff\xff\xff" "abc";
    msgpack_sbuffer_write(&b.sb, hdr, sizeof hdr - 1);
    result r = expect(&b, RKB_E_MALFORMED, "bin", "4294967295 bytes");
    assert_true(r.req.has_id); /* id came before the bad header */
    assert_int_equal(r.req.id, 3);
}

static void t_malformed_deep_nesting(void **state)
{
    (void)state;
    enum { DEPTH = 100000 };
    size_t n = 3 + DEPTH + 1;
    unsigned char *p = malloc(n);
    assert_non_null(p);
    memcpy(p, "\x81\xa1x", 3);
    memset(p + 3, 0x91, DEPTH); /* fixarray of 1, 100 000 times */
    p[n - 1] = 0xc0;
    expect_raw(p, n, RKB_E_MALFORMED, "max_depth");
    /* A single custom limit applies too. */
    rkb_limits lim = {.max_depth = 3, .max_elements = 0, .max_frame = 0};
    result r = decode_lim(p, 8, &lim); /* map > [ > [ > [ : depth 4 */
    assert_int_equal(r.rc, RKB_E_MALFORMED);
    assert_non_null(strstr(r.err.message, "limit of 3"));
    free(p);
}

static void t_malformed_million_keys(void **state)
{
    (void)state;
    /* A real map32 of 1 000 000 entries {"": 0}: 2 MB, every byte present,
     * so only max_elements can refuse it. */
    enum { KEYS = 1000000 };
    size_t n = 5 + 2 * (size_t)KEYS;
    unsigned char *p = malloc(n);
    assert_non_null(p);
    p[0] = 0xdf, p[1] = 0x00, p[2] = 0x0f, p[3] = 0x42, p[4] = 0x40;
    for (size_t i = 0; i < KEYS; i++)
        p[5 + 2 * i] = 0xa0, p[6 + 2 * i] = 0x00;
    expect_raw(p, n, RKB_E_MALFORMED, "max_elements");
    /* The header alone, claiming a million entries: refused by size. */
    expect_raw(p, 64, RKB_E_MALFORMED, "1000000 entries");
    free(p);
}

static void t_malformed_truncated(void **state)
{
    (void)state;
    buf b;
    req_head(&b, 5, "echo", 1);
    kv_bin(&b, "data", "hello", 5);
    result r = decode(b.sb.data, b.sb.size - 2);
    assert_int_equal(r.rc, RKB_E_MALFORMED);
    assert_non_null(strstr(r.err.message, "truncated"));
    /* Cut inside the map header's entries. */
    r = decode(b.sb.data, 3);
    assert_int_equal(r.rc, RKB_E_MALFORMED);
    assert_non_null(strstr(r.err.message, "truncated"));
    /* Cut inside a uint16 header. */
    static const char cut[] = "\x81\xa1x\xcd\x01";
    expect_raw(cut, sizeof cut - 1, RKB_E_MALFORMED, "truncated");
    b_free(&b);
}

static void t_malformed_non_string_key(void **state)
{
    (void)state;
    buf b;
    b_init(&b);
    msgpack_pack_map(&b.pk, 4);
    kv_u(&b, "v", 1);
    kv_u(&b, "id", 1);
    kv_s(&b, "op", "ping");
    msgpack_pack_int(&b.pk, 7);
    msgpack_pack_int(&b.pk, 8);
    expect(&b, RKB_E_MALFORMED, "key", "strings");
}

static void t_too_large(void **state)
{
    (void)state;
    buf b;
    req_head(&b, 77, "echo", 1);
    char big[1000] = {0};
    kv_bin(&b, "data", big, sizeof big);
    rkb_limits lim = RKB_LIMITS_DEFAULT;
    lim.max_frame = 512;
    result r = decode_lim(b.sb.data, b.sb.size, &lim);
    assert_int_equal(r.rc, RKB_E_TOO_LARGE);
    assert_non_null(strstr(r.err.message, "512"));
    assert_true(r.req.has_id);
    assert_int_equal(r.req.id, 77);
    b_free(&b);
}

/* ---- UNSUPPORTED_VERSION ---------------------------------------------- */

static void t_version_missing(void **state)
{
    (void)state;
    buf b;
    b_init(&b);
    msgpack_pack_map(&b.pk, 2);
    kv_u(&b, "id", 9);
    kv_s(&b, "op", "ping");
    result r = expect(&b, RKB_E_UNSUPPORTED_VERSION, "`v`", "missing");
    assert_true(r.req.has_id); /* version errors still echo the id */
    assert_int_equal(r.req.id, 9);
}

static void t_version_2(void **state)
{
    (void)state;
    buf b;
    b_init(&b);
    msgpack_pack_map(&b.pk, 3);
    kv_u(&b, "v", 2);
    kv_u(&b, "id", 9);
    kv_s(&b, "op", "ping");
    expect(&b, RKB_E_UNSUPPORTED_VERSION, "`v` is 2", "version 1");
}

static void t_version_str(void **state)
{
    (void)state;
    buf b;
    b_init(&b);
    msgpack_pack_map(&b.pk, 3);
    kv_s(&b, "v", "1");
    kv_u(&b, "id", 9);
    kv_s(&b, "op", "ping");
    expect(&b, RKB_E_UNSUPPORTED_VERSION, "`v` is a str", NULL);
}

static void t_version_before_id(void **state)
{
    (void)state;
    /* v=2 and no id: the version decides the code (order of checks). */
    buf b;
    b_init(&b);
    msgpack_pack_map(&b.pk, 2);
    kv_u(&b, "v", 2);
    kv_s(&b, "op", "ping");
    result r = expect(&b, RKB_E_UNSUPPORTED_VERSION, "`v`", NULL);
    assert_false(r.req.has_id);
}

/* ---- id ---------------------------------------------------------------- */

static void t_id_missing(void **state)
{
    (void)state;
    buf b;
    b_init(&b);
    msgpack_pack_map(&b.pk, 2);
    kv_u(&b, "v", 1);
    kv_s(&b, "op", "ping");
    result r = expect(&b, RKB_E_INVALID_ARGUMENT, "`id`", "missing");
    assert_false(r.req.has_id);
}

static void t_id_negative(void **state)
{
    (void)state;
    buf b;
    b_init(&b);
    msgpack_pack_map(&b.pk, 3);
    kv_u(&b, "v", 1);
    kv_i(&b, "id", -5);
    kv_s(&b, "op", "ping");
    result r = expect(&b, RKB_E_INVALID_ARGUMENT, "`id` is negative", "uint64");
    assert_false(r.req.has_id);
}

static void t_id_string(void **state)
{
    (void)state;
    buf b;
    b_init(&b);
    msgpack_pack_map(&b.pk, 3);
    kv_u(&b, "v", 1);
    kv_s(&b, "id", "42");
    kv_s(&b, "op", "ping");
    result r = expect(&b, RKB_E_INVALID_ARGUMENT, "`id` is a str", "uint64");
    assert_false(r.req.has_id);
}

static void t_id_max_and_signed_encoding(void **state)
{
    (void)state;
    buf b;
    req_head(&b, UINT64_MAX, "ping", 0);
    result r = decode(b.sb.data, b.sb.size);
    b_free(&b);
    assert_int_equal(r.rc, RKB_OK);
    assert_true(r.req.id == UINT64_MAX);
    /* id 5 encoded as int8 (0xd0 0x05): a non-negative value is a uint. */
    static const char p[] = "\x83\xa1v\x01\xa2id\xd0\x05\xa2op\xa4ping";
    r = decode(p, sizeof p - 1);
    assert_int_equal(r.rc, RKB_OK);
    assert_int_equal(r.req.id, 5);
}

/* ---- UNKNOWN_OP -------------------------------------------------------- */

static void t_op_missing(void **state)
{
    (void)state;
    buf b;
    b_init(&b);
    msgpack_pack_map(&b.pk, 2);
    kv_u(&b, "v", 1);
    kv_u(&b, "id", 4);
    result r = expect(&b, RKB_E_UNKNOWN_OP, "`op`", "missing");
    assert_int_equal(r.req.id, 4);
}

static void t_op_not_str(void **state)
{
    (void)state;
    buf b;
    b_init(&b);
    msgpack_pack_map(&b.pk, 3);
    kv_u(&b, "v", 1);
    kv_u(&b, "id", 4);
    kv_u(&b, "op", 3);
    expect(&b, RKB_E_UNKNOWN_OP, "`op`", "str");
}

static void t_op_unknown(void **state)
{
    (void)state;
    buf b;
    req_head(&b, 4, "launch_missiles", 0);
    expect(&b, RKB_E_UNKNOWN_OP, "`op`", "launch_missiles");
    req_head(&b, 4, "PING", 0); /* case matters */
    expect(&b, RKB_E_UNKNOWN_OP, "\"PING\"", NULL);
}

/* The status endpoint's decoder (rkb_limits.status_only): `status`, and
 * every other op refused by name before its arguments are looked at; the
 * checks before the op (`v`, `id`) come first as everywhere. */
static void t_status_only(void **state)
{
    (void)state;
    rkb_limits lim = RKB_LIMITS_DEFAULT;
    lim.status_only = true;
    buf b;
    req_head(&b, 40, "status", 0);
    result r = decode_lim(b.sb.data, b.sb.size, &lim);
    b_free(&b);
    assert_int_equal(r.rc, RKB_OK);
    assert_int_equal(r.req.op, RKB_OP_STATUS);
    static const char *const others[] = {"ping", "echo", "launch", "frobnicate", "STATUS"};
    for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
        req_head(&b, 41 + i, others[i], 0); /* echo without `data`: the op is refused first */
        r = decode_lim(b.sb.data, b.sb.size, &lim);
        b_free(&b);
        char q[32];
        snprintf(q, sizeof q, "\"%s\"", others[i]);
        assert_int_equal(r.rc, RKB_E_UNKNOWN_OP);
        assert_non_null(strstr(r.err.message, q));
        assert_non_null(strstr(r.err.message, "serves only `status`"));
        assert_true(r.req.has_id);
        assert_int_equal(r.req.id, 41 + i);
    }
    b_init(&b); /* no op */
    msgpack_pack_map(&b.pk, 2);
    kv_u(&b, "v", 1);
    kv_u(&b, "id", 50);
    r = decode_lim(b.sb.data, b.sb.size, &lim);
    b_free(&b);
    assert_int_equal(r.rc, RKB_E_UNKNOWN_OP);
    assert_non_null(strstr(r.err.message, "missing"));
    b_init(&b); /* `v` first */
    msgpack_pack_map(&b.pk, 3);
    kv_u(&b, "v", 2);
    kv_u(&b, "id", 51);
    kv_s(&b, "op", "ping");
    r = decode_lim(b.sb.data, b.sb.size, &lim);
    b_free(&b);
    assert_int_equal(r.rc, RKB_E_UNSUPPORTED_VERSION);
}

/* ---- INVALID_ARGUMENT --------------------------------------------------- */

static void t_echo_no_data(void **state)
{
    (void)state;
    buf b;
    req_head(&b, 1, "echo", 0);
    result r = expect(&b, RKB_E_INVALID_ARGUMENT, "`data`", "missing");
    assert_int_equal(r.req.id, 1);
}

static void t_echo_data_str(void **state)
{
    (void)state;
    buf b;
    req_head(&b, 1, "echo", 1);
    kv_s(&b, "data", "hello");
    expect(&b, RKB_E_INVALID_ARGUMENT, "`data` is a str", "bin");
}

static void t_vadd_mismatch(void **state)
{
    (void)state;
    float a[3] = {1, 2, 3}, c[2] = {1, 2};
    buf b;
    req_head(&b, 1, "vadd", 2);
    kv_bin(&b, "a", a, sizeof a);
    kv_bin(&b, "b", c, sizeof c);
    expect(&b, RKB_E_INVALID_ARGUMENT,
           "field `a` is 12 bytes and `b` is 8 bytes; vadd needs equal lengths", NULL);
}

static void t_vadd_not_multiple_of_4(void **state)
{
    (void)state;
    buf b;
    req_head(&b, 1, "vadd", 2);
    kv_bin(&b, "a", "123456", 6);
    kv_bin(&b, "b", "123456", 6);
    expect(&b, RKB_E_INVALID_ARGUMENT, "`a` and `b` are 6 bytes", "multiple of 4");
}

static void t_vadd_empty(void **state)
{
    (void)state;
    buf b;
    req_head(&b, 1, "vadd", 2);
    kv_bin(&b, "a", "", 0);
    kv_bin(&b, "b", "", 0);
    expect(&b, RKB_E_INVALID_ARGUMENT, "empty", "at least 1 element");
}

static void t_vadd_missing_b(void **state)
{
    (void)state;
    float a = 1;
    buf b;
    req_head(&b, 1, "vadd", 1);
    kv_bin(&b, "a", &a, 4);
    expect(&b, RKB_E_INVALID_ARGUMENT, "`b` is missing", NULL);
}

static void t_vadd_a_wrong_type(void **state)
{
    (void)state;
    float f = 1;
    buf b;
    req_head(&b, 1, "vadd", 2);
    kv_s(&b, "a", "abcd");
    kv_bin(&b, "b", &f, 4);
    expect(&b, RKB_E_INVALID_ARGUMENT, "`a` is a str", "bin");
}

static void t_launch_negative_grid(void **state)
{
    (void)state;
    buf b;
    req_head(&b, 1, "launch", 3);
    kv_i(&b, "grid", -1);
    kv_u(&b, "block", 128);
    kv_u(&b, "smem", 0);
    expect(&b, RKB_E_INVALID_ARGUMENT, "`grid` is negative", "uint");
}

static void t_launch_str_grid(void **state)
{
    (void)state;
    buf b;
    req_head(&b, 1, "launch", 3);
    kv_s(&b, "grid", "4");
    kv_u(&b, "block", 128);
    kv_u(&b, "smem", 0);
    expect(&b, RKB_E_INVALID_ARGUMENT, "`grid` is a str", NULL);
}

static void t_launch_missing_smem(void **state)
{
    (void)state;
    buf b;
    req_head(&b, 1, "launch", 2);
    kv_u(&b, "grid", 4);
    kv_u(&b, "block", 128);
    expect(&b, RKB_E_INVALID_ARGUMENT, "`smem` is missing", NULL);
}

static void t_launch_float_block(void **state)
{
    (void)state;
    buf b;
    req_head(&b, 1, "launch", 3);
    kv_u(&b, "grid", 4);
    s(&b, "block");
    msgpack_pack_double(&b.pk, 128.0);
    kv_u(&b, "smem", 0);
    expect(&b, RKB_E_INVALID_ARGUMENT, "`block` is a float", NULL);
}

/* ---- valid requests ----------------------------------------------------- */

static void t_valid_ping_status(void **state)
{
    (void)state;
    buf b;
    req_head(&b, 11, "ping", 0);
    result r = decode(b.sb.data, b.sb.size);
    b_free(&b);
    assert_int_equal(r.rc, RKB_OK);
    assert_int_equal(r.req.op, RKB_OP_PING);
    assert_true(r.req.has_id);
    assert_int_equal(r.req.id, 11);
    req_head(&b, 12, "status", 0);
    r = decode(b.sb.data, b.sb.size);
    b_free(&b);
    assert_int_equal(r.rc, RKB_OK);
    assert_int_equal(r.req.op, RKB_OP_STATUS);
    assert_int_equal(r.req.id, 12);
}

/* The test-only ops exist only when the operator asks (rk-bridge
 * --test-faults): otherwise they are unknown, and the known list does not
 * mention them; retry_gpu is an op for everyone to see (an admin's). */
static void t_test_ops_gated(void **state)
{
    (void)state;
    static const char *const test_ops[] = {"fault", "hang"};
    for (int i = 0; i < 2; i++) {
        buf b;
        req_head(&b, 21, test_ops[i], 0);
        result r = expect(&b, RKB_E_UNKNOWN_OP, "not an operation", "retry_gpu");
        const char *known = strstr(r.err.message, "known:");
        assert_non_null(known);
        assert_null(strstr(known, "fault"));
        assert_null(strstr(known, "hang"));
        rkb_limits lim = RKB_LIMITS_DEFAULT;
        lim.test_ops = true;
        req_head(&b, 22, test_ops[i], 0);
        r = decode_lim(b.sb.data, b.sb.size, &lim);
        b_free(&b);
        assert_int_equal(r.rc, RKB_OK);
        assert_int_equal(r.req.op, i ? RKB_OP_HANG : RKB_OP_FAULT);
    }
    buf b;
    req_head(&b, 23, "retry_gpu", 0);
    result r = decode(b.sb.data, b.sb.size);
    b_free(&b);
    assert_int_equal(r.rc, RKB_OK);
    assert_int_equal(r.req.op, RKB_OP_RETRY_GPU);
}

static void t_valid_echo_borrows(void **state)
{
    (void)state;
    buf b;
    req_head(&b, 13, "echo", 1);
    kv_bin(&b, "data", "hello", 5);
    result r = decode(b.sb.data, b.sb.size);
    assert_int_equal(r.rc, RKB_OK);
    assert_int_equal(r.req.op, RKB_OP_ECHO);
    assert_int_equal(r.req.u.echo.data.len, 5);
    assert_memory_equal(r.req.u.echo.data.ptr, "hello", 5);
    /* Borrowed: the bytes are the frame's own, not a copy. */
    const uint8_t *base = (const uint8_t *)b.sb.data;
    assert_true(r.req.u.echo.data.ptr >= base &&
                r.req.u.echo.data.ptr + 5 <= base + b.sb.size);
    b_free(&b);
    /* Empty data is a valid echo. */
    req_head(&b, 14, "echo", 1);
    kv_bin(&b, "data", "", 0);
    r = decode(b.sb.data, b.sb.size);
    b_free(&b);
    assert_int_equal(r.rc, RKB_OK);
    assert_int_equal(r.req.u.echo.data.len, 0);
}

static void t_valid_vadd(void **state)
{
    (void)state;
    float a[3] = {1, 2, 3}, c[3] = {4, 5, 6};
    buf b;
    req_head(&b, 15, "vadd", 2);
    kv_bin(&b, "a", a, sizeof a);
    kv_bin(&b, "b", c, sizeof c);
    result r = decode(b.sb.data, b.sb.size);
    assert_int_equal(r.rc, RKB_OK);
    assert_int_equal(r.req.op, RKB_OP_VADD);
    assert_int_equal(r.req.u.vadd.n, 3);
    assert_int_equal(r.req.u.vadd.a.len, 12);
    assert_memory_equal(r.req.u.vadd.a.ptr, a, sizeof a);
    assert_memory_equal(r.req.u.vadd.b.ptr, c, sizeof c);
    b_free(&b);
}

static void t_valid_launch(void **state)
{
    (void)state;
    buf b;
    req_head(&b, 16, "launch", 3);
    kv_u(&b, "grid", 0);
    kv_u(&b, "block", 256);
    kv_u(&b, "smem", 49152);
    result r = decode(b.sb.data, b.sb.size);
    b_free(&b);
    assert_int_equal(r.rc, RKB_OK);
    assert_int_equal(r.req.op, RKB_OP_LAUNCH);
    assert_int_equal(r.req.u.launch.grid, 0);
    assert_int_equal(r.req.u.launch.block, 256);
    assert_int_equal(r.req.u.launch.smem, 49152);
}

static void t_unknown_keys_ignored(void **state)
{
    (void)state;
    buf b;
    b_init(&b);
    msgpack_pack_map(&b.pk, 5);
    s(&b, "trace");
    msgpack_pack_map(&b.pk, 1); /* nested maps may have any keys */
    msgpack_pack_int(&b.pk, 1);
    msgpack_pack_array(&b.pk, 0);
    kv_s(&b, "op", "ping");
    kv_u(&b, "id", 17);
    kv_s(&b, "client", "test");
    kv_u(&b, "v", 1);
    result r = decode(b.sb.data, b.sb.size);
    b_free(&b);
    assert_int_equal(r.rc, RKB_OK);
    assert_int_equal(r.req.op, RKB_OP_PING);
    assert_int_equal(r.req.id, 17);
}

static void t_state_reuse(void **state)
{
    (void)state;
    /* One state across many decodes, good and bad: no leak (ASan/valgrind). */
    rkb_decode_state st;
    rkb_request req;
    rkb_error err;
    rkb_decode_state_init(&st);
    for (int i = 0; i < 100; i++) {
        buf b;
        req_head(&b, (uint64_t)i, i % 2 ? "ping" : "nope", 0);
        int rc = rkb_decode_request(b.sb.data, b.sb.size, NULL, &req, &st, &err);
        assert_int_equal(rc, i % 2 ? RKB_OK : RKB_E_UNKNOWN_OP);
        assert_int_equal(req.id, (uint64_t)i);
        b_free(&b);
    }
    rkb_decode_state_destroy(&st);
}

/* ---- peek --------------------------------------------------------------- */

static void t_peek(void **state)
{
    (void)state;
    uint64_t id = 0;
    buf b;
    req_head(&b, 99, "echo", 1);
    kv_bin(&b, "data", "x", 1);
    assert_int_equal(rkb_peek_id(b.sb.data, b.sb.size, &id), RKB_OK);
    assert_int_equal(id, 99);
    b_free(&b);

    id = 1234;
    assert_true(rkb_peek_id("\xc1", 1, &id) < 0);
    assert_true(rkb_peek_id("", 0, &id) < 0);
    static const char noid[] = "\x81\xa2op\xa4ping";
    assert_int_equal(rkb_peek_id(noid, sizeof noid - 1, &id), RKB_E_INVALID_ARGUMENT);
    assert_int_equal(id, 1234); /* untouched on failure */

    /* A huge frame: the peek reads headers, not the payload. */
    size_t n = 32u << 20;
    unsigned char *big = calloc(1, n);
    assert_non_null(big);
    static const char head[] = "\x82\xa2id\xcd\x01\x00\xa4" "data\xc6";
    memcpy(big, head, sizeof head - 1);
    uint32_t blen = (uint32_t)(n - (sizeof head - 1) - 4);
    big[sizeof head - 1] = (unsigned char)(blen >> 24);
    big[sizeof head] = (unsigned char)(blen >> 16);
    big[sizeof head + 1] = (unsigned char)(blen >> 8);
    big[sizeof head + 2] = (unsigned char)blen;
    assert_int_equal(rkb_peek_id(big, n, &id), RKB_OK);
    assert_int_equal(id, 256);
    free(big);
}

/* ---- replies ------------------------------------------------------------ */

static const msgpack_object *get(const msgpack_object *map, const char *k)
{
    assert_int_equal(map->type, MSGPACK_OBJECT_MAP);
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object *key = &map->via.map.ptr[i].key;
        assert_int_equal(key->type, MSGPACK_OBJECT_STR);
        if (key->via.str.size == strlen(k) && memcmp(key->via.str.ptr, k, strlen(k)) == 0)
            return &map->via.map.ptr[i].val;
    }
    return NULL;
}

static void assert_str(const msgpack_object *o, const char *want)
{
    assert_non_null(o);
    assert_int_equal(o->type, MSGPACK_OBJECT_STR);
    assert_int_equal(o->via.str.size, strlen(want));
    assert_memory_equal(o->via.str.ptr, want, strlen(want));
}

static void t_reply_ok_roundtrip(void **state)
{
    (void)state;
    buf b;
    b_init(&b);
    assert_int_equal(rkb_reply_begin_ok(&b.pk, true, 0xfedcba9876543210ull, 2), 0);
    assert_int_equal(rkb_pack_key(&b.pk, "backend"), 0);
    assert_int_equal(rkb_pack_key(&b.pk, "cpu"), 0);
    kv_bin(&b, "data", "xyz", 3);

    msgpack_unpacked up;
    size_t off = 0;
    msgpack_unpacked_init(&up);
    assert_int_equal(msgpack_unpack_next(&up, b.sb.data, b.sb.size, &off), MSGPACK_UNPACK_SUCCESS);
    assert_int_equal(off, b.sb.size);
    const msgpack_object *o = &up.data, *f;
    assert_int_equal(o->via.map.size, 5);
    assert_non_null(f = get(o, "v"));
    assert_int_equal(f->type, MSGPACK_OBJECT_POSITIVE_INTEGER);
    assert_int_equal(f->via.u64, 1);
    assert_non_null(f = get(o, "id"));
    assert_int_equal(f->type, MSGPACK_OBJECT_POSITIVE_INTEGER);
    assert_true(f->via.u64 == 0xfedcba9876543210ull);
    assert_non_null(f = get(o, "ok"));
    assert_int_equal(f->type, MSGPACK_OBJECT_BOOLEAN);
    assert_true(f->via.boolean);
    assert_str(get(o, "backend"), "cpu");
    assert_non_null(f = get(o, "data"));
    assert_int_equal(f->type, MSGPACK_OBJECT_BIN);
    assert_memory_equal(f->via.bin.ptr, "xyz", 3);
    assert_null(get(o, "error"));
    msgpack_unpacked_destroy(&up);
    b_free(&b);
}

static void check_error_reply(bool has_id, uint64_t id, int code, const char *msg,
                              const char *want_code)
{
    buf b;
    b_init(&b);
    assert_int_equal(rkb_reply_error(&b.pk, has_id, id, code, msg), 0);
    msgpack_unpacked up;
    size_t off = 0;
    msgpack_unpacked_init(&up);
    assert_int_equal(msgpack_unpack_next(&up, b.sb.data, b.sb.size, &off), MSGPACK_UNPACK_SUCCESS);
    assert_int_equal(off, b.sb.size);
    const msgpack_object *o = &up.data, *f;
    assert_int_equal(o->via.map.size, 4);
    assert_non_null(f = get(o, "v"));
    assert_int_equal(f->via.u64, 1);
    assert_non_null(f = get(o, "id"));
    if (has_id) {
        assert_int_equal(f->type, MSGPACK_OBJECT_POSITIVE_INTEGER);
        assert_true(f->via.u64 == id);
    } else {
        assert_int_equal(f->type, MSGPACK_OBJECT_NIL);
    }
    assert_non_null(f = get(o, "ok"));
    assert_int_equal(f->type, MSGPACK_OBJECT_BOOLEAN);
    assert_false(f->via.boolean);
    const msgpack_object *e = get(o, "error");
    assert_non_null(e);
    assert_int_equal(e->via.map.size, 2);
    assert_str(get(e, "code"), want_code);
    assert_str(get(e, "message"), msg ? msg : "");
    msgpack_unpacked_destroy(&up);
    b_free(&b);
}

static void t_reply_error_roundtrip(void **state)
{
    (void)state;
    /* A decoded error, replied with the id it reported. */
    buf b;
    req_head(&b, 21, "vadd", 2);
    kv_bin(&b, "a", "1234", 4);
    kv_bin(&b, "b", "12345678", 8);
    result r = decode(b.sb.data, b.sb.size);
    b_free(&b);
    assert_int_equal(r.rc, RKB_E_INVALID_ARGUMENT);
    check_error_reply(r.req.has_id, r.req.id, r.rc, r.err.message, "INVALID_ARGUMENT");

    check_error_reply(false, 0, RKB_E_MALFORMED, "the body is an array", "MALFORMED");
    check_error_reply(true, 0, RKB_E_TOO_LARGE, "the request is 9 bytes; the limit is 8 bytes",
                      "TOO_LARGE");
    check_error_reply(true, 5, RKB_E_BUSY, NULL, "BUSY");
    check_error_reply(true, 5, -12345, "bogus code", "INTERNAL");
}

static void t_code_names(void **state)
{
    (void)state;
    static const struct {
        int code;
        const char *name;
    } want[] = {
        {RKB_E_MALFORMED, "MALFORMED"},
        {RKB_E_UNSUPPORTED_VERSION, "UNSUPPORTED_VERSION"},
        {RKB_E_UNKNOWN_OP, "UNKNOWN_OP"},
        {RKB_E_INVALID_ARGUMENT, "INVALID_ARGUMENT"},
        {RKB_E_TOO_LARGE, "TOO_LARGE"},
        {RKB_E_BUSY, "BUSY"},
        {RKB_E_LAUNCH_INVALID, "LAUNCH_INVALID"},
        {RKB_E_DEVICE_FAULT, "DEVICE_FAULT"},
        {RKB_E_SHUTTING_DOWN, "SHUTTING_DOWN"},
        {RKB_E_INTERNAL, "INTERNAL"},
        {RKB_E_ACTOR_FAILED, "ACTOR_FAILED"},
        {RKB_E_PERMISSION_DENIED, "PERMISSION_DENIED"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_true(want[i].code < 0);
        assert_string_equal(rkb_code_name(want[i].code), want[i].name);
    }
    assert_string_equal(rkb_op_name(RKB_OP_VADD), "vadd");
    assert_string_equal(rkb_op_name(RKB_OP_NONE), "");
    /* only launch and retry_gpu change the bridge for everyone */
    for (int op = RKB_OP_NONE; op < RKB_OP_COUNT; op++)
        assert_int_equal(rkb_op_is_admin((rkb_op)op), op == RKB_OP_LAUNCH || op == RKB_OP_RETRY_GPU);
}

/* The status encoder: every field of status.h, every counter, and the map
 * sizes msgpack-c reads back (nothing counted by hand can be off). */
static void t_status_roundtrip(void **state)
{
    (void)state;
    static const char *const in[] = {"a", "b", NULL}, *const out[] = {"c", NULL};
    static const rkb_status_actor act = {"vadd", in, out, true, true};
    static const char *const warn[] = {"careful"};
    rkb_status st = {.backend = "cpu", .backend_why = "asked", .grid = 4, .block = 64,
                     .endpoints = "ipc:///x", .ring_count = 10, .actors = &act, .n_actors = 1,
                     .warnings = warn, .n_warnings = 1};
    uint64_t k = 1;
#define FILL(name, doc) st.counters.name = k++;
    RKB_STATUS_COUNTERS(FILL)
#undef FILL
    rkb_encoder enc;
    assert_int_equal(rkb_encoder_init(&enc), 0);
    assert_int_equal(rkb_encode_status(&enc, true, 99, &st), 0);
    msgpack_unpacked up;
    size_t off = 0;
    msgpack_unpacked_init(&up);
    assert_int_equal(msgpack_unpack_next(&up, rkb_encoder_data(&enc), rkb_encoder_size(&enc), &off),
                     MSGPACK_UNPACK_SUCCESS);
    assert_int_equal(off, rkb_encoder_size(&enc));
    const msgpack_object *o = &up.data, *f;
#define ONE(key, put) +1
    assert_int_equal(o->via.map.size, 3 RKB_STATUS_FIELDS(ONE));
#undef ONE
    assert_non_null(f = get(o, "device"));
    assert_int_equal(f->type, MSGPACK_OBJECT_NIL);
    assert_non_null(f = get(o, "worker")); /* the backend in the bridge's process */
    assert_int_equal(f->type, MSGPACK_OBJECT_NIL);
    assert_non_null(f = get(o, "actors"));
    assert_int_equal(f->via.array.size, 1);
    assert_non_null(f = get(o, "warnings"));
    assert_int_equal(f->via.array.size, 1);
    assert_non_null(f = get(o, "status_endpoint")); /* no --status-bind */
    assert_int_equal(f->type, MSGPACK_OBJECT_NIL);
    assert_non_null(f = get(o, "allocator")); /* none given */
    assert_int_equal(f->type, MSGPACK_OBJECT_NIL);
    const msgpack_object *c = get(o, "counters");
    assert_non_null(c);
    k = 1;
#define CHECK(name, doc)                                                       \
    assert_non_null(f = get(c, #name));                                        \
    assert_int_equal(f->via.u64, k++);
    RKB_STATUS_COUNTERS(CHECK)
#undef CHECK
    assert_int_equal(c->via.map.size, k - 1);
    msgpack_unpacked_destroy(&up);
    /* a supervised worker with a last fault */
    st.has_worker = true;
    st.worker_state = "running", st.worker_backend = "cuda", st.worker_why = "";
    st.worker_pid = 4242, st.worker_restarts = 3, st.worker_faults = 4, st.worker_poisoned = 1;
    st.standby_ready = true, st.standby_pid = 4343, st.last_recovery_ns = 130000000;
    st.has_last_fault = true, st.fault_actor = 1, st.fault_request = 77, st.fault_type = 3;
    st.fault_error = "RK_EDEVICE", st.fault_detail = "illegal address", st.fault_age_ms = 5;
    st.status_endpoint = "ipc:///run/s";
    st.allocator = "jemalloc";
    assert_int_equal(rkb_encode_status(&enc, true, 100, &st), 0);
    msgpack_unpacked_init(&up);
    off = 0;
    assert_int_equal(msgpack_unpack_next(&up, rkb_encoder_data(&enc), rkb_encoder_size(&enc), &off),
                     MSGPACK_UNPACK_SUCCESS);
    assert_int_equal(off, rkb_encoder_size(&enc));
    assert_non_null(f = get(&up.data, "allocator"));
    assert_true(f->type == MSGPACK_OBJECT_STR && f->via.str.size == 8 && !memcmp(f->via.str.ptr, "jemalloc", 8));
    assert_non_null(f = get(&up.data, "status_endpoint"));
    assert_int_equal(f->type, MSGPACK_OBJECT_STR);
    assert_int_equal(f->via.str.size, 12);
    const msgpack_object *w = get(&up.data, "worker");
    assert_non_null(w);
    assert_int_equal(w->type, MSGPACK_OBJECT_MAP);
    assert_int_equal(w->via.map.size, 10);
    assert_int_equal(get(w, "pid")->via.u64, 4242);
    assert_int_equal(get(w, "faults")->via.u64, 4);
    assert_true(get(get(w, "standby"), "ready")->via.boolean);
    const msgpack_object *lf = get(w, "last_fault");
    assert_int_equal(lf->via.map.size, 6);
    assert_int_equal(get(lf, "request")->via.u64, 77);
    msgpack_unpacked_destroy(&up);
    rkb_encoder_destroy(&enc);
}

/* bridge/PROTOCOL.md names every error code, counter and operation (its path is
 * the program's first argument). */
static const char *g_protocol_md;
static void t_protocol_md_in_step(void **state)
{
    (void)state;
    if (!g_protocol_md)
        skip();
    FILE *fp = fopen(g_protocol_md, "r");
    assert_non_null(fp);
    static char text[1 << 17];
    size_t n = fread(text, 1, sizeof text - 1, fp);
    fclose(fp);
    text[n] = 0;
    char want[64];
#define CODE(name, num)                                                        \
    snprintf(want, sizeof want, "`%s`", #name);                               \
    if (!strstr(text, want))                                                   \
        fail_msg("PROTOCOL.md does not name the code %s", #name);
    RKB_CODE_MAP(CODE)
#undef CODE
#define COUNTER(name, doc)                                                     \
    snprintf(want, sizeof want, "`%s`", #name);                               \
    if (!strstr(text, want))                                                   \
        fail_msg("PROTOCOL.md does not describe the counter %s", #name);
    RKB_STATUS_COUNTERS(COUNTER)
#undef COUNTER
#define OP(name, wire, admin)                                                  \
    snprintf(want, sizeof want, "`%s`", wire);                                \
    if (!strstr(text, want))                                                   \
        fail_msg("PROTOCOL.md does not describe the operation %s", wire);
    RKB_OP_MAP(OP)
#undef OP
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_malformed_garbage),
        cmocka_unit_test(t_malformed_empty),
        cmocka_unit_test(t_malformed_array),
        cmocka_unit_test(t_malformed_int),
        cmocka_unit_test(t_malformed_trailing),
        cmocka_unit_test(t_malformed_bin_4gib),
        cmocka_unit_test(t_malformed_deep_nesting),
        cmocka_unit_test(t_malformed_million_keys),
        cmocka_unit_test(t_malformed_truncated),
        cmocka_unit_test(t_malformed_non_string_key),
        cmocka_unit_test(t_too_large),
        cmocka_unit_test(t_version_missing),
        cmocka_unit_test(t_version_2),
        cmocka_unit_test(t_version_str),
        cmocka_unit_test(t_version_before_id),
        cmocka_unit_test(t_id_missing),
        cmocka_unit_test(t_id_negative),
        cmocka_unit_test(t_id_string),
        cmocka_unit_test(t_id_max_and_signed_encoding),
        cmocka_unit_test(t_op_missing),
        cmocka_unit_test(t_op_not_str),
        cmocka_unit_test(t_op_unknown),
        cmocka_unit_test(t_status_only),
        cmocka_unit_test(t_echo_no_data),
        cmocka_unit_test(t_echo_data_str),
        cmocka_unit_test(t_vadd_mismatch),
        cmocka_unit_test(t_vadd_not_multiple_of_4),
        cmocka_unit_test(t_vadd_empty),
        cmocka_unit_test(t_vadd_missing_b),
        cmocka_unit_test(t_vadd_a_wrong_type),
        cmocka_unit_test(t_launch_negative_grid),
        cmocka_unit_test(t_launch_str_grid),
        cmocka_unit_test(t_launch_missing_smem),
        cmocka_unit_test(t_launch_float_block),
        cmocka_unit_test(t_valid_ping_status),
        cmocka_unit_test(t_test_ops_gated),
        cmocka_unit_test(t_valid_echo_borrows),
        cmocka_unit_test(t_valid_vadd),
        cmocka_unit_test(t_valid_launch),
        cmocka_unit_test(t_unknown_keys_ignored),
        cmocka_unit_test(t_state_reuse),
        cmocka_unit_test(t_peek),
        cmocka_unit_test(t_reply_ok_roundtrip),
        cmocka_unit_test(t_reply_error_roundtrip),
        cmocka_unit_test(t_code_names),
        cmocka_unit_test(t_status_roundtrip),
        cmocka_unit_test(t_protocol_md_in_step),
    };
    g_protocol_md = argc > 1 ? argv[1] : NULL;
    return cmocka_run_group_tests(tests, NULL, NULL);
}
