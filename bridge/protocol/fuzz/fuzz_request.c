/* bridge/protocol/fuzz/fuzz_request.c - libFuzzer target for the protocol codec.
 *
 * Runs the decoder (default and tight limits), rkb_peek_id, and encodes the
 * reply the daemon would send, then checks invariants that must hold for ANY
 * input. A failed check aborts, so libFuzzer (or fuzz_replay) reports it.
 * Built two ways: fuzz_request (clang, -fsanitize=fuzzer) and fuzz_replay
 * (any compiler, with replay_main.c). */
#include "codec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                               \
    do {                                                                       \
        if (!(c)) {                                                            \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__,         \
                    __LINE__, #c);                                             \
            abort();                                                           \
        }                                                                      \
    } while (0)

static bool inside(const uint8_t *buf, size_t len, rkb_bytes b)
{
    if (b.len == 0)
        return b.ptr != NULL && b.ptr >= buf && b.ptr <= buf + len;
    return b.ptr >= buf && b.len <= len && b.ptr <= buf + len - b.len;
}

static const msgpack_object *get(const msgpack_object *map, const char *k)
{
    if (map->type != MSGPACK_OBJECT_MAP)
        return NULL;
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object *key = &map->via.map.ptr[i].key;
        if (key->type == MSGPACK_OBJECT_STR && key->via.str.size == strlen(k) &&
            memcmp(key->via.str.ptr, k, strlen(k)) == 0)
            return &map->via.map.ptr[i].val;
    }
    return NULL;
}

/* Encode the reply for (rc, req, err), decode it back, check the envelope. */
static void check_reply(int rc, const rkb_request *req, const rkb_error *err)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    if (rc == RKB_OK) {
        CHECK(rkb_reply_begin_ok(&pk, req->has_id, req->id, 1) == 0);
        if (req->op == RKB_OP_ECHO) {
            CHECK(rkb_pack_key(&pk, "data") == 0);
            msgpack_pack_bin_with_body(&pk, req->u.echo.data.ptr, req->u.echo.data.len);
        } else {
            CHECK(rkb_pack_key(&pk, "op") == 0);
            CHECK(rkb_pack_key(&pk, rkb_op_name(req->op)) == 0);
        }
    } else {
        CHECK(rkb_reply_error(&pk, req->has_id, req->id, rc, err->message) == 0);
    }

    msgpack_unpacked up;
    size_t off = 0;
    msgpack_unpacked_init(&up);
    CHECK(msgpack_unpack_next(&up, sb.data, sb.size, &off) == MSGPACK_UNPACK_SUCCESS);
    CHECK(off == sb.size);
    const msgpack_object *o = &up.data, *f;
    CHECK(o->type == MSGPACK_OBJECT_MAP);
    CHECK((f = get(o, "v")) && f->type == MSGPACK_OBJECT_POSITIVE_INTEGER && f->via.u64 == 1);
    CHECK((f = get(o, "id")));
    if (req->has_id)
        CHECK(f->type == MSGPACK_OBJECT_POSITIVE_INTEGER && f->via.u64 == req->id);
    else
        CHECK(f->type == MSGPACK_OBJECT_NIL);
    CHECK((f = get(o, "ok")) && f->type == MSGPACK_OBJECT_BOOLEAN && f->via.boolean == (rc == 0));
    if (rc != RKB_OK) {
        const msgpack_object *e = get(o, "error"), *code, *msg;
        CHECK(e && e->type == MSGPACK_OBJECT_MAP);
        CHECK((code = get(e, "code")) && code->type == MSGPACK_OBJECT_STR);
        CHECK(code->via.str.size == strlen(rkb_code_name(rc)) &&
              memcmp(code->via.str.ptr, rkb_code_name(rc), code->via.str.size) == 0);
        CHECK((msg = get(e, "message")) && msg->type == MSGPACK_OBJECT_STR);
        CHECK(msg->via.str.size == strlen(err->message));
    } else if (req->op == RKB_OP_ECHO) {
        CHECK((f = get(o, "data")) && f->type == MSGPACK_OBJECT_BIN);
        CHECK(f->via.bin.size == req->u.echo.data.len);
        CHECK(f->via.bin.size == 0 || memcmp(f->via.bin.ptr, req->u.echo.data.ptr, f->via.bin.size) == 0);
    }
    msgpack_unpacked_destroy(&up);
    msgpack_sbuffer_destroy(&sb);
}

static void check_decoded(const uint8_t *data, size_t size, const rkb_limits *lim)
{
    rkb_decode_state st;
    rkb_request req;
    rkb_error err;
    memset(&err, 0xa5, sizeof err); /* untouched on success: poison it */
    rkb_decode_state_init(&st);
    int rc = rkb_decode_request(data, size, lim, &req, &st, &err);

    /* Only the codes the decoder may decide, and never a codec bug. */
    CHECK(rc == RKB_OK || rc == RKB_E_MALFORMED || rc == RKB_E_UNSUPPORTED_VERSION ||
          rc == RKB_E_INVALID_ARGUMENT || rc == RKB_E_UNKNOWN_OP);
    if (rc != RKB_OK) {
        CHECK(err.code == rc);
        CHECK(memchr(err.message, '\0', sizeof err.message) != NULL);
        CHECK(err.message[0] != '\0');
    } else {
        /* no test ops and no module actors under these limits */
        CHECK(req.op >= RKB_OP_PING && req.op <= RKB_OP_RETRY_GPU);
        CHECK(req.has_id); /* a valid request always has an id */
        if (req.op == RKB_OP_ECHO)
            CHECK(inside(data, size, req.u.echo.data));
        if (req.op == RKB_OP_VADD) {
            CHECK(inside(data, size, req.u.vadd.a));
            CHECK(inside(data, size, req.u.vadd.b));
            CHECK(req.u.vadd.a.len == req.u.vadd.b.len);
            CHECK(req.u.vadd.a.len % 4 == 0 && req.u.vadd.a.len > 0);
            CHECK(req.u.vadd.n * 4 == req.u.vadd.a.len);
        }
    }

    /* With default limits the peek and the decoder agree on the id. */
    if (!lim) {
        uint64_t id = 0;
        int prc = rkb_peek_id(data, size, &id);
        CHECK((prc == RKB_OK) == req.has_id);
        if (req.has_id)
            CHECK(id == req.id);
    }
    check_reply(rc, &req, &err);
    rkb_decode_state_destroy(&st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_decoded(data, size, NULL);
    /* Tight limits reach the depth/element refusals with small inputs. */
    const rkb_limits tight = {.max_depth = 2, .max_elements = 12, .max_frame = 0};
    check_decoded(data, size, &tight);
    return 0;
}
