/* bridge/server/endpoint.c - where the bridge listens, and the safety rules
 * for it:
 *  - a bind that other hosts can reach needs CURVE, or the operator's
 *    explicit --allow-insecure-remote (then a warning at start-up and in
 *    `status`);
 *  - an ipc:// path is bound only when nothing is there, or when a socket
 *    is there that nobody answers on (left by a bridge that was killed):
 *    never over a regular file or a symlink, never over a live bridge;
 *    libzmq would unlink either without asking;
 *  - its socket file gets --ipc-mode (0600) whatever the umask, and is
 *    removed at exit when it is still the file this bridge created. */
#include "server.h"

#include "endpoint.h" /* bridge/protocol: the syntax, shared with librkc */

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* ---- who can reach an endpoint -------------------------------------------- */

/* True when only this host can reach ep: ipc, inproc, or tcp on a loopback
 * address (127.0.0.0/8, ::1, localhost, the interface lo). Any other tcp
 * host (0.0.0.0, *, an interface, a name) and any other transport reach
 * further. */
const char *rkb_tcp_host(const char *ep, char *host, size_t cap)
{
    if (strncmp(ep, "tcp://", 6))
        return NULL;
    const char *h = ep + 6, *colon = strrchr(h, ':');
    size_t n = colon ? (size_t)(colon - h) : strlen(h);
    if (n >= cap)
        return NULL;
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']') /* [::1] */
        h++, n -= 2;
    memcpy(host, h, n);
    host[n] = 0;
    return colon ? colon : ep + strlen(ep);
}

static bool rkb__host_only(const char *ep)
{
    if (!strncmp(ep, "ipc://", 6) || !strncmp(ep, "inproc://", 9))
        return true;
    char hp[128];
    if (!rkb_tcp_host(ep, hp, sizeof hp))
        return false;
    if (!strcmp(hp, "localhost") || !strcmp(hp, "lo"))
        return true;
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, hp, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, hp, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6) ||
               (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
    return false;
}

int rkb_endpoints_check(rkb_shared *sh)
{
    const rkb_config *c = sh->cfg;
    /* Only the transports the bridge serves, whose reach the check below
     * knows: another scheme, a typo or one a libzmq build may add (ws://)
     * is refused by name rather than judged "reachable from other hosts";
     * a malformed endpoint (no port, port 99999, which ZeroMQ would wrap
     * to another) says what is wrong rather than ZeroMQ's EINVAL. */
    for (int i = 0; i <= c->n_binds; i++) {
        const char *ep = i < c->n_binds ? c->binds[i] : c->status_bind;
        char why[256];
        if (ep && rkb_endpoint_problem(ep, true, why, sizeof why)) {
            fprintf(stderr, "rk-bridge: %s %s: %s\n", i < c->n_binds ? "--bind" : "--status-bind", ep, why);
            return RKB_EXIT_USAGE;
        }
    }
    if (c->curve_secret_file)
        return 0;
    /* every --bind, then --status-bind: the same rule for both */
    for (int i = 0; i <= c->n_binds; i++) {
        const char *ep = i < c->n_binds ? c->binds[i] : c->status_bind;
        const char *opt = i < c->n_binds ? "--bind" : "--status-bind";
        const char *what = i < c->n_binds ? "use the bridge" : "read the bridge's status";
        if (!ep || rkb__host_only(ep))
            continue;
        if (!c->allow_insecure_remote) {
            fprintf(stderr,
                    "rk-bridge: %s %s can be reached from other hosts and CURVE is off: "
                    "anyone who reaches it could %s; serve it with "
                    "--curve-secret-key-file (see --gen-keys), bind a loopback address, or "
                    "accept that with --allow-insecure-remote\n",
                    opt, ep, what);
            return RKB_EXIT_USAGE;
        }
        rkb_warn_operator(sh, "%s is reachable from other hosts without CURVE "
                          "(--allow-insecure-remote): anyone who reaches it can %s", ep, what);
    }
    return 0;
}

/* ---- ipc files ------------------------------------------------------------ */

/* Nothing is at path: 0 when its directory exists, else -1 and why (ZeroMQ
 * would say only "No such file or directory", as if the socket were
 * missing rather than the directory it goes in). */
static int rkb__ipc_dir_check(const char *path, char *msg, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path)
        return 0; /* the current directory, or / */
    char dir[PATH_MAX];
    if ((size_t)(slash - path) >= sizeof dir)
        return 0; /* ZeroMQ will say the path is too long */
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = 0;
    struct stat st;
    int rc = stat(dir, &st), err = rc ? errno : 0;
    if (rc == 0 && S_ISDIR(st.st_mode))
        return 0;
    if (err == ENOENT)
        snprintf(msg, cap, "the directory %s does not exist (create it first: mkdir -p %s; or bind a "
                 "path in a directory that exists)", dir, dir);
    else
        snprintf(msg, cap, "the socket's directory %s: %s", dir, err ? strerror(err) : "not a directory");
    return -1;
}

