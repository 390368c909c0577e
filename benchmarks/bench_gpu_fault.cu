/* bench_gpu_fault.cu - `rk-bench gpu`: what a faulting GPU actor costs.
 * 8 actors pipeline 64-B echoes through the default (isolated) runtime
 * while a ninth sends --faults poison requests (RK_OP_FAULT: an illegal
 * address in the kernel) one at a time. Each poison faults its worker
 * twice (it runs, is blamed, is retried alone, faults again and is
 * answered RK_EDEVICE), so a poison costs two recoveries. Rows:
 *
 *   fault_recovery       per fault, with the warm standby: fault -> the
 *                        first reply from the fresh worker
 *   fault_recovery_cold  the same without a standby (each worker starts cold)
 *
 * The fault's moment: for a poison's first fault, when it was sent (under
 * this load it runs within microseconds); for its retry, when the
 * supervisor let the suspect go (rk_recovery.suspects_ns: the fresh worker
 * serves and, with the standby on, a new standby is ready; the retry runs
 * at once). Each row
 * also carries the medians of where the time went (rk_runtime_recoveries):
 * detection, teardown (kill, reap, deliver, blame), start (standby GO or
 * cold spawn), and the first reply. The run fails when a reply is lost,
 * duplicated, wrong, or when any request but a poison gets an error. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atomic>

#include "bench_gpu_internal.h"

enum { LOADERS = 8, WINDOW = 64 };

typedef struct loader {
    rk_runtime *rt;
    std::atomic<int> *stop;
    uint64_t sent, ok, bad;
    uint8_t *seen; /* per sequence number mod SEQ_CAP: how many laps came back */
} loader;
/* the load never runs dry: sequence numbers go on past SEQ_CAP, and
 * seen[seq % SEQ_CAP] counts the laps (at 8 x 16.7 M echoes, the H100 run
 * at 804a5f8 ran out of numbers mid-run, and a fresh worker then waited
 * seconds for its first reply: fault_recovery's p99 was 37 s) */
#define SEQ_CAP (1u << 24)

static void *load_main(void *arg)
{
    loader *l = (loader *)arg;
    rk_actor *a;
    if (rk_actor_open(l->rt, &a))
        return NULL;
    uint64_t seq = 0;
    for (;;) {
        bool stopping = l->stop->load();
        while (!stopping && rk_actor_inflight(a) < WINDOW) {
            uint64_t m[8] = {seq};
            if (rk_actor_send(a, RK_OP_ECHO, m, sizeof m, 0, NULL, 10000)) {
                l->bad++;
                break;
            }
            seq++;
            l->sent++;
        }
        if (stopping && rk_actor_inflight(a) == 0)
            break;
        rk_reply r;
        if (rk_actor_recv(a, &r, 30000)) {
            l->bad++;
            break;
        }
        uint64_t got = ~0ull;
        if (r.status == 0 && r.len == 64)
            memcpy(&got, r.data, 8);
        /* each number once: its slot has counted every earlier lap */
        if (got >= seq || l->seen[got % SEQ_CAP] != (uint8_t)(got / SEQ_CAP)) {
            l->bad++;
        } else {
            l->seen[got % SEQ_CAP]++;
            l->ok++;
        }
        rk_reply_release(a, &r);
    }
    rk_actor_close(a);
    return NULL;
}

static int64_t med64(int64_t *v, int n)
{
    double *d = (double *)malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++)
        d[i] = (double)v[i];
    int64_t m = n ? (int64_t)median(d, n) : 0;
    free(d);
    return m;
}

/* The row from the recovery history: per fault, its moment -> the first
 * reply of the fresh worker, and the medians of where the time went. */
