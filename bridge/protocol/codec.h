/* bridge/protocol/codec.h - the protocol v1.1 codec (rkb_ = bridge
 * internal): every msgpack byte the bridge reads or writes goes through
 * here. The wire contract is bridge/PROTOCOL.md.
 *
 * Decoding: rkb_decode_request() turns ONE ZeroMQ body frame into an
 * rkb_request, or into an rkb_error carrying the protocol error code and a
 * sentence naming the offending field or limit. It never trusts a declared
 * length: a bounded header pre-scan (scan.c) refuses hostile frames before
 * msgpack-c allocates anything.
 *
 * Order of checks (the first failing one decides the reply):
 *   1. TOO_LARGE            frame longer than lim->max_frame (when non-zero)
 *   2. MALFORMED            bounded scan: empty, not msgpack, truncated, a
 *                           length or count past the end of the frame,
 *                           nesting > max_depth, elements > max_elements;
 *                           then: first object not a map, a top-level key
 *                           that is not a string, bytes after the map
 *   3. UNSUPPORTED_VERSION  `v` missing or not the integer 1
 *   4. INVALID_ARGUMENT     `id` missing or not a uint64
 *   5. UNKNOWN_OP           `op` missing, not a string, or unknown
 *   6. INVALID_ARGUMENT     per-op arguments, in the order of PROTOCOL.md
 * The request id is reported (req->has_id) whenever the frame starts with a
 * map whose first top-level `id` key holds a uint64 that the scan reached,
 * even when a later check fails: error replies then echo it.
 *
 * Encoding: an rkb_encoder (one per thread) packs whole replies into its
 * buffer (errors, ping, launch, status), or the head of a data reply into
 * a caller's small array (the payload then follows it in the same frame,
 * copied once). Thread-safety: none inside; one decoder state and one
 * encoder per thread.
 */
#ifndef RKB_CODEC_H
#define RKB_CODEC_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "rk/module.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RKB_PROTOCOL_VERSION 1

/* Protocol error codes: negative values (0 is success), and the exact
 * strings that go on the wire in `error.code`. One X-macro generates the
 * enum and rkb_code_name() (libuv style). ACTOR_FAILED and
 * PERMISSION_DENIED are v1.1. */
#define RKB_CODE_MAP(X)                                                        \
    X(MALFORMED, 1)                                                            \
    X(UNSUPPORTED_VERSION, 2)                                                  \
    X(UNKNOWN_OP, 3)                                                           \
    X(INVALID_ARGUMENT, 4)                                                     \
    X(TOO_LARGE, 5)                                                            \
    X(BUSY, 6)                                                                 \
    X(LAUNCH_INVALID, 7)                                                       \
    X(DEVICE_FAULT, 8)                                                         \
    X(SHUTTING_DOWN, 9)                                                        \
    X(INTERNAL, 10)                                                            \
    X(ACTOR_FAILED, 11)                                                        \
    X(PERMISSION_DENIED, 12)

typedef enum rkb_code {
    RKB_OK = 0,
#define RKB__CODE_ENUM(name, num) RKB_E_##name = -(num),
    RKB_CODE_MAP(RKB__CODE_ENUM)
#undef RKB__CODE_ENUM
} rkb_code;

/* Wire string for a code ("MALFORMED", ...); "INTERNAL" for anything that is
 * not a protocol code (a bug must still produce a valid reply). Never NULL. */
const char *rkb_code_name(int code);

/* Decoder limits. Defaults: RKB_LIMITS_DEFAULT; a 0 in max_depth or
 * max_elements also means the default. */
typedef struct rkb_limits {
    uint32_t max_depth;    /* container nesting, the request map is 1; capped
                              at RKB_MAX_DEPTH_CAP (msgpack-c's own stack) */
    uint32_t max_elements; /* msgpack objects in one request, all levels */
    size_t max_frame;      /* bytes per frame; 0 = no limit (TOO_LARGE) */
    bool test_ops;         /* decode the test-only ops (fault, hang); otherwise
                              they are unknown ops (rk-bridge --test-faults) */
    /* actors of loaded modules (rk/module.h), decoded as RKB_OP_ACTOR with
     * their declared input fields; borrowed, may be NULL */
    const struct rkb_actor *actors;
    size_t n_actors;
    /* the status endpoint (rk-bridge --status-bind): `status` is the only
     * operation; any other op, however valid elsewhere, is UNKNOWN_OP
     * naming it (before its arguments are looked at) */
    bool status_only;
} rkb_limits;

/* A module actor the codec knows by name. */
typedef struct rkb_actor {
    const rk_actor_decl *decl; /* borrowed from the runtime */
    uint16_t type;             /* its message type */
} rkb_actor;

#define RKB_DEFAULT_MAX_DEPTH 16u
#define RKB_DEFAULT_MAX_ELEMENTS 4096u
/* 129 MiB: a vadd of 2^24 float32 elements (two 64 MiB operands) and its
 * map, with 1 MiB to spare for keys a client adds */
