/* worker.h - a worker process as librk sees it (worker_proc.c): finding the
 * rk-worker program, starting it on the shared region, talking to it over
 * its control socket (runtime/abi/worker_proto.h), and ending it. Used by
 * the supervisor (supervisor.c). Not thread-safe: one owner per rk__proc. */
#ifndef RK_WORKER_H
#define RK_WORKER_H

#include <sys/types.h>

#include "internal.h"
#include "worker_proto.h"

typedef struct rk__proc {
    pid_t pid;        /* 0: none */
    int ctl;          /* control socket, -1: none */
    uint32_t kind;    /* RK__WB_* */
    bool ready;       /* HELLO received and good: it waits for GO */
    bool live;        /* GO answered RUNNING: it serves */
    rk__wdev dev;     /* from HELLO / RUNNING / RELAUNCHED */
    int64_t spawned_ns;
} rk__proc;

#define RK__PROC_NONE ((rk__proc){.pid = 0, .ctl = -1})

/* Where a helper file of librk is: $env_name, else beside the library (or
 * the program librk is linked into) as NAME or ringkernel/NAME, else
 * install_path. Returns 0 and the path, or -RK_ENOTSUP with every place
 * looked at in the detail. */
RK__HIDDEN int rk__helper_path(const char *name, const char *env_name, const char *install_path, char *path,
                               size_t cap);
/* The worker program: rk-worker, $RK_WORKER. */
RK__HIDDEN int rk__worker_path(char *path, size_t cap);

/* Starts the worker on region_fd (with the modules librk loaded, may be
 * NULL) and sends it `init`. Does not wait for its HELLO. */
struct rk__modset;
RK__HIDDEN int rk__proc_spawn(rk__proc *w, int region_fd, const rk__wmsg *init, const struct rk__modset *mods);

RK__HIDDEN int rk__proc_send(rk__proc *w, const rk__wmsg *m);

/* Receives one message, waiting up to timeout_ms (0: poll, -1: forever).
 * -RK_ETIMEDOUT when none came; -RK_EDEVICE when the worker closed its
 * end (it exited: call rk__proc_end for its status). LOG messages are
 * passed to rk__log and not returned. */
RK__HIDDEN int rk__proc_recv(rk__proc *w, rk__wmsg *m, int timeout_ms);

/* Waits for a message of `kind`; a FAULT, an exit or the timeout fail with
 * the worker's words in the detail. */
RK__HIDDEN int rk__proc_await(rk__proc *w, uint32_t kind, rk__wmsg *m, int timeout_ms);

/* Ends the worker: SIGKILL unless it already exited, then reaps it,
 * waiting at most RK_WORKER_REAP_MS (3 s; a process stuck in the driver
 * is reaped later instead). Describes how it ended in why (may be NULL). */
RK__HIDDEN void rk__proc_end(rk__proc *w, char *why, size_t cap);

/* The same without waiting: SIGKILL, and the exit is reaped in the
 * background. Only for a worker whose kernel is known to be gone (it
 * reported a sticky error: its context no longer runs anything), whose
 * driver teardown (~60 ms on an H100) need not delay the recovery. */
RK__HIDDEN void rk__proc_abandon(rk__proc *w, char *why, size_t cap);

/* Reaps the killed workers that have exited since, waiting up to wait_ms
 * for the rest (0: only those already gone). Any thread. */
RK__HIDDEN void rk__proc_reap_deferred(int wait_ms);

/* Stops the worker cleanly (STOP, STOPPED, exit), ending it the hard way
 * after timeout_ms. rt (may be NULL): the runtime whose rings it serves,
 * drained meanwhile (rk__proc_await_draining). */
RK__HIDDEN void rk__proc_stop(rk__proc *w, int timeout_ms, rk_runtime *rt);
/* rk__proc_await with an rk__drainer routing rt's replies meanwhile: a
 * worker told to stop or relaunch finishes the message at hand, whose
 * reply may wait for room on a reply ring that no actor drains (nobody
 * waits; a close). rt NULL: rk__proc_await. */
RK__HIDDEN int rk__proc_await_draining(rk__proc *w, uint32_t kind, rk__wmsg *m, int timeout_ms, rk_runtime *rt);

/* How long a worker may take to start (CUDA initialisation, registration,
 * validation): RK_WORKER_START_MS, default 30 s. */
RK__HIDDEN int rk__proc_start_ms(void);

/* The per-GPU lock (gpu_lock.c): one runtime per GPU unless shared. Returns
 * a descriptor that holds the lock until closed, or -RK_EBUSY naming the
 * process that holds it. */
RK__HIDDEN int rk__gpu_lock(const char *uuid, const char *name);
/* Takes and closes the connections refused runtimes left on the lock fd
 * (each read the holder's pid from it): the holder calls it now and then,
 * so that the listen backlog never fills and every refusal names it. */
RK__HIDDEN void rk__gpu_lock_drain(int fd);

#endif
