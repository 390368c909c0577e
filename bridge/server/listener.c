/* bridge/server/listener.c - an endpoint's listening socket when the
 * process runs out of file descriptors.
 *
 * accept() then fails and the socket stays readable, so ZeroMQ's I/O
 * thread retries it in a loop, a whole core, for as long as it lasts
 * (it reports each failure as ZMQ_EVENT_ACCEPT_FAILED and does nothing
 * else). zmq_unbind would stop that, but it also closes every connection
 * accepted through the endpoint (ZeroMQ's sessions are children of the
 * listener), losing the requests in them. So the bridge works on the
 * listening socket itself, which it finds by its address (libzmq has no
 * call that returns it) and keeps a second descriptor of:
 *  - pause: the descriptor number ZeroMQ accepts on is pointed at a decoy,
 *    a listening socket nobody can reach (its accept() says EAGAIN and
 *    takes no descriptor); new connections stop reaching the real accept
 *    queue: on TCP a socket filter drops incoming SYNs (the client's
 *    kernel retransmits them, so it connects once the pause ends); an ipc
 *    socket file is renamed to PATH.paused (a connect finds nothing there,
 *    and ZeroMQ clients retry), and its backlog shrinks to its minimum (all
 *    an abstract ipc name can do: a connect beyond it fails);
 *  - shed: what waits in the real queue is accepted and closed at once,
 *    with a descriptor kept spare for that (libuv's "EMFILE trick"; while
 *    the decoy is in place ZeroMQ does not race for it), so the real
 *    socket stops being readable and ZeroMQ's thread goes back to sleep;
 *  - resume: filter off, backlog back (ZMQ_BACKLOG), the real socket back
 *    under ZeroMQ's descriptor number.
 * The socket, its epoll registration in ZeroMQ and the connected clients
 * are never touched. */
#include "server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define RKB_SHED_MAX 4096 /* connections shed per call: a flood must not starve requests */

/* ---- finding the listening socket ----------------------------------------- */

/* e->bound as a socket address ("tcp://ADDR:PORT" with a numeric address,
 * "ipc://PATH" or "ipc://@ABSTRACT", as ZMQ_LAST_ENDPOINT writes them). */
static socklen_t rkb__address(const rkb_endpoint *e, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof *ss);
    if (!strncmp(e->bound, "ipc://", 6)) {
        struct sockaddr_un *un = (struct sockaddr_un *)ss;
        const char *path = e->bound + 6;
        size_t n = strlen(path);
        if (n >= sizeof un->sun_path)
            return 0;
        un->sun_family = AF_UNIX;
        memcpy(un->sun_path, path, n);
        if (path[0] == '@')
            un->sun_path[0] = 0; /* abstract: no terminating zero counts */
        return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (path[0] != '@'));
    }
    char hp[128];
    const char *colon = rkb_tcp_host(e->bound, hp, sizeof hp);
    if (!colon || *colon != ':')
        return 0;
    uint16_t port = htons((uint16_t)strtoul(colon + 1, NULL, 10));
    struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, hp, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = port;
        return sizeof *in4;
    }
    if (inet_pton(AF_INET6, hp, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = port;
        return sizeof *in6;
    }
    return 0;
}

static bool rkb__same(const struct sockaddr_storage *a, socklen_t alen,
                      const struct sockaddr_storage *b, socklen_t blen)
{
    if (a->ss_family != b->ss_family)
        return false;
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    if (a->ss_family == AF_INET6) {
        const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
        return x->sin6_port == y->sin6_port && !memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr);
    }
    /* ipc: the length counts (an abstract name has no terminating zero) */
    const struct sockaddr_un *x = (const void *)a, *y = (const void *)b;
    return alen == blen && !memcmp(x->sun_path, y->sun_path, alen - offsetof(struct sockaddr_un, sun_path));
}

static bool rkb__taken(const rkb_port *p, int fd)
{
    for (int i = 0; i < p->n_eps; i++)
        if (p->eps[i].lfd == fd)
            return true;
    return false;
}

void rkb_listener_find(rkb_port *p, rkb_endpoint *e)
{
    e->lfd = e->real_fd = -1;
    if (strncmp(e->bound, "tcp://", 6) && strncmp(e->bound, "ipc://", 6))
        return; /* inproc: no descriptors */
    struct sockaddr_storage want;
    socklen_t len = rkb__address(e, &want);
    DIR *d = len ? opendir("/proc/self/fd") : NULL;
    if (!d) {
        rkb_log(RKB_LOG_WARN, "cannot find the listening socket of %s (%s): running out of file "
                "descriptors will cost a core while it lasts", e->bound, len ? strerror(errno) : "its address");
        return;
    }
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        int fd = atoi(de->d_name);
        int listening = 0;
        socklen_t ol = sizeof listening;
        struct sockaddr_storage have;
        socklen_t hl = sizeof have;
        if (de->d_name[0] < '0' || de->d_name[0] > '9' || fd == dirfd(d) || rkb__taken(p, fd) ||
            getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ol) != 0 || !listening ||
            getsockname(fd, (struct sockaddr *)&have, &hl) != 0 || hl > sizeof have)
            continue;
        if (rkb__same(&have, hl, &want, len)) {
            /* shedding must not block on an empty queue (ZeroMQ handles
             * EAGAIN itself) */
            int fl = fcntl(fd, F_GETFL);
            e->real_fd = fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0
                             ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
            if (e->real_fd >= 0)
                e->lfd = fd;
            break;
        }
    }
    closedir(d);
    if (e->lfd < 0)
        rkb_log(RKB_LOG_WARN, "no listening socket has the address of %s: running out of file "
                "descriptors will cost a core while it lasts", e->bound);
}

/* ---- pausing, shedding, resuming ------------------------------------------ */

