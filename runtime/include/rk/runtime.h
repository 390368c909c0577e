/* rk/runtime.h - the runtime, its host actors and their messages.
 *
 * A runtime owns one shared region (H2D ring, D2H ring, data arena) and one
 * backend that serves it: the persistent CUDA ring kernel or the CPU worker
 * thread. Host actors send requests into the H2D ring and receive the
 * replies the backend posts on the D2H ring; each reply is routed back to
 * the actor that sent the request.
 *
 * Thread-safety: a runtime may be used from any number of threads. An
 * actor is like a socket: any thread may use it, but one at a time (give
 * each thread its own actor). rk_runtime_close must not race with calls on
 * the runtime or its actors.
 */
#ifndef RK_RUNTIME_H
#define RK_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "rk/msg.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rk_runtime rk_runtime;
typedef struct rk_actor rk_actor;

typedef enum rk_backend_kind {
    RK_BACKEND_AUTO = 0, /* CUDA when a usable GPU passes validation and self-test, else CPU */
    RK_BACKEND_CPU = 1,
    RK_BACKEND_CUDA = 2,
} rk_backend_kind;

/* CPU implementation of an actor: reads in_len bytes at `in`, writes at
 * most out_cap bytes at `out`, stores the reply length in *out_len and
 * returns 0 or a negative RK_E* code (sent back as the reply's status). */
typedef int (*rk_cpu_actor_fn)(const void *in, size_t in_len, void *out, size_t out_cap,
                               size_t *out_len, void *user);

/* A user-defined actor, served under message type `type` (>= RK_OP_USER).
 * The CPU backend runs `cpu`; the CUDA backend runs `gpu`, a handle made
 * by RK_GPU_ACTOR_HANDLE in the user's .cu file (see device/actor.cuh).
 * Both are code of this program, so they run in this process: a runtime
 * with such actors runs its backend in-process (rk_isolation), and the
 * CUDA backend needs every user actor to have a `gpu` handle. */
typedef struct rk_actor_def {
    uint16_t type;
    const char *name;
    rk_cpu_actor_fn cpu;
    void *cpu_user;
    const void *gpu;
    /* Reply bytes to reserve for a request of in_len bytes; NULL means
     * in_len. */
    size_t (*reply_size)(size_t in_len);
} rk_actor_def;

/* Where the backend runs (runtime/README-style summary in README.md,
 * "When a GPU actor faults"). A CUDA context that takes a fault (an
 * illegal address in an actor, any sticky error) is dead until its process
 * exits; in a worker process that costs the requests the fault hit and a
 * restart, in this process it costs the runtime. */
typedef enum rk_isolation {
    /* default: the CUDA backend runs in a supervised worker process (no CUDA
     * call is ever made in this process); the CPU backend runs in a thread
     * of this process (only trusted built-ins and your own CPU actors) */
    RK_ISOLATION_AUTO = 0,
    /* every backend runs in a worker process, the CPU one too (rk-bridge's
     * default: user actors' CPU code can crash as well). User actors given
     * as function pointers cannot run there: rk_runtime_open refuses them. */
    RK_ISOLATION_PROCESS = 1,
    /* everything runs in this process, CUDA through a module loaded on
     * demand: no process hop at start-up, but a GPU fault fails the runtime
     * for good (every request then gets -RK_EDEVICE) until it is reopened in
     * a new process. User GPU actors compiled into this program
     * (RK_GPU_ACTOR_HANDLE) need this mode. */
    RK_ISOLATION_NONE = 2,
} rk_isolation;

#define RK_MAX_DEVICES 16
#define RK_DEVICES_ALL (-1) /* rk_config.n_devices: every GPU */
#define RK_REPLY_RINGS_MAX 8 /* rk_config.reply_rings */
#define RK_HEARTBEAT_MS_MAX 3600000u /* rk_config.heartbeat_ms: an hour */
#define RK_FAULT_LIMIT_MAX 65536u    /* rk_config.fault_limit */

/* Kernel shapes no CUDA device runs, refused by rk_runtime_open and
 * rk_runtime_relaunch on every backend, the CPU backend's too (RK_EGRID,
 * RK_EBLOCK, RK_ESMEM, naming the value and the limit); on the CUDA
 * backend the device's own, smaller limits are checked as well. */
