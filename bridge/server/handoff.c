/* bridge/server/handoff.c - sleeping and waking across the frontend <->
 * worker rings (--io-threads > 1).
 *
 * The frontend and the workers hand items over through rings (spsc.h) with
 * no system call while both are awake. A thread with nothing to do spins
 * for the spin window, then blocks on its eventfd, but only after saying
 * so: the classic Dekker handshake, a seq_cst fence on each side.
 *   sleeper  (rkb_sleep_prepare): sleeping = 1; fence S1; re-check rings;
 *                                 poll(eventfd)
 *   producer (rkb_wake):          publish (release store of tail);
 *                                 fence P1; if (sleeping) write(eventfd)
 * S1 and P1 are ordered in the single total order of seq_cst operations:
 * when S1 comes first, the producer's load of `sleeping` after P1 reads 1
 * and it writes the eventfd; when P1 comes first, the sleeper's re-check
 * after S1 reads the published tail and it does not block. Either way no
 * item waits for a thread that sleeps. A producer that reads 1 swaps it to
 * 0, so one sleep costs one write even with several producers (a spurious
 * write only makes the next poll return at once). */
#include "server.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

int rkb_waker_init(rkb_waker *w)
{
    w->sleeping = 0;
    w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return w->efd < 0 ? -1 : 0;
}

void rkb_waker_fini(rkb_waker *w)
{
    if (w->efd >= 0)
        close(w->efd);
    w->efd = -1;
}

void rkb_sleep_prepare(rkb_waker *w)
{
    __atomic_store_n(&w->sleeping, 1, __ATOMIC_SEQ_CST);
    /* S1: pairs with P1 in rkb_wake and the frontend's wake of its workers */
    rkb__fence_seq_cst();
}

/* After the poll, or instead of it when the re-check found work. readable:
 * the poll saw the eventfd (read it to re-arm it). */
void rkb_sleep_end(rkb_waker *w, bool readable)
{
    /* relaxed: nothing is published through this store; a producer that
     * still reads 1 only writes the eventfd once too often */
    rkb__st_relaxed(&w->sleeping, 0);
    uint64_t v;
    if (readable && read(w->efd, &v, sizeof v) < 0 && errno != EAGAIN)
        rkb_logk(RKB_LK_SYSTEM, RKB_LOG_ERROR, "reading an eventfd: %s", strerror(errno));
}

/* The producer's half: the caller has published its items and then
 * executed P1 (rkb__fence_seq_cst). */
void rkb_wake_after_fence(rkb_waker *w)
{
    /* the exchange only elects one waker; the eventfd's write/read carry
     * no data (the ring indices do) */
    if (rkb__ld_relaxed(&w->sleeping) && __atomic_exchange_n(&w->sleeping, 0, __ATOMIC_RELAXED))
        rkb_wake_always(w);
}

void rkb_wake(rkb_waker *w)
{
    rkb__fence_seq_cst(); /* P1: the tail stores above before the load of sleeping */
    rkb_wake_after_fence(w);
}

void rkb_wake_always(rkb_waker *w)
{
    uint64_t one = 1;
    if (w->efd >= 0 && write(w->efd, &one, sizeof one) != (ssize_t)sizeof one)
        rkb_logk(RKB_LK_SYSTEM, RKB_LOG_ERROR, "writing an eventfd: %s", strerror(errno));
}

rkb_spsc *rkb_ring_new(uint32_t entries)
{
    size_t sz = rkb_spsc_memsize(entries, sizeof(rkb_item));
    rkb_spsc *q = sz ? aligned_alloc(RKB_SPSC_ALIGN, sz) : NULL;
    if (q)
        rkb_spsc_init(q, entries, sizeof(rkb_item));
    return q;
}

uint32_t rkb_ring_discard(rkb_spsc *q)
{
    uint32_t n = 0;
    rkb_item *it;
    while (q && (it = rkb_spsc_sc_peek(q))) {
        rkb_env_close(&it->env);
        if (it->n_body)
            zmq_msg_close(&it->body);
        rkb_spsc_sc_release(q);
        n++;
    }
    return n;
}
