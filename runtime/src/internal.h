/* internal.h - librk internals shared by the runtime core, the backends and
 * the worker program. Nothing here is installed; everything is
 * rk__-prefixed and hidden. */
#ifndef RK_INTERNAL_H
#define RK_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rk/error.h"
#include "rk/log.h"
#include "rk/msg.h"
#include "rk/ring.h"
#include "rk/runtime.h"
#include "rk_abi.h"

#define RK__HIDDEN __attribute__((visibility("hidden")))

/* ---- errors: set the calling thread's detail sentence, return -code ---- */
RK__HIDDEN int rk__fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same with a fixed sentence: no formatting, for hot paths. */
RK__HIDDEN int rk__fail_str(int code, const char *msg);
RK__HIDDEN void rk__clear_detail(void);

/* ---- logging (log.c): to the handler of rk/log.h; nothing by default ---- */
enum { RK__LOG_ERROR = RK_LOG_ERROR, RK__LOG_WARN = RK_LOG_WARN, RK__LOG_INFO = RK_LOG_INFO,
       RK__LOG_DEBUG = RK_LOG_DEBUG };
RK__HIDDEN void rk__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- time and waiting ---- */
RK__HIDDEN int64_t rk__now_ns(void); /* CLOCK_MONOTONIC */
/* Deadline from a timeout in ms: -1 = forever (INT64_MAX), 0 = now. */
RK__HIDDEN int64_t rk__deadline(int timeout_ms);
/* A deadline that reads the clock only when a wait needs it: for
 * timeout_ms > 0 it is -timeout_ms until rk__deadline_at turns it into
 * rk__deadline's value (0 and forever are taken as they are). Why: a send
 * writes its request before anything waits, and a clock read on the way
 * (40-50 ns on the GPU hosts' VMs) made the request late for the kernel's
 * poll (device/NOTES.md, "The host's turn"). */
static inline int64_t rk__deadline_lazy(int timeout_ms)
{
    return timeout_ms > 0 ? -(int64_t)timeout_ms : rk__deadline(timeout_ms);
}
/* The deadline *d stands for, reading the clock the first time. Owner: the
 * caller's thread (d is its local). */
RK__HIDDEN int64_t rk__deadline_at(int64_t *d);

/* Adaptive wait: spin, then sched_yield, then sleep (futex when the other
 * side can ring us, timed sleep otherwise). One backoff per wait loop. The
 * phases are measured in time, not iterations, so they cost the same on
 * any CPU: spin RK__SPIN_NS, yield until RK__SPIN_NS + RK__YIELD_NS
 * (environment overrides: RK_SPIN_US, RK_YIELD_US). Short, because on a
 * 2-core machine a spinning waiter steals the core the other side needs. */
typedef struct rk__backoff {
    int64_t t0;      /* start of this wait, 0 = not started */
    int64_t elapsed; /* last measured */
    uint32_t iter;
    uint32_t sleeps;
} rk__backoff;
#define RK__SPIN_NS 10000
#define RK__YIELD_NS 40000
#define RK__HOT_SPINS 256u /* bare spins (no clock, no pause) before the timed phases */
static inline void rk__backoff_reset(rk__backoff *b) { b->t0 = 0, b->elapsed = 0, b->iter = 0, b->sleeps = 0; }
/* Returns true while the caller should keep busy-polling (spin or yield
 * phases; it yields itself in the yield phase); false once the caller
 * should block (futex wait or timed sleep). */
RK__HIDDEN bool rk__backoff_poll(rk__backoff *b);
/* Sleep length for the blocking phase: grows from 50 us to 1 ms. */
RK__HIDDEN int64_t rk__backoff_sleep_ns(rk__backoff *b);
RK__HIDDEN void rk__sleep_ns(int64_t ns);

/* Futexes on words that may live in a mapping shared with another process
 * (never FUTEX_PRIVATE). */
RK__HIDDEN int rk__futex_wait(uint32_t *word, uint32_t expected, int64_t timeout_ns);
RK__HIDDEN void rk__futex_wake(uint32_t *word, int n);