#define RK_GRID_MAX 2147483647u /* blocks: gridDim.x's limit */
#define RK_BLOCK_MAX 1024u      /* threads per block, on every device */
#define RK_SMEM_MAX 232448u     /* dynamic shared memory per block: 227 KiB, the most any
                                 * device gives one (compute capability 9.0, 10.x) */

typedef struct rk_config {
    rk_backend_kind backend; /* default RK_BACKEND_AUTO */
    rk_isolation isolation;  /* default RK_ISOLATION_AUTO */
    int device;              /* CUDA device ordinal, default 0 */
    uint32_t grid;           /* blocks; 0 = all co-resident blocks (default); at most
                              * RK_GRID_MAX */
    uint32_t block;          /* threads per block; 0 = the largest the kernel and device
                              * allow, at most RK_BLOCK_MAX (default: a busy poll reads 128
                              * slots, 30 at 256) */
    uint32_t smem;           /* dynamic shared memory per block, bytes, default 0; at most
                              * RK_SMEM_MAX */
    uint32_t ring_slots;     /* slots per ring (H2D and each reply ring), power of two,
                              * default 4096 */
    uint32_t slot_size;      /* bytes per slot, power of two 128..4096, default 256 */
    size_t arena_size;       /* data arena bytes, default 256 MiB */
    size_t max_payload;      /* largest request payload, default 128 MiB (two 64 MiB vadd operands) */
    uint32_t actor_window;   /* requests in flight per actor, 1..32768, default 256 */
    uint32_t max_actors;     /* 1..65535, default 64 */
    uint32_t reply_rings;    /* device-to-host rings, a power of two in 1..RK_REPLY_RINGS_MAX;
                              * 0 = default (RK_REPLY_RINGS_MAX; rk_config_init takes
                              * env RK_REPLY_RINGS when set). The replies to actor i
                              * come back on ring i % reply_rings, and a thread waiting
                              * for a reply drains only its actor's ring: threads that
                              * drive different actors (rk_actor_open hands out the
                              * lowest free index, so the first reply_rings actors get
                              * a ring each) share no reply path. Each ring takes
                              * ring_slots x slot_size bytes of the shared region */
    const rk_actor_def *actors; /* user actors (borrowed until close), may be NULL */
    size_t n_actors;
    /* actor modules (rk/module.h) to load: n_modules paths, each a module
     * file or a directory whose *.so files are loaded in name order
     * (borrowed until rk_runtime_open returns). A path is a file path, as
     * for any program: "case.so" is ./case.so, never a search of the
     * library path; it is made absolute at open (the actors' origin), so a
     * worker started later, after a chdir, loads the same file. Their actors are served by name (rk_runtime_actor_find);
     * a worker process loads them too. Set both fields: modules set with
     * n_modules 0 (a NULL-terminated list without its count) is refused
     * with -RK_EINVAL, as it would load nothing; NULL for none. A path that does not exist,
     * or a module that is refused, is -RK_EINVAL, and rk_last_detail names
     * the file and why ("No such file or directory"). */
    const char *const *modules;
    size_t n_modules;

    /* ---- supervision of a worker process (isolation AUTO or PROCESS) ---- */
    int standby;               /* keep a warm standby worker (CUDA initialised, region
                                * registered, waiting) so a recovery does not pay a cold
                                * start: 1 on, 0 off (default; rk-bridge turns it on) */
    uint32_t request_deadline_ms; /* a user actor running longer is a fault (an endless
                                * loop): its worker is replaced. 0 = no deadline;
                                * default 10000 */
    uint32_t heartbeat_ms;     /* a worker whose consumer stamps no heartbeat this long
                                * is dead or wedged; default 1000 (env RK_HEARTBEAT_MS),
                                * 50..RK_HEARTBEAT_MS_MAX.
                                * An actor that runs long is request_deadline_ms's
                                * business: the heartbeat goes on meanwhile */
    uint32_t fault_limit;      /* crash loop: after this many faults within
                                * fault_window_ms, stop restarting the GPU worker and
                                * serve built-ins on the CPU (rk_runtime_retry_gpu tries
                                * the GPU again); default 10, 1..RK_FAULT_LIMIT_MAX */
    uint32_t fault_window_ms;  /* default 60000 */
    int share_gpu;             /* 1: allow a second runtime on a GPU another runtime
                                * holds (they time-slice: latency and throughput of
                                * both suffer); default 0: refuse, naming the holder */
    int test_faults;           /* 1: accept the test-only ops RK_OP_FAULT and RK_OP_HANG
                                * (a worker process must serve: they crash or hang it).
                                * For tests; default 0 */

    /* ---- several devices behind one runtime ---- */
    int n_devices;             /* 0 or 1 (default 0): `device` alone. N > 1: devices[0..N),
                                * each with its own worker, region and ring kernel, so a
                                * fault on one costs the others nothing; RK_DEVICES_ALL:
                                * every GPU the driver lists (at least one). On the CPU
                                * backend each is one more CPU worker (what CI runs).
                                * Each host actor's requests go to one device
                                * (rk_actor_open says which) */
    int devices[RK_MAX_DEVICES]; /* device ordinals for n_devices > 1, distinct */
} rk_config;

