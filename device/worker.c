/* worker.c - rk-worker, the program a runtime's backend runs in (librk
 * starts it; runtime/abi/worker_proto.h is the protocol). It maps the
 * shared region from fd 3, takes commands on the control socket at fd 4,
 * and serves the rings with the CUDA engine (engine.c) or the CPU consumer
 * (runtime/src/serve_cpu.c). A CUDA context that faults is dead for the
 * whole process: this process is what a fault costs, and librk starts
 * another. It exits when its supervisor goes away (EOF on fd 4), so it
 * never outlives the program that started it. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "barrier.h"
#include "internal.h"
#include "modules.h"
#include "worker_proto.h"
#ifdef RK_HAVE_CUDA
#include "engine.h"
#endif

#define RK__POLL_MS 1 /* how often a CUDA worker asks whether its kernel still runs */

static int rk__ctl = RK__WORKER_CTL_FD;
/* the actor modules librk loaded, loaded here in the same order */
static rk__modset rk__mods;

static void rk__say(rk__wmsg *m)
{
    m->abi = RK_ABI_VERSION;
    if (send(rk__ctl, m, sizeof *m, MSG_NOSIGNAL) != (ssize_t)sizeof *m)
        _exit(0); /* the supervisor is gone */
}

/* The worker's log lines go to the supervisor, which hands them to the
 * program's handler (rk/log.h) with the worker's pid. */
static void rk__log_to_supervisor(rk_log_level level, const char *line, void *user)
{
    (void)user;
    rk__wmsg m = {.kind = RK__WM_LOG, .level = (int32_t)level};
    snprintf(m.text, sizeof m.text, "%s", line);
    rk__say(&m);
}

static void rk__reply_flags(uint32_t kind, int rc, const char *text, const rk__wdev *dev, uint32_t flags)
{
    rk__wmsg m = {.kind = kind, .rc = rc, .flags = flags};
    if (text)
        snprintf(m.text, sizeof m.text, "%s", text);
    if (dev)
        m.dev = *dev;
    rk__say(&m);
}

static void rk__reply(uint32_t kind, int rc, const char *text, const rk__wdev *dev)
{
    rk__reply_flags(kind, rc, text, dev, 0);
}

/* Waits for the next command; EOF (the supervisor exited) ends us. */
static int rk__next(rk__wmsg *m, int timeout_ms)
{
    struct pollfd p = {.fd = rk__ctl, .events = POLLIN};
    int r = poll(&p, 1, timeout_ms);
    if (r <= 0)
        return 0;
    ssize_t n = recv(rk__ctl, m, sizeof *m, 0);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
        _exit(0);
    if (n != (ssize_t)sizeof *m)
        return 0;
    return 1;
}

/* Test-only (tests/test_reload.c): a worker whose modules hold the actor
 * RK_TEST_WORKER_EXITS_AT_GO names exits when told to serve, as one that
 * fails between GO and RUNNING: the reload that started it must put the
 * previous modules back on a fresh worker. */
static void rk__test_exit_at_go(void)
{
    const char *name = getenv("RK_TEST_WORKER_EXITS_AT_GO");
    for (size_t i = 0; name && i < rk__mods.n; i++)
        if (rk__mods.defs[i].name && strcmp(rk__mods.defs[i].name, name) == 0)
            _exit(7);
}

/* ---- the CPU consumer ---- */

typedef struct rk__wcpu {
    rk__serve_cpu s;
    pthread_t thread;
} rk__wcpu;

static void *rk__cpu_main(void *arg)
{
    rk__serve_cpu_run(arg);
    return NULL;
}

