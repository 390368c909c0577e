/* supervisor.h - the worker backend's state, shared by supervisor.c
 * (starting, watching and replacing workers) and worker_backend.c (the
 * backend ops: open, close, relaunch, info, retry). */
#ifndef RK_SUPERVISOR_H
#define RK_SUPERVISOR_H

#include "worker.h"

#define RK__HIST 64     /* recoveries kept for rk_runtime_recoveries */

typedef struct rk__super {
    rk_runtime *rt;
    pthread_mutex_t lock; /* everything below; taken before the reply rings' locks */
    pthread_t thread;
    bool thread_on;
    int evfd;             /* wakes the thread to quit */
    _Atomic bool quit;
    rk__proc active, standby;
    rk__proc next;        /* a reload's worker, started beside active (rk_runtime_reload_prepare) */
    const void *next_for; /* ... for this set of modules (rk__modset *) */
    rk__cpu_thread cpu;   /* degraded: built-ins served here */
    _Atomic rk_worker_state state; /* read by health() without the lock */
    int lock_fd;          /* the per-GPU lock, -1 */
    uint64_t restarts, faults, poisoned;
    rk_fault_info last;
    char why[256];
    int64_t *fault_at;    /* the last fault_limit fault times, a ring */
    uint32_t fault_next;
    uint32_t no_progress; /* faults in a row with no reply delivered between them */
    uint64_t replies_at_go;
    int64_t standby_after; /* spawn a standby at or after this time; 0 = never */
    uint32_t standby_fails;
    uint64_t hb_seen;
    int64_t hb_change;
    uint64_t sus_head; /* H2D cons_head at the last look while a suspect's retry waited in it */
    uint64_t run_word[RK__RUNNING_SLOTS];
    int64_t run_since[RK__RUNNING_SLOTS];
    rk_recovery hist[RK__HIST]; /* the last recoveries, a ring */
    uint32_t n_hist;
} rk__super;

RK__HIDDEN extern const char *const rk__state_names[];
static inline const char *rk__kind_name(uint32_t kind) { return kind == RK__WB_CUDA ? "cuda" : "cpu"; }

/* supervisor.c */
RK__HIDDEN int rk__spawn_ready(rk__super *s, rk__proc *w, uint32_t kind);
/* The same for another set of modules (a reload's, before it is rt's). */
RK__HIDDEN int rk__spawn_ready_with(rk__super *s, rk__proc *w, uint32_t kind, const struct rk__modset *mods);
/* Whether the GPU would run grid/block/smem: a CUDA worker spawned with
 * them checks them against its device as any worker's start does (its
 * HELLO), and is ended; *dev: what it would run (grid 0 and block 0
 * resolved). For a lane with no kernel to relaunch (degraded, failed):
 * the configuration it records is then checked as a running one's is.
 * Takes as long as a cold start. s->lock held. */
RK__HIDDEN int rk__check_launch(rk__super *s, uint32_t grid, uint32_t block, uint32_t smem, rk__wdev *dev);
RK__HIDDEN int rk__go(rk__super *s, rk__proc *w, bool *served);
RK__HIDDEN void rk__fill_info(rk__super *s, const rk__proc *w);
RK__HIDDEN int rk__take_over(rk__super *s, uint32_t kind, bool *served, bool *warm);
RK__HIDDEN void rk__rings_reset_locked(rk_runtime *rt);
RK__HIDDEN void rk__degrade(rk__super *s, const char *why);
RK__HIDDEN void *rk__super_main(void *arg);
/* Completes the history's newest entry from what the router saw. */
RK__HIDDEN void rk__note_first_reply(rk__super *s);

#endif
