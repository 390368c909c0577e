/* bridge/server/watch.c - what the thread that owns the port looks at
 * besides requests: the stop signal, the ROUTER's socket events, paused
 * endpoints, and the log's summaries.
 *
 * Accept failures (no file descriptor left; listener.c says why they would
 * cost a core): the endpoint pauses, what waits in its accept queue is
 * shed, and it listens again after a pause that grows from
 * RKB_PAUSE_MIN_NS to RKB_PAUSE_MAX_NS while failures go on. Connected
 * clients are not touched; new ones wait (TCP) or retry (ipc).
 *
 * An ipc endpoint must not get there: libzmq (4.3) aborts the process
 * when an ipc accept() fails for want of a descriptor (its ipc listener
 * lacks EMFILE among the errors it expects). So it pauses while fewer than
 * its backlog + RKB_IPC_RESERVE descriptors are free (connections counted
 * from the socket events, the rest counted at start-up), and resumes once
 * RKB_IPC_RESERVE more are.
 *
 * Settling at exit: libzmq writes a reply into the connection and forgets
 * it; a client whose receive queue is full (ZMQ_RCVHWM) reads no more
 * until it catches up, and if the connection closes meanwhile its libzmq
 * drops what is still in the socket. So before closing, the bridge waits
 * (bounded by --drain-ms) until no connection holds unread bytes. */
#include "server.h"

#include <errno.h>
#include <linux/sockios.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#define RKB_WATCH_NS 1000000LL          /* while busy: every 1 ms */
#define RKB_PAUSE_MIN_NS 100000000LL    /* 100 ms */
#define RKB_PAUSE_MAX_NS 2000000000LL   /* 2 s */
#define RKB_PAUSE_RESET_NS 10000000000LL /* no failure for 10 s: back to the minimum */
#define RKB_IPC_RESERVE 32              /* descriptors kept free, beyond the backlog (ipc) */

/* 1 when a stop signal came; SIGHUP asks for a deploy (deploy.c), unless
 * the bridge stops: a stop cancels a deploy, and one begun after it would
 * hold the socket unread during the drain and outlive the request loops. */
