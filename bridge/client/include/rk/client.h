/* rk/client.h - librkc: the C client of rk-bridge (protocol v1.1, see
 * bridge/PROTOCOL.md in the source tree), msgpack-c and ZeroMQ underneath.
 * Link with `pkg-config --cflags --libs rkc`.
 *
 * Any actor by name, with named bin fields (here samples/gpu_module's
 * saxpy: a, x, y -> y):
 *
 *   rkc *c;
 *   if (rkc_connect(&c, "tcp://127.0.0.1:5555", NULL))
 *       die(rkc_last_error());
 *   float a = 2;
 *   rkc_field in[] = {RKC_FIELD("a", &a, 4), RKC_FIELD("x", x, n * 4), RKC_FIELD("y", y, n * 4)};
 *   rkc_reply r;
 *   int rc = rkc_actor_call(c, "saxpy", in, 3, &r, 1000);
 *   if (rc)             -> no reply: rkc_errmsg(c) says why (rc: -ETIMEDOUT, ...)
 *   else if (!r.ok)     -> the bridge refused: r.code ("INVALID_ARGUMENT"), r.message
 *   else rkc_reply_bin(&r, "y", &out, &outlen) ...
 *   rkc_reply_free(&r);
 *   rkc_close(c);
 *
 * Pipelining (DEALER, the default): rkc_send()/rkc_actor_send() any number
 * of requests, each gets an id; rkc_recv() returns replies in the order
 * they arrive (not necessarily the order sent); rkc_wait() waits for one id
 * and keeps the others for later rkc_recv()/rkc_wait() calls.
 *
 * Threads: a handle (rkc *) is used by one thread at a time (it wraps one
 * ZeroMQ socket); different handles are independent. A reply or an actor
 * list belongs to its caller and may be read and freed from any thread,
 * also after its handle is closed.
 *
 * Errors: functions return 0 or a negative errno value: -EINVAL (a bad
 * argument), -ETIMEDOUT (nothing within timeout_ms: a call's send and
 * wait together), -EINTR (a signal handler ran while it waited; not
 * retried, the caller decides: a request rkc_send sent is still answered,
 * and rkc_wait() takes its reply), -EPROTO (a reply that is not a
 * protocol reply), -EIO (ZeroMQ failed), -ENOMEM, -E2BIG (a field longer
 * than msgpack's 4 GiB), -ENOENT (no such reply field); rkc_errmsg()
 * says more, as a sentence. The library prints nothing. A reply that says
 * ok: false is not an error of the call: its code and message are in the
 * reply, and rkc_reply_errno() maps the code to an errno value. */
#ifndef RK_CLIENT_H
#define RK_CLIENT_H

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
    int socket_type;               /* RKC_DEALER (default, pipelined) or RKC_REQ (one at a time; a
                                      request that got no reply does not block the next) */
    const char *server_public_key; /* Z85 (40 chars): turns CURVE on; NULL = plain */
    const char *secret_key;        /* the client's Z85 secret key (40 chars; public derived from it);
                                      a key of another length is -EINVAL */
} rkc_options;

/* Connects (ZeroMQ connects in the background: a bridge that is not up
 * yet is reached when it comes up). endpoint: tcp://HOST:PORT, ipc://PATH
 * or inproc://NAME. opt may be NULL; its strings are copied. Returns 0 and
 * *out (the caller owns it: rkc_close), or a negative errno with *out
 * NULL; rkc_last_error() then says why (a malformed endpoint: -EINVAL and
 * what is wrong with it, e.g. no transport or no port). */
int rkc_connect(rkc **out, const char *endpoint, const rkc_options *opt);

/* Why the calling thread's last rkc_connect failed, as a sentence (empty
 * when it did not). Thread-local, owned by the library; never NULL. */
const char *rkc_last_error(void);

/* Closes the socket; replies still in flight and replies rkc_wait set
 * aside are discarded (replies already returned stay the caller's). NULL
 * is a no-op. */
void rkc_close(rkc *c);

/* The last failure of c, as a sentence, owned by c (valid until c's next
 * call). Never NULL. */
const char *rkc_errmsg(const rkc *c);

