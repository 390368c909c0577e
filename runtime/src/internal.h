/* internal.h - librk internals shared by the runtime core and backends.
 * Nothing here is installed; everything is rk__-prefixed and hidden. */
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
static inline void rk__backoff_reset(rk__backoff *b) { b->t0 = 0, b->elapsed = 0, b->iter = 0, b->sleeps = 0; }
/* Returns true while the caller should keep busy-polling (spin or yield
 * phases; it yields itself in the yield phase); false once the caller
 * should block (futex wait or timed sleep). */
RK__HIDDEN bool rk__backoff_poll(rk__backoff *b);
/* Sleep length for the blocking phase: grows from 50 us to 1 ms. */
RK__HIDDEN int64_t rk__backoff_sleep_ns(rk__backoff *b);
RK__HIDDEN void rk__sleep_ns(int64_t ns);

RK__HIDDEN int rk__futex_wait(uint32_t *word, uint32_t expected, int64_t timeout_ns);
RK__HIDDEN void rk__futex_wake(uint32_t *word, int n);

static inline void rk__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* ---- the shared region: [header | H2D ring | D2H ring | arena] ----
 * One mapping (memfd, MAP_SHARED) so it can be registered with CUDA and
 * shared with another process. Offsets, never pointers, cross sides. */
#define RK__REGION_MAGIC 0x524b5247494f4e31ull /* "RKREGION1" */
typedef struct rk__region {
    uint64_t magic;
    uint64_t size;
    uint64_t h2d_off, d2h_off, arena_off, arena_size;
    uint8_t pad0[128 - 48];
    /* Written by the consumer (kernel or CPU worker) about every ms while it
     * runs; the host watches it to notice a dead or wedged backend. */
    uint64_t heartbeat; /* offset 128 */
    uint8_t pad1[120];
    /* Host -> consumer: 1 asks it to return. */
    uint32_t stop; /* offset 256 */
    uint8_t pad2[124];
    /* Consumer -> host: RK__STATE_*, or a negative RK_E* code on a fault. */
    int32_t state; /* offset 384 */
    uint8_t pad3[124];
} rk__region;
enum { RK__STATE_INIT = 0, RK__STATE_RUNNING = 1, RK__STATE_STOPPED = 2 };

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
} rk__arena;
RK__HIDDEN int rk__arena_init(rk__arena *ar, void *base, size_t size);
RK__HIDDEN void rk__arena_destroy(rk__arena *ar);
/* Allocates `size` bytes (rounded to RK_ARENA_ALIGN); waits until deadline
 * for space. Returns 0 and the offset in *off, -RK_EMSGSIZE when size can
 * never fit, -RK_ENOSPC when the deadline passed. */
RK__HIDDEN int rk__arena_alloc(rk__arena *ar, size_t size, int64_t deadline, uint64_t *off);
RK__HIDDEN void rk__arena_free(rk__arena *ar, uint64_t off, size_t size);
RK__HIDDEN void rk__arena_usage(rk__arena *ar, size_t *used, size_t *peak);

/* ---- rings ---- */
/* True when line 0 of the slot at cons_head carries this lap's flag: a
 * message is (at least partly) there. Consumer side, never blocks. */
RK__HIDDEN bool rk__ring_ready(rk_ring *r);

/* ---- backends ---- */
typedef struct rk__backend_ops {
    const char *name;
    rk_backend_kind kind;
    /* Starts serving rt->h2d into rt->d2h (threads, kernel, self-test).
     * Fills the kernel/device fields of rt->info. Returns 0 or a code with
     * the detail set. */
    int (*start)(rk_runtime *rt);
    /* Stops the consumer and frees what start made. Idempotent. */
    void (*stop)(rk_runtime *rt);
    /* 0 while healthy, else the negative fault code. Cheap: waiters call it. */
    int (*health)(rk_runtime *rt);
    /* Validates and applies a new kernel configuration; NULL = record only. */
    int (*relaunch)(rk_runtime *rt, uint32_t grid, uint32_t block, uint32_t smem);
} rk__backend_ops;

RK__HIDDEN extern const rk__backend_ops rk__cpu_backend;
#ifdef RK_HAVE_CUDA
RK__HIDDEN extern const rk__backend_ops rk__cuda_backend;
#endif

/* ---- the runtime ---- */
typedef struct rk__pending rk__pending;

struct rk_runtime {
    rk_config cfg;
    rk_info info;
    const rk__backend_ops *backend;
    void *backend_state; /* owned by the backend */

    /* The shared region (memfd mapping). */
    int region_fd;
    rk__region *region;
    size_t region_size;
    rk_ring *h2d, *d2h;
    rk__arena arena;

    /* Actors, indexed by rk_msg_hdr.actor. */
    pthread_mutex_t actors_lock;
    rk_actor **actors;
    uint32_t n_actor_slots;

    /* D2H is drained by whichever waiting actor holds this lock; it routes
     * each reply into its actor's ready queue and wakes that actor. */
    pthread_mutex_t d2h_lock;
    uint32_t wake_seq; /* futex word: bumped when replies were routed */
    _Atomic uint32_t sleepers;

    _Atomic int fault;  /* 0, or the code that stopped the backend */
    _Atomic bool closing;

    _Atomic uint64_t n_requests, n_replies, n_errors, n_restarts;
};

/* Finds a user actor definition by type, or NULL. */
RK__HIDDEN const rk_actor_def *rk__find_actor_def(const rk_runtime *rt, uint16_t type);

/* Reply bytes to reserve for a request (reply_cap 0 = the type's default). */
RK__HIDDEN size_t rk__reply_cap(const rk_runtime *rt, uint16_t type, size_t len, size_t reply_cap);

/* Runs one request on the host (the CPU backend, and host fallback of the
 * CUDA backend for user actors without a GPU handler). in/out point into
 * the slot copy or the arena. Returns the reply status. */
RK__HIDDEN int rk__cpu_execute(const rk_runtime *rt, uint16_t type, const void *in, size_t in_len,
                               void *out, size_t out_cap, size_t *out_len);

/* Reference vadd: c[i] = a[i] + b[i] in float32 (IEEE; no FMA, no
 * reassociation), bit-identical to the GPU actor. */
RK__HIDDEN void rk__vadd_f32(const float *a, const float *b, float *c, size_t n);

/* Marks the backend failed: every waiter sees the code within its next
 * poll, and every in-flight request comes back with status = code. */
RK__HIDDEN void rk__runtime_fault(rk_runtime *rt, int code, const char *why);

/* Wakes actors sleeping for replies (CPU backend after posting replies). */
RK__HIDDEN void rk__runtime_wake(rk_runtime *rt);

#endif /* RK_INTERNAL_H */