/* A lock word for the hot path (a reply ring's: rk__d2h.lock). Taken
 * with one exchange, given back with a store: rk_actor_call's round trip
 * takes and gives it once per reply, and pthread_mutex_unlock's locked
 * exchange and call were ~20 ns of the host's turn (device/NOTES.md,
 * "The host's turn"). A taker that must wait spins, yields, then naps
 * (rk__lock_take): they are rare (close, a re-post, the supervisor) or
 * brief (a router publishing in turn). */
typedef struct rk__lock {
    _Atomic uint32_t held;
} rk__lock;
static inline bool rk__lock_try(rk__lock *l)
{
    /* a relaxed look first: no exchange (a locked instruction that takes
     * the line) while another holds it. acquire: pairs with rk__unlock's
     * store-release, so the holder before us is seen in full */
    return !atomic_load_explicit(&l->held, memory_order_relaxed) &&
           !atomic_exchange_explicit(&l->held, 1u, memory_order_acquire);
}
RK__HIDDEN void rk__lock_take(rk__lock *l);
static inline void rk__unlock(rk__lock *l)
{
    /* release: everything done under the lock before the next taker's
     * acquire exchange sees it free */
    atomic_store_explicit(&l->held, 0u, memory_order_release);
}

static inline void rk__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* Reads an integer from the environment (a test or tuning knob), or dflt. */
RK__HIDDEN long long rk__env_ll(const char *name, long long dflt);
/* The same for a knob with a range, lo..hi: dflt also (with one warning
 * that names it, its value and the range) when it is out of range or not
 * an integer. */
#define RK__ENV_MS_MAX 3600000 /* an hour: a wait in ms fits an int */
RK__HIDDEN long long rk__env_range(const char *name, long long dflt, long long lo, long long hi);

/* ---- the shared region (runtime/abi/rk_abi.h) ----
 * The same view is built by librk (which creates the region) and by a
 * worker process (which maps it from an inherited fd). */
typedef struct rk__view {
    rk__region *hdr;
    size_t size;
    rk_ring *h2d;
    rk_ring *d2h[RK__D2H_RINGS_MAX]; /* the reply rings, [0, n_d2h) */
    uint32_t n_d2h;
    uint8_t *arena;
    size_t arena_size;
} rk__view;
/* Creates the memfd region for cfg's rings and arena and maps it; *fd is
 * the memfd (close-on-exec). cfg is checked, its reply_rings resolved (not
 * 0). */
RK__HIDDEN int rk__region_create(const rk_config *cfg, int *fd, rk__view *v);
/* Maps an existing region from fd and checks its header and rings. */
RK__HIDDEN int rk__region_map(int fd, rk__view *v);
RK__HIDDEN void rk__region_unmap(rk__view *v);

/* ---- data arena: host-side allocator over the region's arena bytes ----
 * Both allocation (at send) and free (at reply release) happen on the
 * host, so a mutex is enough; the device only reads and writes payloads. */
typedef struct rk__extent {
    uint64_t off, size;
} rk__extent;
typedef struct rk__arena {
    pthread_mutex_t lock;
    pthread_cond_t freed; /* signalled when space comes back */
    uint8_t *base;
    size_t size;
    size_t used, peak;
    rk__extent *free; /* free extents, address-ordered, coalesced */
    size_t n_free, cap_free;
    int fault; /* 0, or the code that failed the backend for good (rk__arena_fail) */
} rk__arena;
RK__HIDDEN int rk__arena_init(rk__arena *ar, void *base, size_t size);
RK__HIDDEN void rk__arena_destroy(rk__arena *ar);
/* Allocates `size` bytes (rounded to RK_ARENA_ALIGN); waits until deadline
 * for space. Returns 0 and the offset in *off, -RK_EMSGSIZE when size can
 * never fit, -RK_ENOSPC when the deadline passed, the fault when one
 * came (rk__arena_fail) and there is no space. */
RK__HIDDEN int rk__arena_alloc(rk__arena *ar, size_t size, int64_t deadline, uint64_t *off);
/* The same, for a waiter that can make space come back: help(arg) runs
 * without the arena's lock before each wait and every RK__ARENA_HELP_NS
 * of it (a sender routes the replies of closed actors, whose space comes
 * back only when they are routed). */
