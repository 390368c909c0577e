/* serve_cpu.c - the CPU consumer: serves the H2D ring into the D2H ring
 * with the same operations and results as the ring kernel, until the
 * region's stop word is set. It runs as a thread of librk (the CPU backend,
 * and the CPU standing in for a crash-looping GPU) or as the body of a CPU
 * worker process; everything it touches is in the shared region.
 *
 * It spins briefly after each message (sub-microsecond hand-off), then
 * yields, then sleeps on the H2D doorbell futex, which producers ring when
 * they see it sleeping: an idle consumer costs no CPU, a busy one answers
 * without a system call. */
#include <stdlib.h>
#include <string.h>

#include "barrier.h"
#include "internal.h"
#include "worker_proto.h"

/* Heartbeat period: the consumer stamps hdr->heartbeat at least this often
 * while idle (its sleep is bounded by it) and every RK__HB_MSGS messages
 * while busy; while one handler runs, a worker process's control thread
 * stamps it (in_handler, device/worker.c). */
#define RK__CPU_HB_NS 20000000 /* 20 ms */
#define RK__HB_MSGS 1024u

/* Runs one request (msg: len bytes copied out of the H2D slot) into
 * `reply`; returns the reply's length, 0 when the request is dropped.
 * *marked: running slot 0 names it until its reply is posted. */
static uint32_t rk__serve_one(const rk__serve_cpu *s, uint32_t gen, const uint8_t *msg, uint32_t len,
                              uint8_t *reply, bool *marked)
{
    rk_msg_hdr h;
    memcpy(&h, msg, sizeof h);
    const rk__view *v = &s->v;
    const uint32_t msg_max = rk_ring_msg_max(v->d2h[0]);
    uint32_t reply_len = sizeof h;
    size_t out_len = 0;
    int status;

    if (len >= sizeof h && h.gen != gen)
        return 0; /* posted for another worker: the host re-posts it if it still owes it */
    /* test only: a retried test fault that vanishes (its consumer drops it),
     * for the supervisor's watch on suspects (tests/test_isolation.c) */
    if ((s->flags & RK__WF_TEST_FAULTS) && h.type == RK_OP_FAULT && gen && getenv("RK_TEST_LOSE_RETRIES"))
        return 0;
    /* not a trusted built-in: say which request runs, so a crash is
     * blamed on it (rk_abi.h, running slots) */
    *marked = len >= sizeof h && !rk__op_builtin(h.type);
    if (*marked)
        rk__st_relaxed(&v->hdr->running[0], RK__RUN_WORD(h.actor, h.tag, h.id));
    if (len < sizeof h) {
        status = -RK_EPROTO;
    } else if (h.flags & RK_MSG_ARENA) {
        rk_arena_ref ref;
        if (len < sizeof h + sizeof ref) {
            status = -RK_EPROTO;
        } else {
            memcpy(&ref, msg + sizeof h, sizeof ref);
            /* the offsets come from shared memory: check them before use */
            size_t asz = v->arena_size;
            if (ref.in_off > asz || h.len > asz - ref.in_off || ref.out_off > asz ||
                ref.out_cap > asz - ref.out_off) {
                status = -RK_EPROTO;
            } else {
                status = rk__ops_execute(s->defs, s->n_defs, s->flags, h.type, v->arena + ref.in_off, h.len,
                                         v->arena + ref.out_off, ref.out_cap, &out_len);
            }
            memcpy(reply + sizeof h, &ref, sizeof ref);
            reply_len += sizeof ref;
        }
    } else if (h.len > len - sizeof h) {
        status = -RK_EPROTO;
    } else {
        status = rk__ops_execute(s->defs, s->n_defs, s->flags, h.type, msg + sizeof h, h.len,
                                 reply + sizeof h, msg_max - sizeof h, &out_len);
        if (status == 0 || status == -RK_EACTOR)
            reply_len += (uint32_t)out_len;
    }
    h.status = status;
    /* an actor's own error (-RK_EACTOR) carries its sentence as the data */
    h.len = status == 0 || status == -RK_EACTOR ? (uint32_t)out_len : 0;
    memcpy(reply, &h, sizeof h);
    return reply_len;
}