/* 0 when path may be bound: nothing is there (in a directory that exists),
 * or a socket nobody answers on. Else -1 and why in msg. */
static int rkb__ipc_check(const char *path, char *msg, size_t cap)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return rkb__ipc_dir_check(path, msg, cap);
        snprintf(msg, cap, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISSOCK(st.st_mode)) {
        snprintf(msg, cap, "%s exists and is not a socket (%s); refusing to replace it",
                 path, S_ISLNK(st.st_mode) ? "a symbolic link" : S_ISREG(st.st_mode) ? "a regular file" : "another kind of file");
        return -1;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
        snprintf(msg, cap, "%s is longer than a socket path may be (%zu bytes)", path,
                 sizeof sa.sun_path - 1);
        return -1;
    }
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(msg, cap, "socket: %s", strerror(errno));
        return -1;
    }
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    int err = errno;
    close(fd);
    if (rc != 0 && err == ECONNREFUSED)
        return 0; /* left behind by a process that is gone */
    if (rc == 0)
        snprintf(msg, cap, "another process (a running rk-bridge?) answers on %s", path);
    else
        snprintf(msg, cap, "cannot tell whether a process answers on %s: %s", path, strerror(err));
    return -1;
}

/* Binds an ipc:// path: checked, created with no access for group and
 * others (umask 077 around the bind; umask is process-wide, and no other
 * thread creates files), then given the configured mode. */
static int rkb__bind_ipc(rkb_port *p, rkb_endpoint *e, const char *ep, char *msg, size_t cap)
{
    const char *path = ep + 6;
    bool file = path[0] != '@' && strcmp(path, "*") != 0; /* abstract, or a temporary name */
    if (file && rkb__ipc_check(path, msg, cap))
        return -1;
    mode_t old = umask(077);
    int rc = zmq_bind(e->sock, ep);
    int err = errno;
    umask(old);
    if (rc != 0) {
        snprintf(msg, cap, "%s", zmq_strerror(err));
        return -1;
    }
    size_t sz = sizeof e->bound;
    if (zmq_getsockopt(e->sock, ZMQ_LAST_ENDPOINT, e->bound, &sz) != 0)
        snprintf(e->bound, sizeof e->bound, "%s", ep);
    const char *real = e->bound + 6;
    struct stat st;
    if (real[0] == '@' || lstat(real, &st) != 0)
        return 0;
    if (chmod(real, (mode_t)p->sh->cfg->ipc_mode) != 0) {
        snprintf(msg, cap, "chmod %04o %s: %s", p->sh->cfg->ipc_mode, real, strerror(errno));
        zmq_unbind(e->sock, e->bound);
        return -1;
    }
    if (file) {
        e->ipc_file = true;
        snprintf(e->path, sizeof e->path, "%s", real);
        e->dev = st.st_dev;
        e->ino = st.st_ino;
    }
    return 0;
}

int rkb_endpoint_bind(rkb_port *p, rkb_endpoint *e, char *msg, size_t cap)
{
    if (!strncmp(e->asked, "ipc://", 6)) {
        if (rkb__bind_ipc(p, e, e->asked, msg, cap))
            return -1;
    } else {
        if (zmq_bind(e->sock, e->asked) != 0) {
            snprintf(msg, cap, "%s", zmq_strerror(errno));
            return -1;
        }
        size_t sz = sizeof e->bound;
        if (zmq_getsockopt(e->sock, ZMQ_LAST_ENDPOINT, e->bound, &sz) != 0)
            snprintf(e->bound, sizeof e->bound, "%s", e->asked);
    }
    e->listening = true;
    rkb_listener_find(p, e);
    return 0;
}

void rkb_endpoint_remove_file(rkb_endpoint *e)
{
    struct stat st;
    if (e->ipc_file && lstat(e->path, &st) == 0 && S_ISSOCK(st.st_mode) &&
        (uint64_t)st.st_dev == e->dev && (uint64_t)st.st_ino == e->ino)
        unlink(e->path);
    e->ipc_file = false;
}

/* ---- file descriptors --------------------------------------------------- */

uint64_t rkb_raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 0;
    rlim_t want = rl.rlim_max == RLIM_INFINITY ? (rlim_t)1 << 20 : rl.rlim_max;
    if (rl.rlim_cur < want) {
        rlim_t was = rl.rlim_cur;
        rl.rlim_cur = want;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
            rkb_log(RKB_LOG_DEBUG, "file descriptor limit raised from %llu to %llu",
                    (unsigned long long)was, (unsigned long long)want);
        else
            rl.rlim_cur = was;
    }
    return (uint64_t)rl.rlim_cur;
}