#define RK__ARENA_HELP_NS 1000000
RK__HIDDEN int rk__arena_alloc_help(rk__arena *ar, size_t size, int64_t deadline, uint64_t *off,
                                    void (*help)(void *), void *arg);
RK__HIDDEN void rk__arena_free(rk__arena *ar, uint64_t off, size_t size);
/* The backend failed for good (rk__runtime_fault): nothing may come back
 * to free space, so a wait for it ends with `code` (the negative fault),
 * at once for those already waiting. */
RK__HIDDEN void rk__arena_fail(rk__arena *ar, int code);
RK__HIDDEN void rk__arena_usage(rk__arena *ar, size_t *used, size_t *peak);

/* ---- rings ---- */
/* True when line 0 of the slot at cons_head carries this lap's flag: a
 * message is (at least partly) there. Consumer side, never blocks. */
RK__HIDDEN bool rk__ring_ready(rk_ring *r);
/* ... of the slot at pos (a consumer that claims positions itself). */
RK__HIDDEN bool rk__ring_ready_at(rk_ring *r, uint64_t pos);
/* rk__ring_ready_at, inline, with the length line 0 states in *len (for
 * a prefetch of the other lines; not checked against the slot's). relaxed:
 * a consumer validates the lines again with acquire before it reads
 * them (rk__ring_complete_at). */
static inline bool rk__ring_there(rk_ring *r, uint64_t pos, uint32_t *len)
{
    const uint64_t l0 = __atomic_load_n(rk_ring_slot(r, pos), __ATOMIC_RELAXED);
    *len = (uint32_t)l0;
    return (uint32_t)(l0 >> 32) == rk_ring_flag(r, pos);
}
/* 0 and the length in *len when every line of the message at pos is
 * there; -RK_EAGAIN when some are not yet; -RK_EPROTO (rk__fail) for a
 * length over the slot's. */
RK__HIDDEN int rk__ring_complete_at(rk_ring *r, uint64_t pos, uint32_t *len);
/* Whether lines 1 .. of the len-byte message in slot all carry flag
 * (line 0 said it is there): one look at each, no branch per line.
 * acquire: pairs with the producer's store-release of each line, so what
 * a line points to (arena) is visible once they check out. */
static inline bool rk__slot_lines_there(const uint64_t *slot, uint32_t flag, uint32_t len)
{
    const uint64_t want = (uint64_t)flag << 32;
    const uint64_t *line = slot + 1, *end = line + (len + 3) / 4;
    uint64_t miss = 0; /* its high half: 0 while every flag matches */
    for (; line + 2 <= end; line += 2)
        miss |= (__atomic_load_n(&line[0], __ATOMIC_ACQUIRE) ^ want) |
                (__atomic_load_n(&line[1], __ATOMIC_ACQUIRE) ^ want);
    if (line < end)
        miss |= __atomic_load_n(&line[0], __ATOMIC_ACQUIRE) ^ want;
    return (miss >> 32) == 0;
}
/* Copies n bytes of a message from its lines (4 bytes a line; line[0]
 * holds the first 4) into dst, for a consumer that checked every line
 * there (rk__slot_lines_there): it reads the slot once, straight into
 * where the bytes go. relaxed: that check's acquires are the edge (the
 * lines do not change before cons_head passes them). */
static inline void rk__slot_copy(const uint64_t *line, void *dst, uint32_t n)
{
    uint8_t *out = dst;
    uint32_t k = 0;
    for (; k + 8 <= n; k += 8, line += 2) { /* two lines per 8-byte store */
        const uint64_t w = (uint32_t)__atomic_load_n(&line[0], __ATOMIC_RELAXED) |
                           __atomic_load_n(&line[1], __ATOMIC_RELAXED) << 32;
        __builtin_memcpy(out + k, &w, 8);
    }
    for (; k < n; k += 4, line++) {
        const uint32_t d = (uint32_t)__atomic_load_n(&line[0], __ATOMIC_RELAXED);
        __builtin_memcpy(out + k, &d, n - k < 4 ? n - k : 4);
    }
}
/* rk_ring_sc_peek of the message at pos: for consumers that share out
 * positions among themselves and publish cons_head in order (router.c). */