/* Fills *cfg with the defaults above (NULL: nothing). */
void rk_config_init(rk_config *cfg);

/* What the runtime runs on, for logs and the bridge's `status`. */
typedef struct rk_info {
    rk_backend_kind backend;  /* the backend in use: CPU or CUDA, never AUTO */
    char backend_name[8];     /* "cuda" or "cpu" */
    char why[256];            /* why this backend: e.g. "no CUDA device: ..." */
    int has_device;           /* 1 when a GPU is in use */
    char device_name[128];
    int sm_count;
    int cc_major, cc_minor;
    uint32_t grid, block, smem;                /* the running kernel's configuration (CPU
                                                * backend: the configured values) */
    uint32_t max_grid, max_block, max_smem;    /* the device's limits for this kernel */
    uint32_t ring_slots, slot_size, msg_max;   /* msg_max: largest inline message */
    size_t arena_size, max_payload;
    uint32_t reply_rings;                      /* reply rings (rk_config.reply_rings) */
} rk_info;

typedef struct rk_stats {
    uint64_t requests;   /* requests enqueued */
    uint64_t replies;    /* replies delivered to actors */
    uint64_t errors;     /* replies with a non-zero status, and failed sends */
    uint64_t restarts;   /* relaunches: rk_runtime_relaunch, and each worker started after a fault
                          * (a group of devices sums its devices': one relaunch of N counts N) */
    uint64_t arena_used; /* arena bytes allocated now */
    uint64_t arena_peak;
} rk_stats;

/* Opens a runtime. cfg NULL means defaults. On success *out owns the
 * runtime (close it with rk_runtime_close). On failure returns a negative
 * code, *out is NULL and rk_last_detail() says what failed, naming the
 * value and the limit. */
int rk_runtime_open(rk_runtime **out, const rk_config *cfg);

/* Stops the backend, fails every request still in flight with
 * -RK_ECLOSED, closes the runtime's actors and frees everything. NULL is a
 * no-op. */
void rk_runtime_close(rk_runtime *rt);

/* Copies the runtime's description into *out (a NULL argument: nothing).
 * Thread-safe. */
void rk_runtime_info(const rk_runtime *rt, rk_info *out);

/* Copies the counters into *out (a NULL argument: nothing). Thread-safe. */
void rk_runtime_stats(const rk_runtime *rt, rk_stats *out);

/* Returns 0 while the backend is healthy, or the negative code of the
 * fault that stopped it (e.g. -RK_EDEVICE); -RK_EINVAL for a NULL
 * runtime. Thread-safe. */
int rk_runtime_health(rk_runtime *rt);

/* Relaunches the backend with a new kernel configuration (validated first:
 * on an invalid configuration nothing changes and the launch error is
 * returned). Queued requests are kept. On the CPU backend the values are
 * recorded once they are within RK_GRID_MAX, RK_BLOCK_MAX and RK_SMEM_MAX
 * (every backend checks those). With a GPU worker that
 * is not running (RK_WORKER_DEGRADED or _FAILED below) there is no kernel
 * to relaunch: a worker started for it checks the configuration against
 * the device (as long as a cold start) and it is recorded for the GPU's
 * next worker (rk_runtime_retry_gpu). Thread-safe. */
