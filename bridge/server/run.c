/* bridge/server/run.c - start-up and teardown (rkb_run): checks the
 * configuration, opens the runtime, measures its ring, binds, says it is
 * ready, runs the request loop (or the frontend and its workers), then
 * flushes the replies, closes everything and reports what it answered. */
#include "server.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

void rkb_config_init(rkb_config *c)
{
    memset(c, 0, sizeof *c);
    rk_config_init(&c->rk);
    c->rk.actor_window = 4096;
    c->rk.max_actors = 4;
    /* a client's request must never cost the bridge: every backend in a
     * supervised worker, with a warm standby (README.md) */
    c->rk.isolation = RK_ISOLATION_PROCESS;
    c->rk.standby = 1;
    c->max_message_bytes = RKB_DEFAULT_MAX_FRAME;
    c->queue = 4096;
    c->queue_bytes = (size_t)512 << 20;
    c->admission_ms = 100;
    c->sndhwm = 10000;
    c->rcvhwm = 1000;
    c->shutdown_quiet_ms = 200;
    c->drain_ms = 10000;
    c->log_level = RKB_LOG_INFO;
    c->ipc_mode = 0600;
}

void rkb_warn_operator(rkb_shared *sh, const char *fmt, ...)
{
    if (sh->n_warnings == RKB_MAX_WARNINGS)
        return;
    char *t = sh->warning_text[sh->n_warnings];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t, sizeof sh->warning_text[0], fmt, ap);
    va_end(ap);
    sh->warnings[sh->n_warnings++] = t;
    rkb_log(RKB_LOG_WARN, "%s", t);
}

/* ---- the ring's own round trip ------------------------------------------ */

static int rkb__cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* 64-byte echoes through a temporary actor, one at a time: the p50/p99 of
 * the ring round trip on this backend, before any client is served. */
static void rkb__ring_calibrate(rkb_shared *sh)
{
    enum { WARM = 2000, N = 10000 };
    rk_actor *a;
    uint64_t *t = malloc(N * sizeof *t);
    if (!t || rk_actor_open(sh->rt, &a) != 0) {
        rkb_log(RKB_LOG_WARN, "ring round-trip calibration skipped: %s", t ? rk_last_detail() : "no memory");
        free(t);
        return;
    }
    uint8_t msg[64];
    memset(msg, 0x5a, sizeof msg);
    int n = 0;
    for (int i = 0; i < WARM + N; i++) {
        rk_reply r;
        int64_t t0 = rkb_now_ns();
        if (rk_actor_call(a, RK_OP_ECHO, msg, sizeof msg, 0, &r, 1000) != 0)
            break;
        int64_t t1 = rkb_now_ns();
        rk_reply_release(a, &r);
        if (i >= WARM)
            t[n++] = (uint64_t)(t1 - t0);
    }
    rk_actor_close(a);
    if (n == N) {
        qsort(t, N, sizeof *t, rkb__cmp_u64);
        sh->ring_p50_ns = t[N / 2];
        sh->ring_p99_ns = t[N * 99 / 100];
        sh->ring_count = N;
    } else {
        rkb_log(RKB_LOG_WARN, "ring round-trip calibration stopped after %d echoes: %s", n, rk_last_detail());
    }
    free(t);
}

/* ---- start-up -------------------------------------------------------------- */

/* The --io-threads and --zmq-io-threads to use: as given, or auto
 * (cpus.c says why each auto is what it is). */
static int rkb__io_threads(const rkb_config *c, long cpus)
{
    return c->io_threads > 0 ? c->io_threads : rkb_auto_io_threads(cpus);
}

static int rkb__zmq_io_threads(const rkb_config *c, long cpus)
{
    if (c->zmq_io_threads > 0)
        return c->zmq_io_threads;
    bool tcp = false;
    for (int i = 0; i < c->n_binds; i++)
        tcp |= !strncmp(c->binds[i], "tcp://", 6);
    return rkb_auto_zmq_io_threads(tcp, cpus);
}

/* librk's own lines (a worker replaced, a fault blamed on a request) go
 * into the bridge's log, under its level and its per-kind rate limit: a
 * client sending poison requests cannot flood it through librk either. */
static void rkb__librk_log(rk_log_level level, const char *msg, void *user)
{
    (void)user;
    int l = level <= RK_LOG_ERROR ? RKB_LOG_ERROR : level == RK_LOG_WARN ? RKB_LOG_WARN
          : level == RK_LOG_INFO  ? RKB_LOG_INFO  : RKB_LOG_DEBUG;
    rkb_logk(RKB_LK_LIBRK, l, "runtime: %s", msg);
}

/* A start-up configuration the CUDA backend refused as a launch error is
 * not silently served by the CPU fallback: the operator asked for a kernel
 * shape that cannot run. */