RK__HIDDEN int rk__ring_peek_at(rk_ring *r, uint64_t pos, void *buf, uint32_t cap, uint32_t *len);
/* Wakes every host consumer sleeping on r's doorbell (seq_cst fence, then
 * a futex wake when cons_sleeping is non-zero). */
RK__HIDDEN void rk__ring_wake(rk_ring *r);
/* Sets r->flags (RK_RING_F_*) while producers may run. */
RK__HIDDEN void rk__ring_set_flags(rk_ring *r, uint32_t flags);
/* A burst's three steps (send.c's batches): reserve up to n consecutive
 * positions with one CAS of prod_tail (as many as are free; 0 when full),
 * write each reserved position (len <= rk_ring_msg_max, checked by the
 * caller), then ring the doorbell once for all of them. */
RK__HIDDEN uint32_t rk__ring_mp_reserve(rk_ring *r, uint32_t n, uint64_t *first);
/* A ring message in two parts, head || body (hlen a multiple of 4), so
 * that a request's payload goes from its pending record into the slot
 * without a copy in between. edge (may be NULL): where the consumer's
 * side says rk__tsan_acquire; the write says rk__tsan_release there after
 * reading the parts and before line 0 publishes them (barrier.h: the
 * worker-process edge). */
typedef struct rk__ring_msg {
    const void *head, *body;
    uint32_t hlen, blen;
    const void *edge;
} rk__ring_msg;
RK__HIDDEN void rk__ring_write2(rk_ring *r, uint64_t pos, const rk__ring_msg *m);
RK__HIDDEN void rk__ring_doorbell(rk_ring *r);
/* Fetches, for reading, the lines of the len-byte message at pos past its
 * first 64 bytes (the reader has those: line 0 said the message is
 * there). */
static inline void rk__ring_prefetch_r(rk_ring *r, uint64_t pos, uint32_t len)
{
    const char *s = (const char *)rk_ring_slot(r, pos);
    const uint64_t end = 8 * (1 + ((uint64_t)len + 3) / 4);
    for (uint32_t k = 64; k < end && k < r->slot_size; k += 64)
        __builtin_prefetch(s + k, 0, 3);
}
/* rk_ring_mp_enqueue of a message in parts: the three steps for one; *at
 * (when not NULL): the position it took */
RK__HIDDEN int rk__ring_mp_enqueue2(rk_ring *r, const rk__ring_msg *m, uint64_t *at);

/* ---- operations as the host runs them (ops.c) ---- */
/* Reference vadd: c[i] = a[i] + b[i] in float32 (IEEE; no FMA, no
 * reassociation), bit-identical to the GPU actor. */
RK__HIDDEN void rk__vadd_f32(const float *a, const float *b, float *c, size_t n);
/* Finds a user actor definition by type in defs[0..n), or NULL. */
RK__HIDDEN const rk_actor_def *rk__find_def(const rk_actor_def *defs, size_t n, uint16_t type);
/* True for the library's own operations (trusted: no running marker). */
static inline bool rk__op_builtin(uint16_t type) { return type <= RK_OP_VADD; }
/* Runs one request on the host. flags: RK__WF_* (runtime/abi/worker_proto.h).
 * Returns the reply status; *out_len the reply bytes. */
RK__HIDDEN int rk__ops_execute(const rk_actor_def *defs, size_t n_defs, uint32_t flags, uint16_t type,
                               const void *in, size_t in_len, void *out, size_t out_cap, size_t *out_len);

/* ---- the CPU consumer loop (serve_cpu.c): serves H2D into D2H until the
 * region's stop word is set, as a thread of librk (CPU backend, degraded
 * mode) or as the body of a CPU worker process. ---- */