int rk_runtime_relaunch(rk_runtime *rt, uint32_t grid, uint32_t block, uint32_t smem);

/* ---- the worker process (isolation AUTO with CUDA, or PROCESS) ---- */

typedef enum rk_worker_state {
    RK_WORKER_NONE = 0,       /* the backend runs in this process */
    RK_WORKER_RUNNING = 1,    /* a worker serves */
    RK_WORKER_RECOVERING = 2, /* a worker failed; a fresh one is being started */
    RK_WORKER_DEGRADED = 3,   /* crash loop: the GPU is not restarted; built-ins are
                               * served on the CPU in this process, the rest fails with
                               * -RK_EDEVICE until rk_runtime_retry_gpu */
    RK_WORKER_FAILED = 4,     /* no worker could be started; requests fail */
} rk_worker_state;

/* The last fault a worker took. */
typedef struct rk_fault_info {
    int64_t at_ns;        /* CLOCK_MONOTONIC when it was detected, 0 = none yet */
    int error;            /* negative RK_E* code, e.g. -RK_EDEVICE */
    uint16_t actor;       /* the host actor whose request was blamed (0xffff: none) */
    uint16_t type;        /* its message type */
    uint64_t request_id;  /* its correlation id (0: none blamed) */
    char detail[256];     /* what happened, e.g. "worker 1234 (cuda) exited on signal 9" */
} rk_fault_info;

/* One recovery: where the time between a worker's fault and the first
 * reply from its replacement went. Times are CLOCK_MONOTONIC ns. */
typedef struct rk_recovery {
    int64_t detected_at;  /* the supervisor noticed the fault */
    int64_t teardown_ns;  /* detection -> the failed worker killed and reaped (its CUDA
                           * context torn down), its replies delivered, suspects blamed */
    int64_t start_ns;     /* -> the fresh worker serves: a warm standby's GO..RUNNING,
                           * or a cold worker's spawn..RUNNING */
    int64_t first_reply_ns; /* detection -> the first reply from the fresh worker
                           * (re-posting included); 0 when none came before the next fault */
    int64_t suspects_ns;  /* detection -> the suspects it blamed may be retried: once the
                           * fresh worker serves and, with a standby configured, the next
                           * standby is ready (at most 2 s), so that a suspect that faults
                           * again meets a warm standby too; 0 while held */
    uint32_t blamed;      /* requests it blamed (suspects and poison) */
    int warm;             /* 1: the warm standby took over */
    int error;            /* the fault's code */
} rk_recovery;

typedef struct rk_worker_info {
    rk_worker_state state;
    char state_name[16];     /* "none", "running", "recovering", "degraded", "failed" */
    int pid;                 /* the serving worker's pid, 0 when none */
    char backend[8];         /* what the worker runs: "cuda" or "cpu" */
    uint64_t restarts;       /* workers started after the first */
    uint64_t faults;         /* worker faults seen (exits, sticky errors, silent
                              * heartbeats, requests past their deadline) */
    uint64_t poisoned;       /* requests answered -RK_EDEVICE because they faulted twice */
    int64_t last_recovery_ns; /* fault detected -> first reply from the fresh worker */
    int standby_ready;       /* a warm standby is waiting */
    int standby_pid;
    rk_fault_info last_fault;
    char why[256];           /* degraded/failed: why; otherwise empty */
} rk_worker_info;

/* Copies the worker's state into *out (state RK_WORKER_NONE when the
 * backend runs in this process; a NULL argument: nothing). Thread-safe. */
void rk_runtime_worker(rk_runtime *rt, rk_worker_info *out);

/* Copies the last (up to max, at most 64 kept) recoveries, oldest first,
 * into out; returns how many. Thread-safe. */
int rk_runtime_recoveries(rk_runtime *rt, rk_recovery *out, int max);

/* The operator's action after a crash loop (state RK_WORKER_DEGRADED):
 * starts a GPU worker again, re-posting what the CPU has not answered.
 * Returns 0 once it serves, or the start error (the runtime stays
 * degraded). -RK_ENOTSUP when no worker backend is in use. Thread-safe;
 * may take as long as a cold worker start. */