static void fault_stats(bench_report *rep, const char *name, const rk_recovery *h, int nh, const int64_t *sent_at,
                        int n_poison, uint64_t ok)
{
    /* per fault: its moment -> the first reply of the fresh worker */
    uint64_t *smp = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)nh);
    int64_t det[64], tear[64], start[64], first[64];
    int nd = 0, nw = 0, ns = 0, lost = 0;
    for (int i = 0; i < nh; i++) {
        lost += h[i].error == -RK_ETIMEDOUT; /* the supervisor's watch on a suspect's retry */
        if (!h[i].first_reply_ns) /* the next fault came before any reply (it was the retry) */
            continue;
        if (h[i].error == -RK_ETIMEDOUT)
            continue;
        /* the fault's moment: the latest of the last poison sent and the
         * moment the last recovery let its suspect go (the retry runs, and
         * faults, at once) */
        int64_t fault_at = 0;
        for (int k = 0; k < n_poison; k++)
            if (sent_at[k] < h[i].detected_at && sent_at[k] > fault_at)
                fault_at = sent_at[k];
        if (i && h[i - 1].suspects_ns && h[i - 1].detected_at + h[i - 1].suspects_ns > fault_at &&
            h[i - 1].detected_at + h[i - 1].suspects_ns < h[i].detected_at)
            fault_at = h[i - 1].detected_at + h[i - 1].suspects_ns;
        int64_t reply_at = h[i].detected_at + h[i].first_reply_ns;
        smp[ns] = (uint64_t)(reply_at - fault_at);
        det[nd++] = h[i].detected_at - fault_at;
        tear[ns] = h[i].teardown_ns;
        start[ns] = h[i].start_ns;
        first[ns] = h[i].first_reply_ns - h[i].teardown_ns - h[i].start_ns;
        ns++;
        nw += h[i].warm;
    }
    char extra[400];
    snprintf(extra, sizeof extra,
             "\"faults\": %d, \"measured\": %d, \"lost_retries\": %d, \"poisons\": %d, \"warm_takeovers\": %d, \"detect_p50_ns\": %lld, "
             "\"teardown_p50_ns\": %lld, \"start_p50_ns\": %lld, \"repost_p50_ns\": %lld, \"echoes\": %llu",
             nh, ns, lost, n_poison, nw, (long long)med64(det, nd), (long long)med64(tear, ns), (long long)med64(start, ns),
             (long long)med64(first, ns), (unsigned long long)ok);
    latency_row(rep, name, "cuda", smp, (size_t)ns, extra);
    if (lost)
        printf("    %s: %d suspect retries got no answer and were blamed by the supervisor's watch\n", name, lost);
    printf("    %s: %d faults (%d warm take-overs): median detection %.1f ms, teardown %.1f ms, start %.1f ms, "
           "re-post to first reply %.1f ms; %llu echoes alongside, all answered once\n",
           name, ns, nw, (double)med64(det, nd) / 1e6, (double)med64(tear, ns) / 1e6, (double)med64(start, ns) / 1e6,
           (double)med64(first, ns) / 1e6, (unsigned long long)ok);
    free(smp);
}

/* One row: n_poison poisons under load with or without the standby. */
static int fault_row(bench_report *rep, int device, int n_poison, bool warm)
{
    rk_config cfg;
    rk_config_init(&cfg);
    if (bench_reply_rings)
        cfg.reply_rings = bench_reply_rings;
    cfg.backend = RK_BACKEND_CUDA;
    cfg.device = device;
    cfg.test_faults = 1;
    cfg.standby = warm;
    cfg.fault_limit = 4 * (uint32_t)n_poison + 4; /* not a crash loop: we ask for them */
    cfg.request_deadline_ms = 2000; /* a retry that gets no answer costs 2 s, not 10 */
    rk_runtime *rt;
    CKRK(rk_runtime_open(&rt, &cfg));
    std::atomic<int> stop{0};
    loader l[LOADERS];
    pthread_t t[LOADERS];
    for (int i = 0; i < LOADERS; i++) {
        l[i] = (loader){rt, &stop, 0, 0, 0, (uint8_t *)calloc(SEQ_CAP, 1)};
        pthread_create(&t[i], NULL, load_main, &l[i]);
    }
    rk_actor *p;
    CKRK(rk_actor_open(rt, &p));
    int64_t *sent_at = (int64_t *)calloc((size_t)n_poison, sizeof(int64_t));
    int n_dev = 0;
    for (int k = 0; k < n_poison; k++) {
        /* let the standby get ready (and the load settle) between poisons */
        for (int w = 0; w < 400; w++) {
            rk_worker_info wi;
            rk_runtime_worker(rt, &wi);
            if (!warm || wi.standby_ready)
                break;
            usleep(5000);
        }
        usleep(50000);
        rk_reply r;
        sent_at[k] = (int64_t)bench_now_ns();
        CKRK(rk_actor_call(p, RK_OP_FAULT, NULL, 0, 0, &r, 60000));
        n_dev += r.status == -RK_EDEVICE;
        rk_reply_release(p, &r);
    }
    usleep(100000);
    stop.store(1);
    uint64_t sent = 0, ok = 0, bad = 0;
    for (int i = 0; i < LOADERS; i++) {
        pthread_join(t[i], NULL);
        sent += l[i].sent, ok += l[i].ok, bad += l[i].bad;
        free(l[i].seen);
    }
    rk_recovery h[64];
    int nh = rk_runtime_recoveries(rt, h, 64);
    rk_worker_info wi;
    rk_runtime_worker(rt, &wi);
    rk_actor_close(p);
    rk_runtime_close(rt);
    if (n_dev != n_poison || bad || ok != sent || nh < 2 * n_poison) {
        fprintf(stderr, "rk-bench gpu: fault_recovery: %d/%d poisons answered RK_EDEVICE, %llu of %llu echoes ok "
                "(%llu bad), %d recoveries (want %d)\n", n_dev, n_poison, (unsigned long long)ok,
                (unsigned long long)sent, (unsigned long long)bad, nh, 2 * n_poison);
        return 1;
    }
    fault_stats(rep, warm ? "fault_recovery" : "fault_recovery_cold", h, nh, sent_at, n_poison, ok);
    free(sent_at);
    return 0;
}

int fault_section(bench_report *rep, int device, int n_poison)
{
    if (n_poison > 32)
        n_poison = 32; /* rk_runtime_recoveries keeps 64 */
    if (n_poison <= 0)
        return 0;
    return fault_row(rep, device, n_poison, true) || fault_row(rep, device, n_poison, false);
}