#define RKB_DEFAULT_MAX_FRAME ((size_t)129 << 20)
#define RKB_MAX_DEPTH_CAP 32u
#define RKB_LIMITS_DEFAULT                                                     \
    ((rkb_limits){RKB_DEFAULT_MAX_DEPTH, RKB_DEFAULT_MAX_ELEMENTS,             \
                  RKB_DEFAULT_MAX_FRAME, false, NULL, 0, false})

/* Operations: wire name, and whether only an admin may call it. FAULT and
 * HANG are test-only (rkb_limits.test_ops). */
#define RKB_OP_MAP(X)                                                          \
    X(PING, "ping", false)                                                     \
    X(ECHO, "echo", false)                                                     \
    X(VADD, "vadd", false)                                                     \
    X(STATUS, "status", false)                                                 \
    X(LAUNCH, "launch", true)                                                  \
    X(RETRY_GPU, "retry_gpu", true)                                            \
    X(FAULT, "fault", false)                                                   \
    X(HANG, "hang", false)                                                     \
    X(ACTOR, "", false) /* a module actor: rkb_request.u.actor */

typedef enum rkb_op {
    RKB_OP_NONE = 0, /* not decoded (error before the op was known) */
#define RKB__OP_ENUM(name, wire, admin) RKB_OP_##name,
    RKB_OP_MAP(RKB__OP_ENUM)
#undef RKB__OP_ENUM
    RKB_OP_COUNT
} rkb_op;

/* Wire name of an op ("vadd"), "" for RKB_OP_NONE. Never NULL. */
const char *rkb_op_name(rkb_op op);
/* True for operations that change the bridge for every client (launch). */
bool rkb_op_is_admin(rkb_op op);

/* A byte range BORROWED from the caller's frame: valid only while that
 * frame's buffer is. Never NULL when len is 0 (it then points into the
 * frame, or at a static empty byte for an empty frame). */
typedef struct rkb_bytes {
    const uint8_t *ptr;
    size_t len;
} rkb_bytes;

typedef struct rkb_request {
    bool has_id; /* false: the reply's id is nil */
    uint64_t id;
    rkb_op op;
    union {
        struct {
            rkb_bytes data;
        } echo;
        struct {
            rkb_bytes a, b; /* little-endian float32, a.len == b.len */
            size_t n;       /* element count, >= 1 */
        } vadd;
        struct {
            uint64_t grid, block, smem; /* not yet checked against a device */
        } launch;
        struct {
            uint32_t index;                /* into rkb_limits.actors */
            rkb_bytes in[RK_FIELDS_MAX];   /* its inputs, in declared order */
        } actor;
    } u;
} rkb_request;

#define RKB_MESSAGE_MAX 256

/* A failed decode (or any error reply the daemon wants to send). */
typedef struct rkb_error {
    int code;                      /* RKB_E_*, or RKB_OK */
    char message[RKB_MESSAGE_MAX]; /* one sentence, NUL-terminated */
} rkb_error;

/* Fill err with code and a printf-style sentence (truncated to fit).
 * Returns code, so callers can `return rkb_error_set(...)`. err may be NULL. */