static int rkb__open_runtime(rkb_shared *sh, int n_loops)
{
    static const rk_log_level levels[] = {RK_LOG_ERROR, RK_LOG_WARN, RK_LOG_INFO, RK_LOG_DEBUG};
    rk_log_set_level(levels[sh->cfg->log_level]);
    rk_log_set_handler(rkb__librk_log, NULL);
    rk_config rkc = sh->cfg->rk;
    if (rkc.max_actors < (uint32_t)n_loops + 2)
        rkc.max_actors = (uint32_t)n_loops + 2;
    /* every payload a frame within the limit can carry passes the
     * runtime's own check; what its arena cannot hold is TOO_LARGE */
    if (rkc.max_payload < sh->cfg->max_message_bytes)
        rkc.max_payload = sh->cfg->max_message_bytes;
    rkc.modules = sh->cfg->n_actors ? sh->cfg->actors : NULL; /* set only with its count */
    rkc.n_modules = (size_t)sh->cfg->n_actors;
    int rc = rk_runtime_open(&sh->rt, &rkc);
    if (rc && sh->cfg->n_actors && strncmp(rk_last_detail(), "module", 6) == 0) {
        fprintf(stderr, "rk-bridge: --actors: %s\n", rk_last_detail());
        return RKB_EXIT_USAGE;
    }
    if (rc) {
        bool launch = rkb_is_launch_error(rc) && -rc != RK_EINVAL;
        if (launch)
            fprintf(stderr, "rk-bridge: LAUNCH_INVALID: %s\n", rk_last_detail());
        else
            fprintf(stderr, "rk-bridge: cannot open the runtime (%s): %s\n", rk_err_name(rc),
                    rk_last_detail());
        /* RK_EINVAL: the runtime refused its configuration, which is the
         * command line's (main.c checks what it can name by option first) */
        return launch || -rc == RK_EINVAL ? RKB_EXIT_USAGE : RKB_EXIT_FAIL;
    }
    rk_info info;
    rk_runtime_info(sh->rt, &info);
    static const char *names[] = {"RK_EBLOCK", "RK_ESMEM", "RK_EGRID"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strstr(info.why, names[i])) {
            fprintf(stderr, "rk-bridge: LAUNCH_INVALID: %s\n", info.why);
            return RKB_EXIT_USAGE;
        }
    return 0;
}

static rkb_loop *rkb__loop_new(rkb_shared *sh, int index, bool worker)
{
    size_t sz = (sizeof(rkb_loop) + RKB_SPSC_ALIGN - 1) & ~(size_t)(RKB_SPSC_ALIGN - 1);
    rkb_loop *l = aligned_alloc(RKB_SPSC_ALIGN, sz);
    if (!l)
        return NULL;
    memset(l, 0, sz);
    l->wk.efd = -1;
    l->sh = sh;
    l->cfg = sh->cfg;
    l->index = index;
    sh->loops[index] = l;
    sh->n_loops = index + 1;
    if (rkb_loop_init(l))
        return NULL;
    if (worker && (rkb_waker_init(&l->wk) || !(l->reqq = rkb_ring_new(RKB_REQ_RING)) ||
                   !(l->repq = rkb_ring_new(RKB_REP_RING)))) {
        fprintf(stderr, "rk-bridge: cannot set up the worker hand-off: %s\n", strerror(errno));
        return NULL;
    }
    if (!worker)
        l->port = &sh->port;
    return l;
}

static int rkb__signalfd(void)
{
    sigset_t ss;
    sigemptyset(&ss);
    sigaddset(&ss, SIGINT);
    sigaddset(&ss, SIGTERM);
    sigaddset(&ss, SIGHUP); /* a deploy (deploy.c) */
    return signalfd(-1, &ss, SFD_NONBLOCK | SFD_CLOEXEC);
}

static void rkb__print_ready(const rkb_shared *sh, int nw)
{
    const rkb_config *c = sh->cfg;
    rk_info info;
    rk_runtime_info(sh->rt, &info);
    char dev[200] = "none";
    if (info.has_device)
        snprintf(dev, sizeof dev, "%s (%d SMs, cc %d.%d)", info.device_name, info.sm_count,
                 info.cc_major, info.cc_minor);
    char threads[96] = "";
    if (nw > 1 || sh->zmq_io_threads > 1)
        snprintf(threads, sizeof threads, "; %d I/O threads%s, %d ZeroMQ I/O threads", nw,
                 nw > 1 ? " behind a frontend" : "", sh->zmq_io_threads);
    /* before "listening on", whose endpoint list ends the line (scripts
     * take the first word after it) */
    char status[300] = "";
    if (sh->status_endpoint[0])
        snprintf(status, sizeof status, "status endpoint %s; ", sh->status_endpoint);
    printf("rk-bridge %s: backend %s (%s); device %s; kernel grid %u block %u smem %u; "
           "rings %u x %u B, arena %zu B, window %u, max message %zu B (transport cap %zu B); "
           "ring round trip p50 %.2f us, p99 %.2f us; %s%s; %slistening on %s\n",
           RKB_VERSION, info.backend_name, info.why, dev, info.grid, info.block, info.smem,
           info.ring_slots, info.slot_size, info.arena_size, c->rk.actor_window,
           c->max_message_bytes, c->max_message_bytes * 4, (double)sh->ring_p50_ns / 1e3,
           (double)sh->ring_p99_ns / 1e3, c->curve_secret_file ? "CURVE on" : "no encryption",
           threads, status, sh->endpoints);
    fflush(stdout);
}

