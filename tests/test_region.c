/* test_region.c - the shared region (runtime/src/region.c): what a worker
 * process maps from the creator's fd, and every header it must refuse
 * (RK_EPROTO, naming what is wrong) instead of reading past the mapping:
 * rings that do not fit, a reply-ring count that is not a power of two in
 * range, a ring header that is not a ring. Until 2026-11-28 the offsets'
 * refusal read the header after unmapping it (a crash under this test).
 * Reaches internals, so it links librk's static library. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "internal.h"

enum { ARENA = 1 << 16 };

/* A region of 64-slot rings, two reply rings, a 64 KiB arena, created
 * into *v; returns its fd. */
static int region_new(rk__view *v)
{
    rk_config c;
    rk_config_init(&c);
    c.ring_slots = 64;
    c.reply_rings = 2;
    c.arena_size = ARENA;
    int fd = -1;
    assert_int_equal(rk__region_create(&c, &fd, v), 0);
    return fd;
}

/* A mapper finds what the creator laid out: the same offsets, the rings
 * initialised, the arena where the header says. */
static void test_map_what_was_created(void **state)
{
    (void)state;
    rk__view v, w;
    const int fd = region_new(&v);
    assert_int_equal(rk__region_map(fd, &w), 0);
    assert_int_equal(w.size, v.size);
    assert_int_equal(w.n_d2h, 2);
    assert_int_equal((char *)w.h2d - (char *)w.hdr, (char *)v.h2d - (char *)v.hdr);
    assert_int_equal((char *)w.d2h[1] - (char *)w.hdr, (char *)v.d2h[1] - (char *)v.hdr);
    assert_int_equal(w.arena - (uint8_t *)w.hdr, v.arena - (uint8_t *)v.hdr);
    assert_int_equal(w.arena_size, ARENA);
    assert_int_equal(w.h2d->slots, 64);
    /* one memory: a message the creator enqueues, the mapper dequeues */
    assert_int_equal(rk_ring_mp_enqueue(v.h2d, "region", 6), 0);
    char buf[16];
    uint32_t len = 0;
    assert_int_equal(rk_ring_sc_dequeue(w.h2d, buf, sizeof buf, &len), 0);
    assert_int_equal(len, 6);
    assert_memory_equal(buf, "region", 6);
    rk__region_unmap(&w);
    rk__region_unmap(&v);
    close(fd);
}

/* Each corruption of the header, written through the creator's mapping,
 * is refused by a new mapping with RK_EPROTO and a detail that names it;
 * the creator's header is put back between cases. */
static void test_bad_headers_refused(void **state)
{
    (void)state;
    rk__view v, w;
    const int fd = region_new(&v);
    rk__region *h = v.hdr;
    const rk__region good = *h;
#define FIELD(f) offsetof(rk__region, f), sizeof(((rk__region *)0)->f)
    const struct {
        const char *what, *says;
        size_t at, size; /* the field (FIELD) */
        uint64_t value;
    } bad[] = {
        {"reply rings 3", "header offsets", FIELD(d2h_rings), 3},
        {"reply rings 0", "header offsets", FIELD(d2h_rings), 0},
        {"reply rings 16", "header offsets", FIELD(d2h_rings), 16},
        {"stride past the arena", "header offsets", FIELD(d2h_stride), good.arena_off},
        {"D2H before H2D", "header offsets", FIELD(h2d_off), good.d2h_off},
        {"arena past the end", "header offsets", FIELD(arena_size), good.size},
        {"arena over the rings", "header offsets", FIELD(arena_off), good.h2d_off},
        {"H2D ring cut short", "ring header corrupt", FIELD(d2h_off), good.h2d_off + 1024},
        {"H2D inside its own slots", "ring magic", FIELD(h2d_off), good.h2d_off + 4096},
    };
#undef FIELD
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (bad[i].size == 4) {
            const uint32_t v32 = (uint32_t)bad[i].value;
            memcpy((char *)h + bad[i].at, &v32, 4);
        } else {
            memcpy((char *)h + bad[i].at, &bad[i].value, 8);
        }
        memset(&w, 0x5a, sizeof w);
        int rc = rk__region_map(fd, &w);
        if (rc != -RK_EPROTO || !strstr(rk_last_detail(), bad[i].says))
            fail_msg("%s: rc %d, detail \"%s\"", bad[i].what, rc, rk_last_detail());
        assert_null(w.hdr); /* nothing left mapped */
        *h = good;
    }
    /* another ABI, and no magic */
    h->abi = RK_ABI_VERSION + 1;
    assert_int_equal(rk__region_map(fd, &w), -RK_EPROTO);
    assert_non_null(strstr(rk_last_detail(), "ABI"));
    *h = good;
    h->magic = 0;
    assert_int_equal(rk__region_map(fd, &w), -RK_EPROTO);
    *h = good;
    assert_int_equal(rk__region_map(fd, &w), 0);
    rk__region_unmap(&w);
    rk__region_unmap(&v);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_map_what_was_created),
        cmocka_unit_test(test_bad_headers_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
