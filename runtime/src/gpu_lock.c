/* gpu_lock.c - one ring kernel per GPU. Two persistent kernels on one GPU
 * time-slice (measured on an H100: a second bridge took the first one's
 * echo p99 from 0.1 ms to 3.3 ms, its throughput from 1.3 M to 0.17 M
 * msg/s, with no word in any log), so a runtime holds a lock keyed by the
 * GPU's UUID.
 *
 * The lock is a listening socket in Linux's abstract unix namespace
 * ("\0ringkernel/gpu/<uuid>"): binding it is the lock, the kernel frees it
 * when the holder exits however it exits, no file is left behind and no
 * directory needs to be writable; a runtime that finds it taken connects
 * and reads the holder's pid with SO_PEERCRED, so the refusal names it.
 * Its connection waits in the holder's backlog (64) until the holder's
 * rk__gpu_lock_drain takes it: a full backlog refuses the connect, and
 * the refusal could no longer name the holder. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "worker.h"

static socklen_t rk__lock_addr(struct sockaddr_un *a, const char *uuid)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "ringkernel/gpu/%s", uuid);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* The pid of the process listening on the lock, or 0 when it cannot be read. */
static pid_t rk__lock_holder(const struct sockaddr_un *a, socklen_t len)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return 0;
    pid_t pid = 0;
    if (connect(fd, (const struct sockaddr *)a, len) == 0) {
        struct ucred cr;
        socklen_t cl = sizeof cr;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0)
            pid = cr.pid;
    }
    close(fd);
    return pid;
}

int rk__gpu_lock(const char *uuid, const char *name)
{
    struct sockaddr_un a;
    socklen_t len = rk__lock_addr(&a, uuid);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return rk__fail(RK_ESYS, "GPU lock: socket failed: %s", strerror(errno));
    if (bind(fd, (struct sockaddr *)&a, len) == 0 && listen(fd, 64) == 0)
        return fd;
    int e = errno;
    close(fd);
    if (e != EADDRINUSE)
        return rk__fail(RK_ESYS, "GPU lock for %s: %s", uuid, strerror(e));
    pid_t holder = rk__lock_holder(&a, len);
    char who[48];
    if (holder > 0)
        snprintf(who, sizeof who, "process %d", (int)holder);
    else
        snprintf(who, sizeof who, "another process");
    return rk__fail(RK_EBUSY,
                    /* the remedy before the reason: rk_info.why keeps 255 bytes of this */
                    "GPU %s (%s) already runs a ring kernel for %s; set rk_config.share_gpu "
                    "(rk-bridge --share-gpu) to share it anyway (both then time-slice)",
                    uuid, name && *name ? name : "?", who);
}

void rk__gpu_lock_drain(int fd)
{
    /* (the lock is non-blocking: accept stops at EAGAIN; a bound on one
     * pass, should runtimes keep knocking) */
    for (int i = 0, c; fd >= 0 && i < 256 && (c = accept4(fd, NULL, NULL, SOCK_CLOEXEC)) >= 0; i++)
        close(c);
}