/* Opens everything up to the moment the bridge may serve. */
/* *nw: the request loops (sh->loops has room for RK_MAX_DEVICES or more):
 * at least one per device, whose actor is pinned to it (loop.c). */
static int rkb__start(rkb_shared *sh, int *nwp)
{
    const rkb_config *c = sh->cfg;
    int rc, nw = *nwp;
    sh->fd_limit = rkb_raise_fd_limit();
    if ((rc = rkb_endpoints_check(sh)) || (rc = rkb__open_runtime(sh, nw)))
        return rc;
    int nd = rk_runtime_device_count(sh->rt);
    if (nd > nw && c->io_threads > 0) {
        fprintf(stderr, "rk-bridge: --devices: %d devices but --io-threads %d: each device needs a "
                "request loop of its own; give --io-threads %d or more (or auto)\n", nd, nw, nd);
        return RKB_EXIT_USAGE;
    }
    *nwp = nw = nd > nw ? nd : nw;
    rkb__ring_calibrate(sh);
    if (!(sh->ctx = zmq_ctx_new())) {
        fprintf(stderr, "rk-bridge: zmq_ctx_new: %s\n", zmq_strerror(errno));
        return RKB_EXIT_FAIL;
    }
    if (sh->zmq_io_threads > 1 && zmq_ctx_set(sh->ctx, ZMQ_IO_THREADS, sh->zmq_io_threads) != 0) {
        rkb_log(RKB_LOG_WARN, "ZMQ_IO_THREADS %d: %s; ZeroMQ keeps 1", sh->zmq_io_threads,
                zmq_strerror(errno));
        sh->zmq_io_threads = 1;
    }
    for (int i = 0; i < nw; i++)
        if (!rkb__loop_new(sh, i, nw > 1))
            return RKB_EXIT_FAIL;
    if (nw > 1) {
        size_t sz = (sizeof(rkb_front) + RKB_SPSC_ALIGN - 1) & ~(size_t)(RKB_SPSC_ALIGN - 1);
        if (!(sh->front = aligned_alloc(RKB_SPSC_ALIGN, sz)))
            return RKB_EXIT_FAIL;
        memset(sh->front, 0, sz);
        sh->front->sh = sh;
        if (rkb_waker_init(&sh->front->wk) || rkb_encoder_init(&sh->front->enc)) {
            fprintf(stderr, "rk-bridge: cannot set up the frontend: %s\n", strerror(errno));
            return RKB_EXIT_FAIL;
        }
    }
    sh->port.sfd = rkb__signalfd();
    rc = rkb_port_open(&sh->port, sh, nw > 1 ? &sh->front->n : &sh->loops[0]->n);
    if (rc)
        return rc;
    rkb__print_ready(sh, nw);
    rkb_notify("READY=1");
    return 0;
}

/* ---- running --------------------------------------------------------------- */

static void rkb__serve(rkb_shared *sh, int nw)
{
    if (nw == 1) {
        rkb_loop_run(sh->loops[0]);
        return;
    }
    int started = 0;
    __atomic_store_n(&sh->live, nw, __ATOMIC_RELAXED);
    for (; started < nw; started++)
        if (pthread_create(&sh->loops[started]->thread, NULL, rkb_worker_main, sh->loops[started])) {
            fprintf(stderr, "rk-bridge: cannot start I/O thread %d\n", started);
            __atomic_sub_fetch(&sh->live, nw - started, __ATOMIC_RELEASE);
            sh->front->stopping = true;
            rkb_stop_workers(sh);
            sh->exit_code = RKB_EXIT_FAIL;
            break;
        }
    rkb_front_run(sh->front);
    for (int i = 0; i < started; i++)
        pthread_join(sh->loops[i]->thread, NULL);
}

