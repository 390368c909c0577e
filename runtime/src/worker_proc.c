/* worker_proc.c - starting, talking to and ending a worker process
 * (worker.h; the protocol is runtime/abi/worker_proto.h). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "actor.h"
#include "modules.h"
#include "worker.h"

extern char **environ;

#ifndef RK_WORKER_INSTALL_PATH
#define RK_WORKER_INSTALL_PATH ""
#endif

/* (3 ms at least: RUNNING is awaited a third of it) */
int rk__proc_start_ms(void) { return (int)rk__env_range("RK_WORKER_START_MS", 30000, 3, RK__ENV_MS_MAX); }

static bool rk__present(const char *p, int mode) { return p[0] && access(p, mode) == 0; }

int rk__helper_path(const char *name, const char *env_name, const char *install_path, char *path, size_t cap)
{
    const int mode = strstr(name, ".so") ? R_OK : X_OK;
    const char *env = getenv(env_name);
    if (env && *env) {
        snprintf(path, cap, "%s", env);
        if (rk__present(path, mode))
            return 0;
        return rk__fail(RK_ENOTSUP, "%s=%s: no such %s", env_name, env, mode == X_OK ? "program" : "file");
    }
    /* beside the library: the build tree keeps it next to librk, an
     * install in LIBDIR/ringkernel/ (no PATH involved) */
    char looked[768] = "";
    Dl_info di;
    if (dladdr((void *)rk__helper_path, &di) && di.dli_fname) {
        const char *slash = strrchr(di.dli_fname, '/');
        int dir = slash ? (int)(slash - di.dli_fname) : 1;
        const char *base = slash ? di.dli_fname : ".";
        for (int i = 0; i < 2; i++) {
            snprintf(path, cap, "%.*s/%s%s", dir, base, i ? "ringkernel/" : "", name);
            if (rk__present(path, mode))
                return 0;
            size_t n = strlen(looked);
            snprintf(looked + n, sizeof looked - n, "%s%s", n ? ", " : "", path);
        }
    }
    snprintf(path, cap, "%s", install_path);
    if (rk__present(path, mode))
        return 0;
    return rk__fail(RK_ENOTSUP, "%s was not found (looked at %s%s%s; %s names it explicitly)", name, looked,
                    looked[0] && path[0] ? ", " : "", path, env_name);
}

int rk__worker_path(char *path, size_t cap)
{
    return rk__helper_path("rk-worker", "RK_WORKER", RK_WORKER_INSTALL_PATH, path, cap);
}

/* The worker's command line: the module files librk loaded, in its order,
 * each as the descriptor librk keeps open (fd RK__WORKER_CTL_FD + 1 + i in
 * the worker: the bytes librk loaded, even after a rebuild replaced the
 * file), and the hash of the types it gave their actors (modules.h). */
static char **rk__worker_argv(char *path, const rk__modset *mods, char *hash, size_t hash_cap)
{
    size_t n = mods ? mods->n_files : 0;
    /* the pointers, then 32 bytes of fd path per module */
    char **argv = calloc(1, (2 * n + 4) * sizeof *argv + 32 * n);
    if (!argv)
        return NULL;
    char *fdp = (char *)(argv + 2 * n + 4);
    size_t k = 0;
    argv[k++] = path;
    for (size_t i = 0; i < n; i++) {
        argv[k++] = (char *)"--module";
        argv[k] = mods->files[i];
        if (mods->fds[i] >= 0)
            snprintf(argv[k] = fdp + 32 * i, 32, "/proc/self/fd/%zu", RK__WORKER_CTL_FD + 1 + i);
        k++;
    }
    if (n) {
        snprintf(hash, hash_cap, "%016llx", (unsigned long long)mods->hash);
        argv[k++] = (char *)"--actors-hash";
        argv[k++] = hash;
    }
    return argv;
}