int rk_runtime_retry_gpu(rk_runtime *rt);

/* Name of a backend kind: "auto", "cpu", "cuda". */
const char *rk_backend_name(rk_backend_kind kind);

/* Parses "auto", "cpu" or "cuda"; returns 0 or -RK_EINVAL. */
int rk_backend_parse(const char *s, rk_backend_kind *out);

/* ---- several devices (rk_config.n_devices) ---- */
/* How many devices serve this runtime: 1 unless rk_config.n_devices asked
 * for more. Thread-safe. */
int rk_runtime_device_count(const rk_runtime *rt);
/* The runtime of device i (0 <= i < count; rt itself for a single device),
 * owned by rt: read it with rk_runtime_info, _stats, _health, _worker and
 * _recoveries, pin actors to it with rk_actor_open_on; never close it. NULL
 * when i is out of range. On a runtime of several devices, rk_runtime_info,
 * _worker, _recoveries and the actor list answer for device 0, _stats sums
 * them, _health is 0 while any device serves, and _relaunch and _retry_gpu
 * act on each (_relaunch on all or none: a device that refuses the
 * configuration sends those relaunched before it back to theirs).
 * Thread-safe. */
rk_runtime *rk_runtime_device(rk_runtime *rt, int i);

/* ---- the actors a runtime serves, by name (rk/module.h) ---- */
struct rk_actor_decl;
/* The built-in actors, echo and vadd: the first of rk_runtime_actor_at. */
#define RK_BUILTIN_ACTORS 2
/* How many actors the runtime serves by name: the built-ins echo and vadd,
 * then every actor of the loaded modules. Thread-safe. */
int rk_runtime_actor_count(const rk_runtime *rt);
/* The i-th of them (0 <= i < count): its declaration (owned by the runtime
 * or its module, valid until rk_runtime_close or a reload), its message type in *type
 * and the file it came from in *origin ("built-in" for echo and vadd); NULL
 * when i is out of range. Thread-safe. */
const struct rk_actor_decl *rk_runtime_actor_at(const rk_runtime *rt, int i, uint16_t *type,
                                                const char **origin);
/* Finds an actor by name: its declaration and type, or NULL. Thread-safe. */
const struct rk_actor_decl *rk_runtime_actor_find(const rk_runtime *rt, const char *name,
                                                  uint16_t *type);
/* Whether the backend in use can run that actor: 1, or 0 for a GPU-only
 * actor on the CPU backend (its requests are answered -RK_ENODEV). */
int rk_runtime_actor_runs(const rk_runtime *rt, const struct rk_actor_decl *decl);

/* Deploys a new set of actor modules into the open runtime: paths[0..n)
 * replace rk_config.modules (files or directories, read as at open; n 0
 * unloads them all); the built-ins and rk_config.actors stay.
 *   1. The new set is loaded and checked here first: a module refused (as
 *      rk_runtime_open refuses one, the file and the cause in the detail)
 *      changes nothing.
 *   2. Every reply must be in: with any request of an open actor in flight
 *      or staged it is -RK_EBUSY, naming how many, and nothing changes
 *      (a request sent for the old set must not reach the new one, whose
 *      types may differ).
 *   3. A worker process for the new set starts beside the serving one (a
 *      cold start, about what rk_runtime_open's takes, unless
 *      rk_runtime_reload_prepare below did it already): if it does not
 *      start, nothing changes. Then the serving consumer stops at a message
 *      boundary and the new one takes over (the CPU backend in this process:
 *      its thread restarts). One that fails as it takes over puts the
 *      previous set back on a fresh worker, and so do the devices of a
 *      group done before it: the code and detail say why (if even that
 *      worker fails, the runtime is degraded as after a crash loop).
 * Afterwards the module actors' declarations, types and origins are the
 * new set's: look them up again (rk_runtime_actor_find); those got before
 * are invalid. Open actors stay open. Device-resident actor state starts
 * over (a new worker). Not for the CUDA backend in this process
 * (RK_ISOLATION_NONE: -RK_ENOTSUP) nor a worker that does not serve
 * (degraded or failed: -RK_EDEVICE; rk_runtime_retry_gpu first).
 * Thread-safety: while it runs no other thread may use rt (send, receive,
 * look up actors, or read declarations got before); one call at a time.
 * rk-bridge calls it on SIGHUP, between requests (bridge/README.md). */
