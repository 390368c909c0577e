/* selftest.c - one NOP ping through the rings before any actor exists: it
 * proves that the consumer sees host writes and that its replies reach the
 * host (on a GPU: that polling mapped host memory works on this machine). */
#include <string.h>

#include "barrier.h"
#include "internal.h"

int rk__selftest(rk_runtime *rt, int timeout_ms, int (*alive)(void *), void *arg)
{
    rk_msg_hdr h = {.type = RK_OP_NOP, .actor = 0xffff, .id = 0x5e1f7e575e1f7e57ull};
    h.gen = atomic_load(&rt->gen);
    int rc = rk_ring_mp_enqueue(rt->h2d, &h, sizeof h);
    if (rc)
        return rk__fail(RK_ESELFTEST, "self-test: cannot enqueue the ping: %s", rk_last_detail());
    /* its reply comes back on the ring of actor 0xffff, as any reply does */
    rk__d2h *d = rk__d2h_of(rt, h.actor);
    int64_t t0 = rk__now_ns(), deadline = t0 + (int64_t)timeout_ms * 1000000;
    _Alignas(16) uint8_t buf[RK_RING_SLOT_MAX / 2];
    for (;;) {
        uint32_t len = 0;
        rc = rk_ring_sc_dequeue(d->ring, buf, sizeof buf, &len);
        if (rc == 0) {
            rk_msg_hdr r;
            memcpy(&r, buf, sizeof r);
            if (len < sizeof r || r.id != h.id || r.type != RK_OP_NOP || r.status != 0)
                return rk__fail(RK_ESELFTEST, "self-test: wrong reply (len %u, type %u, id %llx, status %d)",
                                len, r.type, (unsigned long long)r.id, r.status);
            /* the routers go on from here (router.c) */
            atomic_store_explicit(&d->claim, rk__ld_relaxed(&d->ring->cons_head), memory_order_relaxed);
            rk__log(RK__LOG_INFO, "self-test: ping through the rings in %.1f us",
                    (double)(rk__now_ns() - t0) / 1e3);
            return 0;
        }
        if (rc != -RK_EAGAIN)
            return rk__fail(RK_ESELFTEST, "self-test: bad reply: %s", rk_last_detail());
        if (alive && (rc = alive(arg)) != 0)
            return rk__fail(RK_ESELFTEST, "self-test: %s", rk_last_detail());
        if (rk__now_ns() > deadline)
            return rk__fail(RK_ESELFTEST,
                            "self-test: no reply to a ping through the rings within %d ms: the device "
                            "does not see host writes to mapped memory on this machine (or the kernel is "
                            "not running)",
                            timeout_ms);
        rk__sleep_ns(rk__now_ns() - t0 < 10000000 ? 2000 : 200000);
    }
}