int rkb_error_set(rkb_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Decoder scratch: owns msgpack-c's zone for the object tree of the last
 * decoded frame. The zone is cleared, not re-created, per request: its first
 * chunk (MSGPACK_ZONE_CHUNK_SIZE) is kept, larger chunks are freed at the
 * next call. Caller storage: _init before first use, _destroy once.
 * Not thread-safe: one state per decoding thread. */
#define RKB_FLAT_MAX 16 /* entries of a map decoded without msgpack_unpack */
typedef struct rkb_decode_state {
    msgpack_zone zone;
    msgpack_object obj;
    bool zone_ok;
    bool zone_used;  /* the last tree came from msgpack_unpack (the zone holds it) */
    bool no_flat;    /* tests: always decode through msgpack_unpack */
    msgpack_object_kv flat[RKB_FLAT_MAX]; /* the last tree, when it was a flat map */
} rkb_decode_state;

void rkb_decode_state_init(rkb_decode_state *st);
void rkb_decode_state_destroy(rkb_decode_state *st);

/* Decode one request frame.
 *  buf/len: the body frame; BORROWED, never copied: bin fields of *req point
 *           into buf, so buf must outlive every use of *req.
 *  lim:     NULL for RKB_LIMITS_DEFAULT.
 *  req:     always written; on failure req->has_id/id still say which id the
 *           error reply must echo, and req->op is what was decoded so far.
 *  st:      scratch reused across calls (see above); the object tree in it is
 *           released at the next call or at _destroy.
 *  err:     written on failure (code + message); untouched on success.
 * Returns RKB_OK or a negative RKB_E_* code (== err->code). The only codes
 * it returns are TOO_LARGE, MALFORMED, UNSUPPORTED_VERSION, INVALID_ARGUMENT,
 * UNKNOWN_OP, and INTERNAL (msgpack-c out of memory). */
int rkb_decode_request(const void *buf, size_t len, const rkb_limits *lim,
                       rkb_request *req, rkb_decode_state *st, rkb_error *err);

/* Read only the request id of a frame, with the same bounded scan (default
 * limits) and no allocation: for replying to frames refused before
 * decoding (TOO_LARGE, BUSY, SHUTTING_DOWN). Returns 0 and sets *id when the
 * frame starts with a map whose first top-level `id` key holds a uint64
 * reached before any problem in the frame; otherwise a negative code
 * (RKB_E_MALFORMED or RKB_E_INVALID_ARGUMENT) and *id is untouched. Any
 * frame size is accepted: the scan reads headers, not payloads. */
int rkb_peek_id(const void *buf, size_t len, uint64_t *id);

/* ---- encoding ---------------------------------------------------------- */

/* The low-level pieces (tests and the fuzzer use them; the daemon uses the
 * whole-reply encoders below). Each returns 0, or RKB_E_INTERNAL when the
 * packer's write callback failed. */
/* Start an OK reply: a map of 3 + nfields entries with `v`: 1, `id` (nil
 * when !has_id) and `ok`: true; the caller packs exactly nfields pairs. */
int rkb_reply_begin_ok(msgpack_packer *pk, bool has_id, uint64_t id,
                       uint32_t nfields);
/* A complete error reply: `v`: 1, `id` (or nil), `ok`: false, `error`:
 * {`code`: rkb_code_name(code), `message`: message}. NULL message is "". */
int rkb_reply_error(msgpack_packer *pk, bool has_id, uint64_t id, int code,
                    const char *message);
/* A str (a C string): a key, or a short value. */
int rkb_pack_key(msgpack_packer *pk, const char *key);

/* Largest head of a data reply: map, v, id, ok, key, bin header. */
#define RKB_DATA_HEAD_MAX 40

/* One thread's reply encoder: a growable buffer for whole replies and the
 * constant bytes of a data reply, packed once by msgpack-c at init.
 * Caller storage: _init (0 or RKB_E_INTERNAL), then _destroy once. */
typedef struct rkb_encoder {
    msgpack_sbuffer sbuf;
    msgpack_packer pk;
    uint8_t pre[16], suf[2][16]; /* {v: 1, id: | ok: true, data:/c: */
    uint8_t pre_len, suf_len[2];
} rkb_encoder;

int rkb_encoder_init(rkb_encoder *enc);
void rkb_encoder_destroy(rkb_encoder *enc);

/* The reply the last rkb_encode_* call packed: enc->sbuf.data[0..size).
 * It stays there until the next call; rkb_encoder_release hands the
 * malloc'd buffer to the caller (free() it) and leaves the encoder empty. */
static inline const void *rkb_encoder_data(const rkb_encoder *enc) { return enc->sbuf.data; }
static inline size_t rkb_encoder_size(const rkb_encoder *enc) { return enc->sbuf.size; }
void *rkb_encoder_release(rkb_encoder *enc);

/* Whole replies into enc (replacing what it held). Each returns 0 or
 * RKB_E_INTERNAL (out of memory). */
int rkb_encode_error(rkb_encoder *enc, bool has_id, uint64_t id, int code,
                     const char *message);
int rkb_encode_ping(rkb_encoder *enc, bool has_id, uint64_t id, const char *backend);
int rkb_encode_launch(rkb_encoder *enc, bool has_id, uint64_t id, const char *backend,
                      uint32_t grid, uint32_t block, uint32_t smem);
int rkb_encode_status(rkb_encoder *enc, bool has_id, uint64_t id, const rkb_status *st);

/* The head of a data reply to `op` (echo: `data`, vadd: `c`) whose payload
 * is len bytes: {v: 1, id, ok: true, data|c: bin header}. Writes at most
 * RKB_DATA_HEAD_MAX bytes to out and returns how many; the payload follows
 * them in the same frame. */
size_t rkb_encode_data_head(const rkb_encoder *enc, uint8_t *out, bool has_id, uint64_t id,
                            rkb_op op, size_t len);

/* The same for a reply of one field named `key` (a module actor's one
 * output): at most RKB_KEY_HEAD_MAX bytes. */
#define RKB_KEY_HEAD_MAX (24 + RK_ACTOR_NAME_MAX + 8)
size_t rkb_encode_key_head(uint8_t *out, bool has_id, uint64_t id, const char *key, size_t len);

/* A whole OK reply of n named bin fields (a module actor's outputs). */
int rkb_encode_fields(rkb_encoder *enc, bool has_id, uint64_t id, const char *const *keys,
                      const rk_field *fields, uint32_t n);

#ifdef __cplusplus
}
#endif

#endif /* RKB_CODEC_H */