int rk_runtime_reload_modules(rk_runtime *rt, const char *const *paths, size_t n);
/* Optional, ahead of rk_runtime_reload_modules(rt, paths, n): what a reload
 * does that needs no pause. The set is loaded and checked (refused here,
 * nothing changed) and its worker process started beside the serving one
 * (the cold start: a CUDA context, the modules loaded), while other threads
 * go on using rt as usual. A reload of the same paths then only switches
 * (the serving worker stops at a message boundary, the prepared one takes
 * over, as a warm standby does after a fault); a reload of other paths
 * drops it. The files are read here: the set deployed is the one
 * prepared. Not concurrently with another prepare or reload;
 * rk_runtime_close drops a prepared set. rk-bridge prepares on SIGHUP while
 * it serves, and holds requests only for the switch. */
int rk_runtime_reload_prepare(rk_runtime *rt, const char *const *paths, size_t n);

/* ---- host actors ---- */

/* Opens an actor on rt. *out is owned by the caller until rk_actor_close
 * (or rk_runtime_close). Fails with -RK_EBUSY at max_actors. On every
 * failure (here and in rk_actor_open_on) *out is NULL, unless out is. */
int rk_actor_open(rk_runtime *rt, rk_actor **out);
/* On a runtime of several devices, rk_actor_open places the actor: every
 * request of it goes to the device with the fewest requests outstanding
 * when it opened, among those not failed for good (ties in turn), so one
 * actor's requests keep their order. rk_actor_open_on pins it to device i
 * instead (device-resident actor state then stays on one GPU); -RK_EINVAL
 * names i and the count when it is out of range. */
int rk_actor_open_on(rk_runtime *rt, int device, rk_actor **out);
/* The index of the device an actor's requests go to (0 for one device). */
int rk_actor_device(const rk_actor *a);

/* One large operation split across every device of a runtime, its reply
 * assembled in order: a split holds four actors on each device (fewer when
 * max_actors has no room for them; at least one). Only elementwise
 * operations split; of the built-ins that is vadd (RK_OP_VADD, payload
 * a || b of float32): each device adds a contiguous share, gathered from
 * the caller's buffer, all at once. Shares of 2^16 elements or more go by
 * a thread each, and by up to four threads a device where each still has
 * 2^16 (the host's copies into and out of the arenas are what a large split
 * waits for). Each thread's share goes in parts of up to 2^18 elements
 * (fewer where max_payload / 8 is), a few in flight (within half the
 * arena), so the copies overlap the device's adds and a split is not
 * bounded by max_payload. rk_split_call writes the n * 4 result bytes to
 * out and *out_len; -RK_ENOTSUP for another type, -RK_EINVAL for a payload
 * that is not a || b, -RK_EMSGSIZE when out_cap is too small, else the
 * first device's error (every part's reply is still taken). The result is
 * the same as one unsplit call. A call that timed out leaves its parts in
 * flight: their late replies are dropped by the next call, which waits for
 * its own. A split is used by one thread at a time; rk_split_close before
 * closing the runtime. */
typedef struct rk_split rk_split;
int rk_split_open(rk_runtime *rt, rk_split **out);
void rk_split_close(rk_split *s);
int rk_split_call(rk_split *s, uint16_t type, const void *data, size_t len, void *out, size_t out_cap,
                  size_t *out_len, int timeout_ms);

/* Closes an actor. Replies still in flight are discarded when they arrive;
 * their arena space is reclaimed then. NULL is a no-op. */
void rk_actor_close(rk_actor *a);

/* A gather element: the request payload is the concatenation of iovs. */
typedef struct rk_iov {
    const void *base;
    size_t len;
} rk_iov;

/* A reply. data/len are borrowed from the actor: valid until
 * rk_reply_release() on it or rk_actor_close(). */