int rk__proc_spawn(rk__proc *w, int region_fd, const rk__wmsg *init, const rk__modset *mods)
{
    *w = RK__PROC_NONE;
    char path[512];
    int rc = rk__worker_path(path, sizeof path);
    if (rc)
        return rc;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        return rk__fail(RK_ESYS, "socketpair for the worker's control channel failed: %s", strerror(errno));
    /* above 10, so that placing them at 3 and 4 in the child never
     * overwrites one with the other, and dup2 always clears CLOEXEC */
    int rfd = fcntl(region_fd, F_DUPFD_CLOEXEC, 10);
    int cfd = fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
    close(sv[1]);
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    posix_spawn_file_actions_adddup2(&fa, rfd, RK__WORKER_REGION_FD);
    posix_spawn_file_actions_adddup2(&fa, cfd, RK__WORKER_CTL_FD);
    /* the module files at 5.., from copies above them all (as above) */
    const size_t nm = mods ? mods->n_files : 0;
    int *mfd = calloc(nm + 1, sizeof *mfd), mfd_err = mfd ? 0 : ENOMEM;
    for (size_t i = 0; mfd && i < nm; i++) {
        mfd[i] = mods->fds[i] < 0 ? -1 : fcntl(mods->fds[i], F_DUPFD_CLOEXEC, (int)(RK__WORKER_CTL_FD + 1 + nm));
        if (mfd[i] >= 0)
            posix_spawn_file_actions_adddup2(&fa, mfd[i], (int)(RK__WORKER_CTL_FD + 1 + i));
        else if (mods->fds[i] >= 0)
            mfd_err = errno;
    }
    posix_spawn_file_actions_addclosefrom_np(&fa, (int)(RK__WORKER_CTL_FD + 1 + nm));
    /* its own process group: a terminal's Ctrl-C is for us to handle (a
     * bridge drains on SIGINT), not for the worker; default signals and an
     * empty mask whatever this thread blocks */
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    sigdelset(&all, SIGKILL);
    sigdelset(&all, SIGSTOP);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &all);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
    char hash[24];
    char **argv = rk__worker_argv(path, mods, hash, sizeof hash);
    pid_t pid = 0;
    int err = rfd < 0 || cfd < 0 ? errno
              : mfd_err         ? mfd_err
              : !argv           ? ENOMEM
                                : posix_spawn(&pid, path, &fa, &at, argv, environ);
    free(argv);
    for (size_t i = 0; mfd && i < nm; i++)
        if (mfd[i] >= 0)
            close(mfd[i]);
    free(mfd);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (rfd >= 0)
        close(rfd);
    if (cfd >= 0)
        close(cfd);
    if (err) {
        close(sv[0]);
        return rk__fail(RK_ESYS, "starting the worker %s failed: %s", path, strerror(err));
    }
    w->pid = pid;
    w->ctl = sv[0];
    w->kind = init->backend;
    w->spawned_ns = rk__now_ns();
    rc = rk__proc_send(w, init);
    if (rc)
        rk__proc_end(w, NULL, 0);
    return rc;
}

int rk__proc_send(rk__proc *w, const rk__wmsg *m)
{
    /* MSG_NOSIGNAL: a dead worker is an error here, not our SIGPIPE */
    ssize_t n = send(w->ctl, m, sizeof *m, MSG_NOSIGNAL);
    if (n == (ssize_t)sizeof *m)
        return 0;
    return rk__fail(RK_EDEVICE, "worker %d: sending control message %u failed: %s", (int)w->pid, m->kind,
                    n < 0 ? strerror(errno) : "short write");
}