static int rk__serve_cpu_worker(const rk__view *v, const rk__wmsg *init)
{
    rk__reply(RK__WM_HELLO, 0, NULL, NULL);
    rk__wmsg m;
    while (!rk__next(&m, -1) || m.kind != RK__WM_GO) {
    }
    rk__test_exit_at_go();
    uint32_t in_handler = 0;
    rk__wcpu c = {.s = {.v = *v, .defs = rk__mods.defs, .n_defs = rk__mods.n, .flags = init->flags,
                        .in_handler = &in_handler}};
    rk__st_relaxed(&v->hdr->stop, 0u);
    if (pthread_create(&c.thread, NULL, rk__cpu_main, &c.s) != 0) {
        rk__reply(RK__WM_RUNNING, -RK_ESYS, "the CPU worker could not start its thread", NULL);
        return 1;
    }
    /* the consumer says RUNNING in the region before it polls */
    while (rk__ld_acquire(&v->hdr->state) == RK__STATE_INIT)
        rk__sleep_ns(20000);
    rk__reply(RK__WM_RUNNING, 0, NULL, NULL);
    /* how often to look: often enough to keep a heartbeat_ms as short as
     * 50 going (INIT says, in us), at most every 100 ms */
    const int look_ms = init->hb_period_us / 1000 < 1     ? 1
                        : init->hb_period_us / 1000 > 100 ? 100
                                                          : (int)(init->hb_period_us / 1000);
    for (;;) {
        if (!rk__next(&m, look_ms)) {
            /* a handler that runs long (a slow actor) is watched by its
             * deadline (request_deadline_ms), not by the heartbeat, as on
             * the GPU, whose housekeeper stamps while an actor runs. Until
             * 2026-11-27 a CPU actor slower than heartbeat_ms cost its
             * worker and was poisoned. relaxed: the flag carries no data */
            if (rk__ld_relaxed(&in_handler))
                rk__st_relaxed(&v->hdr->heartbeat, (uint64_t)rk__now_ns());
            int st = rk__ld_acquire(&v->hdr->state);
            if (st < 0) {
                rk__reply(RK__WM_FAULT, st, "the CPU consumer stopped on a corrupt ring slot", NULL);
                return 3;
            }
            continue;
        }
        if (m.kind == RK__WM_RELAUNCH) {
            rk__reply(RK__WM_RELAUNCHED, 0, NULL, NULL);
        } else if (m.kind == RK__WM_STOP) {
            /* release: pairs with the consumer's load-acquire of stop */
            rk__st_release(&v->hdr->stop, 1u);
            rk__fetch_add(&v->h2d->doorbell, 1u);
            rk__futex_wake(&v->h2d->doorbell, 1);
            pthread_join(c.thread, NULL);
            rk__reply(RK__WM_STOPPED, 0, NULL, NULL);
            return 0;
        }
    }
}

/* ---- the CUDA engine ---- */

#ifdef RK_HAVE_CUDA
static int rk__serve_cuda_worker(const rk__view *v, const rk__wmsg *init)
{
    const rk__engine_api *api = &rk__engine_v1;
    rk__engine_cfg cfg = {.device = init->device, .grid = init->grid, .block = init->block, .smem = init->smem,
                          .kernel = rk__mods.kernel};
    if (init->flags & RK__WF_TEST_FAULTS)
        cfg.kflags |= RK_KF_TEST_FAULTS;
    const char *fake = getenv("RK_CUDA_FAKE");
    if (fake && strstr(fake, "mute"))
        cfg.kflags |= RK_KF_MUTE;
    rk__engine *e = NULL;
    rk__wdev dev;
    char err[512] = "";
    int rc = api->open(&e, &cfg, v->hdr, v->size, &dev, err, sizeof err);
    rk__reply(RK__WM_HELLO, rc, err, &dev);
    if (rc)
        return 1;
    rk__wmsg m;
    while (!rk__next(&m, -1) || m.kind != RK__WM_GO) {
    }
    rk__test_exit_at_go();
    rc = api->launch(e, m.gen, m.grid, m.block, m.smem, &dev, err, sizeof err);
    rk__reply(RK__WM_RUNNING, rc, err, &dev);
    if (rc)
        return 1;
    char lost[600] = ""; /* why a failed relaunch left no kernel running */
    for (;;) {
        if (rk__next(&m, RK__POLL_MS)) {
            if (m.kind == RK__WM_RELAUNCH) {
                rc = api->relaunch(e, m.grid, m.block, m.smem, &dev, err, sizeof err);
                rk__reply(RK__WM_RELAUNCHED, rc, err, &dev);
                /* (a refused configuration leaves the kernel running; a
                 * sticky error is a fault of its own) */
                char perr[512] = "";
                const int prc = rc ? api->poll(e, perr, sizeof perr) : 0;
                if (prc < 0) {
                    rk__reply(RK__WM_FAULT, prc, perr, NULL);
                    return 3;
                }
                if (prc > 0)
                    snprintf(lost, sizeof lost, "relaunch failed: %s", err);
            } else if (m.kind == RK__WM_STOP) {
                rc = api->halt(e, err, sizeof err);
                rk__reply(RK__WM_STOPPED, rc, err, NULL);
                api->close(e);
                return 0;
            }
        }
        rc = api->poll(e, err, sizeof err);
        if (rc != 0) {
            /* a sticky error: say it, and let the process go (the context
             * is dead; only a new process gets a new one) */
            rk__reply_flags(RK__WM_FAULT, rc < 0 ? rc : -RK_EDEVICE,
                            rc < 0 ? err : lost[0] ? lost : "the ring kernel exited without being asked to", NULL,
                            rc > 0 && lost[0] ? RK__WF_MAY_RUN : 0u);
            return 3;
        }
    }
}
#endif

