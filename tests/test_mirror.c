/* test_mirror.c - the H2D ring's mirror (runtime/abi/rk_abi.h): what a
 * producer copies there and when (a request sent alone that fits the
 * mirror's 32 lines, while the ring's flags ask for it), where the region
 * lays it out and what a mapper refuses, and that a rings reset clears it.
 * The kernel's side (the reader warp) is tests/gpu/test_gpu_reader.c's.
 * Reaches internals, so it links librk's static library. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "barrier.h"
#include "internal.h"

enum { SLOTS = 8, SLOT = 512 };

typedef struct ring_mem {
    rk_ring *r;
    uint64_t *mirror;
} ring_mem;

static ring_mem ring_new(uint32_t flags)
{
    const size_t rs = rk_ring_memsize(SLOTS, SLOT);
    void *p = aligned_alloc(RK_RING_ALIGN, rs + rk__mirror_bytes(SLOTS));
    assert_non_null(p);
    memset(p, 0, rs + rk__mirror_bytes(SLOTS));
    assert_int_equal(rk_ring_init(p, rs, SLOTS, SLOT), 0);
    ring_mem m = {p, (uint64_t *)((char *)p + rs)};
    rk__ring_set_flags(m.r, flags);
    return m;
}

static const uint64_t *copy_at(const ring_mem *m, uint64_t pos)
{
    return m->mirror + (pos & (SLOTS - 1)) * RK__MIRROR_LINES;
}

/* Enqueues len bytes (head 24 B of 0xa5, then the body's pattern) with
 * the mirror given; returns the position. */
static uint64_t put(ring_mem *m, uint32_t len, uint64_t *mirror)
{
    uint8_t head[24], body[SLOT];
    memset(head, 0xa5, sizeof head);
    for (uint32_t i = 0; i < sizeof body; i++)
        body[i] = (uint8_t)(i * 7 + len);
    const uint32_t hlen = len < 24 ? len & ~3u : 24;
    const rk__ring_msg msg = {.head = head, .hlen = hlen, .body = body, .blen = len - hlen};
    uint64_t at = ~0ull;
    assert_int_equal(rk__ring_mp_enqueue2(m->r, &msg, &at, mirror), 0);
    return at;
}

/* Consumes everything, so the ring never fills. */
static void drain(ring_mem *m)
{
    uint8_t buf[SLOT];
    uint32_t len;
    while (rk_ring_sc_dequeue(m->r, buf, sizeof buf, &len) == 0)
        ;
}

/* Each length that fits 32 lines is copied line for line (data and
 * flag) into its position's mirror slot; longer ones leave it alone. */
static void test_copy_fits_only(void **state)
{
    (void)state;
    ring_mem m = ring_new(RK_RING_F_NO_SLEEP | RK__RING_F_MIRROR);
    for (uint32_t len = 0; len <= 200; len++) {
        const uint64_t pos = put(&m, len, m.mirror);
        const uint64_t *slot = rk_ring_slot(m.r, pos), *copy = copy_at(&m, pos);
        const uint32_t lines = 1 + (len + 3) / 4;
        if (lines <= RK__MIRROR_LINES) {
            assert_memory_equal(copy, slot, lines * 8);
            assert_int_equal((uint32_t)(copy[0] >> 32), rk_ring_flag(m.r, pos));
            assert_int_equal((uint32_t)copy[0], len);
        } else {
            /* an older lap's copy, or none: never this position's flag */
            assert_int_not_equal((uint32_t)(copy[0] >> 32), rk_ring_flag(m.r, pos));
        }
        drain(&m);
    }
    free(m.r);
}

/* No copy without the ring's flag (a CPU consumer: nobody reads it), nor
 * without a mirror given (a pipelined send, a re-post). */
static void test_no_copy_unasked(void **state)
{
    (void)state;
    ring_mem m = ring_new(RK_RING_F_NO_SLEEP);
    for (int k = 0; k < 3 * SLOTS; k++) {
        put(&m, 64, m.mirror);
        drain(&m);
    }
    rk__ring_set_flags(m.r, RK__RING_F_MIRROR);
    for (int k = 0; k < 3 * SLOTS; k++) {
        put(&m, 64, NULL);
        drain(&m);
    }
    static const uint8_t zero[SLOTS * RK__MIRROR_LINES * 8];
    assert_memory_equal(m.mirror, zero, sizeof zero);
    /* asked: the next one is copied */
    const uint64_t pos = put(&m, 64, m.mirror);
    assert_int_equal((uint32_t)(copy_at(&m, pos)[0] >> 32), rk_ring_flag(m.r, pos));
    free(m.r);
}

/* Over laps, each slot's copy carries the flag of the last position
 * written there, so a reader that wants position p refuses the copies of
 * p - SLOTS and p + SLOTS. */