typedef struct rk__serve_cpu {
    rk__view v;
    const rk_actor_def *defs; /* user actors with CPU handlers (in-process only) */
    size_t n_defs;
    uint32_t flags;           /* RK__WF_* */
    /* where the consumer says a handler runs (1) or not (0), relaxed, for
     * its worker process's control thread, which keeps the heartbeat going
     * meanwhile (a slow actor is its deadline's business); NULL: nobody */
    uint32_t *in_handler;
} rk__serve_cpu;
RK__HIDDEN void rk__serve_cpu_run(const rk__serve_cpu *s);

/* The CPU consumer as a thread of this process (backend_cpu.c). */
typedef struct rk__cpu_thread {
    pthread_t thread;
    rk__serve_cpu s;
    bool running;
} rk__cpu_thread;
RK__HIDDEN int rk__cpu_thread_start(rk__cpu_thread *c, rk_runtime *rt, uint32_t flags);
/* Stops it at a message boundary (everything it consumed is answered). */
RK__HIDDEN void rk__cpu_thread_stop(rk__cpu_thread *c, rk_runtime *rt);

/* ---- backends ---- */
struct rk__registry;
typedef struct rk__backend_ops {
    const char *name;
    /* Starts serving rt's rings (threads, processes, kernel, self-test).
     * Fills rt->info's backend fields. Returns 0 or a code with the detail
     * set; on failure leaves clean rings for another backend. */
    int (*start)(rk_runtime *rt);
    /* Stops serving and frees what start made. Idempotent. */
    void (*stop)(rk_runtime *rt);
    /* 0 while serving (recovering counts as serving), else the negative
     * code of a fault nothing will recover from. Cheap: waiters call it. */
    int (*health)(rk_runtime *rt);
    /* Validates and applies a new kernel configuration; NULL = record only. */
    int (*relaunch)(rk_runtime *rt, uint32_t grid, uint32_t block, uint32_t smem);
    /* Fills *out (NULL: the runtime fills a "no worker" answer). */
    void (*worker)(rk_runtime *rt, rk_worker_info *out);
    /* The last recoveries, oldest first (NULL: none). */
    int (*recoveries)(rk_runtime *rt, rk_recovery *out, int max);
    /* An operator's "try the GPU again" after a crash loop (NULL: -RK_ENOTSUP). */
    int (*retry)(rk_runtime *rt);
    /* rk_runtime_reload_modules (reload.c), nothing in flight: stops the
     * consumer at a message boundary, installs *next (rk__registry_swap:
     * *next then holds the set it replaced) and starts the consumer on
     * it. When that fails, installs the previous set again and restarts
     * on it (*next then holds the new set). 0 or the code, detail set.
     * back: *next is the set a group's other devices went back to; one
     * that does not start is installed all the same, the device degraded
     * (or failed) on it, never left serving the set they left.
     * NULL: -RK_ENOTSUP. */
    int (*reload)(rk_runtime *rt, struct rk__registry *next, bool back);
    /* rk_runtime_reload_prepare: starts next's consumer beside the serving
     * one, for the reload of that set to take over (NULL: nothing to
     * prepare). unprepare ends it (idempotent). Other threads may use rt. */
    int (*prepare)(rk_runtime *rt, const struct rk__registry *next);
    void (*unprepare)(rk_runtime *rt);
} rk__backend_ops;

RK__HIDDEN extern const rk__backend_ops rk__cpu_backend;    /* a thread of this process */
RK__HIDDEN extern const rk__backend_ops rk__worker_backend; /* a supervised worker process */
RK__HIDDEN extern const rk__backend_ops rk__inproc_backend; /* CUDA in this process (module) */

/* ---- the runtime ---- */
struct rk__modset;

/* D2H chunks (router.c): the most replies a router claims at a time, and
 * the most chunks claimed and not yet published (per reply ring). */
#define RK__D2H_CHUNK 32u
#define RK__D2H_CHUNKS 16u
/* rk_config.reply_rings 0 means this many */
#define RK__REPLY_RINGS_DEFAULT RK_REPLY_RINGS_MAX
_Static_assert(RK_REPLY_RINGS_MAX == RK__D2H_RINGS_MAX, "rk/runtime.h and rk_abi.h agree");
/* One claimed chunk of D2H: positions [pos, pos + n), the records its
 * replies filled (a NULL actor: dropped). Its router fills it without
 * its ring's lock, then stores routed = ticket + 1; whoever publishes in turn
 * (under its ring's lock) takes it from there. */