/* A named field of a request: a msgpack bin unless type says otherwise.
 * Everything is borrowed: only read while the send call runs. A request
 * carries at most 2044 fields, its op's own included (the bridge decodes
 * at most 4096 msgpack objects); more is -EINVAL.
 *   rkc_field f[] = {RKC_FIELD("a", a, n * 4), RKC_FIELD("b", b, n * 4),
 *                    RKC_FIELD_UINT("grid", 4)}; */
typedef enum rkc_field_type { RKC_BIN = 0, RKC_STR, RKC_UINT } rkc_field_type;
typedef struct rkc_field {
    const char *name;    /* the key; not "v", "id" or "op"; no two alike */
    const void *data;    /* RKC_BIN, RKC_STR: len bytes (NULL when len is 0) */
    size_t len;
    rkc_field_type type; /* RKC_BIN (0) unless set */
    uint64_t u;          /* RKC_UINT: the value */
} rkc_field;
/* Initializers of an rkc_field (designated: no -Wmissing-field-initializers). */
#define RKC_FIELD(name_, data_, len_) {.name = (name_), .data = (data_), .len = (len_), .type = RKC_BIN}
#define RKC_FIELD_STR(name_, str_, len_) {.name = (name_), .data = (str_), .len = (len_), .type = RKC_STR}
#define RKC_FIELD_UINT(name_, u_) {.name = (name_), .type = RKC_UINT, .u = (u_)}

/* The operations the enum names; any other by rkc_request.name. */
typedef enum rkc_op { RKC_PING = 1, RKC_ECHO, RKC_VADD, RKC_STATUS, RKC_LAUNCH } rkc_op;

/* A request, borrowed for the send call. Either name (any operation: an
 * actor such as "saxpy", an admin op) with fields, or op with its own
 * members below (fields, when given, are sent after them). */
typedef struct rkc_request {
    rkc_op op;
    const void *data; /* echo: bytes */
    size_t len;
    const float *a, *b; /* vadd: n float32 each (sent little-endian) */
    size_t n;
    uint32_t grid, block, smem; /* launch */
    const char *name;           /* when set: the op's name; op and the members above are unused */
    const rkc_field *fields;    /* n_fields named fields */
    size_t n_fields;
} rkc_request;

/* A reply. Its pointers point into storage the reply owns: release it
 * with rkc_reply_free(). */
typedef struct rkc_reply {
    bool has_id;
    uint64_t id;
    bool ok;
    const char *code;    /* error code when !ok, e.g. "INVALID_ARGUMENT"; "" when ok; never NULL */
    const char *message; /* the error's sentence when !ok; "" when ok; never NULL */
    const uint8_t *data; /* echo: `data`; vadd: `c` (float32 LE); else NULL (see rkc_reply_bin) */
    size_t len;
    char backend[16];    /* ping/status/launch: `backend` */
    const msgpack_object *root; /* the whole reply map, for other fields */
    double rtt_us;       /* rkc_call, rkc_actor_call: round trip in microseconds */
    void *impl_;
} rkc_reply;

/* Releases what r owns; r's pointers are invalid afterwards. A zeroed or
 * already released reply, and NULL, are no-ops. */
void rkc_reply_free(rkc_reply *r);

/* A top-level field of the reply map, or NULL. Points into r. */
const msgpack_object *rkc_reply_get(const rkc_reply *r, const char *key);
/* A field of a map object, or NULL (also when map is not a map). */
const msgpack_object *rkc_map_get(const msgpack_object *map, const char *key);

/* A bin field of the reply by name (an actor's output: "z"): *data (into
 * r, valid until rkc_reply_free) and *len. Returns 0, -ENOENT when the
 * reply has no such field, -EPROTO when it is not a bin, -EINVAL for a
 * NULL argument. */
int rkc_reply_bin(const rkc_reply *r, const char *name, const void **data, size_t *len);

/* 0 for an ok reply; else the error code as a negative errno value:
 * MALFORMED -EBADMSG, UNSUPPORTED_VERSION -EPROTONOSUPPORT, UNKNOWN_OP
 * -ENOSYS, INVALID_ARGUMENT -EINVAL, TOO_LARGE -EMSGSIZE, BUSY -EBUSY,
 * LAUNCH_INVALID -ERANGE, DEVICE_FAULT -EIO, ACTOR_FAILED -ECANCELED,
 * PERMISSION_DENIED -EPERM, SHUTTING_DOWN -ESHUTDOWN, INTERNAL and codes
 * this library does not know -EREMOTEIO. */