static void test_laps(void **state)
{
    (void)state;
    ring_mem m = ring_new(RK__RING_F_MIRROR);
    for (uint64_t k = 0; k < 5 * SLOTS; k++) {
        const uint64_t pos = put(&m, (uint32_t)(k % 60), m.mirror);
        assert_int_equal(pos, k);
        const uint64_t *copy = copy_at(&m, pos);
        assert_int_equal((uint32_t)(copy[0] >> 32), (uint32_t)(pos / SLOTS) + 1);
        if (pos >= SLOTS)
            assert_int_not_equal((uint32_t)(copy[0] >> 32), rk_ring_flag(m.r, pos - SLOTS));
        drain(&m);
    }
    free(m.r);
}

static rk_config small_cfg(void)
{
    rk_config c;
    rk_config_init(&c);
    c.ring_slots = 64;
    c.reply_rings = 2;
    c.arena_size = 1 << 16;
    return c;
}

/* The region lays the mirror out between the H2D ring and reply ring 0,
 * zeroed and large enough; a mapper finds it where the creator put it. */
static void test_region_layout(void **state)
{
    (void)state;
    rk_config c = small_cfg();
    int fd = -1;
    rk__view v, w;
    assert_int_equal(rk__region_create(&c, &fd, &v), 0);
    assert_non_null(v.h2d_mirror);
    const char *base = (const char *)v.hdr;
    assert_true((const char *)v.h2d_mirror >= (const char *)v.h2d + rk_ring_memsize(64, c.slot_size));
    assert_true((const char *)v.h2d_mirror + rk__mirror_bytes(64) <= (const char *)v.d2h[0]);
    assert_int_equal((const char *)v.h2d_mirror - base, (long)v.hdr->h2d_mirror_off);
    for (size_t i = 0; i < rk__mirror_bytes(64) / 8; i++)
        assert_int_equal(v.h2d_mirror[i], 0);
    assert_int_equal(rk__region_map(fd, &w), 0);
    assert_int_equal((const char *)w.h2d_mirror - (const char *)w.hdr, (long)v.hdr->h2d_mirror_off);
    rk__region_unmap(&w);
    rk__region_unmap(&v);
    close(fd);
}

/* A header whose mirror overlaps the H2D ring, lies past reply ring 0, or
 * is too small for the ring's slots is refused (RK_EPROTO), by name. */
static void test_region_bad_mirror(void **state)
{
    (void)state;
    rk_config c = small_cfg();
    int fd = -1;
    rk__view v, w;
    assert_int_equal(rk__region_create(&c, &fd, &v), 0);
    const uint64_t good = v.hdr->h2d_mirror_off, h2d = v.hdr->h2d_off, d2h = v.hdr->d2h_off;
    const struct {
        uint64_t off;
        const char *says;
    } bad[] = {{h2d + 512, "ring header corrupt"}, {d2h + 4096, "header offsets"}, {d2h - 8, "H2D mirror"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v.hdr->h2d_mirror_off = bad[i].off;
        assert_int_equal(rk__region_map(fd, &w), -RK_EPROTO);
        assert_non_null(strstr(rk_last_detail(), bad[i].says));
    }
    v.hdr->h2d_mirror_off = 0; /* none: valid (a region of a librk built without one) */
    assert_int_equal(rk__region_map(fd, &w), 0);
    assert_null(w.h2d_mirror);
    rk__region_unmap(&w);
    v.hdr->h2d_mirror_off = good;
    rk__region_unmap(&v);
    close(fd);
}

/* A rings reset (positions from 0 again) clears the mirror: a copy of an
 * old lap would otherwise carry a flag the new positions reach. */
static void test_rings_clean_clears(void **state)
{
    (void)state;
    rk_config c = small_cfg();
    c.backend = RK_BACKEND_CPU;
    c.isolation = RK_ISOLATION_NONE;
    rk_runtime *rt = NULL;
    assert_int_equal(rk_runtime_open(&rt, &c), 0);
    assert_non_null(rt->view.h2d_mirror);
    memset(rt->view.h2d_mirror, 0x5a, rk__mirror_bytes(rt->cfg.ring_slots));
    rk__rings_clean(rt);
    for (size_t i = 0; i < rk__mirror_bytes(rt->cfg.ring_slots) / 8; i++)
        assert_int_equal(rt->view.h2d_mirror[i], 0);
    /* a CPU consumer: producers are not asked for copies */
    assert_int_equal(rk__ld_relaxed(&rt->h2d->flags) & RK__RING_F_MIRROR, 0);
    rk_runtime_close(rt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copy_fits_only),    cmocka_unit_test(test_no_copy_unasked),
        cmocka_unit_test(test_laps),              cmocka_unit_test(test_region_layout),
        cmocka_unit_test(test_region_bad_mirror), cmocka_unit_test(test_rings_clean_clears),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