int rk__proc_recv(rk__proc *w, rk__wmsg *m, int timeout_ms)
{
    int64_t deadline = timeout_ms < 0 ? INT64_MAX : rk__now_ns() + (int64_t)timeout_ms * 1000000;
    for (;;) {
        int64_t left = deadline == INT64_MAX ? -1 : (deadline - rk__now_ns()) / 1000000;
        struct pollfd p = {.fd = w->ctl, .events = POLLIN};
        int r = poll(&p, 1, left < 0 && deadline != INT64_MAX ? 0 : (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0)
            return rk__fail_str(RK_ETIMEDOUT, "no control message from the worker in time");
        ssize_t n = recv(w->ctl, m, sizeof *m, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n <= 0)
            return rk__fail(RK_EDEVICE, "worker %d closed its control channel", (int)w->pid);
        if (n != (ssize_t)sizeof *m)
            return rk__fail(RK_EPROTO, "worker %d sent a %zd B control message, expected %zu B", (int)w->pid,
                            n, sizeof *m);
        m->text[sizeof m->text - 1] = '\0';
        if (m->kind != RK__WM_LOG)
            return 0;
        rk__log(m->level, "worker %d: %s", (int)w->pid, m->text);
        /* a worker whose lines keep coming gets no more time than one
         * that is silent (poll does not return 0 while they come) */
        if (deadline != INT64_MAX && rk__now_ns() >= deadline)
            return rk__fail_str(RK_ETIMEDOUT, "no control message from the worker in time");
    }
}

int rk__proc_await(rk__proc *w, uint32_t kind, rk__wmsg *m, int timeout_ms)
{
    int rc = rk__proc_recv(w, m, timeout_ms);
    if (rc == -RK_ETIMEDOUT)
        return rk__fail(RK_ETIMEDOUT, "worker %d (%s) did not answer within %d ms (RK_WORKER_START_MS)",
                        (int)w->pid, w->kind == RK__WB_CUDA ? "cuda" : "cpu", timeout_ms);
    if (rc == -RK_EDEVICE) {
        char why[200];
        rk__proc_end(w, why, sizeof why);
        return rk__fail(RK_EDEVICE, "%s before it answered", why);
    }
    if (rc)
        return rc;
    if (m->kind == RK__WM_FAULT || (m->kind == kind && m->rc))
        return rk__fail(m->rc ? m->rc : -RK_EDEVICE, "%s", m->text);
    if (m->kind != kind)
        return rk__fail(RK_EPROTO, "worker %d sent control message %u, expected %u", (int)w->pid, m->kind,
                        kind);
    return 0;
}

int rk__proc_await_draining(rk__proc *w, uint32_t kind, rk__wmsg *m, int timeout_ms, rk_runtime *rt)
{
    if (!rt)
        return rk__proc_await(w, kind, m, timeout_ms);
    rk__drainer d;
    rk__drainer_start(&d, rt);
    int rc = rk__proc_await(w, kind, m, timeout_ms);
    rk__drainer_stop(&d);
    if (rc == -RK_ETIMEDOUT) /* (rk__proc_await names the start-up's wait) */
        rc = rk__fail(RK_ETIMEDOUT, "worker %d (%s) did not answer within %d ms", (int)w->pid,
                      w->kind == RK__WB_CUDA ? "cuda" : "cpu", timeout_ms);
    return rc;
}

static void rk__describe_exit(const rk__proc *w, int st, char *why, size_t cap)
{
    const char *b = w->kind == RK__WB_CUDA ? "cuda" : "cpu";
    if (WIFSIGNALED(st))
        snprintf(why, cap, "worker %d (%s) was killed by signal %d (%s)", (int)w->pid, b, WTERMSIG(st),
                 strsignal(WTERMSIG(st)));
    else if (WIFEXITED(st))
        snprintf(why, cap, "worker %d (%s) exited with status %d", (int)w->pid, b, WEXITSTATUS(st));
    else
        snprintf(why, cap, "worker %d (%s) ended", (int)w->pid, b);
}

/* Killed workers that had not exited yet (a CUDA worker can take a while
 * in the driver tearing a faulted context down): reaped later, by any
 * thread, so that no supervisor ever blocks on one. Process-wide, like
 * child processes themselves. */
static pthread_mutex_t rk__deferred_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t rk__deferred[64];

static void rk__defer_reap(pid_t pid)
{
    pthread_mutex_lock(&rk__deferred_lock);
    for (int i = 0; i < 64 && pid; i++)
        if (!rk__deferred[i])
            rk__deferred[i] = pid, pid = 0;
    pthread_mutex_unlock(&rk__deferred_lock);
    if (pid) /* 64 stuck processes: wait for this one rather than lose it */
        waitpid(pid, NULL, 0);
}

void rk__proc_reap_deferred(int wait_ms)
{
    int64_t deadline = rk__now_ns() + (int64_t)wait_ms * 1000000;
    for (;;) {
        int left = 0;
        pthread_mutex_lock(&rk__deferred_lock);
        for (int i = 0; i < 64; i++) {
            if (!rk__deferred[i])
                continue;
            pid_t r = waitpid(rk__deferred[i], NULL, WNOHANG);
            if (r == rk__deferred[i] || (r < 0 && errno == ECHILD))
                rk__deferred[i] = 0;
            else
                left++;
        }
        pthread_mutex_unlock(&rk__deferred_lock);
        if (!left || rk__now_ns() >= deadline)
            return;
        rk__sleep_ns(1000000);
    }
}

/* Waits up to reap_ms for a killed worker to exit. */
static pid_t rk__reap(pid_t pid, int *st, long long reap_ms)
{
    const int64_t deadline = rk__now_ns() + reap_ms * 1000000;
    for (;;) {
        pid_t r = waitpid(pid, st, WNOHANG);
        if (r != 0 && !(r < 0 && errno == EINTR))
            return r;
        if (rk__now_ns() >= deadline)
            return 0;
        rk__sleep_ns(200000);
    }
}

/* rk__proc_end and rk__proc_abandon: SIGKILL unless it exited, reap within
 * reap_ms or later. */
static void rk__proc_finish(rk__proc *w, char *why, size_t cap, long long reap_ms)
{
    if (w->pid > 0) {
        const char *b = w->kind == RK__WB_CUDA ? "cuda" : "cpu";
        int st = 0;
        pid_t r;
        /* exited on its own already? then it is what it did that counts */
        while ((r = waitpid(w->pid, &st, WNOHANG)) < 0 && errno == EINTR) {
        }
        if (r == 0) {
            kill(w->pid, SIGKILL);
            /* a CUDA worker's context is torn down on the way out */
            r = rk__reap(w->pid, &st, reap_ms);
        }
        if (r == 0) {
            rk__defer_reap(w->pid);
            if (why && reap_ms)
                snprintf(why, cap, "worker %d (%s) killed; it had not exited %lld ms later (reaped later)",
                         (int)w->pid, b, reap_ms);
            else if (why)
                snprintf(why, cap, "worker %d (%s) killed (reaped in the background)", (int)w->pid, b);
        } else if (why && r == w->pid) {
            rk__describe_exit(w, st, why, cap);
        } else if (why) { /* someone else reaped it (a SIGCHLD handler of the program) */
            snprintf(why, cap, "worker %d (%s) ended", (int)w->pid, b);
        }
    } else if (why && cap) {
        why[0] = '\0';
    }
    if (w->ctl >= 0)
        close(w->ctl);
    *w = RK__PROC_NONE;
}

void rk__proc_end(rk__proc *w, char *why, size_t cap)
{
    rk__proc_finish(w, why, cap, rk__env_range("RK_WORKER_REAP_MS", 3000, 0, RK__ENV_MS_MAX));
}

void rk__proc_abandon(rk__proc *w, char *why, size_t cap) { rk__proc_finish(w, why, cap, 0); }

void rk__proc_stop(rk__proc *w, int timeout_ms, rk_runtime *rt)
{
    if (w->pid <= 0)
        return;
    rk__wmsg m = {.kind = RK__WM_STOP};
    if (w->live && rk__proc_send(w, &m) == 0) {
        int rc = rk__proc_await_draining(w, RK__WM_STOPPED, &m, timeout_ms, rt);
        if (rc && w->pid > 0) {
            rk__log(RK__LOG_WARN, "worker %d did not stop cleanly: %s", (int)w->pid, rk_last_detail());
            /* it had its time (a handler that runs on): not twice */
            rk__proc_end(w, NULL, 0);
            return;
        }
    }
    if (w->pid <= 0)
        return;
    /* closing the control channel is its cue to exit */
    close(w->ctl);
    w->ctl = -1;
    int64_t deadline = rk__now_ns() + (int64_t)timeout_ms * 1000000;
    while (rk__now_ns() < deadline) {
        int st;
        pid_t r = waitpid(w->pid, &st, WNOHANG);
        if (r == w->pid || (r < 0 && errno == ECHILD)) {
            *w = RK__PROC_NONE;
            return;
        }
        rk__sleep_ns(1000000);
    }
    rk__proc_end(w, NULL, 0); /* SIGKILL, bounded wait, else reaped later */
}