/* Sums the counters the exit line reports. */
static rkb_counters rkb__totals(const rkb_shared *sh)
{
    rkb_counters t = {0};
    for (int i = 0; i <= sh->n_loops; i++) {
        const rkb_counters *n = i < sh->n_loops ? &sh->loops[i]->n : sh->front ? &sh->front->n : NULL;
        if (!n)
            continue;
#define RKB__TC_ADD(name) t.name += n->name;
        RKB_THREAD_COUNTERS(RKB__TC_ADD)
#undef RKB__TC_ADD
    }
    return t;
}

/* Closes the socket, waiting until the clients have read the replies
 * ZeroMQ holds or has written (rkb_port_settle), then for those still
 * queued to leave: up to the rest of --drain-ms (at least 2 s) in all. A
 * client that reads gets them; ZeroMQ cannot say which replies a client
 * that stopped reading lost, so the exit line says only whether the wait
 * ran out. */
static void rkb__close(rkb_shared *sh, bool served)
{
    int64_t now = rkb_now_ns();
    int64_t end = sh->stop_at ? sh->stop_at : now;
    for (int i = 0; i < sh->n_loops; i++)
        if (sh->loops[i]->stop_at > end)
            end = sh->loops[i]->stop_at;
    int64_t left = end + (int64_t)sh->cfg->drain_ms * 1000000 - now;
    int linger = left > 2000000000 ? (int)(left / 1000000) : 2000;
    int64_t deadline = now + (int64_t)linger * 1000000;
    bool read_all = !served || rkb_port_settle(&sh->port, deadline);
    int64_t rest = deadline - rkb_now_ns();
    rkb_port_close(&sh->port, rest > 0 ? (int)(rest / 1000000) : 0);
    if (!sh->ctx)
        return;
    zmq_ctx_shutdown(sh->ctx);
    rkb_zap_stop(sh->port.zap);
    sh->port.zap = NULL;
    zmq_ctx_term(sh->ctx);
    if (!served)
        return;
    rkb_counters t = rkb__totals(sh);
    uint64_t done = t.replies + t.dropped_replies + t.unroutable;
    rkb_log_flush(1);
    rkb_log(RKB_LOG_INFO, "stopped: %" PRIu64 " requests: %" PRIu64 " replies (%" PRIu64
            " errors), %" PRIu64 " dropped (client queue full), %" PRIu64
            " unroutable (client gone), %" PRIu64 " unanswered; %s",
            t.requests, t.replies, t.errors, t.dropped_replies, t.unroutable,
            t.requests > done ? t.requests - done : 0,
            read_all && rkb_now_ns() < deadline - 50000000
                ? "clients read every reply ZeroMQ held"
                : "the wait for clients to read the replies ZeroMQ held ran out: clients that "
                  "stopped reading lost theirs");
}

int rkb_run(const rkb_config *c)
{
    rkb_log_set_level(c->log_level);
    const long cpus = rkb_cpus();
    int nw = rkb__io_threads(c, cpus); /* rkb__start may add loops, one per device */
    rkb_shared *sh = calloc(1, sizeof *sh);
    /* room for a loop per device, however many `--devices all` finds */
    rkb_loop **loops = calloc((size_t)(nw > RK_MAX_DEVICES ? nw : RK_MAX_DEVICES), sizeof *loops);
    if (!sh || !loops) {
        free(sh);
        free(loops);
        return RKB_EXIT_FAIL;
    }
    sh->cfg = c;
    sh->cpus = cpus;
    sh->zmq_io_threads = rkb__zmq_io_threads(c, cpus);
    sh->loops = loops;
    sh->port.sfd = -1;
    /* none yet: a start that fails before rkb_port_open closes the port,
     * which must not close descriptor 0 (stdin, or the runtime's own) */
    sh->port.spare_fd = sh->port.decoy_fd = -1;
    int rc = rkb__start(sh, &nw);
    if (rc == 0)
        rkb__serve(sh, nw);
    /* before the loops and the frontend go: ending a switch wakes them
     * (a stop cancelled it already: a prepare thread must not outlive the runtime) */
    rkb_deploy_cancel(sh);
    rkb__close(sh, rc == 0);
    if (sh->front) {
        for (int i = 0; i < sh->n_loops; i++)
            if (rkb_ring_discard(sh->loops[i]->reqq) + rkb_ring_discard(sh->loops[i]->repq))
                rkb_log(RKB_LOG_ERROR, "INTERNAL: frames left in worker %d's rings at exit", i);
        rkb_waker_fini(&sh->front->wk);
        rkb_encoder_destroy(&sh->front->enc);
        free(sh->front);
    }
    for (int i = 0; i < sh->n_loops; i++) {
        rkb_loop_fini(sh->loops[i]);
        free(sh->loops[i]);
    }
    rk_runtime_close(sh->rt);
    if (sh->port.sfd >= 0)
        close(sh->port.sfd);
    rc = rc ? rc : sh->exit_code;
    free(loops);
    free(sh);
    return rc;
}