static int rkb__signal(rkb_port *p, int64_t now)
{
    struct signalfd_siginfo si;
    int stop = 0;
    /* every signal waiting: a SIGHUP must not hide a SIGTERM behind it */
    while (p->sfd >= 0 && read(p->sfd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGHUP) {
            if (p->stop_seen)
                rkb_log(RKB_LOG_INFO, "SIGHUP: the bridge is stopping; nothing deployed");
            else
                rkb_deploy_ask(p->sh, now);
            continue;
        }
        rkb_log(RKB_LOG_INFO, "signal %u (%s): shutting down", si.ssi_signo,
                si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM");
        stop = 1;
        p->stop_seen = true;
    }
    return stop;
}

/* The endpoint of sock an event names; else sock's only endpoint, if it
 * has one. */
static rkb_endpoint *rkb__find(rkb_port *p, void *sock, const char *addr, size_t len)
{
    rkb_endpoint *only = NULL;
    int n = 0;
    for (int i = 0; i < p->n_eps; i++) {
        if (p->eps[i].sock != sock)
            continue;
        if (strlen(p->eps[i].bound) == len && !memcmp(p->eps[i].bound, addr, len))
            return &p->eps[i];
        only = &p->eps[i];
        n++;
    }
    return n == 1 ? only : NULL;
}

static void rkb__pause(rkb_port *p, rkb_endpoint *e, int err, int64_t now)
{
    if (!e || e->lfd < 0)
        return; /* listener.c warned at start-up */
    e->shed = true;
    /* paused already (events queued meanwhile, or the decoy's EAGAIN), a
     * failure that is not about descriptors, or it cannot */
    if (!e->listening || (err != EMFILE && err != ENFILE) || rkb_listener_pause(p, e) != 0)
        return;
    bool recent = e->last_failure && now - e->last_failure < RKB_PAUSE_RESET_NS;
    e->backoff_ns = !recent || !e->backoff_ns ? RKB_PAUSE_MIN_NS
                    : e->backoff_ns * 2 > RKB_PAUSE_MAX_NS ? RKB_PAUSE_MAX_NS
                                                           : e->backoff_ns * 2;
    e->last_failure = now;
    e->resume_at = now + e->backoff_ns;
    RKB_INC(p->n, listen_pauses);
    rkb_logk(RKB_LK_ACCEPT, RKB_LOG_WARN,
             "cannot accept a connection on %s: %s (file descriptor limit %llu, %llu connections "
             "open); new connections wait for %lld ms",
             e->bound, strerror(err), (unsigned long long)p->sh->fd_limit,
             (unsigned long long)(RKB_LD(p->n->accepted) - RKB_LD(p->n->disconnects)),
             (long long)(e->backoff_ns / 1000000));
}

/* Descriptors free: the limit less those open at start-up and the
 * connections open now. */
static uint64_t rkb__free_fds(const rkb_port *p)
{
    uint64_t used = p->base_fds + (uint64_t)p->n_conn;
    return p->sh->fd_limit > used ? p->sh->fd_limit - used : 0;
}

/* ipc endpoints pause below this many free descriptors, and resume at
 * RKB_IPC_RESERVE more */
static uint64_t rkb__ipc_reserve(const rkb_port *p) { return (uint64_t)p->backlog + RKB_IPC_RESERVE; }

static bool rkb__is_ipc(const rkb_endpoint *e) { return !strncmp(e->bound, "ipc://", 6); }

static void rkb__guard(rkb_port *p, int64_t now)
{
    uint64_t reserve = rkb__ipc_reserve(p), free_fds = rkb__free_fds(p);
    if (free_fds >= reserve)
        return;
    for (int i = 0; i < p->n_eps; i++) {
        rkb_endpoint *e = &p->eps[i];
        if (!rkb__is_ipc(e) || !e->listening || rkb_listener_pause(p, e) != 0)
            continue;
        e->shed = true;
        e->resume_at = now + RKB_PAUSE_MIN_NS;
        RKB_INC(p->n, listen_pauses);
        rkb_logk(RKB_LK_ACCEPT, RKB_LOG_WARN,
                 "%llu file descriptors free (limit %llu, %d connections open): %s takes no new "
                 "connection until %llu are (libzmq would abort on an ipc accept with none left)",
                 (unsigned long long)free_fds, (unsigned long long)p->sh->fd_limit, p->n_conn,
                 e->bound, (unsigned long long)(reserve + RKB_IPC_RESERVE));
    }
}

/* The descriptors of open connections (the events' value), for
 * rkb_port_settle; a set that cannot grow just loses the wait for that one. */
static void rkb__conn_add(rkb_port *p, int fd)
{
    if (p->n_conn == p->cap_conn) {
        int cap = p->cap_conn ? p->cap_conn * 2 : 64;
        int *n = realloc(p->conn_fds, (size_t)cap * sizeof *n);
        if (!n)
            return;
        p->conn_fds = n;
        p->cap_conn = cap;
    }
    p->conn_fds[p->n_conn++] = fd;
}

static void rkb__conn_remove(rkb_port *p, int fd)
{
    for (int i = 0; i < p->n_conn; i++)
        if (p->conn_fds[i] == fd) {
            p->conn_fds[i] = p->conn_fds[--p->n_conn];
            return;
        }
}

/* One event of monitor (sock's): [uint16 event, uint32 value] then the
 * endpoint's address. */
static int rkb__event(rkb_port *p, void *monitor, void *sock, int64_t now)
{
    zmq_msg_t a, b;
    zmq_msg_init(&a);
    if (zmq_msg_recv(&a, monitor, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&a);
        return 0;
    }
    zmq_msg_init(&b);
    if (zmq_msg_more(&a))
        zmq_msg_recv(&b, monitor, 0);
    uint16_t ev = 0;
    uint32_t value = 0;
    if (zmq_msg_size(&a) >= 6) {
        memcpy(&ev, zmq_msg_data(&a), 2);
        memcpy(&value, (const char *)zmq_msg_data(&a) + 2, 4);
    }
    if (ev == ZMQ_EVENT_ACCEPTED) {
        RKB_INC(p->n, accepted);
        rkb__conn_add(p, (int)value);
    } else if (ev == ZMQ_EVENT_DISCONNECTED) {
        RKB_INC(p->n, disconnects);
        rkb__conn_remove(p, (int)value);
    } else if (ev == ZMQ_EVENT_ACCEPT_FAILED) {
        RKB_INC(p->n, accept_failures);
        rkb__pause(p, rkb__find(p, sock, zmq_msg_data(&b), zmq_msg_size(&b)), (int)value, now);
    }
    zmq_msg_close(&a);
    zmq_msg_close(&b);
    return 1;
}

/* Sheds what waits after failures (once per watch however many events
 * came), and resumes endpoints whose pause is over. */
static void rkb__resume(rkb_port *p, int64_t now)
{
    for (int i = 0; i < p->n_eps; i++) {
        rkb_endpoint *e = &p->eps[i];
        if (e->shed) {
            e->shed = false;
            RKB_ADD(p->n, connections_shed, rkb_listener_shed(p, e));
        }
        if (e->listening || now < e->resume_at)
            continue;
        if (rkb__is_ipc(e) && rkb__free_fds(p) < rkb__ipc_reserve(p) + RKB_IPC_RESERVE) {
            e->resume_at = now + RKB_PAUSE_MIN_NS;
            continue;
        }
        rkb_listener_resume(p, e);
        rkb_logk(RKB_LK_ACCEPT, RKB_LOG_INFO, "accepting connections on %s again", e->bound);
    }
}

int rkb_port_watch(rkb_port *p, int64_t now)
{
    p->next_watch = now + RKB_WATCH_NS;
    int sig = rkb__signal(p, now);
    /* bounded: a flood of events must not starve the requests */
    for (int k = 0; p->monitor && k < 4096 && rkb__event(p, p->monitor, p->router, now); k++)
        ;
    for (int k = 0; p->st.monitor && k < 4096 && rkb__event(p, p->st.monitor, p->st.router, now); k++)
        ;
    rkb__guard(p, now);
    rkb__resume(p, now);
    if (now >= p->next_flush) {
        p->next_flush = now + 1000000000;
        rkb_log_flush(0);
    }
    return sig;
}

int rkb_port_poll_items(rkb_port *p, zmq_pollitem_t *it)
{
    it[0] = (zmq_pollitem_t){NULL, p->sfd, ZMQ_POLLIN, 0};
    it[1] = (zmq_pollitem_t){p->monitor, 0, ZMQ_POLLIN, 0};
    if (!p->st.router)
        return 2;
    /* always: the status endpoint is read whatever the queue bound */
    it[2] = (zmq_pollitem_t){p->st.router, 0, ZMQ_POLLIN, 0};
    it[3] = (zmq_pollitem_t){p->st.monitor, 0, ZMQ_POLLIN, 0};
    return 4;
}

long rkb_port_timeout(const rkb_port *p, int64_t now)
{
    long tmo = -1;
    for (int i = 0; i < p->n_eps; i++) {
        const rkb_endpoint *e = &p->eps[i];
        if (e->listening)
            continue;
        long ms = e->resume_at > now ? (long)((e->resume_at - now) / 1000000) + 1 : 0;
        if (tmo < 0 || ms < tmo)
            tmo = ms;
    }
    return tmo;
}

/* Bytes written to a connection that its client has not yet read (unix
 * sockets) or acknowledged (TCP); 0 for a descriptor that is no socket. */
static int rkb__unread(int fd)
{
    int q = 0;
    return ioctl(fd, SIOCOUTQ, &q) == 0 && q > 0 ? q : 0;
}

bool rkb_port_settle(rkb_port *p, int64_t deadline_ns)
{
    /* quiet twice 5 ms apart: ZeroMQ refills a connection as soon as its
     * client reads, so one empty look may fall between two writes */
    for (int quiet = 0;;) {
        while (p->monitor && rkb__event(p, p->monitor, p->router, rkb_now_ns()))
            ;
        while (p->st.monitor && rkb__event(p, p->st.monitor, p->st.router, rkb_now_ns()))
            ;
        long unread = 0;
        for (int i = 0; i < p->n_conn; i++)
            unread += rkb__unread(p->conn_fds[i]);
        quiet = unread ? 0 : quiet + 1;
        if (quiet >= 2)
            return true;
        if (rkb_now_ns() >= deadline_ns)
            return false;
        nanosleep(&(struct timespec){0, 5000000}, NULL);
    }
}
