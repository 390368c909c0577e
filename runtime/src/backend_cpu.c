/* backend_cpu.c - the CPU backend: one worker thread serves the same rings
 * the ring kernel serves, with the same operations and results.
 *
 * The worker spins briefly after each message (sub-microsecond hand-off),
 * then yields, then sleeps on the H2D doorbell futex, which producers ring
 * when they see it sleeping: an idle runtime costs no CPU, a busy one
 * answers without a system call. */
#include <stdlib.h>
#include <string.h>

#include "barrier.h"
#include "internal.h"

typedef struct rk__cpu {
    pthread_t thread;
    bool running;
} rk__cpu;

/* Heartbeat period: the worker stamps region->heartbeat at least this
 * often (its idle sleep is bounded by it). */
#define RK__CPU_IDLE_SLEEP_NS 100000000 /* 100 ms */

/* Serves one request (msg, len bytes copied out of the H2D slot) and posts
 * its reply. */
static void rk__cpu_serve(rk_runtime *rt, const uint8_t *msg, uint32_t len, uint8_t *reply)
{
    rk_msg_hdr h;
    memcpy(&h, msg, sizeof h);
    const uint32_t msg_max = rk_ring_msg_max(rt->d2h);
    uint32_t reply_len = sizeof h;
    size_t out_len = 0;
    int status;

    if (len < sizeof h) {
        status = -RK_EPROTO;
    } else if (h.flags & RK_MSG_ARENA) {
        rk_arena_ref ref;
        if (len < sizeof h + sizeof ref) {
            status = -RK_EPROTO;
        } else {
            memcpy(&ref, msg + sizeof h, sizeof ref);
            /* the offsets come from shared memory: check them before use */
            size_t asz = rt->arena.size;
            if (ref.in_off > asz || h.len > asz - ref.in_off || ref.out_off > asz ||
                ref.out_cap > asz - ref.out_off) {
                status = -RK_EPROTO;
            } else {
                status = rk__cpu_execute(rt, h.type, rt->arena.base + ref.in_off, h.len,
                                         rt->arena.base + ref.out_off, ref.out_cap, &out_len);
            }
            memcpy(reply + sizeof h, &ref, sizeof ref);
            reply_len += sizeof ref;
        }
    } else if (h.len > len - sizeof h) {
        status = -RK_EPROTO;
    } else {
        status = rk__cpu_execute(rt, h.type, msg + sizeof h, h.len, reply + sizeof h,
                                 msg_max - sizeof h, &out_len);
        if (status == 0)
            reply_len += (uint32_t)out_len;
    }
    h.status = status;
    h.len = status == 0 ? (uint32_t)out_len : 0;
    memcpy(reply, &h, sizeof h);

    rk__backoff b;
    rk__backoff_reset(&b);
    while (rk_ring_sp_enqueue(rt->d2h, reply, reply_len) == -RK_EAGAIN) {
        /* D2H full: actors drain it when they wait; wake any that sleep */
        rk__runtime_wake(rt);
        if (rk__ld_acquire(&rt->region->stop))
            return;
        if (!rk__backoff_poll(&b))
            rk__sleep_ns(rk__backoff_sleep_ns(&b));
    }
    rk__runtime_wake(rt);
}

static void *rk__cpu_main(void *arg)
{
    rk_runtime *rt = arg;
    rk__region *reg = rt->region;
    /* messages and replies are at most msg_max bytes; 8-aligned so vadd's
     * float operands are aligned when inline */
    _Alignas(16) uint8_t msg[RK_RING_SLOT_MAX / 2];
    _Alignas(16) uint8_t reply[RK_RING_SLOT_MAX / 2];
    rk__backoff b;
    rk__backoff_reset(&b);
    rk__st_release(&reg->state, (int32_t)RK__STATE_RUNNING);
    /* acquire: pairs with rk__cpu_stop's store-release of stop */
    while (!rk__ld_acquire(&reg->stop)) {
        uint32_t len;
        int rc = rk_ring_sc_peek(rt->h2d, msg, sizeof msg, &len);
        if (rc == 0) {
            /* the slot is copied out and arena payloads stay allocated
             * until the reply is released, so the slot can go back now */
            rk_ring_sc_release(rt->h2d);
            rk__cpu_serve(rt, msg, len, reply);
            rk__backoff_reset(&b);
            continue;
        }
        if (rc != -RK_EAGAIN) {
            rk__runtime_fault(rt, rc, rk_last_detail());
            break;
        }
        if (rk__backoff_poll(&b))
            continue;
        rk__st_relaxed(&reg->heartbeat, (uint64_t)rk__now_ns());
        rk_ring_sc_sleep(rt->h2d, RK__CPU_IDLE_SLEEP_NS);
    }
    rk__st_release(&reg->state, (int32_t)RK__STATE_STOPPED);
    return NULL;
}

static int rk__cpu_start(rk_runtime *rt)
{
    rk__cpu *c = calloc(1, sizeof *c);
    if (!c)
        return rk__fail(RK_ENOMEM, "CPU backend: out of memory");
    rk__st_relaxed(&rt->region->stop, 0u);
    int err = pthread_create(&c->thread, NULL, rk__cpu_main, rt);
    if (err) {
        free(c);
        return rk__fail(RK_ESYS, "CPU backend: pthread_create failed: %s", strerror(err));
    }
    c->running = true;
    rt->backend_state = c;
    rk_info *in = &rt->info;
    in->backend = RK_BACKEND_CPU;
    strcpy(in->backend_name, "cpu");
    in->has_device = 0;
    in->grid = rt->cfg.grid;
    in->block = rt->cfg.block;
    in->smem = rt->cfg.smem;
    return 0;
}

static void rk__cpu_stop(rk_runtime *rt)
{
    rk__cpu *c = rt->backend_state;
    if (!c)
        return;
    /* release: pairs with the worker's load-acquire of stop */
    rk__st_release(&rt->region->stop, 1u);
    /* the worker may be asleep on the doorbell: ring it */
    rk__fetch_add(&rt->h2d->doorbell, 1u);
    rk__futex_wake(&rt->h2d->doorbell, 1);
    if (c->running)
        pthread_join(c->thread, NULL);
    free(c);
    rt->backend_state = NULL;
}

static int rk__cpu_health(rk_runtime *rt)
{
    (void)rt;
    return 0;
}

const rk__backend_ops rk__cpu_backend = {
    .name = "cpu",
    .kind = RK_BACKEND_CPU,
    .start = rk__cpu_start,
    .stop = rk__cpu_stop,
    .health = rk__cpu_health,
    .relaunch = NULL,
};