typedef struct rk_reply {
    uint64_t id;
    uint16_t type;
    int status;        /* 0, or the negative code the actor (or the runtime) failed with;
                        * then rk_last_detail() on the receiving thread says why */
    const void *data;
    size_t len;
    uint32_t tag_;     /* internal */
} rk_reply;

/* Sends a request of message type `type` whose payload is the
 * concatenation of iov[0..iovcnt). The payload is copied (into the slot, or
 * into the arena when it does not fit), so the caller keeps its buffers.
 * reply_cap is the most reply bytes to reserve; 0 means the type's default
 * (echo: the payload length; vadd: half of it; user types: reply_size()).
 * Waits up to timeout_ms (-1 forever, 0 not at all) for ring or arena
 * space. On success stores the request's correlation id in *id (may be
 * NULL) and returns 0. Errors: -RK_EINVAL (bad type or arguments),
 * -RK_EMSGSIZE (payload above max_payload or the arena), -RK_EBUSY
 * (actor_window requests in flight), -RK_ETIMEDOUT (no ring space),
 * -RK_ENOSPC (no arena space in time), -RK_ECLOSED, -RK_EDEVICE. */
int rk_actor_sendv(rk_actor *a, uint16_t type, const rk_iov *iov, int iovcnt, size_t reply_cap,
                   uint64_t *id, int timeout_ms);

/* rk_actor_sendv with one buffer. */
int rk_actor_send(rk_actor *a, uint16_t type, const void *data, size_t len, size_t reply_cap,
                  uint64_t *id, int timeout_ms);

/* Zero-copy send, for payloads the caller can produce in place (large
 * vectors): rk_actor_buf_alloc reserves `len` payload bytes where the
 * request will travel (in the data arena when it does not fit a slot) and
 * a window slot, waiting up to timeout_ms for arena space; the caller
 * fills buf->data[0..len) and calls rk_actor_buf_send, which enqueues it
 * without copying the payload again (or rk_actor_buf_abandon to give it
 * back). Arguments and errors as rk_actor_sendv. buf->data belongs to the
 * actor and is valid until the send or abandon. */
typedef struct rk_buf {
    void *data;
    size_t len;
    uint32_t tag_; /* internal */
} rk_buf;
int rk_actor_buf_alloc(rk_actor *a, uint16_t type, size_t len, size_t reply_cap, rk_buf *buf,
                       int timeout_ms);
int rk_actor_buf_send(rk_actor *a, rk_buf *buf, uint64_t *id, int timeout_ms);
void rk_actor_buf_abandon(rk_actor *a, rk_buf *buf);

/* Receives the next reply for this actor (in completion order), waiting up
 * to timeout_ms. Returns 0 and fills *out (release it with
 * rk_reply_release), -RK_ETIMEDOUT, -RK_EAGAIN when nothing is in flight,
 * or -RK_EDEVICE / -RK_ECLOSED when the backend failed (in-flight requests
 * then come back as replies whose status is that code). */
int rk_actor_recv(rk_actor *a, rk_reply *out, int timeout_ms);

/* Gives a reply's storage (and its arena space) back. Releasing it again,
 * or through a copy of the struct, does nothing. */
void rk_reply_release(rk_actor *a, rk_reply *r);

/* Send + wait for that request's reply. Replies to other requests that
 * arrive meanwhile stay queued for rk_actor_recv. Returns 0 (check
 * out->status too) or a send/recv error. */
int rk_actor_call(rk_actor *a, uint16_t type, const void *data, size_t len, size_t reply_cap,
                  rk_reply *out, int timeout_ms);

/* Requests this actor has sent whose replies it has not yet received (0
 * for NULL). */
uint32_t rk_actor_inflight(const rk_actor *a);

/* ---- batches (liburing's submit and peek-batch, DPDK's burst) ----
 *
 * The same requests and replies as above, many per call: a batch of n
 * requests reserves its H2D ring slots with one compare-and-swap of the
 * ring's tail and rings the consumer's doorbell once (one seq_cst fence,
 * and one futex wake only when a CPU consumer sleeps), where n single
 * sends pay both n times. Replies come back as before, one per request,
 * and are reaped many per call. Same rules as the single calls: an actor
 * is used by one thread at a time; these calls work on every backend
 * (CPU, worker process, CUDA in-process or in a worker). */