/* The filters: drop everything (the decoy), or drop a TCP segment with SYN
 * set and ACK clear, a new connection's first packet (a paused TCP
 * endpoint). Socket filters see TCP packets from the TCP header (byte 13:
 * the flags). A connection whose handshake completes while the SYN filter
 * is attached inherits it, harmlessly: its peer sends no more bare SYNs. */
static struct sock_filter rkb__drop_all[] = {BPF_STMT(BPF_RET | BPF_K, 0)};
static struct sock_filter rkb__drop_syn[] = {
    BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 13),
    BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0x12),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x02, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, 0),
    BPF_STMT(BPF_RET | BPF_K, 0xffffffffu),
};

static int rkb__filter(int fd, struct sock_filter *f, unsigned short n)
{
    if (f) {
        struct sock_fprog prog = {n, f};
        return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog);
    }
    int unused = 0;
    return setsockopt(fd, SOL_SOCKET, SO_DETACH_FILTER, &unused, sizeof unused);
}

static bool rkb__is_tcp(const rkb_endpoint *e) { return !strncmp(e->bound, "tcp://", 6); }

/* The decoy: listening on loopback, every packet to it dropped. */
static int rkb__decoy(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd >= 0 && rkb__filter(fd, rkb__drop_all, 1) == 0 &&
        bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(fd, 1) == 0)
        return fd;
    int err = errno;
    if (fd >= 0)
        close(fd);
    errno = err;
    return -1;
}

/* The name an ipc socket file has while paused. */
static void rkb__hidden(const rkb_endpoint *e, char *out, size_t cap)
{
    snprintf(out, cap, "%s.paused", e->path);
}

int rkb_listener_pause(rkb_port *p, rkb_endpoint *e)
{
    if (e->lfd < 0 || p->decoy_fd < 0)
        return -1;
    int rc = rkb__is_tcp(e) ? rkb__filter(e->real_fd, rkb__drop_syn, 5) : listen(e->real_fd, 0);
    char hidden[sizeof e->path + 8];
    rkb__hidden(e, hidden, sizeof hidden);
    e->hidden = rc == 0 && e->ipc_file &&
                renameat2(AT_FDCWD, e->path, AT_FDCWD, hidden, RENAME_NOREPLACE) == 0;
    /* one atomic swap: ZeroMQ's next accept() on lfd meets the decoy */
    if (rc != 0 || dup3(p->decoy_fd, e->lfd, O_CLOEXEC) < 0) {
        rkb_logk(RKB_LK_SYSTEM, RKB_LOG_ERROR, "cannot pause %s: %s", e->bound, strerror(errno));
        return -1;
    }
    e->listening = false;
    return 0;
}

void rkb_listener_resume(rkb_port *p, rkb_endpoint *e)
{
    if (e->listening || e->lfd < 0)
        return;
    int rc = rkb__is_tcp(e) ? rkb__filter(e->real_fd, NULL, 0) : listen(e->real_fd, p->backlog);
    if (rc != 0)
        rkb_logk(RKB_LK_SYSTEM, RKB_LOG_ERROR, "cannot resume %s: %s", e->bound, strerror(errno));
    char hidden[sizeof e->path + 8];
    rkb__hidden(e, hidden, sizeof hidden);
    if (e->hidden && renameat2(AT_FDCWD, hidden, AT_FDCWD, e->path, RENAME_NOREPLACE) != 0)
        rkb_logk(RKB_LK_SYSTEM, RKB_LOG_ERROR, "cannot rename %s back to %s: %s; ipc clients "
                 "cannot reach this bridge there", hidden, e->path, strerror(errno));
    e->hidden = false;
    /* the swap back: must happen whatever else failed, since ZeroMQ
     * removes lfd from its epoll set by number at close */
    while (dup3(e->real_fd, e->lfd, O_CLOEXEC) < 0 && errno == EINTR)
        ;
    e->listening = true;
}

/* The spare descriptor: closed for a moment so that accept() succeeds. */
static void rkb__spare(rkb_port *p)
{
    if (p->spare_fd < 0)
        p->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

void rkb_listener_open(rkb_port *p)
{
    p->spare_fd = -1;
    rkb__spare(p);
    p->decoy_fd = rkb__decoy();
    if (p->spare_fd < 0 || p->decoy_fd < 0)
        rkb_log(RKB_LOG_WARN, "cannot prepare for running out of file descriptors (%s): it would "
                "cost a core while it lasts", strerror(errno));
}

void rkb_listener_close(rkb_port *p)
{
    for (int i = 0; i < p->n_eps; i++) {
        rkb_endpoint *e = &p->eps[i];
        if (e->real_fd >= 0)
            close(e->real_fd);
        e->real_fd = e->lfd = -1;
    }
    if (p->spare_fd >= 0)
        close(p->spare_fd);
    if (p->decoy_fd >= 0)
        close(p->decoy_fd);
    p->spare_fd = p->decoy_fd = -1;
}

uint64_t rkb_listener_shed(rkb_port *p, rkb_endpoint *e)
{
    if (e->lfd < 0 || e->listening)
        return 0;
    if (p->spare_fd >= 0) {
        close(p->spare_fd);
        p->spare_fd = -1;
    }
    uint64_t n = 0;
    for (int fd; n < RKB_SHED_MAX && (fd = accept4(e->real_fd, NULL, NULL, SOCK_CLOEXEC)) >= 0; n++)
        close(fd);
    rkb__spare(p);
    return n;
}

uint64_t rkb_listener_count(void)
{
    uint64_t n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;)
        n += de->d_name[0] >= '0' && de->d_name[0] <= '9';
    closedir(d);
    return n > 0 ? n - 1 : 0; /* less the directory's own */
}