typedef struct rk__d2h_chunk {
    _Atomic uint64_t routed;
    uint64_t pos, ticket;
    uint32_t n;
    rk_actor *act[RK__D2H_CHUNK];
    uint16_t tag[RK__D2H_CHUNK];
} rk__d2h_chunk;

/* One reply ring and the state of the threads that drain it (router.c).
 * The replies of actor a come back on ring RK__REPLY_RING(a, n_d2h), so
 * threads waiting for different actors drain different rings: no lock,
 * line or record is shared between them (with one ring for all, routing
 * another thread's replies was the serial step that held the API to
 * ~9 M msg/s however many threads sent: benchmarks/MEASURED.md, "The
 * actor API on an H100").
 *
 * The waiting actors drain their ring themselves (no router thread):
 * `lock` orders their claims and publications and keeps them away from
 * the supervisor and a closing actor (rk__d2h_lock). A router claims the
 * complete replies from `claim` on under the lock, routes them without it
 * (so several threads route at once) and publishes them, and cons_head,
 * under it again in claim order. Waiters read `claim` at every spin to see
 * whether there is anything to claim. Actors that sleep wait on the ring's
 * doorbell (shared memory, so a worker process can ring it); its
 * cons_sleeping counts them. */
typedef struct rk__d2h {
    struct rk_runtime *rt;
    rk_ring *ring;
    uint32_t index;
    _Alignas(64) rk__lock lock;
    /* threads blocked in rk__d2h_lock: routers (trylock) leave the lock to
     * them, and one that holds it stops draining for them, or a stream of
     * routers starves them for seconds (H100, 84a5d49: the supervisor
     * waited 3.6 s under 8 pipelining actors; 048de4b: a re-post ~60 s).
     * Read at every drain, written rarely: a line of its own. */
    _Alignas(64) _Atomic int wanted;
    _Alignas(64) _Atomic uint64_t claim;     /* written under lock */
    /* replies routed from this ring: written under lock (a relaxed load
     * and store, no locked add on the round trip), summed by rk__replies */
    _Atomic uint64_t n_replies;
    uint64_t tickets;                        /* under lock: chunks claimed */
    _Atomic uint64_t published;              /* chunks published, in claim order */
    uint32_t out;                            /* under lock: claimed, not yet published */
    rk__d2h_chunk chunks[RK__D2H_CHUNKS];    /* by ticket */
} rk__d2h;

struct rk_runtime {
    rk_config cfg;
    rk_info info;
    const rk__backend_ops *backend;
    void *backend_state; /* owned by the backend */
    uint32_t wflags;     /* RK__WF_* the consumers get (test faults) */
    uint32_t worker_kind; /* RK__WB_*: what the worker and in-process backends start */

    /* The shared region (memfd mapping). */
    int region_fd;
    rk__view view;
    rk_ring *h2d; /* = view.h2d */
    rk__arena arena;

    /* Actors, indexed by rk_msg_hdr.actor. */
    pthread_mutex_t actors_lock;
    rk_actor **actors;
    uint32_t n_actor_slots;

    /* The reply rings, [0, n_d2h) (rk__d2h above). Locks are taken in
     * ring order (rk__d2h_lock_all). */
    rk__d2h d2h[RK__D2H_RINGS_MAX];
    uint32_t n_d2h;

    /* Read at every spin of every waiter, written rarely: a line of their
     * own, apart from the locks and the counters the hot path writes (with
     * them on one line, 4 pipelining threads got 2 M msg/s, 1 got 7 M) */
    _Alignas(64) _Atomic int fault;  /* 0, or the code that stopped the backend for good */
    _Atomic bool closing;

