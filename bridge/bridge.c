/* bridge/bridge.c - the rk-bridge I/O loop (see bridge.h for the shape).
 *
 * Requests live in a fixed pool of entries (window + queue of them): an
 * entry holds the routing envelope and the body frame of one request from
 * the moment it is read until its reply is sent, so memory is bounded by
 * the pool, ZeroMQ's high-water marks and --max-message-bytes. Entries in
 * flight are found by the runtime's request id through a small open
 * addressing table; entries waiting for admission form a FIFO. */
#include "bridge.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>

#include <msgpack.h>
#include <zmq.h>

#include "codec.h"
#include "spsc.h"

int rkb_log_level = RKB_LOG_INFO;

void rkb_log(int level, const char *fmt, ...)
{
    static const char *names[] = {"error", "warn", "info", "debug"};
    if (level > rkb_log_level)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "rk-bridge %s: %s\n", names[level < 0 ? 0 : level > 3 ? 3 : level], line);
}

void rkb_config_init(rkb_config *c)
{
    memset(c, 0, sizeof *c);
    rk_config_init(&c->rk);
    c->rk.actor_window = 4096;
    c->rk.max_actors = 4;
    c->max_message_bytes = (size_t)16 << 20;
    c->rk.max_payload = c->max_message_bytes;
    c->queue = 4096;
    c->admission_ms = 100;
    c->sndhwm = 10000;
    c->rcvhwm = 1000;
    c->shutdown_grace_ms = 0;
    c->drain_ms = 10000;
    c->log_level = RKB_LOG_INFO;
    c->io_threads = 0; /* auto: rkb__io_threads */
    c->zmq_io_threads = 1;
}

static int64_t rkb__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void rkb__relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* ---- keys ---------------------------------------------------------- */

int rkb_key_read(const char *path, char z85[41])
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "rk-bridge: cannot open key file %s: %s\n", path, strerror(errno));
        return -1;
    }
    char line[256];
    int rc = -1;
    if (fgets(line, sizeof line, f)) {
        size_t n = strcspn(line, " \t\r\n");
        if (n == 40) {
            memcpy(z85, line, 40);
            z85[40] = 0;
            uint8_t bin[32];
            if (zmq_z85_decode(bin, z85))
                rc = 0;
        }
    }
    fclose(f);
    if (rc)
        fprintf(stderr, "rk-bridge: key file %s does not start with a 40-character Z85 key\n",
                path);
    return rc;
}

int rkb_keys_generate(const char *prefix)
{
    char pub[41], sec[41];
    if (zmq_curve_keypair(pub, sec) != 0) {
        fprintf(stderr, "rk-bridge: zmq_curve_keypair failed: %s (libzmq without CURVE?)\n",
                zmq_strerror(errno));
        return -1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s.key", prefix);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || dprintf(fd, "%s\n", sec) < 0 || close(fd) != 0) {
        fprintf(stderr, "rk-bridge: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    snprintf(path, sizeof path, "%s.pub", prefix);
    FILE *f = fopen(path, "w");
    if (!f || fprintf(f, "%s\n", pub) < 0 || fclose(f) != 0) {
        fprintf(stderr, "rk-bridge: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    printf("wrote %s.key (secret, mode 0600) and %s.pub (public: %s)\n", prefix, prefix, pub);
    return 0;
}

/* ---- ZAP handler: CURVE allow-list ------------------------------------ */

typedef struct rkb_zap {
    void *ctx;
    uint8_t (*keys)[32];
    size_t n_keys;
    pthread_t thread;
    bool running;
    void *sock;
} rkb_zap;

static int rkb__zap_load(rkb_zap *z, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "rk-bridge: cannot open --curve-allow-dir %s: %s\n", dir, strerror(errno));
        return -1;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n < 5 || strcmp(de->d_name + n - 4, ".pub"))
            continue;
        char path[4096], z85[41];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (rkb_key_read(path, z85))
            continue;
        void *k = realloc(z->keys, (z->n_keys + 1) * sizeof *z->keys);
        if (!k)
            break;
        z->keys = k;
        zmq_z85_decode(z->keys[z->n_keys++], z85);
    }
    closedir(d);
    rkb_log(RKB_LOG_INFO, "CURVE allow-list: %zu client key(s) from %s", z->n_keys, dir);
    return 0;
}

static void *rkb__zap_main(void *arg)
{
    rkb_zap *z = arg;
    for (;;) {
        zmq_msg_t fr[8];
        int n = 0, more = 1;
        while (more) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            if (zmq_msg_recv(&m, z->sock, 0) < 0) {
                zmq_msg_close(&m);
                for (int i = 0; i < n; i++)
                    zmq_msg_close(&fr[i]);
                if (errno == EINTR)
                    goto next;
                return NULL; /* ETERM: the context is shutting down */
            }
            more = zmq_msg_more(&m);
            if (n < 8)
                fr[n++] = m;
            else
                zmq_msg_close(&m);
        }
        {
            /* version, request_id, domain, address, identity, mechanism, credentials */
            bool ok = false;
            if (n >= 7 && zmq_msg_size(&fr[5]) == 5 && !memcmp(zmq_msg_data(&fr[5]), "CURVE", 5) &&
                zmq_msg_size(&fr[6]) == 32) {
                for (size_t i = 0; i < z->n_keys && !ok; i++)
                    ok = !memcmp(z->keys[i], zmq_msg_data(&fr[6]), 32);
            }
            char addr[64] = "?";
            if (n >= 4)
                snprintf(addr, sizeof addr, "%.*s", (int)zmq_msg_size(&fr[3]),
                         (const char *)zmq_msg_data(&fr[3]));
            if (!ok)
                rkb_log(RKB_LOG_WARN, "CURVE: refused a client key not on the allow-list (from %s)",
                        addr);
            const char *code = ok ? "200" : "400";
            const char *text = ok ? "OK" : "client key not allowed";
            zmq_send(z->sock, "1.0", 3, ZMQ_SNDMORE);
            if (n >= 2)
                zmq_send(z->sock, zmq_msg_data(&fr[1]), zmq_msg_size(&fr[1]), ZMQ_SNDMORE);
            else
                zmq_send(z->sock, "", 0, ZMQ_SNDMORE);
            zmq_send(z->sock, code, 3, ZMQ_SNDMORE);
            zmq_send(z->sock, text, strlen(text), ZMQ_SNDMORE);
            zmq_send(z->sock, "", 0, ZMQ_SNDMORE);
            zmq_send(z->sock, "", 0, 0);
        }
        for (int i = 0; i < n; i++)
            zmq_msg_close(&fr[i]);
    next:;
    }
}

static int rkb__zap_start(rkb_zap *z, void *ctx, const char *dir)
{
    z->ctx = ctx;
    if (rkb__zap_load(z, dir))
        return -1;
    z->sock = zmq_socket(ctx, ZMQ_REP);
    int linger = 0;
    zmq_setsockopt(z->sock, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_bind(z->sock, "inproc://zeromq.zap.01") != 0) {
        fprintf(stderr, "rk-bridge: binding the ZAP handler failed: %s\n", zmq_strerror(errno));
        zmq_close(z->sock);
        return -1;
    }
    /* the thread inherits the blocked SIGINT/SIGTERM of the caller */
    if (pthread_create(&z->thread, NULL, rkb__zap_main, z) != 0) {
        zmq_close(z->sock);
        return -1;
    }
    z->running = true;
    return 0;
}

/* Call after zmq_ctx_shutdown: the handler's recv fails with ETERM. */
static void rkb__zap_stop(rkb_zap *z)
{
    if (z->running) {
        pthread_join(z->thread, NULL);
        zmq_close(z->sock);
        z->running = false;
    }
    free(z->keys);
    z->keys = NULL;
}

/* ---- the request pool ------------------------------------------------ */

#define RKB_ENV_MAX 4
#define RKB_FRAMES_MAX 16

/* --io-threads > 1: what goes through a worker's rings (spsc.h), one
 * message each way. The frames are MOVED in and out by struct copy, never
 * copied: the side that takes an item out owns its frames. Body first, then
 * the envelope, so a message with a one-frame envelope touches the first
 * two lines plus the counts. */
typedef struct rkb_item {
    zmq_msg_t body;              /* the first body frame; valid when n_body > 0 */
    zmq_msg_t env[RKB_ENV_MAX];  /* routing envelope, env[0] = routing id */
    uint32_t n_body;             /* body frames the message had (replies: 1) */
    uint8_t n_env;
} rkb_item;

/* Ring sizes per worker. Requests: about the ZeroMQ high-water mark the
 * inproc hop used to have; a full ring makes the frontend skip that worker,
 * all full makes it stop reading its ROUTER (back-pressure). Replies: a
 * worker whose reply ring is full waits for the frontend, which empties the
 * rings on every pass and never waits for a worker. */
#define RKB_REQ_RING 1024
#define RKB_REP_RING 2048

/* One thread that may block on its eventfd (a worker, or the frontend),
 * on a line of its own: producers read `sleeping` after every burst. */
typedef struct rkb_waker {
    _Alignas(RKB_SPSC_ALIGN) int sleeping; /* 1: the owner is in, or about to enter, poll */
    int efd;                               /* eventfd (EFD_NONBLOCK), -1 in direct mode */
} rkb_waker;

enum { RKB_FREE = 0, RKB_PARKED = 1, RKB_INFLIGHT = 2 };

typedef struct rkb_entry {
    zmq_msg_t env[RKB_ENV_MAX];
    zmq_msg_t body;
    rkb_request req;
    int64_t deadline;
    uint64_t rk_id;
    int32_t next;
    uint8_t n_env;
    uint8_t state;
    bool body_open;
} rkb_entry;

/* Each counter has one writer (the thread that owns the rkb) and is read by
 * any thread answering `status`: relaxed atomic stores and loads. */
typedef struct rkb_counters {
    uint64_t requests, replies, errors;
    uint64_t busy, too_large, malformed, shutting_down, device_fault, internal;
    uint64_t parked_total, dropped_replies, unroutable;
} rkb_counters;

