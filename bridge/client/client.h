/* bridge/client/client.h - rkc: a C client of rk-bridge (protocol v1.1, see
 * bridge/PROTOCOL.md), msgpack via msgpack-c, ZeroMQ underneath.
 *
 *   rkc *c;
 *   rkc_connect(&c, "tcp://127.0.0.1:5555", NULL);
 *   rkc_request rq = {.op = RKC_ECHO, .data = "hi", .len = 2};
 *   rkc_reply r;
 *   if (rkc_call(c, &rq, &r, 1000) == 0 && r.ok) ... r.data, r.len ...
 *   rkc_reply_free(&r);
 *   rkc_close(c);
 *
 * Pipelining (DEALER, the default): rkc_send() any number of requests,
 * each gets an id; rkc_recv() returns replies in the order they arrive
 * (not necessarily the order sent); rkc_wait() waits for one id and keeps
 * the others for later rkc_recv() calls. A handle is used by one thread at
 * a time (it wraps one ZeroMQ socket). Errors are negative errno values
 * (-ETIMEDOUT, -EINVAL, -EPROTO for an unreadable reply, -EIO for a ZeroMQ
 * failure); rkc_errmsg() says more. */
#ifndef RKC_CLIENT_H
#define RKC_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rkc rkc;

enum { RKC_DEALER = 0, RKC_REQ = 1 };

typedef struct rkc_options {
    int socket_type;               /* RKC_DEALER (default, pipelined) or RKC_REQ (one at a time) */
    const char *server_public_key; /* Z85 (40 chars): turns CURVE on; NULL = plain */
    const char *secret_key;        /* the client's Z85 secret key (public derived from it) */
} rkc_options;

/* Connects (ZeroMQ connects in the background: a bridge that is not up
 * yet is reached when it comes up). opt may be NULL. Returns 0 and *out,
 * or a negative errno with *out NULL; rkc_last_error() then says why.
 * Prints nothing. */
int rkc_connect(rkc **out, const char *endpoint, const rkc_options *opt);

/* Why the calling thread's last rkc_connect failed, as a sentence (empty
 * when it did not). Thread-local; never NULL. */
const char *rkc_last_error(void);

/* Closes the socket; replies still in flight are discarded. NULL is a no-op. */
void rkc_close(rkc *c);

/* The last failure of c, as a sentence. Never NULL. */
const char *rkc_errmsg(const rkc *c);

typedef enum rkc_op { RKC_PING = 1, RKC_ECHO, RKC_VADD, RKC_STATUS, RKC_LAUNCH } rkc_op;

typedef struct rkc_request {
    rkc_op op;
    const void *data; /* echo: bytes (borrowed for the call) */
    size_t len;
    const float *a, *b; /* vadd: n float32 each (sent little-endian) */
    size_t n;
    uint32_t grid, block, smem; /* launch */
} rkc_request;

/* A reply. Fields point into storage the reply owns: release it with
 * rkc_reply_free(). */
typedef struct rkc_reply {
    bool has_id;
    uint64_t id;
    bool ok;
    char code[32];     /* error code string when !ok, e.g. "MALFORMED" */
    char message[256]; /* error message when !ok */
    const uint8_t *data; /* echo: `data`; vadd: `c` (float32 LE); else NULL */
    size_t len;
    char backend[16];  /* ping/status/launch: `backend` */
    const msgpack_object *root; /* the whole reply map, for other fields */
    double rtt_us;     /* rkc_call only: round trip in microseconds */
    void *impl_;
} rkc_reply;

void rkc_reply_free(rkc_reply *r);

/* A top-level field of the reply map, or NULL. */
const msgpack_object *rkc_reply_get(const rkc_reply *r, const char *key);
/* A field of a map object, or NULL. */
const msgpack_object *rkc_map_get(const msgpack_object *map, const char *key);

/* Sends a request with a fresh id (stored in *id when id is not NULL).
 * Never blocks longer than timeout_ms (-1 forever). */
int rkc_send(rkc *c, const rkc_request *rq, uint64_t *id, int timeout_ms);

/* Sends one raw body frame as is (tests, tools). */
int rkc_send_raw(rkc *c, const void *frame, size_t len, int timeout_ms);

/* Next reply (a stashed one first), waiting up to timeout_ms. */
int rkc_recv(rkc *c, rkc_reply *out, int timeout_ms);

/* The reply with this id; other replies that arrive meanwhile are kept for
 * rkc_recv(). */
int rkc_wait(rkc *c, uint64_t id, rkc_reply *out, int timeout_ms);

/* rkc_send + rkc_wait; out->rtt_us is the round trip. */
int rkc_call(rkc *c, const rkc_request *rq, rkc_reply *out, int timeout_ms);

/* The underlying ZeroMQ socket (for zmq_poll). */
void *rkc_socket(rkc *c);

#ifdef __cplusplus
}
#endif
#endif
