/* actor.h - host actors' private state, shared by actor.c (open, close,
 * the window), send.c (requests in), router.c (replies out of the rings),
 * recv.c (replies to their waiters) and supervisor.c (blaming and
 * answering requests after a worker fault).
 *
 * Per actor, a window of pending-request records (indexed by the tag the
 * message carries) holds what a reply needs: its id, its arena block and a
 * buffer for an inline reply; until the reply arrives the same buffer
 * holds the inline request, so a request can be re-posted after a worker
 * fault without the caller's help. So a reply never allocates, and the
 * number of replies an actor can be owed is bounded by its window. */
#ifndef RK_ACTOR_H
#define RK_ACTOR_H

#include "internal.h"

/* QUEUED: staged and taken into a batch being posted (owner only, within
 * rk_actor_send_batch; it is SENT or back to STAGED/FREE on return) */
enum { RK__P_FREE = 0, RK__P_SENT = 1, RK__P_DONE = 2, RK__P_STAGED = 3, RK__P_QUEUED = 4 };

typedef struct rk__pending {
    uint64_t id;
    uint64_t arena_off; /* request + reply block in the arena ... */
    size_t arena_len;   /* ... or 0 when both travel inline */
    uint64_t out_off;
    size_t out_cap;
    int32_t status;
    uint32_t len;   /* request bytes while SENT, reply bytes once DONE */
    uint32_t gen;   /* the worker generation it was last posted for */
    uint16_t type;
    uint8_t state;  /* RK__P_*: atomic (relaxed) because the owner peeks at it
                     * while a router may set it under its ring's lock; the data
                     * fields are handed over by the ready queue's
                     * release/acquire */
    uint8_t strikes; /* worker faults it was running during (under its ring's lock):
                      * 1 = a suspect, retried alone; 2 = the poison */
    uint8_t *inline_buf;
} rk__pending;
_Static_assert(sizeof(rk__pending) == 64, "a pending record is one cache line (actor.c allocates them aligned)");

struct rk_actor {
    rk_runtime *rt;
    rk__d2h *d2h; /* the ring its replies come back on (rk__d2h_of) */
    uint16_t index;
    bool closing; /* written under its ring's lock; read by routers at every reply */
    uint32_t window;
    rk__pending *pend;
    uint8_t *inline_bufs;
    /* ready queue: tags of replied requests. Single producer at a time (a
     * router or the supervisor, serialised by its ring's lock), single consumer
     * (the owner). The producer's two words have a line of their own: on
     * the owner's line, every reply routed from another thread took that
     * line from the owner and gave it back. */
    uint16_t *ready;
    uint32_t ready_mask;
    _Alignas(64) uint64_t ready_tail; /* router: store-release; owner: load-acquire */
    uint64_t ready_pub;  /* router (under its ring's lock): queued; published as ready_tail
                          * per drain (router.c, rk__publish) */
    /* from here on, what the owner writes (apart from what routers read
     * above: the pointers, window, index) */
    _Alignas(64) uint64_t ready_head; /* owner only */
    uint64_t ready_seen; /* owner only: the ready_tail it last loaded */
    /* free tags: a stack, the owner's until rk_actor_close marks it
     * closing, then its ring's lock holder's (routers give back the
     * records of a closing actor's late replies, and the last one reaps it
     * when n_free reaches window: no record is in use). Plain, not atomic:
     * a locked add per call delayed rk_actor_call's next request */
    uint16_t *free_tags;
    uint32_t n_free;
    /* replies rk_actor_call set aside for rk_actor_recv: owner-private FIFO */
    uint16_t *stash;
    uint32_t stash_head, stash_n;
    uint16_t *order;  /* owner-private scratch: tags to re-post, by id */
    uint16_t *batch;  /* owner-private scratch: tags of a batch being posted */
    uint64_t next_id;
    uint32_t gen;     /* owner-private: the generation its requests go to; behind
                       * rt->gen until it re-posted what it owes (send.c) */
    uint32_t awaiting;         /* owner-private: sent, reply not yet popped */
    /* owner-private: its last look at the other rings (router.c, rk__steal) */
    int64_t steal_at;
    uint64_t steal_seen[RK__D2H_RINGS_MAX];
    bool steal_ready[RK__D2H_RINGS_MAX];
    uint32_t polls;
};

/* actor.c */
/* Gives a pending record back (owner, or a router for a closing actor). */
RK__HIDDEN void rk__pending_put(rk_actor *a, uint16_t tag);
/* Removes a closing actor whose last reply came back. Caller holds its ring's lock. */
RK__HIDDEN void rk__actor_reap(rk_actor *a);
/* After a worker change, every reply ring's lock held: the requests of
 * actors closed while they were in flight will not be answered (the new
 * worker drops the old generation's, and nobody re-posts for a closed
 * actor): their records go back, and each such actor is reaped. */