#define RKB_INC(b, f) __atomic_store_n(&(b)->n.f, (b)->n.f + 1, __ATOMIC_RELAXED)
#define RKB_SET(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define RKB_LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

struct rkb;

/* What every I/O thread shares: the runtime, the context, the stop signal
 * and (for `status`) every thread's counters. */
typedef struct rkb_shared {
    const rkb_config *cfg;
    void *ctx;
    rk_runtime *rt;
    struct rkb **workers; /* the rkb of each thread that owns an actor */
    int n_workers;
    struct rkb *front;    /* --io-threads > 1: the frontend (its counters, its waker) */
    int stopping;         /* atomic: a signal arrived (worker mode) */
    int64_t stop_at;      /* written before stopping is set (release) */
    int live;             /* atomic: workers still running */
    char endpoints[1024];
    /* the in-process ring's round trip (64-B echo), measured at start-up
     * (status `ring`: what the bridge adds over it is its own cost) */
    uint64_t ring_p50_ns, ring_p99_ns, ring_count;
} rkb_shared;

typedef struct rkb {
    const rkb_config *cfg;
    rkb_shared *sh;
    void *ctx, *router; /* router: the client ROUTER (direct mode, frontend); NULL in a worker */
    bool worker;        /* --io-threads > 1: fed through its rings by the frontend */
    int index;
    pthread_t thread;
    rk_runtime *rt;
    rk_actor *act;
    rk_info info;
    rkb_entry *pool;
    uint32_t pool_n;
    int32_t free_head;
    uint32_t n_free;
    int32_t park_head, park_tail;
    uint32_t n_parked;
    uint32_t n_inflight;
    /* id -> entry index + 1 (0 = empty), linear probing */
    uint64_t *map_key;
    uint32_t *map_val;
    uint32_t map_mask;
    rkb_decode_state dec;
    rkb_limits lim;
    /* a data reply's constant bytes, packed once by msgpack-c at start-up:
     * {v: 1, id: <here>, ok: true, data|c: <bin>} */
    uint8_t pre[16], suf_echo[16], suf_vadd[16];
    uint8_t pre_len, suf_echo_len, suf_vadd_len;
    msgpack_sbuffer sbuf;
    msgpack_packer pk;
    rkb_counters n;
    bool stopping;
    int64_t stop_at;
    int sfd;
    /* --io-threads > 1. A worker: the rings the frontend fills (reqq) and
     * empties (repq), and whether replies were pushed since the frontend was
     * last checked for sleep. The frontend: the workers that got requests
     * in this burst (bit i: worker i) and the worker being filled. */
    rkb_spsc *reqq, *repq;
    bool owe_wake;
    uint64_t wake_mask;
    int fill;
    rkb_waker wk;
} rkb;

static uint32_t rkb__hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (uint32_t)k;
}

static void rkb__map_put(rkb *b, uint64_t key, uint32_t idx)
{
    uint32_t i = rkb__hash(key) & b->map_mask;
    while (b->map_val[i])
        i = (i + 1) & b->map_mask;
    b->map_key[i] = key;
    b->map_val[i] = idx + 1;
}

/* Removes key; returns its entry index or -1. Backward-shift deletion
 * keeps every probe chain unbroken without tombstones. */
static int32_t rkb__map_take(rkb *b, uint64_t key)
{
    uint32_t i = rkb__hash(key) & b->map_mask;
    while (b->map_val[i] && b->map_key[i] != key)
        i = (i + 1) & b->map_mask;
    if (!b->map_val[i])
        return -1;
    int32_t idx = (int32_t)b->map_val[i] - 1;
    uint32_t hole = i;
    for (uint32_t j = (i + 1) & b->map_mask; b->map_val[j]; j = (j + 1) & b->map_mask) {
        uint32_t home = rkb__hash(b->map_key[j]) & b->map_mask;
        /* can the element at j move to the hole? yes unless home is in (hole, j] */
        bool in_range = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!in_range) {
            b->map_key[hole] = b->map_key[j];
            b->map_val[hole] = b->map_val[j];
            hole = j;
        }
    }
    b->map_val[hole] = 0;
    return idx;
}

static int32_t rkb__entry_get(rkb *b)
{
    int32_t i = b->free_head;
    if (i < 0)
        return -1;
    b->free_head = b->pool[i].next;
    b->n_free--;
    /* n_env == 0 and !body_open already (calloc, rkb__entry_put): a reader
     * may have filled the frames of pool[free_head] before taking it */
    b->pool[i].next = -1;
    return i;
}

static void rkb__entry_put(rkb *b, int32_t i)
{
    rkb_entry *e = &b->pool[i];
    for (int k = 0; k < e->n_env; k++)
        zmq_msg_close(&e->env[k]);
    e->n_env = 0;
    if (e->body_open)
        zmq_msg_close(&e->body);
    e->body_open = false;
    e->state = RKB_FREE;
    e->next = b->free_head;
    b->free_head = i;
    b->n_free++;
}

/* ---- replies --------------------------------------------------------- */

static void rkb__sbuf_reset(rkb *b) { b->sbuf.size = 0; }

static void rkb__free_buf(void *data, void *hint)
{
    (void)hint;
    free(data);
}

/* Sends env[0..n_env) then *body on the client ROUTER (direct mode, or the
 * frontend): every frame is moved into ZeroMQ or closed here. Counts the
 * reply, or why it was dropped. */
static void rkb__send_frames(rkb *b, zmq_msg_t *env, int n_env, zmq_msg_t *body)
{
    int rc = 0;
    int k = 0;
    for (; k < n_env && rc >= 0; k++) {
        rc = zmq_msg_send(&env[k], b->router, ZMQ_SNDMORE | ZMQ_DONTWAIT);
        if (rc < 0 && k > 0) {
            /* cannot happen: a ROUTER accepts or refuses at the first frame */
            rkb_log(RKB_LOG_ERROR, "INTERNAL: envelope frame %d refused: %s", k,
                    zmq_strerror(errno));
        }
    }
    int err = rc < 0 ? errno : 0;
    /* frames that went out belong to ZeroMQ; the refused one and the rest
     * are still ours */
    for (int j = rc >= 0 ? k : k - 1; j < n_env; j++)
        zmq_msg_close(&env[j]);
    if (rc >= 0) {
        rc = zmq_msg_send(body, b->router, ZMQ_DONTWAIT);
        if (rc < 0) {
            err = errno;
            zmq_msg_close(body);
        }
    } else {
        zmq_msg_close(body);
    }
    if (rc < 0) {
        if (err == EHOSTUNREACH) {
            RKB_INC(b, unroutable);
            rkb_log(RKB_LOG_DEBUG, "reply to a client that is gone: dropped");
        } else {
            RKB_INC(b, dropped_replies);
            rkb_log(RKB_LOG_WARN, "reply dropped: the client's queue is full (%d replies unread, "
                    "--sndhwm) or %s", b->cfg->sndhwm, zmq_strerror(err));
        }
    } else {
        RKB_INC(b, replies);
    }
}

static rkb_item *rkb__wait_reply_room(rkb *b);

/* A worker's reply: env[0..n_env) and *body are moved into the next slot of
 * its reply ring; the frontend sends (and counts) it. */
static void rkb__push_reply(rkb *b, zmq_msg_t *env, int n_env, zmq_msg_t *body)
{
    rkb_item *it = rkb_spsc_sp_slot(b->repq);
    if (__builtin_expect(!it, 0))
        it = rkb__wait_reply_room(b);
    it->body = *body;
    for (int k = 0; k < n_env; k++)
        it->env[k] = env[k];
    it->n_env = (uint8_t)n_env;
    it->n_body = 1;
    rkb_spsc_sp_commit(b->repq);
    b->owe_wake = true; /* rkb__loop tells the frontend after this burst */
}

/* Sends the envelope of e followed by *body: where frames go is the one
 * thing that differs between the single thread (the ROUTER) and a worker
 * (its reply ring). Either way every frame is moved on (or closed): the
 * entry is freed right after a reply. */
static void rkb__send_msg(rkb *b, rkb_entry *e, zmq_msg_t *body)
{
    if (!b->worker)
        rkb__send_frames(b, e->env, e->n_env, body);
    else
        rkb__push_reply(b, e->env, e->n_env, body);
    e->n_env = 0;
}

/* Sends the envelope of e followed by the packed reply in b->sbuf. */
static void rkb__send_reply(rkb *b, rkb_entry *e)
{
    zmq_msg_t m;
    if (b->sbuf.size > 4096) {
        /* large: hand the buffer to ZeroMQ without a copy */
        size_t sz = b->sbuf.size;
        void *data = msgpack_sbuffer_release(&b->sbuf);
        zmq_msg_init_data(&m, data, sz, rkb__free_buf, NULL);
    } else {
        zmq_msg_init_size(&m, b->sbuf.size);
        memcpy(zmq_msg_data(&m), b->sbuf.data, b->sbuf.size);
    }
    rkb__send_msg(b, e, &m);
    rkb__sbuf_reset(b);
}

/* A packer that writes into a fixed buffer (the head of a data reply). */
typedef struct rkb_fixbuf {
    uint8_t *p;
    size_t len, cap;
} rkb_fixbuf;

static int rkb__fixbuf_write(void *data, const char *buf, size_t len)
{
    rkb_fixbuf *f = data;
    if (len > f->cap - f->len)
        return -1;
    memcpy(f->p + f->len, buf, len);
    f->len += len;
    return 0;
}