/* One request of a batch. The payload is iov[0..iovcnt) when iovcnt > 0,
 * else data[0..len); it is copied, as by rk_actor_sendv, so the caller
 * keeps its buffers. When buf is not NULL, the request is that buffer from
 * rk_actor_buf_alloc, sent without a copy (type, data, len, iov, iovcnt and
 * reply_cap are then ignored: rk_actor_buf_alloc took them). */
typedef struct rk_send_req {
    uint16_t type;
    const void *data;
    size_t len;
    const rk_iov *iov;
    int iovcnt;
    size_t reply_cap; /* as rk_actor_sendv's; 0 = the type's default */
    rk_buf *buf;
} rk_send_req;

/* Sends reqs[0..n) in order, as n rk_actor_sendv / rk_actor_buf_send
 * calls would, with one ring reservation and one doorbell per burst (a
 * burst: what fits the ring's free slots; a batch that finds the ring
 * full waits, helping drain replies, and posts the rest as room appears).
 * timeout_ms (-1 forever, 0 not at all) bounds the whole call: waits for
 * arena space and ring space.
 *
 * Returns k > 0: reqs[0..k) were posted, in order, and each will get
 * exactly one reply; ids[0..k) (ids may be NULL, else room for n) hold
 * their correlation ids, increasing; their buffers (req.buf) are sent
 * (buf->data is NULL again, as after rk_actor_buf_send).
 * When k < n, reqs[k] is the request that stopped the batch and none of
 * reqs[k..n) was posted or kept: no reply will come for them, ids[k..n)
 * are not written, their buffers are still allocated and the caller's (to
 * send again or abandon). rk_last_detail() says why reqs[k] stopped it;
 * sending reqs + k again returns its error. A request stops the batch
 * when it is invalid (as rk_actor_sendv's -RK_EINVAL, -RK_ENOTSUP,
 * -RK_EMSGSIZE; a buf that is not a buffer of this actor from
 * rk_actor_buf_alloc, or one given twice), when the actor's window is full
 * (-RK_EBUSY: no wait, as rk_actor_sendv), or when arena or ring space did
 * not come in time (-RK_ENOSPC, -RK_ETIMEDOUT); the runtime closing
 * (-RK_ECLOSED) or its backend failing (-RK_EDEVICE) stops it too.
 * Returns a negative error (those above) when reqs[0] could not be posted:
 * then nothing was; -RK_EINVAL when a or reqs is NULL or n <= 0. */
int rk_actor_send_batch(rk_actor *a, const rk_send_req *reqs, int n, uint64_t *ids,
                        int timeout_ms);

/* Reaps up to max replies: waits up to timeout_ms, as rk_actor_recv, for
 * the first one, then takes every reply that is ready (up to max) without
 * waiting more. Returns how many it stored in out[0..k) (k >= 1), in
 * completion order, or rk_actor_recv's error when none came (then out is
 * untouched): -RK_ETIMEDOUT, -RK_EAGAIN (nothing in flight), -RK_EDEVICE
 * or -RK_ECLOSED; -RK_EINVAL when a or out is NULL or max <= 0. Each
 * reply's data is borrowed as rk_actor_recv's: release each one
 * (rk_reply_release) or all of them at once (rk_reply_release_batch).
 * rk_last_detail() explains the last failed reply of the batch. */
int rk_actor_recv_batch(rk_actor *a, rk_reply *out, int max, int timeout_ms);

/* rk_reply_release on r[0..n): gives every reply's storage back. */
void rk_reply_release_batch(rk_actor *a, rk_reply *r, int n);

/* Why reply r (held: not yet released) failed, as one sentence into
 * buf[0..cap) (empty when its status is 0): what rk_last_detail() said
 * right after r alone was received. For replies reaped many at a time,
 * where rk_last_detail() explains only the last failed one. Returns 0, or
 * -RK_EINVAL (a NULL argument, cap 0, or r not held by a). Same thread
 * rules as rk_actor_recv. */
int rk_reply_detail(const rk_actor *a, const rk_reply *r, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* RK_RUNTIME_H */