/* argv: --module FILE ... --actors-hash HEX (worker_proc.c). Loads the
 * modules; 0, or a negative code with the reason in err. */
static int rk__load_modules(int argc, char **argv, char *err, size_t cap)
{
    const char **files = calloc((size_t)argc, sizeof *files);
    size_t n = 0;
    unsigned long long want = 0;
    for (int i = 1; files && i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--module") == 0)
            files[n++] = argv[i + 1];
        else if (strcmp(argv[i], "--actors-hash") == 0)
            want = strtoull(argv[i + 1], NULL, 16);
    }
    int rc = files ? rk__modules_load(&rk__mods, files, n, 1) : rk__fail(RK_ENOMEM, "out of memory");
    free(files);
    if (rc == 0 && rk__mods.hash != want)
        rc = rk__fail(RK_EINVAL, "the modules' actors differ from librk's (a module file changed between loads)");
    if (rc)
        snprintf(err, cap, "%s", rk_last_detail());
    return rc;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--module") != 0) {
        fprintf(stderr, "rk-worker: started by librk (runtime/abi/worker_proto.h), not by hand\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    rk__wmsg init;
    if (!rk__next(&init, 30000) || init.kind != RK__WM_INIT)
        return 2;
    char merr[512];
    int mrc = argc > 1 ? rk__load_modules(argc, argv, merr, sizeof merr) : 0;
    if (mrc) {
        rk__reply(RK__WM_HELLO, mrc, merr, NULL);
        return 2;
    }
    rk_log_set_level((rk_log_level)init.level);
    rk_log_set_handler(rk__log_to_supervisor, NULL);
    if (init.abi != RK_ABI_VERSION) {
        char t[96];
        snprintf(t, sizeof t, "rk-worker speaks ABI %u, its librk ABI %u", RK_ABI_VERSION, init.abi);
        rk__reply(RK__WM_HELLO, -RK_EPROTO, t, NULL);
        return 2;
    }
    rk__view v;
    int rc = rk__region_map(RK__WORKER_REGION_FD, &v);
    if (rc) {
        rk__reply(RK__WM_HELLO, rc, rk_last_detail(), NULL);
        return 2;
    }
    if (init.backend == RK__WB_CPU)
        return rk__serve_cpu_worker(&v, &init);
#ifdef RK_HAVE_CUDA
    return rk__serve_cuda_worker(&v, &init);
#else
    rk__reply(RK__WM_HELLO, -RK_ENOCUDA, "rk-worker was built without the CUDA backend", NULL);
    return 2;
#endif
}