static void rkb__reply_error(rkb *b, rkb_entry *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void rkb__reply_error(rkb *b, rkb_entry *e, int code, const char *fmt, ...)
{
    char msg[RKB_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    RKB_INC(b, errors);
    switch (code) {
    case RKB_E_BUSY: RKB_INC(b, busy); break;
    case RKB_E_TOO_LARGE: RKB_INC(b, too_large); break;
    case RKB_E_MALFORMED: RKB_INC(b, malformed); break;
    case RKB_E_SHUTTING_DOWN: RKB_INC(b, shutting_down); break;
    case RKB_E_DEVICE_FAULT: RKB_INC(b, device_fault); break;
    case RKB_E_INTERNAL:
        RKB_INC(b, internal);
        rkb_log(RKB_LOG_ERROR, "INTERNAL error answering id %" PRIu64 " (op %s): %s", e->req.id,
                rkb_op_name(e->req.op), msg);
        break;
    default: break;
    }
    rkb__sbuf_reset(b);
    rkb_reply_error(&b->pk, e->req.has_id, e->req.id, code, msg);
    rkb__send_reply(b, e);
}

static void rkb__pack_str(msgpack_packer *pk, const char *s)
{
    size_t n = strlen(s);
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

static void rkb__pack_kv_uint(msgpack_packer *pk, const char *k, uint64_t v)
{
    rkb_pack_key(pk, k);
    msgpack_pack_uint64(pk, v);
}

static void rkb__pack_kernel(rkb *b)
{
    msgpack_packer *pk = &b->pk;
    rkb_pack_key(pk, "kernel");
    msgpack_pack_map(pk, 3);
    rkb__pack_kv_uint(pk, "grid", b->info.grid);
    rkb__pack_kv_uint(pk, "block", b->info.block);
    rkb__pack_kv_uint(pk, "smem", b->info.smem);
}

static void rkb__reply_status(rkb *b, rkb_entry *e)
{
    msgpack_packer *pk = &b->pk;
    rk_stats st;
    rk_runtime_stats(b->rt, &st);
    /* another thread may have relaunched the kernel */
    rk_runtime_info(b->rt, &b->info);
    /* every I/O thread's counters (one thread unless --io-threads > 1) */
    rkb_counters n = {0};
    uint64_t inflight = 0, parked = 0;
    rkb_shared *sh = b->sh;
    for (int i = 0; i <= sh->n_workers; i++) {
        rkb *w = i < sh->n_workers ? sh->workers[i] : sh->front;
        if (!w)
            continue;
        n.requests += RKB_LD(w->n.requests);
        n.replies += RKB_LD(w->n.replies);
        n.errors += RKB_LD(w->n.errors);
        n.busy += RKB_LD(w->n.busy);
        n.too_large += RKB_LD(w->n.too_large);
        n.malformed += RKB_LD(w->n.malformed);
        n.shutting_down += RKB_LD(w->n.shutting_down);
        n.device_fault += RKB_LD(w->n.device_fault);
        n.internal += RKB_LD(w->n.internal);
        n.parked_total += RKB_LD(w->n.parked_total);
        n.dropped_replies += RKB_LD(w->n.dropped_replies);
        n.unroutable += RKB_LD(w->n.unroutable);
        inflight += RKB_LD(w->n_inflight);
        parked += RKB_LD(w->n_parked);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    rkb__sbuf_reset(b);
    rkb_reply_begin_ok(pk, e->req.has_id, e->req.id, 8);
    rkb_pack_key(pk, "backend");
    rkb__pack_str(pk, b->info.backend_name);
    rkb_pack_key(pk, "backend_why");
    rkb__pack_str(pk, b->info.why);
    rkb_pack_key(pk, "device");
    if (b->info.has_device) {
        char cc[16];
        snprintf(cc, sizeof cc, "%d.%d", b->info.cc_major, b->info.cc_minor);
        msgpack_pack_map(pk, 3);
        rkb_pack_key(pk, "name");
        rkb__pack_str(pk, b->info.device_name);
        rkb__pack_kv_uint(pk, "sm_count", (uint64_t)b->info.sm_count);
        rkb_pack_key(pk, "cc");
        rkb__pack_str(pk, cc);
    } else {
        msgpack_pack_nil(pk);
    }
    rkb__pack_kernel(b);
    rkb_pack_key(pk, "limits");
    msgpack_pack_map(pk, 3);
    rkb__pack_kv_uint(pk, "max_grid", b->info.max_grid);
    rkb__pack_kv_uint(pk, "max_block", b->info.max_block);
    rkb__pack_kv_uint(pk, "max_smem", b->info.max_smem);
    rkb_pack_key(pk, "endpoints");
    rkb__pack_str(pk, b->sh->endpoints);
    rkb_pack_key(pk, "ring");
    msgpack_pack_map(pk, 3);
    rkb__pack_kv_uint(pk, "p50_ns", sh->ring_p50_ns);
    rkb__pack_kv_uint(pk, "p99_ns", sh->ring_p99_ns);
    rkb__pack_kv_uint(pk, "count", sh->ring_count);
    rkb_pack_key(pk, "counters");
    msgpack_pack_map(pk, 26);
    /* this request is counted, its reply is not yet */
    rkb__pack_kv_uint(pk, "requests", n.requests);
    rkb__pack_kv_uint(pk, "replies", n.replies);
    rkb__pack_kv_uint(pk, "errors", n.errors);
    rkb__pack_kv_uint(pk, "restarts", st.restarts);
    rkb__pack_kv_uint(pk, "busy", n.busy);
    rkb__pack_kv_uint(pk, "too_large", n.too_large);
    rkb__pack_kv_uint(pk, "malformed", n.malformed);
    rkb__pack_kv_uint(pk, "shutting_down", n.shutting_down);
    rkb__pack_kv_uint(pk, "device_fault", n.device_fault);
    rkb__pack_kv_uint(pk, "internal", n.internal);
    rkb__pack_kv_uint(pk, "in_flight", inflight);
    rkb__pack_kv_uint(pk, "queued", parked);
    rkb__pack_kv_uint(pk, "queued_total", n.parked_total);
    rkb__pack_kv_uint(pk, "dropped_replies", n.dropped_replies);
    rkb__pack_kv_uint(pk, "unroutable", n.unroutable);
    rkb__pack_kv_uint(pk, "ring_requests", st.requests);
    rkb__pack_kv_uint(pk, "ring_replies", st.replies);
    rkb__pack_kv_uint(pk, "ring_errors", st.errors);
    rkb__pack_kv_uint(pk, "arena_used", st.arena_used);
    rkb__pack_kv_uint(pk, "arena_peak", st.arena_peak);
    rkb__pack_kv_uint(pk, "max_message_bytes", b->cfg->max_message_bytes);
    rkb__pack_kv_uint(pk, "window", b->cfg->rk.actor_window);
    rkb__pack_kv_uint(pk, "io_threads", (uint64_t)(sh->n_workers));
    rkb__pack_kv_uint(pk, "zmq_io_threads", (uint64_t)b->cfg->zmq_io_threads);
    /* the whole process (I/O threads, ZeroMQ's threads, the CPU backend's
     * worker): rk-bench bridge divides its growth by the messages */
    rkb__pack_kv_uint(pk, "cpu_user_us",
                      (uint64_t)ru.ru_utime.tv_sec * 1000000 + (uint64_t)ru.ru_utime.tv_usec);
    rkb__pack_kv_uint(pk, "cpu_sys_us",
                      (uint64_t)ru.ru_stime.tv_sec * 1000000 + (uint64_t)ru.ru_stime.tv_usec);
    rkb__send_reply(b, e);
}

static bool rkb__is_launch_error(int rc)
{
    rc = rc < 0 ? -rc : rc;
    return rc == RK_EBLOCK || rc == RK_ESMEM || rc == RK_EGRID || rc == RK_ENOCOOP ||
           rc == RK_EINVAL;
}

static void rkb__do_launch(rkb *b, rkb_entry *e)
{
    uint64_t g = e->req.u.launch.grid, bl = e->req.u.launch.block, sm = e->req.u.launch.smem;
    if (g > UINT32_MAX || bl > UINT32_MAX || sm > UINT32_MAX) {
        const char *what = g > UINT32_MAX ? "grid" : bl > UINT32_MAX ? "block" : "smem";
        uint64_t v = g > UINT32_MAX ? g : bl > UINT32_MAX ? bl : sm;
        rkb__reply_error(b, e, RKB_E_LAUNCH_INVALID, "%s %" PRIu64 " exceeds %u", what, v,
                         UINT32_MAX);
        return;
    }
    int rc = rk_runtime_relaunch(b->rt, (uint32_t)g, (uint32_t)bl, (uint32_t)sm);
    if (rc) {
        const char *d = rk_last_detail();
        if (rkb__is_launch_error(rc))
            rkb__reply_error(b, e, RKB_E_LAUNCH_INVALID, "%s", d[0] ? d : rk_strerror(rc));
        else if (-rc == RK_EDEVICE)
            rkb__reply_error(b, e, RKB_E_DEVICE_FAULT, "relaunch failed: %s", d[0] ? d : rk_strerror(rc));
        else
            rkb__reply_error(b, e, RKB_E_INTERNAL, "relaunch failed (%s): %s", rk_err_name(rc), d);
        return;
    }
    rk_runtime_info(b->rt, &b->info);
    rkb_log(RKB_LOG_INFO, "launch: kernel now grid %u block %u smem %u on the %s backend",
            b->info.grid, b->info.block, b->info.smem, b->info.backend_name);
    rkb__sbuf_reset(b);
    rkb_reply_begin_ok(&b->pk, e->req.has_id, e->req.id, 2);
    rkb_pack_key(&b->pk, "backend");
    rkb__pack_str(&b->pk, b->info.backend_name);
    rkb__pack_kernel(b);
    rkb__send_reply(b, e);
}

/* Maps a runtime error of a send or a reply status onto the protocol. */
static void rkb__reply_rk_error(rkb *b, rkb_entry *e, int rc, const char *detail)
{
    int c = rc < 0 ? -rc : rc;
    const char *d = detail && detail[0] ? detail : rk_strerror(rc);
    switch (c) {
    case RK_EDEVICE:
    case RK_ENODEV:
    case RK_ESELFTEST:
        rkb__reply_error(b, e, RKB_E_DEVICE_FAULT, "the %s backend failed with request %s in flight: %s",
                         b->info.backend_name, rkb_op_name(e->req.op), d);
        break;
    case RK_ECLOSED:
        rkb__reply_error(b, e, RKB_E_SHUTTING_DOWN, "the bridge is shutting down: %s", d);
        break;
    case RK_EMSGSIZE:
        rkb__reply_error(b, e, RKB_E_TOO_LARGE, "%s", d);
        break;
    case RK_EINVAL:
        rkb__reply_error(b, e, RKB_E_INVALID_ARGUMENT, "%s", d);
        break;
    default:
        rkb__reply_error(b, e, RKB_E_INTERNAL, "runtime error %s: %s", rk_err_name(rc), d);
        break;
    }
}

/* Tries to put e into the ring. Returns 0 (in flight), 1 (no room now:
 * park or keep parked) or -1 (answered with an error; free e). */
static int rkb__admit(rkb *b, int32_t idx)
{
    rkb_entry *e = &b->pool[idx];
    rk_iov iov[2];
    int n;
    uint16_t type;
    if (e->req.op == RKB_OP_ECHO) {
        type = RK_OP_ECHO;
        iov[0].base = e->req.u.echo.data.ptr;
        iov[0].len = e->req.u.echo.data.len;
        n = 1;
    } else {
        type = RK_OP_VADD;
        iov[0].base = e->req.u.vadd.a.ptr;
        iov[0].len = e->req.u.vadd.a.len;
        iov[1].base = e->req.u.vadd.b.ptr;
        iov[1].len = e->req.u.vadd.b.len;
        n = 2;
    }
    uint64_t id;
    int rc = rk_actor_sendv(b->act, type, iov, n, 0, &id, 0);
    if (rc == 0) {
        e->rk_id = id;
        e->state = RKB_INFLIGHT;
        rkb__map_put(b, id, (uint32_t)idx);
        RKB_SET(b->n_inflight, b->n_inflight + 1);
        /* the payload is copied: give the frame back now */
        zmq_msg_close(&e->body);
        e->body_open = false;
        return 0;
    }
    if (rc == -RK_EBUSY || rc == -RK_ENOSPC || rc == -RK_ETIMEDOUT)
        return 1;
    rkb__reply_rk_error(b, e, rc, rk_last_detail());
    return -1;
}

static void rkb__park(rkb *b, int32_t idx)
{
    rkb_entry *e = &b->pool[idx];
    e->state = RKB_PARKED;
    e->deadline = rkb__now_ns() + (int64_t)b->cfg->admission_ms * 1000000;
    e->next = -1;
    if (b->park_tail >= 0)
        b->pool[b->park_tail].next = idx;
    else
        b->park_head = idx;
    b->park_tail = idx;
    RKB_SET(b->n_parked, b->n_parked + 1);
    RKB_INC(b, parked_total);
}

static int32_t rkb__unpark(rkb *b)
{
    int32_t i = b->park_head;
    b->park_head = b->pool[i].next;
    if (b->park_head < 0)
        b->park_tail = -1;
    RKB_SET(b->n_parked, b->n_parked - 1);
    return i;
}

/* Retries the parked FIFO in order; BUSY for those whose admission time
 * ran out; SHUTTING_DOWN for all of them once stopping. */
static int rkb__retry_parked(rkb *b)
{
    int progress = 0;
    int64_t now = 0;
    while (b->park_head >= 0) {
        int32_t idx = b->park_head;
        rkb_entry *e = &b->pool[idx];
        if (b->stopping) {
            rkb__unpark(b);
            rkb__reply_error(b, e, RKB_E_SHUTTING_DOWN,
                             "the bridge is shutting down; the request was still waiting for admission");
            rkb__entry_put(b, idx);
            progress++;
            continue;
        }
        int rc = rkb__admit(b, idx);
        if (rc == 1) {
            if (!now)
                now = rkb__now_ns();
            if (now < e->deadline)
                break; /* keep FIFO order: nothing behind it goes first */
            rkb__unpark(b);
            rkb__reply_error(b, e, RKB_E_BUSY,
                             "the bridge could not queue the request within the admission time of "
                             "%u ms (%u requests in flight, %u waiting)",
                             b->cfg->admission_ms, b->n_inflight, b->n_parked);
            rkb__entry_put(b, idx);
            progress++;
            continue;
        }
        rkb__unpark(b);
        if (rc < 0)
            rkb__entry_put(b, idx);
        else
            e->state = RKB_INFLIGHT;
        progress++;
    }
    return progress;
}

/* One reply out of the runtime. */
static void rkb__on_reply(rkb *b, rk_reply *r)
{
    int32_t idx = rkb__map_take(b, r->id);
    if (idx < 0) {
        rkb_log(RKB_LOG_ERROR, "INTERNAL: runtime reply id %" PRIu64 " matches no request", r->id);
        RKB_INC(b, internal);
        rk_reply_release(b->act, r);
        return;
    }
    RKB_SET(b->n_inflight, b->n_inflight - 1);
    rkb_entry *e = &b->pool[idx];
    if (r->status) {
        rkb__reply_rk_error(b, e, r->status, rk_strerror(r->status));
    } else {
        /* the head (map, v, id, ok, key, bin header) goes into a small
         * buffer: the constant parts packed at start-up, the id and the
         * bin header packed now; the payload is copied once, from the
         * runtime's reply straight into the frame ZeroMQ sends */
        uint8_t head[64];
        rkb_fixbuf fb = {head, 0, sizeof head};
        msgpack_packer hp;
        msgpack_packer_init(&hp, &fb, rkb__fixbuf_write);
        bool echo = e->req.op == RKB_OP_ECHO;
        if (e->req.has_id) {
            memcpy(head, b->pre, b->pre_len);
            fb.len = b->pre_len;
            msgpack_pack_uint64(&hp, e->req.id);
            memcpy(head + fb.len, echo ? b->suf_echo : b->suf_vadd,
                   echo ? b->suf_echo_len : b->suf_vadd_len);
            fb.len += echo ? b->suf_echo_len : b->suf_vadd_len;
        } else {
            rkb_reply_begin_ok(&hp, false, 0, 1);
            rkb_pack_key(&hp, echo ? "data" : "c");
        }
        msgpack_pack_bin(&hp, r->len);
        zmq_msg_t m;
        if (zmq_msg_init_size(&m, fb.len + r->len) != 0) {
            rk_reply_release(b->act, r);
            rkb__reply_error(b, e, RKB_E_INTERNAL, "out of memory for a reply of %zu B", r->len);
            rkb__entry_put(b, idx);
            return;
        }
        uint8_t *d = zmq_msg_data(&m);
        memcpy(d, head, fb.len);
        if (r->len)
            memcpy(d + fb.len, r->data, r->len);
        rk_reply_release(b->act, r);
        rkb__send_msg(b, e, &m);
        rkb__entry_put(b, idx);
        return;
    }
    rk_reply_release(b->act, r);
    rkb__entry_put(b, idx);
}

static int rkb__drain_replies(rkb *b)
{
    int n = 0;
    rk_reply r;
    while (b->n_inflight) {
        int rc = rk_actor_recv(b->act, &r, 0);
        if (rc == 0) {
            rkb__on_reply(b, &r);
            n++;
            continue;
        }
        if (rc != -RK_ETIMEDOUT && rc != -RK_EAGAIN) {
            rkb_log(RKB_LOG_ERROR, "the runtime failed (%s): %s", rk_err_name(rc), rk_last_detail());
            /* every request still owed comes back as a reply with that
             * status (rk_actor_recv's contract); if none does, answer them
             * here so that each request still gets exactly one reply */
            if (rc != -RK_EDEVICE || b->n_inflight == 0)
                break;
            for (uint32_t i = 0; i < b->pool_n; i++)
                if (b->pool[i].state == RKB_INFLIGHT) {
                    rkb__map_take(b, b->pool[i].rk_id);
                    RKB_SET(b->n_inflight, b->n_inflight - 1);
                    rkb__reply_rk_error(b, &b->pool[i], rc, rk_last_detail());
                    rkb__entry_put(b, (int32_t)i);
                }
        }
        break;
    }
    return n;
}

/* Receives one message from b->router (the client ROUTER: direct mode or
 * the frontend): the envelope frames go to env[0..*n_env), the first body
 * frame to *body, further body frames are closed (but counted in *n_body).
 * Nothing is written when no message is ready. Returns 1 (a message), 0
 * (none ready) or -1 (a message read and dropped: its envelope is deeper
 * than RKB_ENV_MAX, so no reply could be routed back). */
static inline __attribute__((always_inline)) int
rkb__recv_request(rkb *b, zmq_msg_t *env, uint8_t *n_env, zmq_msg_t *body, uint32_t *n_body)
{
    zmq_msg_t fr[RKB_FRAMES_MAX];
    int nf = 0, extra = 0;
    zmq_msg_init(&fr[0]);
    if (zmq_msg_recv(&fr[0], b->router, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&fr[0]);
        if (errno != EAGAIN && errno != EINTR)
            rkb_log(RKB_LOG_ERROR, "zmq_msg_recv: %s", zmq_strerror(errno));
        return 0;
    }
    nf = 1;
    int more = zmq_msg_more(&fr[0]);
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, b->router, 0) < 0) { /* parts of a message arrive together */
            zmq_msg_close(&m);
            break;
        }
        more = zmq_msg_more(&m);
        if (nf < RKB_FRAMES_MAX)
            fr[nf++] = m;
        else
            zmq_msg_close(&m), extra++;
    }
    RKB_INC(b, requests);
    /* envelope: the routing id, then everything up to and including the
     * first empty frame that is not the last frame (REQ's delimiter) */
    int env_n = 1;
    for (int k = 1; k < nf - 1; k++)
        if (zmq_msg_size(&fr[k]) == 0) {
            env_n = k + 1;
            break;
        }
    if (env_n > RKB_ENV_MAX) {
        rkb_log(RKB_LOG_WARN, "dropped a message with %d envelope frames (at most %d)", env_n,
                RKB_ENV_MAX);
        RKB_INC(b, unroutable);
        for (int k = 0; k < nf; k++)
            zmq_msg_close(&fr[k]);
        return -1;
    }
    for (int k = 0; k < env_n; k++)
        env[k] = fr[k]; /* moves: the caller owns them now */
    *n_env = (uint8_t)env_n;
    if (nf > env_n)
        *body = fr[env_n];
    for (int k = env_n + 1; k < nf; k++)
        zmq_msg_close(&fr[k]);
    *n_body = (uint32_t)(nf - env_n + extra);
    return 1;
}

/* Answers or admits the request whose frames were just put into entry idx
 * (taken from the pool): envelope in e->env, and when n_body > 0 the first
 * body frame in e->body. The same for direct mode and a worker. */
static inline __attribute__((always_inline)) int rkb__on_request(rkb *b, int32_t idx,
                                                                 uint32_t n_body)
{
    rkb_entry *e = &b->pool[idx];
    memset(&e->req, 0, sizeof e->req);
    e->body_open = n_body > 0;
    if (n_body != 1) {
        if (n_body > 1) {
            uint64_t id;
            if (rkb_peek_id(zmq_msg_data(&e->body), zmq_msg_size(&e->body), &id) == 0)
                e->req.has_id = true, e->req.id = id;
        }
        rkb__reply_error(b, e, RKB_E_MALFORMED,
                         "the request has %u body frames; the protocol allows exactly one", n_body);
        rkb__entry_put(b, idx);
        return 1;
    }
    if (b->stopping) {
        uint64_t id;
        if (rkb_peek_id(zmq_msg_data(&e->body), zmq_msg_size(&e->body), &id) == 0)
            e->req.has_id = true, e->req.id = id;
        rkb__reply_error(b, e, RKB_E_SHUTTING_DOWN, "the bridge is shutting down");
        rkb__entry_put(b, idx);
        return 1;
    }
    rkb_error err;
    int rc = rkb_decode_request(zmq_msg_data(&e->body), zmq_msg_size(&e->body), &b->lim, &e->req,
                                &b->dec, &err);
    if (rc) {
        rkb__reply_error(b, e, err.code, "%s", err.message);
        rkb__entry_put(b, idx);
        return 1;
    }
    switch (e->req.op) {
    case RKB_OP_PING:
        rkb__sbuf_reset(b);
        rkb_reply_begin_ok(&b->pk, e->req.has_id, e->req.id, 1);
        rkb_pack_key(&b->pk, "backend");
        rkb__pack_str(&b->pk, b->info.backend_name);
        rkb__send_reply(b, e);
        rkb__entry_put(b, idx);
        return 1;
    case RKB_OP_STATUS:
        rkb__reply_status(b, e);
        rkb__entry_put(b, idx);
        return 1;
    case RKB_OP_LAUNCH:
        rkb__do_launch(b, e);
        rkb__entry_put(b, idx);
        return 1;
    case RKB_OP_ECHO:
    case RKB_OP_VADD:
        break;
    default:
        rkb__reply_error(b, e, RKB_E_INTERNAL, "decoder returned op %d", (int)e->req.op);
        rkb__entry_put(b, idx);
        return 1;
    }
    /* FIFO: behind whatever already waits */
    if (b->park_head < 0) {
        rc = rkb__admit(b, idx);
        if (rc == 0)
            return 1;
        if (rc < 0) {
            rkb__entry_put(b, idx);
            return 1;
        }
    }
    rkb__park(b, idx);
    return 1;
}

/* Takes one request (from the ROUTER in direct mode, from the request ring
 * in a worker) into a fresh entry and answers or admits it. The caller has
 * checked that an entry is free. Returns 1 when a message was taken, 0 when
 * none was ready. */
static int rkb__read_one(rkb *b)
{
    int32_t idx = b->free_head;
    if (idx < 0)
        return 0;
    rkb_entry *e = &b->pool[idx];
    uint32_t n_body;
    if (!b->worker) {
        /* straight into the free entry; it is taken only once filled */
        int r = rkb__recv_request(b, e->env, &e->n_env, &e->body, &n_body);
        if (r <= 0)
            return r < 0;
    } else {
        rkb_item *it = rkb_spsc_sc_peek(b->reqq);
        if (!it)
            return 0;
        /* move the frames out; the slot goes back to the frontend */
        e->n_env = it->n_env;
        for (int k = 0; k < it->n_env; k++)
            e->env[k] = it->env[k];
        n_body = it->n_body;
        if (n_body)
            e->body = it->body;
        rkb_spsc_sc_release(b->reqq);
    }
    rkb__entry_get(b);
    return rkb__on_request(b, idx, n_body);
}

/* ---- start-up and the loop ------------------------------------------- */

static int rkb__open_socket(rkb *b, rkb_zap *zap)
{
    const rkb_config *c = b->cfg;
    b->router = zmq_socket(b->ctx, ZMQ_ROUTER);
    if (!b->router) {
        fprintf(stderr, "rk-bridge: zmq_socket: %s\n", zmq_strerror(errno));
        return -1;
    }
    int one = 1, linger = 2000;
    zmq_setsockopt(b->router, ZMQ_SNDHWM, &c->sndhwm, sizeof c->sndhwm);
    zmq_setsockopt(b->router, ZMQ_RCVHWM, &c->rcvhwm, sizeof c->rcvhwm);
    zmq_setsockopt(b->router, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    zmq_setsockopt(b->router, ZMQ_LINGER, &linger, sizeof linger);
    /* frames far above the limit drop the connection instead of being
     * buffered whole: up to twice the limit still gets a TOO_LARGE reply */
    int64_t maxmsg = (int64_t)c->max_message_bytes * 2 + (1 << 20);
    zmq_setsockopt(b->router, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    if (c->curve_secret_file) {
        char sec[41];
        if (rkb_key_read(c->curve_secret_file, sec))
            return -1;
        if (rkb__zap_start(zap, b->ctx, c->curve_allow_dir ? c->curve_allow_dir : "/nonexistent"))
            return -1;
        int srv = 1;
        zmq_setsockopt(b->router, ZMQ_CURVE_SERVER, &srv, sizeof srv);
        if (zmq_setsockopt(b->router, ZMQ_CURVE_SECRETKEY, sec, 40) != 0) {
            fprintf(stderr, "rk-bridge: CURVE unavailable: %s\n", zmq_strerror(errno));
            return -1;
        }
        char pub[41];
        zmq_curve_public(pub, sec);
        rkb_log(RKB_LOG_INFO, "CURVE on: server public key %s", pub);
        explicit_bzero(sec, sizeof sec);
    }
    size_t off = 0;
    for (int i = 0; i < c->n_binds; i++) {
        if (zmq_bind(b->router, c->binds[i]) != 0) {
            fprintf(stderr, "rk-bridge: cannot bind %s: %s\n", c->binds[i], zmq_strerror(errno));
            return -1;
        }
        char last[512];
        size_t sz = sizeof last;
        if (zmq_getsockopt(b->router, ZMQ_LAST_ENDPOINT, last, &sz) != 0)
            snprintf(last, sizeof last, "%s", c->binds[i]);
        off += (size_t)snprintf(b->sh->endpoints + off, off < sizeof b->sh->endpoints ? sizeof b->sh->endpoints - off : 0,
                                "%s%s", i ? " " : "", last);
        if (off >= sizeof b->sh->endpoints)
            off = sizeof b->sh->endpoints - 1;
    }
    return 0;
}

/* A start-up configuration that the CUDA backend refused as a launch
 * error is not silently served by the CPU fallback: the operator asked for
 * a kernel shape that cannot run. */
static const char *rkb__launch_refusal(const rk_info *in)
{
    static const char *names[] = {"RK_EBLOCK", "RK_ESMEM", "RK_EGRID"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strstr(in->why, names[i]))
            return names[i];
    return NULL;
}

/* ---- start-up: the ring's own round trip -------------------------------- */

static int rkb__cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* 64-byte echoes through a temporary actor, one at a time: the p50/p99 of
 * the ring round trip on this backend, before any client is served. */
static void rkb__ring_calibrate(rkb_shared *sh)
{
    enum { WARM = 2000, N = 10000 };
    rk_actor *a;
    uint64_t *t = malloc(N * sizeof *t);
    if (!t || rk_actor_open(sh->rt, &a) != 0) {
        rkb_log(RKB_LOG_WARN, "ring round-trip calibration skipped: %s", t ? rk_last_detail() : "no memory");
        free(t);
        return;
    }
    uint8_t msg[64];
    memset(msg, 0x5a, sizeof msg);
    int n = 0;
    for (int i = 0; i < WARM + N; i++) {
        rk_reply r;
        int64_t t0 = rkb__now_ns();
        if (rk_actor_call(a, RK_OP_ECHO, msg, sizeof msg, 0, &r, 1000) != 0)
            break;
        int64_t t1 = rkb__now_ns();
        rk_reply_release(a, &r);
        if (i >= WARM)
            t[n++] = (uint64_t)(t1 - t0);
    }
    rk_actor_close(a);
    if (n == N) {
        qsort(t, N, sizeof *t, rkb__cmp_u64);
        sh->ring_p50_ns = t[N / 2];
        sh->ring_p99_ns = t[N * 99 / 100];
        sh->ring_count = N;
    } else {
        rkb_log(RKB_LOG_WARN, "ring round-trip calibration stopped after %d echoes: %s", n, rk_last_detail());
    }
    free(t);
}

/* ---- one I/O thread's state ------------------------------------------- */

static int rkb__io_init(rkb *b)
{
    const rkb_config *c = b->cfg;
    b->free_head = b->park_head = b->park_tail = -1;
    b->sfd = -1;
    rkb_decode_state_init(&b->dec);
    msgpack_sbuffer_init(&b->sbuf);
    msgpack_packer_init(&b->pk, &b->sbuf, msgpack_sbuffer_write);
    rk_runtime_info(b->rt, &b->info);
    int rc = rk_actor_open(b->rt, &b->act);
    if (rc) {
        fprintf(stderr, "rk-bridge: rk_actor_open: %s\n", rk_last_detail());
        return -1;
    }
    b->pool_n = c->rk.actor_window + c->queue;
    b->pool = calloc(b->pool_n, sizeof *b->pool);
    uint32_t mcap = 1;
    while (mcap < 2 * c->rk.actor_window)
        mcap <<= 1;
    b->map_key = calloc(mcap, sizeof *b->map_key);
    b->map_val = calloc(mcap, sizeof *b->map_val);
    b->map_mask = mcap - 1;
    if (!b->pool || !b->map_key || !b->map_val) {
        fprintf(stderr, "rk-bridge: out of memory for %u request entries\n", b->pool_n);
        return -1;
    }
    for (int32_t i = (int32_t)b->pool_n - 1; i >= 0; i--) {
        b->pool[i].next = b->free_head;
        b->free_head = i;
    }
    b->n_free = b->pool_n;
    b->lim = RKB_LIMITS_DEFAULT;
    b->lim.max_frame = c->max_message_bytes;
    /* the constant parts of a data reply (see rkb__on_reply) */
    rkb_fixbuf fb = {b->pre, 0, sizeof b->pre};
    msgpack_packer pk;
    msgpack_packer_init(&pk, &fb, rkb__fixbuf_write);
    msgpack_pack_map(&pk, 4);
    rkb_pack_key(&pk, "v");
    msgpack_pack_uint8(&pk, RKB_PROTOCOL_VERSION);
    rkb_pack_key(&pk, "id");
    b->pre_len = (uint8_t)fb.len;
    fb = (rkb_fixbuf){b->suf_echo, 0, sizeof b->suf_echo};
    rkb_pack_key(&pk, "ok");
    msgpack_pack_true(&pk);
    rkb_pack_key(&pk, "data");
    b->suf_echo_len = (uint8_t)fb.len;
    fb = (rkb_fixbuf){b->suf_vadd, 0, sizeof b->suf_vadd};
    rkb_pack_key(&pk, "ok");
    msgpack_pack_true(&pk);
    rkb_pack_key(&pk, "c");
    b->suf_vadd_len = (uint8_t)fb.len;
    return 0;
}

/* After the sockets are closed: entries still holding frames (a drain
 * that timed out) are freed, then the actor. */
static void rkb__io_fini(rkb *b)
{
    for (uint32_t i = 0; b->pool && i < b->pool_n; i++)
        if (b->pool[i].state != RKB_FREE)
            rkb__entry_put(b, (int32_t)i);
    rkb_decode_state_destroy(&b->dec);
    msgpack_sbuffer_destroy(&b->sbuf);
    rk_actor_close(b->act);
    b->act = NULL;
    free(b->pool);
    free(b->map_key);
    free(b->map_val);
    b->pool = NULL;
    b->map_key = NULL;
    b->map_val = NULL;
}

/* Direct mode: reads the signalfd (non-blocking). */
static void rkb__check_signal(rkb *b)
{
    struct signalfd_siginfo si;
    if (b->sfd >= 0 && read(b->sfd, &si, sizeof si) == (ssize_t)sizeof si && !b->stopping) {
        b->stopping = true;
        b->stop_at = rkb__now_ns();
        rkb_log(RKB_LOG_INFO, "signal %u: shutting down (%u in flight, %u waiting)", si.ssi_signo,
                b->n_inflight, b->n_parked);
    }
}

/* ---- sleeping and waking (--io-threads > 1) -------------------------------
 * The frontend and the workers hand items over through rings (spsc.h) with
 * no system call while both are awake. A thread with nothing to do spins
 * for the spin window, then blocks on its eventfd, but only after saying
 * so: the classic Dekker handshake, a seq_cst fence on each side.
 *   sleeper  (rkb__sleep_prepare): sleeping = 1; fence S1; re-check rings;
 *                                  poll(eventfd)
 *   producer (rkb__wake):          publish (release store of tail);
 *                                  fence P1; if (sleeping) write(eventfd)
 * S1 and P1 are ordered in the single total order of seq_cst operations:
 * when S1 comes first, the producer's load of `sleeping` after P1 reads 1
 * and it writes the eventfd; when P1 comes first, the sleeper's re-check
 * after S1 reads the published tail and it does not block. Either way no
 * item waits for a thread that sleeps. A producer that reads 1 swaps it to
 * 0, so one sleep costs one write even with several producers (a spurious
 * write only makes the next poll return at once). */

static void rkb__sleep_prepare(rkb_waker *w)
{
    __atomic_store_n(&w->sleeping, 1, __ATOMIC_SEQ_CST);
    /* S1: pairs with P1 in rkb__wake and rkb__front_wake_workers */
    rkb__fence_seq_cst();
}

/* After the poll, or instead of it when the re-check found work. readable:
 * the poll saw the eventfd (read it to re-arm it). */
static void rkb__sleep_end(rkb_waker *w, bool readable)
{
    /* relaxed: nothing is published through this store; a producer that
     * still reads 1 only writes the eventfd once too often */
    rkb__st_relaxed(&w->sleeping, 0);
    uint64_t v;
    if (readable && read(w->efd, &v, sizeof v) < 0 && errno != EAGAIN)
        rkb_log(RKB_LOG_ERROR, "reading an eventfd: %s", strerror(errno));
}

/* The producer's half: the caller has published its items and then
 * executed P1 (rkb__fence_seq_cst). */
static void rkb__wake_after_fence(rkb_waker *w)
{
    /* the exchange only elects one waker; the eventfd's write/read
     * carry no data (the ring indices do) */
    if (rkb__ld_relaxed(&w->sleeping) && __atomic_exchange_n(&w->sleeping, 0, __ATOMIC_RELAXED)) {
        uint64_t one = 1;
        if (write(w->efd, &one, sizeof one) != (ssize_t)sizeof one)
            rkb_log(RKB_LOG_ERROR, "writing an eventfd: %s", strerror(errno));
    }
}

static void rkb__wake(rkb_waker *w)
{
    rkb__fence_seq_cst(); /* P1: the tail stores above before the load of sleeping */
    rkb__wake_after_fence(w);
}

/* A worker that pushed replies in this burst tells the frontend. */
static void rkb__wake_front(rkb *b)
{
    b->owe_wake = false;
    rkb__wake(&b->sh->front->wk);
}

/* The worker's reply ring is full. The frontend empties the rings on every
 * pass and never waits for a worker, so room comes soon; tell it first (it
 * may be asleep: the replies of this burst were not announced yet). */
static rkb_item *rkb__wait_reply_room(rkb *b)
{
    rkb__wake_front(b);
    rkb_item *it;
    for (int k = 0; !(it = rkb_spsc_sp_slot(b->repq)); k++) {
        if (k < 64)
            rkb__relax();
        else
            sched_yield();
    }
    return it;
}

/* A worker blocks on its eventfd (tmo ms, -1 = until woken). */
static void rkb__worker_sleep(rkb *b, long tmo, bool can_read)
{
    rkb__sleep_prepare(&b->wk);
    /* the re-check after S1: a request the frontend published before P1 */
    if (can_read && rkb_spsc_sc_peek(b->reqq)) {
        rkb__sleep_end(&b->wk, false);
        return;
    }
    struct pollfd p = {b->wk.efd, POLLIN, 0};
    int np = poll(&p, 1, (int)tmo);
    if (np < 0 && errno != EINTR)
        rkb_log(RKB_LOG_ERROR, "poll: %s", strerror(errno));
    rkb__sleep_end(&b->wk, np > 0 && (p.revents & POLLIN));
}

/* Spin while replies are owed only where there are cores to spare: on 2
 * cores a spinning bridge holds the core the CPU worker or ZeroMQ's I/O
 * thread needs; on a bigger machine each sched_yield round costs a system
 * call that a reply 2-3 us away does not need. */
static int64_t rkb__spin_ns(void)
{
    return getenv("RKB_SPIN_NS") ? atoll(getenv("RKB_SPIN_NS"))
           : sysconf(_SC_NPROCESSORS_ONLN) > 4 ? 100000 : 0;
}

/* The request->reply loop of one thread: the only thread in direct mode,
 * or one worker (its requests then come from its ring, its replies go to
 * the other ring, and the stop comes from sh->stopping). */
static void rkb__loop(rkb *b)
{
    const rkb_config *c = b->cfg;
    rkb_shared *sh = b->sh;
    zmq_pollitem_t items[2] = {{b->router, 0, ZMQ_POLLIN, 0}, {NULL, b->sfd, ZMQ_POLLIN, 0}};
    int64_t last_progress = rkb__now_ns(), last_sig = last_progress;
    /* while replies are owed: spin (pause) this long, then yield, then poll */
    int64_t spin_ns = rkb__spin_ns();
    int64_t yield_ns = getenv("RKB_YIELD_NS") ? atoll(getenv("RKB_YIELD_NS")) : 2000000;
    for (;;) {
        int progress = rkb__drain_replies(b);
        if (b->n_parked)
            progress += rkb__retry_parked(b);
        /* a worker announces its replies before the (longer) read burst */
        if (b->owe_wake)
            rkb__wake_front(b);
        /* read while a request has somewhere to go */
        for (int k = 0; k < 256 && b->n_free && b->n_parked < c->queue; k++) {
            if (!rkb__read_one(b))
                break;
            progress++;
        }
        int64_t now = rkb__now_ns();
        if (b->worker) {
            if (b->owe_wake)
                rkb__wake_front(b);
            /* acquire: pairs with the release in rkb__stop_workers (stop_at) */
            if (!b->stopping && __atomic_load_n(&sh->stopping, __ATOMIC_ACQUIRE)) {
                b->stopping = true;
                b->stop_at = sh->stop_at;
            }
        } else if (progress && now - last_sig > 10000000) {
            /* a loaded bridge still notices a signal (every 10 ms) */
            last_sig = now;
            rkb__check_signal(b);
        }
        if (b->stopping) {
            bool grace_over = now >= b->stop_at + (int64_t)c->shutdown_grace_ms * 1000000;
            bool drain_over = now >= b->stop_at + (int64_t)c->drain_ms * 1000000;
            if (b->n_inflight == 0 && b->n_parked == 0 && grace_over)
                break;
            if (drain_over) {
                rkb_log(RKB_LOG_WARN, "shutdown: %u request(s) still in flight after %u ms; exiting",
                        b->n_inflight, c->drain_ms);
                break;
            }
        }
        if (progress) {
            last_progress = now;
            continue;
        }
        int64_t idle = now - last_progress;
        bool busy = b->n_inflight || b->n_parked;
        /* spin also for a while after the last request (not only while
         * replies are owed): a client that sends its next request right
         * after a reply (or a frontend handing one over) finds this thread
         * awake, not asleep in zmq_poll / on its eventfd (a wake-up costs
         * more than the whole relay) */
        if (idle < spin_ns) {
            for (int k = 0; k < 16; k++)
                rkb__relax();
            continue;
        }
        if (busy && idle < yield_ns) {
            sched_yield();
            continue;
        }
        long tmo = busy ? 1 : -1;
        if (b->stopping && !busy) {
            int64_t left = b->stop_at + (int64_t)c->shutdown_grace_ms * 1000000 - now;
            tmo = left > 0 ? (long)(left / 1000000) + 1 : 0;
        }
        /* stop reading when the queue is full: poll only the signal */
        bool can_read = b->n_free && b->n_parked < c->queue;
        if (b->worker) {
            rkb__worker_sleep(b, tmo, can_read);
            continue;
        }
        zmq_pollitem_t *it = can_read ? items : items + 1;
        int np = zmq_poll(it, can_read ? 2 : 1, tmo);
        if (np < 0 && errno != EINTR) {
            rkb_log(RKB_LOG_ERROR, "zmq_poll: %s", zmq_strerror(errno));
            break;
        }
        last_sig = now;
        rkb__check_signal(b);
    }
}

static void *rkb__worker_main(void *arg)
{
    rkb *w = arg;
    char name[16]; /* what top -H and perf show: which thread saturates */
    snprintf(name, sizeof name, "rkb-worker-%d", w->index);
    pthread_setname_np(pthread_self(), name);
    rkb__loop(w);
    /* release: pairs with the frontend's acquire of live == 0, after which
     * it owns both rings (every reply of this worker is published) */
    __atomic_sub_fetch(&w->sh->live, 1, __ATOMIC_RELEASE);
    rkb__wake(&w->sh->front->wk); /* it need not wait for its 10 ms poll */
    return NULL;
}

/* ---- the frontend (--io-threads > 1) -------------------------------------
 * Owns the client ROUTER and does only ZeroMQ work. It reads a request (all
 * its frames, split into envelope and body as in direct mode) straight into
 * the next slot of a worker's request ring, fill-first (rkb__front_requests);
 * when every ring is full it stops reading its ROUTER,
 * so back-pressure reaches the clients through ZeroMQ's high-water marks.
 * It sends every reply the workers push to their reply rings (envelope,
 * then body, ZMQ_DONTWAIT). Frames are moved, never copied. It counts
 * requests, replies, dropped_replies and unroutable, as the single thread
 * does in direct mode; the workers count the rest. */

/* Wakes the workers that got requests in this burst, if they sleep. */
static void rkb__front_wake_workers(rkb *f)
{
    /* P1 once for the burst: every tail store above before the loads of
     * `sleeping` below */
    rkb__fence_seq_cst();
    for (uint64_t m = f->wake_mask; m; m &= m - 1)
        rkb__wake_after_fence(&f->sh->workers[__builtin_ctzll(m)]->wk);
    f->wake_mask = 0;
}

static int rkb__front_replies(rkb *f)
{
    rkb_shared *sh = f->sh;
    int n = 0;
    for (int i = 0; i < sh->n_workers; i++) {
        rkb_spsc *q = sh->workers[i]->repq;
        rkb_item *it;
        for (int k = 0; k < 256 && (it = rkb_spsc_sc_peek(q)); k++, n++) {
            rkb__send_frames(f, it->env, it->n_env, &it->body);
            rkb_spsc_sc_release(q);
        }
    }
    return n;
}

static bool rkb__front_replies_ready(rkb *f)
{
    for (int i = 0; i < f->sh->n_workers; i++)
        if (rkb_spsc_sc_peek(f->sh->workers[i]->repq))
            return true;
    return false;
}

/* Requests the frontend gives one worker before it moves to the next. */
#define RKB_FILL 32

/* Reads up to 256 requests into the workers' rings; *room = false when
 * every ring was full. Fill-first, not round-robin: the current worker
 * takes requests until RKB_FILL of them wait in its ring, then the next
 * one does. Under light load every request goes to the same worker,
 * which is then awake (spinning) when the next one comes; handed round
 * the workers, each request found its worker asleep past the spin window
 * and paid an eventfd wake-up (measured on the H200 host: bridge echo p50
 * 8 us over raw ZeroMQ with 3 workers, 2 us with 1 thread). Under load the
 * workers get runs of RKB_FILL. */
static int rkb__front_requests(rkb *f, bool *room)
{
    rkb_shared *sh = f->sh;
    int nw = sh->n_workers, n = 0;
    while (n < 256) {
        int w = f->fill;
        rkb_item *it = NULL;
        for (int k = 0; k < nw; k++) {
            rkb_spsc *q = sh->workers[w]->reqq;
            if (rkb_spsc_sp_pending(q, RKB_FILL) < RKB_FILL && (it = rkb_spsc_sp_slot(q)))
                break;
            w = w + 1 == nw ? 0 : w + 1;
        }
        for (int k = 0; !it && k < nw; k++) {
            /* every worker has RKB_FILL or more waiting: any with room */
            if ((it = rkb_spsc_sp_slot(sh->workers[w]->reqq)))
                break;
            w = w + 1 == nw ? 0 : w + 1;
        }
        if (!it) {
            *room = false; /* back-pressure: leave the rest in the ROUTER */
            break;
        }
        int r = rkb__recv_request(f, it->env, &it->n_env, &it->body, &it->n_body);
        if (r == 0)
            break;
        n++;
        if (r < 0)
            continue; /* dropped and counted; the slot was not used */
        rkb_spsc_sp_commit(sh->workers[w]->reqq);
        f->wake_mask |= UINT64_C(1) << w;
        f->fill = w; /* stay with it (fill-first) */
    }
    return n;
}

/* Closes the frames of every item left in q; the caller is its only user. */
static void rkb__ring_discard(rkb_spsc *q)
{
    rkb_item *it;
    while (q && (it = rkb_spsc_sc_peek(q))) {
        for (int k = 0; k < it->n_env; k++)
            zmq_msg_close(&it->env[k]);
        if (it->n_body)
            zmq_msg_close(&it->body);
        rkb_spsc_sc_release(q);
    }
}

/* A signal or a failed start: the workers answer what they hold, stop. */
static void rkb__stop_workers(rkb_shared *sh)
{
    sh->stop_at = rkb__now_ns();
    /* release: pairs with the workers' acquire of stopping (stop_at) */
    __atomic_store_n(&sh->stopping, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < sh->n_workers; i++) {
        /* unconditionally (once): the eventfd stays readable until read */
        uint64_t one = 1;
        if (sh->workers[i]->wk.efd >= 0 &&
            write(sh->workers[i]->wk.efd, &one, sizeof one) != (ssize_t)sizeof one)
            rkb_log(RKB_LOG_ERROR, "waking worker %d failed: %s", i, strerror(errno));
    }
}

static void rkb__front_check_signal(rkb *f)
{
    struct signalfd_siginfo si;
    if (f->stopping || f->sfd < 0 || read(f->sfd, &si, sizeof si) != (ssize_t)sizeof si)
        return;
    f->stopping = true;
    rkb__stop_workers(f->sh);
    rkb_log(RKB_LOG_INFO, "signal %u: shutting down (%d I/O threads)", si.ssi_signo,
            f->sh->n_workers);
}

static void rkb__front_loop(rkb *f)
{
    rkb_shared *sh = f->sh;
    int64_t spin_ns = rkb__spin_ns();
    int64_t last_progress = rkb__now_ns(), last_sig = last_progress;
    for (;;) {
        bool room = true;
        int progress = rkb__front_replies(f);
        progress += rkb__front_requests(f, &room);
        if (f->wake_mask)
            rkb__front_wake_workers(f);
        /* acquire: pairs with each worker's release when it leaves; then
         * every reply is in a ring: send them all; requests no worker will
         * read are closed (a single thread leaves them in its socket) */
        if (f->stopping && __atomic_load_n(&sh->live, __ATOMIC_ACQUIRE) == 0) {
            while (rkb__front_replies(f))
                ;
            for (int i = 0; i < sh->n_workers; i++)
                rkb__ring_discard(sh->workers[i]->reqq);
            break;
        }
        int64_t now = rkb__now_ns();
        if (progress) {
            last_progress = now;
            if (now - last_sig > 10000000) { /* a loaded frontend still notices a signal */
                last_sig = now;
                rkb__front_check_signal(f);
            }
            continue;
        }
        if (now - last_progress < spin_ns) {
            for (int k = 0; k < 16; k++)
                rkb__relax();
            continue;
        }
        rkb__sleep_prepare(&f->wk);
        /* the re-check after S1: replies published, or a worker gone,
         * before that worker's P1 */
        if (rkb__front_replies_ready(f) ||
            (f->stopping && __atomic_load_n(&sh->live, __ATOMIC_ACQUIRE) == 0)) {
            rkb__sleep_end(&f->wk, false);
            continue;
        }
        zmq_pollitem_t items[3];
        int ni = 0;
        if (room)
            items[ni++] = (zmq_pollitem_t){f->router, 0, ZMQ_POLLIN, 0};
        int ei = ni;
        items[ni++] = (zmq_pollitem_t){NULL, f->wk.efd, ZMQ_POLLIN, 0};
        if (!f->stopping && f->sfd >= 0)
            items[ni++] = (zmq_pollitem_t){NULL, f->sfd, ZMQ_POLLIN, 0};
        /* stopping: look at `live` every 10 ms; every ring full: look for
         * room every 1 ms (taking a request wakes nobody; its reply does) */
        long tmo = f->stopping ? 10 : room ? -1 : 1;
        int np = zmq_poll(items, ni, tmo);
        int err = np < 0 ? errno : 0;
        rkb__sleep_end(&f->wk, np > 0 && (items[ei].revents & ZMQ_POLLIN));
        if (np < 0 && err != EINTR) {
            /* workers may wait for reply room: keep emptying the rings
             * until they are gone */
            rkb_log(RKB_LOG_ERROR, "zmq_poll: %s; stopping", zmq_strerror(err));
            if (!f->stopping) {
                f->stopping = true;
                rkb__stop_workers(sh);
            }
            usleep(1000);
        }
        last_sig = now;
        rkb__front_check_signal(f);
    }
}

/* ---- start-up ----------------------------------------------------------- */

/* An I/O thread's state: zeroed, aligned for its waker's line. */
static rkb *rkb__new(void)
{
    size_t sz = (sizeof(rkb) + RKB_SPSC_ALIGN - 1) & ~(size_t)(RKB_SPSC_ALIGN - 1);
    rkb *b = aligned_alloc(RKB_SPSC_ALIGN, sz);
    if (b) {
        memset(b, 0, sz);
        b->wk.efd = -1;
    }
    return b;
}

static rkb_spsc *rkb__ring_new(uint32_t entries)
{
    size_t sz = rkb_spsc_memsize(entries, sizeof(rkb_item));
    rkb_spsc *q = sz ? aligned_alloc(RKB_SPSC_ALIGN, sz) : NULL;
    if (q)
        rkb_spsc_init(q, entries, sizeof(rkb_item));
    return q;
}

/* Creates the worker's (or the frontend's) eventfd and a worker's rings. */
static int rkb__handoff_init(rkb *b, bool rings)
{
    b->wk.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (rings) {
        b->reqq = rkb__ring_new(RKB_REQ_RING);
        b->repq = rkb__ring_new(RKB_REP_RING);
    }
    if (b->wk.efd < 0 || (rings && (!b->reqq || !b->repq))) {
        fprintf(stderr, "rk-bridge: cannot set up the worker hand-off: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

/* --io-threads auto: one thread does everything where cores are few (a
 * frontend and workers would only take turns on them); with cores to
 * spare, workers decode, encode and drive the ring in parallel (H200
 * host, 16 cores, tcp, 8 clients x 128: 0.84 M msg/s with 1 thread, 1.43 M
 * with 2 workers, 1.53 M with 3; bridge/README.md) */
static int rkb__io_threads(const rkb_config *c)
{
    if (c->io_threads > 0)
        return c->io_threads;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 8 ? 3 : n > 4 ? 2 : 1;
}

int rkb_run(const rkb_config *c)
{
    rkb_shared *sh = calloc(1, sizeof *sh);
    int nw = rkb__io_threads(c);
    bool workers = nw > 1;
    rkb **ws = calloc((size_t)nw, sizeof *ws);
    rkb *front = workers ? rkb__new() : NULL;
    if (nw > 64) { /* main.c's limit; the frontend's wake_mask has 64 bits */
        fprintf(stderr, "rk-bridge: --io-threads %d exceeds 64\n", nw);
        free(sh);
        free(ws);
        free(front);
        return 1;
    }
    if (!sh || !ws || (workers && !front)) {
        free(sh);
        free(ws);
        free(front);
        return 1;
    }
    rkb_zap zap = {0};
    int exit_code = 1;
    int sfd = -1;
    int started = 0;
    rkb_log_level = c->log_level;
    sh->cfg = c;
    sh->workers = ws;
    sh->front = front;
    rk_config rkc = c->rk;
    if (rkc.max_actors < (uint32_t)nw + 2)
        rkc.max_actors = (uint32_t)nw + 2;
    rk_info info;

    int rc = rk_runtime_open(&sh->rt, &rkc);
    if (rc) {
        int code = rkb__is_launch_error(rc) && -rc != RK_EINVAL ? RKB_E_LAUNCH_INVALID : 0;
        if (code)
            fprintf(stderr, "rk-bridge: LAUNCH_INVALID: %s\n", rk_last_detail());
        else
            fprintf(stderr, "rk-bridge: cannot open the runtime (%s): %s\n", rk_err_name(rc),
                    rk_last_detail());
        exit_code = code ? 2 : 1;
        goto out;
    }
    rk_runtime_info(sh->rt, &info);
    const char *refusal = rkb__launch_refusal(&info);
    if (refusal) {
        fprintf(stderr, "rk-bridge: LAUNCH_INVALID: %s\n", info.why);
        exit_code = 2;
        goto out;
    }
    rkb__ring_calibrate(sh);
    sh->ctx = zmq_ctx_new();
    if (!sh->ctx) {
        fprintf(stderr, "rk-bridge: zmq_ctx_new: %s\n", zmq_strerror(errno));
        goto out;
    }
    if (c->zmq_io_threads > 1 && zmq_ctx_set(sh->ctx, ZMQ_IO_THREADS, c->zmq_io_threads) != 0)
        rkb_log(RKB_LOG_WARN, "ZMQ_IO_THREADS %d: %s", c->zmq_io_threads, zmq_strerror(errno));
    for (int i = 0; i < nw; i++) {
        ws[i] = rkb__new();
        if (!ws[i])
            goto out;
        sh->n_workers = i + 1;
        ws[i]->cfg = c;
        ws[i]->sh = sh;
        ws[i]->ctx = sh->ctx;
        ws[i]->rt = sh->rt;
        ws[i]->worker = workers;
        ws[i]->index = i;
        if (rkb__io_init(ws[i]) || (workers && rkb__handoff_init(ws[i], true)))
            goto out;
    }

    sigset_t ss;
    sigemptyset(&ss);
    sigaddset(&ss, SIGINT);
    sigaddset(&ss, SIGTERM);
    sfd = signalfd(-1, &ss, SFD_NONBLOCK | SFD_CLOEXEC);

    /* the client-facing ROUTER: the single thread's, or the frontend's */
    rkb *io = workers ? front : ws[0];
    if (workers) {
        front->cfg = c;
        front->sh = sh;
        front->ctx = sh->ctx;
        front->rt = sh->rt;
        front->index = -1;
    }
    io->sfd = sfd;
    if (rkb__open_socket(io, &zap))
        goto out;
    if (workers && rkb__handoff_init(front, false))
        goto out;

    char dev[200] = "none";
    if (info.has_device)
        snprintf(dev, sizeof dev, "%s (%d SMs, cc %d.%d)", info.device_name, info.sm_count,
                 info.cc_major, info.cc_minor);
    char threads[96] = "";
    if (workers || c->zmq_io_threads > 1)
        snprintf(threads, sizeof threads, "; %d I/O threads%s, %d ZeroMQ I/O threads", nw,
                 workers ? " behind a frontend" : "", c->zmq_io_threads);
    printf("rk-bridge %d.%d.%d: backend %s (%s); device %s; kernel grid %u block %u smem %u; "
           "rings %u x %u B, arena %zu B, window %u, max message %zu B; ring round trip p50 %.2f us, "
           "p99 %.2f us; %s%s; listening on %s\n",
           RK_VERSION_MAJOR, RK_VERSION_MINOR, RK_VERSION_PATCH, info.backend_name, info.why,
           dev, info.grid, info.block, info.smem, info.ring_slots, info.slot_size,
           info.arena_size, c->rk.actor_window, c->max_message_bytes,
           (double)sh->ring_p50_ns / 1e3, (double)sh->ring_p99_ns / 1e3,
           c->curve_secret_file ? "CURVE on" : "no encryption", threads, sh->endpoints);
    fflush(stdout);

    if (!workers) {
        rkb__loop(ws[0]);
    } else {
        __atomic_store_n(&sh->live, nw, __ATOMIC_RELAXED);
        for (; started < nw; started++)
            if (pthread_create(&ws[started]->thread, NULL, rkb__worker_main, ws[started]) != 0) {
                fprintf(stderr, "rk-bridge: cannot start I/O thread %d\n", started);
                __atomic_sub_fetch(&sh->live, nw - started, __ATOMIC_RELEASE);
                front->stopping = true;
                rkb__stop_workers(sh);
                break;
            }
        rkb__front_loop(front);
        for (int i = 0; i < started; i++)
            pthread_join(ws[i]->thread, NULL);
        started = 0;
    }
    {
        rkb_counters t = {0};
        for (int i = 0; i <= nw; i++) {
            rkb *w = i < nw ? ws[i] : front;
            if (!w)
                continue;
            t.requests += w->n.requests;
            t.replies += w->n.replies;
            t.errors += w->n.errors;
        }
        rkb_log(RKB_LOG_INFO, "stopped: %" PRIu64 " requests, %" PRIu64 " replies, %" PRIu64
                " errors", t.requests, t.replies, t.errors);
    }
    exit_code = 0;

out:
    if (started) { /* a start-up failure after threads began: stop them */
        rkb__stop_workers(sh);
        for (int i = 0; i < started; i++)
            pthread_join(ws[i]->thread, NULL);
    }
    /* the threads are gone: frames still in a ring are closed here */
    for (int i = 0; i < sh->n_workers; i++)
        if (ws[i]) {
            rkb__ring_discard(ws[i]->reqq);
            rkb__ring_discard(ws[i]->repq);
        }
    if (front && front->router)
        zmq_close(front->router);
    for (int i = 0; i < sh->n_workers; i++)
        if (ws[i] && ws[i]->router)
            zmq_close(ws[i]->router);
    if (sh->ctx) {
        zmq_ctx_shutdown(sh->ctx);
        rkb__zap_stop(&zap);
        zmq_ctx_term(sh->ctx);
    } else {
        rkb__zap_stop(&zap);
    }
    for (int i = 0; i < sh->n_workers; i++)
        if (ws[i]) {
            rkb__io_fini(ws[i]);
            if (ws[i]->wk.efd >= 0)
                close(ws[i]->wk.efd);
            free(ws[i]->reqq);
            free(ws[i]->repq);
            free(ws[i]);
        }
    rk_runtime_close(sh->rt);
    if (sfd >= 0)
        close(sfd);
    if (front && front->wk.efd >= 0)
        close(front->wk.efd);
    free(front);
    free(ws);
    free(sh);
    return exit_code;
}