/* Posts a reply on the reply ring of its actor, waiting for room (the
 * heartbeat goes on meanwhile: a consumer that waits for its host to
 * drain is alive); false when told to abort meanwhile. */
static bool rk__post_reply(const rk__serve_cpu *s, const uint8_t *reply, uint32_t len)
{
    rk_msg_hdr h;
    memcpy(&h, reply, sizeof h);
    rk_ring *d = s->v.d2h[RK__REPLY_RING(h.actor, s->v.n_d2h)];
    rk__backoff b;
    rk__backoff_reset(&b);
    while (rk_ring_sp_enqueue(d, reply, len) == -RK_EAGAIN) {
        /* full: its actors drain it when they wait, and waiters of the
         * other rings when nobody does (router.c, rk__steal); wake all */
        for (uint32_t i = 0; i < s->v.n_d2h; i++)
            rk__ring_wake(s->v.d2h[i]);
        if (rk__ld_acquire(&s->v.hdr->stop) >= 2)
            return false;
        if (!rk__backoff_poll(&b)) {
            rk__st_relaxed(&s->v.hdr->heartbeat, (uint64_t)rk__now_ns());
            rk__sleep_ns(rk__backoff_sleep_ns(&b));
        }
    }
    return true;
}

void rk__serve_cpu_run(const rk__serve_cpu *s)
{
    rk__region *reg = s->v.hdr;
    /* messages and replies are at most msg_max bytes; 8-aligned so vadd's
     * float operands are aligned when inline */
    _Alignas(16) uint8_t msg[RK_RING_SLOT_MAX / 2];
    _Alignas(16) uint8_t reply[RK_RING_SLOT_MAX / 2];
    /* acquire: the host set gen (and reset the rings) before starting us */
    const uint32_t gen = rk__ld_acquire(&reg->gen);
    rk__backoff b;
    rk__backoff_reset(&b);
    uint32_t since_hb = 0;
    rk__st_relaxed(&reg->heartbeat, (uint64_t)rk__now_ns());
    rk__st_release(&reg->state, (int32_t)RK__STATE_RUNNING);
    /* acquire: pairs with the host's store-release of stop */
    while (!rk__ld_acquire(&reg->stop)) {
        uint32_t len;
        int rc = rk_ring_sc_peek(s->v.h2d, msg, sizeof msg, &len);
        if (rc == 0) {
            /* the slot is copied out and arena payloads stay allocated
             * until the reply is released, so the slot can go back now */
            rk_ring_sc_release(s->v.h2d);
            bool marked = false;
            if (s->in_handler) /* relaxed: a stale view costs one 100-ms stamp at most */
                rk__st_relaxed(s->in_handler, 1u);
            uint32_t rlen = rk__serve_one(s, gen, msg, len, reply, &marked);
            if (s->in_handler)
                rk__st_relaxed(s->in_handler, 0u);
            /* the handler is done: the wait for reply-ring room below is
             * not its (a fault or a deadline then blames nobody) */
            if (marked)
                rk__st_relaxed(&reg->running[0], 0ull);
            if (rlen && !rk__post_reply(s, reply, rlen))
                break;
            if (++since_hb == RK__HB_MSGS) {
                since_hb = 0;
                rk__st_relaxed(&reg->heartbeat, (uint64_t)rk__now_ns());
            }
            rk__backoff_reset(&b);
            continue;
        }
        if (rc != -RK_EAGAIN) {
            /* a corrupt slot: say so and stop; the host replaces us */
            rk__log(RK__LOG_ERROR, "CPU consumer: %s", rk_last_detail());
            rk__st_release(&reg->state, (int32_t)rc);
            return;
        }
        if (rk__backoff_poll(&b))
            continue;
        rk__st_relaxed(&reg->heartbeat, (uint64_t)rk__now_ns());
        rk_ring_sc_sleep(s->v.h2d, RK__CPU_HB_NS);
    }
    rk__st_release(&reg->state, (int32_t)RK__STATE_STOPPED);
}