int rkc_reply_errno(const rkc_reply *r);

/* Sends a request with a fresh id (stored in *id when id is not NULL).
 * Never blocks longer than timeout_ms (-1 forever). */
int rkc_send(rkc *c, const rkc_request *rq, uint64_t *id, int timeout_ms);

/* The bytes rkc_send would put on the wire for rq (its largest id), or 0
 * when rq names no op; packed by msgpack-c with a writer that only counts,
 * so the payloads are not read and may not exist yet (NULL): a request can
 * be checked against a bridge's transport cap (status counters
 * transport_cap_bytes) before it is built. rq's other checks are
 * rkc_send's. Thread-safe (no connection). */
size_t rkc_request_bytes(const rkc_request *rq);

/* Sends one raw body frame as is (tests, tools); its reply carries
 * whatever id the frame holds. */
int rkc_send_raw(rkc *c, const void *frame, size_t len, int timeout_ms);

/* Next reply (a set-aside one first), waiting up to timeout_ms. *out
 * becomes the caller's (rkc_reply_free). */
int rkc_recv(rkc *c, rkc_reply *out, int timeout_ms);

/* The reply with this id, waiting up to timeout_ms; other replies that
 * arrive meanwhile are set aside for rkc_recv()/rkc_wait(). On a REQ
 * socket an id-less reply (the bridge could not read the id) is the
 * answer. *out becomes the caller's. */
int rkc_wait(rkc *c, uint64_t id, rkc_reply *out, int timeout_ms);

/* rkc_send + rkc_wait, both within timeout_ms (one deadline); out->rtt_us
 * is the round trip. When it fails after sending (-ETIMEDOUT, -EINTR), a
 * reply that comes later is dropped, not set aside (nobody knows its id). */
int rkc_call(rkc *c, const rkc_request *rq, rkc_reply *out, int timeout_ms);

/* Any actor (or operation) by name with n named fields: rkc_send and
 * rkc_call of {.name = actor, .fields = fields, .n_fields = n}. */
int rkc_actor_send(rkc *c, const char *actor, const rkc_field *fields, size_t n, uint64_t *id,
                   int timeout_ms);
int rkc_actor_call(rkc *c, const char *actor, const rkc_field *fields, size_t n, rkc_reply *out,
                   int timeout_ms);

/* An actor's signature, from `status` `actors` (v1.1). */
typedef struct rkc_actor_info {
    const char *name;
    const char *const *inputs;  /* n_inputs input field names */
    size_t n_inputs;
    const char *const *outputs; /* n_outputs output field names */
    size_t n_outputs;
    bool gpu, cpu;              /* where it can run */
} rkc_actor_info;

/* Actors; everything points into storage the list owns (one block):
 * release it with rkc_actor_list_free(). */
typedef struct rkc_actor_list {
    rkc_actor_info *actors;
    size_t n;
    void *impl_;
} rkc_actor_list;

/* The actors of a status reply (which stays the caller's; the list is a
 * copy, independent of it). Returns 0, -ENOENT when the reply has no
 * `actors` (a bridge older than protocol 1.1), -EPROTO when it is not as
 * PROTOCOL.md says, -ENOMEM. */
int rkc_status_actors(const rkc_reply *status, rkc_actor_list *out);

/* Asks the bridge (`status`) for its actors: rkc_call + rkc_status_actors.
 * An error reply returns rkc_reply_errno's value, with its code and
 * message in rkc_errmsg(c). */
int rkc_actors(rkc *c, rkc_actor_list *out, int timeout_ms);

/* The actor of that name in l, or NULL. Points into l. */
const rkc_actor_info *rkc_actor_find(const rkc_actor_list *l, const char *name);

/* Releases what l owns. A zeroed or released list, and NULL, are no-ops. */
void rkc_actor_list_free(rkc_actor_list *l);

/* The underlying ZeroMQ socket (for zmq_poll; owned by c). */
void *rkc_socket(rkc *c);

#ifdef __cplusplus
}
#endif
#endif