RK__HIDDEN void rk__reap_closed_locked(rk_runtime *rt);
/* The actor in slot i, or NULL (acquire: it is initialised). */
static inline rk_actor *rk__actor_at(rk_runtime *rt, uint32_t i)
{
    return i < rt->n_actor_slots ? __atomic_load_n(&rt->actors[i], __ATOMIC_ACQUIRE) : NULL;
}

/* Where record p's request payload is staged (rk__prepare: its arena
 * block, or its inline buffer until the post copies it into the slot),
 * and where its reply is once done: what rk_buf.data and rk_reply.data
 * point at, so that a buffer or reply is known for this record's. */
static inline uint8_t *rk__request_data(const rk_runtime *rt, const rk__pending *p)
{
    return p->arena_len ? rt->arena.base + p->arena_off : p->inline_buf;
}
static inline const void *rk__reply_data(const rk_runtime *rt, const rk__pending *p)
{
    return p->arena_len ? (const void *)(rt->arena.base + p->out_off) : p->inline_buf;
}

/* router.c */
/* Claims the next chunk of reply ring d, if any is complete and the lock
 * is free, and routes it; returns the number of replies routed. */
RK__HIDDEN int rk__drain(rk_runtime *rt, rk__d2h *d, const rk_actor *self);
/* Routes everything complete in every reply ring; the caller holds every
 * ring's lock (rk__d2h_lock_all) and wakes the actors afterwards. */
RK__HIDDEN void rk__drain_locked(rk_runtime *rt);
/* The same, taking the locks and waking the actors itself. */
RK__HIDDEN void rk__drain_all(rk_runtime *rt);
/* While a backend's consumer is told to stop or relaunch, it finishes the
 * message at hand, and that reply may wait for room on a ring no actor
 * drains (nobody waits; a close): a drainer routes the rings every 20 ms
 * meanwhile, from a thread of its own. */
typedef struct rk__drainer {
    rk_runtime *rt;
    pthread_t thread;
    pthread_mutex_t lock; /* quit, and the wait between passes */
    pthread_cond_t wake;  /* stop: ends that wait at once */
    bool quit;
    bool on;
} rk__drainer;
RK__HIDDEN void rk__drainer_start(rk__drainer *d, rk_runtime *rt);
RK__HIDDEN void rk__drainer_stop(rk__drainer *d);
/* Chunk after chunk of d under its lock (caller holds it, no chunk out):
 * yield stops after a chunk when a thread blocks on the lock, or after a
 * ring's worth of replies.
 * Returns the number routed; *others: how many went to another actor than
 * self; *rc: -RK_EAGAIN, or the ring error that stopped it. */
RK__HIDDEN int rk__drain_some(rk_runtime *rt, rk__d2h *d, const rk_actor *self, bool yield, int *others,
                              int *rc);
/* Completes a SENT record with `status` and no payload, as if its reply
 * had come (the supervisor's answer to a poison request). Caller holds
 * its ring's lock. */
RK__HIDDEN void rk__answer_locked(rk_runtime *rt, rk_actor *a, uint16_t tag, int status);
/* rk__drain of a's ring by a, which waits for tag want (-1: any): *own
 * says it took that very reply straight from the ring (rk_actor_call's
 * round trip: no chunk, no ready queue), its tag in *tag. Owner only. */
RK__HIDDEN int rk__drain_own(rk_runtime *rt, rk_actor *a, int want, bool *own, uint16_t *tag);
/* Drains the other reply rings that hold a reply nobody claimed since a's
 * last look (at most every 100 us; owner only). */
RK__HIDDEN void rk__steal(rk_actor *a, int64_t now);

/* recv.c */
/* Waits for a reply: the next one (want < 0) or the one with tag `want`,
 * until deadline (ns; timeout_ms is the caller's, for the error's detail). */
RK__HIDDEN int rk__wait(rk_actor *a, int want, rk_reply *out, int64_t deadline, int timeout_ms);

/* send.c */
/* Re-posts, in id order, what a lagging actor still owes after a worker
 * change; true once it is in step with rt->gen. Owner only. */
RK__HIDDEN bool rk__repost(rk_actor *a);
static inline bool rk__in_step(rk_actor *a)
{
    /* acquire: pairs with the supervisor's store-release of gen, after
     * which the records' strikes and the rings' positions are settled */
    return a->gen == atomic_load_explicit(&a->rt->gen, memory_order_acquire);
}
/* Releases the one-suspect-at-a-time token if `word` holds it. */
RK__HIDDEN void rk__suspect_release(rk_runtime *rt, uint64_t word);

#endif