    /* Recovery (router.c, supervisor.c). gen: the worker generation; an
     * actor whose own gen lags re-posts what it still owes (send.c).
     * suspect: the running word (rk_abi.h) of the one suspect being
     * retried, 0 when none: suspects are retried one at a time. */
    _Atomic uint32_t gen;
    _Atomic uint64_t suspect;
    _Atomic int64_t recover_t0;      /* detection time of the fault being recovered, 0 when none */
    _Atomic int64_t suspect_hold;    /* suspects are not retried before this time (0: no hold) */
    _Atomic int64_t suspect_since;   /* when the suspect's retry started to count (supervisor.c) */
    _Atomic uint64_t suspect_pos;    /* its retry's H2D position; UINT64_MAX until it is sent */
    _Atomic int64_t last_recovery_ns; /* detection -> first routed reply of the last recovery */
    _Atomic bool degraded;           /* the worker crash-looped, the CPU serves built-ins only:
                                      * set by rk__degrade, cleared by a retry that serves
                                      * again; read for a failed reply's detail */
    /* that first reply, for the history: written by the one router that
     * ends the recovery's clock (at, then t0 with release); read by the
     * supervisor (t0 acquire, at, t0 again) */
    _Atomic int64_t first_reply_t0, first_reply_at;

    /* written per burst by senders: a line of its own (the replies are
     * counted per reply ring: rk__d2h.n_replies) */
    _Alignas(64) _Atomic uint64_t n_requests;
    _Alignas(64) _Atomic uint64_t n_errors, n_restarts;

    /* User actors: rk_config.actors, then those of the loaded modules
     * (modules.h); defs is the merged table the consumers run. */
    struct rk__modset *mods;
    rk_actor_def *defs;
    size_t n_defs;
    /* a set rk_runtime_reload_prepare loaded (reload.c), or NULL */
    struct rk__prepared *prep;

    /* Several devices (group.c): a group holds one runtime per device in
     * lanes[0..n_lanes) and nothing else of the above is used; each of
     * those knows its index in `lane` (0 for a runtime of one device). */
    struct rk_runtime **lanes;
    int n_lanes, lane;
    _Atomic uint32_t next_lane; /* placement ties go in turn */
    pthread_mutex_t relaunch_lock; /* a group: one relaunch at a time (all or none) */
    /* info after open: rk_runtime_info copies it, a relaunch rewrites it
     * (rk__info_lock); a leaf lock, nothing is taken under it */
    pthread_mutex_t info_lock;
};

/* n zeroed objects of `size` bytes, 64-byte aligned (calloc promises
 * only 16): for structs whose fields sit on cache lines of their own.
 * NULL when out of memory. Free with free(). */
RK__HIDDEN void *rk__zalloc_lines(size_t n, size_t size);
/* A zeroed rk_runtime, as aligned as its members ask (free() it). */
RK__HIDDEN rk_runtime *rk__runtime_alloc(void);
/* Around a rewrite of rt->info after open (a relaunch). */
RK__HIDDEN void rk__info_lock(rk_runtime *rt);
RK__HIDDEN void rk__info_unlock(rk_runtime *rt);
/* Records grid/block/smem as the configuration (rk_info and rk_config),
 * under the info lock: a backend with no kernel to check them against. */
RK__HIDDEN void rk__info_record(rk_runtime *rt, uint32_t grid, uint32_t block, uint32_t smem);

/* group.c. rk__group_open: rk_runtime_open for n_devices > 1 or ALL.
 * rk__lane0: the runtime answering for a group (itself when single). */
RK__HIDDEN int rk__group_open(rk_runtime **out, const rk_config *cfg);
RK__HIDDEN void rk__group_close(rk_runtime *rt);
RK__HIDDEN void rk__group_stats(const rk_runtime *rt, rk_stats *out);
RK__HIDDEN int rk__group_health(rk_runtime *rt);
RK__HIDDEN int rk__group_relaunch(rk_runtime *rt, uint32_t grid, uint32_t block, uint32_t smem);
RK__HIDDEN rk_runtime *rk__group_place(rk_runtime *rt);
static inline rk_runtime *rk__lane0(const rk_runtime *rt)
{
    return rt->lanes ? rt->lanes[0] : (rk_runtime *)rt;
}

/* The user actors (registry.c): loads rk_config.modules and merges them with
 * rk_config.actors into rt->defs (types must not collide); and frees them. */
RK__HIDDEN int rk__registry_load(rk_runtime *rt);
RK__HIDDEN void rk__registry_free(rk_runtime *rt);
/* A set of user actors apart from a runtime: the modules loaded from
 * paths[0..n) merged with rt's rk_config.actors (rk__registry_build), for
 * a reload; rk__registry_swap exchanges it with rt's own (the caller
 * keeps every reader away: rk_runtime_reload_modules' contract). */
typedef struct rk__registry {
    struct rk__modset *mods;
    rk_actor_def *defs;
    size_t n_defs;
} rk__registry;
RK__HIDDEN int rk__registry_build(const rk_runtime *rt, const char *const *paths, size_t n, rk__registry *out);
RK__HIDDEN void rk__registry_swap(rk_runtime *rt, rk__registry *r);
RK__HIDDEN void rk__registry_drop(rk__registry *r);
/* Drops what rk_runtime_reload_prepare made (reload.c), at close. */
RK__HIDDEN void rk__reload_free(rk_runtime *rt);
/* Checks that the backend in use can run user type `type` (send path):
 * 0, -RK_ENOTSUP (no such actor) or -RK_ENODEV (not on this backend). */
RK__HIDDEN int rk__registry_check(const rk_runtime *rt, uint16_t type);
/* What a message type is called in a detail or a log line: the built-in's
 * or the registered actor's name, "unknown" for none. Static storage or
 * the runtime's (valid until close). */
RK__HIDDEN const char *rk__type_name(const rk_runtime *rt, uint16_t type);

/* Reply bytes to reserve for a request (reply_cap 0 = the type's default). */
RK__HIDDEN size_t rk__reply_cap(const rk_runtime *rt, uint16_t type, size_t len, size_t reply_cap);

/* Marks the backend failed for good: every waiter sees the code within
 * its next poll, and every in-flight request comes back with status = code.
 * (A supervised worker's faults are recovered instead: supervisor.c.) */
RK__HIDDEN void rk__runtime_fault(rk_runtime *rt, int code, const char *why);

/* Takes a reply ring's lock, ahead of the routers' trylocks (`wanted`),
 * once no chunk of it is out: for every thread that must touch pending
 * records the ring's routers may write (close, a fault reply, a re-post:
 * the actor's ring). Release with rk__d2h_unlock. */
RK__HIDDEN void rk__d2h_lock(rk__d2h *d);
static inline void rk__d2h_unlock(rk__d2h *d) { rk__unlock(&d->lock); }
/* Every ring's, in ring order: for the supervisor, which touches any
 * actor's records. */
RK__HIDDEN void rk__d2h_lock_all(rk_runtime *rt);
RK__HIDDEN void rk__d2h_unlock_all(rk_runtime *rt);
/* The ring the replies to actor `actor` come back on. */
static inline rk__d2h *rk__d2h_of(rk_runtime *rt, uint32_t actor)
{
    return &rt->d2h[RK__REPLY_RING(actor, rt->n_d2h)];
}

/* Replies routed so far, every reply ring's (relaxed: a statistic, and
 * the supervisor's "any progress" look). */
static inline uint64_t rk__replies(const rk_runtime *rt)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < rt->n_d2h; i++)
        n += atomic_load_explicit(&rt->d2h[i].n_replies, memory_order_relaxed);
    return n;
}

/* Initialises the rings afresh (positions 0, every slot empty) after a
 * backend failed to start, for the backend a fallback starts. */
RK__HIDDEN void rk__rings_clean(rk_runtime *rt);

/* Wakes actors sleeping for replies (on every ring). */
RK__HIDDEN void rk__runtime_wake(rk_runtime *rt);

/* One NOP ping through the rings before any actor exists: proves the
 * consumer sees host writes and the host sees its replies. `alive` (may be
 * NULL) says whether the consumer still runs; its detail names why not. */
RK__HIDDEN int rk__selftest(rk_runtime *rt, int timeout_ms, int (*alive)(void *), void *arg);

#endif /* RK_INTERNAL_H */
