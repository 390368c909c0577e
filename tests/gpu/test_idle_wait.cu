/* test_idle_wait.cu - the ring kernel's adaptive idle wait (device/
 * dispatch.cuh idle_wait_next), run on the host: once a window of polls
 * it steps down when few requests missed the poll's first read after a
 * reply, up when many did, stays within its bounds, ignores finds after
 * more reads and second-read finds whose first read came back slow
 * (idle_reads_seen: a reply late on its way), settles where ~0.5 % miss
 * against a host whose turn varies, follows a host that gets slower, and
 * a millisecond of misses moves it at most IDLE_UP_MAX steps, back in a
 * few windows (the step-a-poll law before it: ~1 400 cycles, 0.15 s).
 * And the idle poll's fast tests (device/idle.cuh echo_fast_ok,
 * user_fast_ok) say yes exactly when idle_check's rules (slot_inline_at,
 * the reply ring, its room, the type) would answer the echo or serve the
 * user actor, over random and edge-case slots. Needs no GPU (fast
 * suite). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>
}

#include "dispatch.cuh"
#include "idle.cuh"

using rk::dev::idle_cycles_of;
using rk::dev::idle_fx_of;
using rk::dev::idle_read_base;
using rk::dev::idle_reads_seen;
using rk::dev::idle_wait_next;
using rk::dev::idle_wait_step;
using rk::dev::IDLE_READ_SLOW;
using rk::dev::IDLE_STEP;
using rk::dev::IDLE_UP_MAX;
using rk::dev::IDLE_WAIT_MAX;
using rk::dev::IDLE_WAIT_MIN;
using rk::dev::IDLE_WAIT_MIN_OLD;
using rk::dev::IDLE_WIN;
using rk::dev::IDLE_WIN_HI;
using rk::dev::IDLE_WIN_LO;

static const uint32_t START = idle_fx_of(RK_KERNEL_IDLE_DELAY);

/* one window of IDLE_WIN polls, `misses` of them second-read finds */
static uint32_t window(uint32_t fx, uint32_t misses, uint32_t lo = IDLE_WAIT_MIN)
{
    uint32_t win = 0;
    for (uint32_t i = 0; i < IDLE_WIN; i++)
        idle_wait_next(fx, win, i < misses ? 2u : 1u, lo);
    assert_int_equal(win, 0u); /* a full window starts the next */
    return fx;
}

static void test_bounds_and_directions(void **)
{
    if (IDLE_WIN == 0) /* a build of the step-a-poll law (RK_KERNEL_IDLE_WIN=0), for comparison */
        skip();
    /* a window's misses decide: over HI up a step, under LO down, else none */
    assert_int_equal(window(START, IDLE_WIN_HI + 1), START + IDLE_STEP);
    assert_int_equal(window(START, 2 * IDLE_WIN_HI + 2), START + 2 * IDLE_STEP); /* a step per HI + 1 */
    assert_int_equal(window(START, IDLE_WIN), START + IDLE_UP_MAX * IDLE_STEP); /* at most UP_MAX */
    assert_int_equal(window(START, IDLE_WIN_HI), START);
    assert_int_equal(window(START, IDLE_WIN_LO), START);
    assert_int_equal(window(START, IDLE_WIN_LO - 1), START - IDLE_STEP);
    assert_int_equal(window(START, 0), START - IDLE_STEP);
    /* nothing moves before the window is full, and finds after more reads
     * (or none) count neither as polls nor as misses */
    uint32_t fx = START, win = 0;
    for (uint32_t i = 0; i + 1 < IDLE_WIN; i++)
        idle_wait_next(fx, win, 2);
    for (uint32_t r : {0u, 3u, 7u, 64u})
        idle_wait_next(fx, win, r);
    assert_int_equal(fx, START);
    assert_int_equal(win, (IDLE_WIN - 1) | (IDLE_WIN - 1) << 16);
    idle_wait_next(fx, win, 2);
    assert_int_equal(fx, START + IDLE_UP_MAX * IDLE_STEP);
    /* its bounds: no wait at all, the cap; no wrap */
    fx = START;
    for (int i = 0; i < 200; i++)
        fx = window(fx, 0);
    assert_int_equal(fx, IDLE_WAIT_MIN);
    assert_int_equal(IDLE_WAIT_MIN, 0u);
    for (int i = 0; i < 200; i++)
        fx = window(fx, IDLE_WIN);
    assert_int_equal(fx, IDLE_WAIT_MAX);
    assert_int_equal(window(IDLE_STEP - 1, 0), 0u);
    /* the comparison RK_KF_WAIT_MIN150's least: down to 150 cycles, not past */
    fx = START;
    for (int i = 0; i < 200; i++)
        fx = window(fx, 0, IDLE_WAIT_MIN_OLD);
    assert_int_equal(fx, idle_fx_of(150u));
    /* the step-a-poll law (RK_KERNEL_IDLE_WIN=0, for comparison) */
    assert_true(idle_wait_step(START, 1) < START);
    assert_true(idle_wait_step(START, 2) > START);
    assert_int_equal(idle_wait_step(START, 3), START);
}

static void test_slow_first_read(void **)
{
    const uint32_t base = 2000;
    /* a second-read find counts as a miss unless its first read was slow */
    assert_int_equal(idle_reads_seen(2, base + IDLE_READ_SLOW, base), 2u);
    assert_int_equal(idle_reads_seen(2, base + IDLE_READ_SLOW + 1, base), 3u);
    assert_int_equal(idle_reads_seen(2, 100000, 0), 2u); /* no usual read known yet */
    for (uint32_t r : {0u, 1u, 3u, 9u})                   /* other finds: as they are */
        assert_int_equal(idle_reads_seen(r, 100000, base), r);
    /* the usual first read: from the first find, then 1/16 of each step,
     * both ways; only first-read finds move it */
    assert_int_equal(idle_read_base(0, 1, 2100), 2100u);
    assert_int_equal(idle_read_base(0, 2, 2100), 0u);
    assert_int_equal(idle_read_base(base, 1, base + 160), base + 10);
    assert_int_equal(idle_read_base(base, 1, base - 160), base - 10);
    assert_int_equal(idle_read_base(base, 2, 9000), base);
    assert_int_equal(idle_read_base(base, 3, 9000), base);
}

/* xorshift64*: a fixed stream, so the test is the same on every run */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double uniform(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0;
}

/* The host of run_late: its next request reaches memory `turn` cycles
 * after the reply, mostly in [lo, hi), one in 50 up to 150 cycles later;
 * with probability `other` a reply late on its way makes it later than
 * both reads (reads 3), with `late` the reply is 0.5-5 us late and the
 * first read, queued behind it, with it (the second read finds it), and
 * in polls [burst_at, burst_end) every reply is late by a little: the
 * first read comes back in its usual time and misses (the platform's
 * slow milliseconds). */
typedef struct host_model {
    double turn_lo, turn_hi, other, late;
    int burst_at, burst_end;
} host_model;

/* The kernel's rule (idle_adapt) over n polls against host h, from the
 * wait fx0 (cycles), or, `old`, the step-a-poll law (idle_wait_step) and,
 * `nolat`, with every second-read find a miss (the rule before
 * idle_reads_seen). Returns the share of requests the host made too late
 * for the first read over the last half of n; the wait at the end in
 * *end, its most over polls [burst_at, n) in *peak (cycles). */
static double run_host(const host_model *h, uint32_t fx0, bool old, bool nolat, int n, uint32_t *end,
                       uint32_t *peak)
{
    uint32_t fx = idle_fx_of(fx0), base = 0, win = 0;
    int missed = 0;
    *peak = 0;
    for (int i = 0; i < n; i++) {
        double turn = h->turn_lo + (h->turn_hi - h->turn_lo) * uniform();
        if (uniform() < 0.02)
            turn += 150.0 * uniform();
        uint32_t lat1 = 2000u + (uint32_t)(200.0 * uniform());
        uint32_t reads = uniform() < h->other ? 3u : (double)idle_cycles_of(fx) >= turn ? 1u : 2u;
        if (i >= h->burst_at && i < h->burst_end)
            reads = 2;
        if (i >= n / 2 && reads == 2)
            missed++;
        if (reads != 3 && uniform() < h->late) {
            lat1 += 1000u + (uint32_t)(9000.0 * uniform());
            reads = 2;
        }
        const uint32_t seen = nolat ? reads : idle_reads_seen(reads, lat1, base);
        if (old)
            fx = idle_wait_step(fx, seen);
        else
            idle_wait_next(fx, win, seen);
        base = idle_read_base(base, reads, lat1);
        if (i >= h->burst_at && idle_cycles_of(fx) > *peak)
            *peak = idle_cycles_of(fx);
    }
    *end = idle_cycles_of(fx);
    return (double)missed / (n - n / 2);
}

static double run(double turn_lo, double turn_hi, double other, int n, uint32_t *end)
{
    host_model h = {turn_lo, turn_hi, other, 0.0, n, n};
    uint32_t peak;
    return run_host(&h, RK_KERNEL_IDLE_DELAY, false, false, n, end, &peak);
}

static void test_settles_near_half_a_percent(void **)
{
    uint32_t end;
    /* a host slower than the start (the actor API's turn): the wait rises */
    double miss = run(450.0, 520.0, 0.0, 400000, &end);
    assert_true(end > 500 && end < 680);
    assert_true(miss > 0.002 && miss < 0.01);
    /* a quick host (the raw rings'): it falls, and the misses stay rare */
    miss = run(150.0, 220.0, 0.0, 400000, &end);
    assert_true(end >= 180 && end < 380);
    assert_true(miss > 0.002 && miss < 0.01);
    /* replies late on their way (reads 3, 2 %) do not move it */
    miss = run(450.0, 520.0, 0.02, 400000, &end);
    assert_true(end > 500 && end < 680);
    assert_true(miss > 0.002 && miss < 0.01);
}

/* Minutes when replies are often late (here 3 %: the floor's own late
 * share on a noisy H100 host was 4.6 %): counted as misses they pushed the
 * wait to its cap; not counted, it stays where the host's turn puts it. */
static void test_late_replies_do_not_raise_it(void **)
{
    uint32_t end, quiet, peak;
    host_model h = {450.0, 520.0, 0.0, 0.0, 400000, 400000};
    (void)run_host(&h, RK_KERNEL_IDLE_DELAY, false, false, 400000, &quiet, &peak); /* no late replies */
    h.late = 0.03;
    double miss = run_host(&h, RK_KERNEL_IDLE_DELAY, false, false, 400000, &end, &peak);
    assert_true(end > 500 && end <= quiet + 64);
    assert_true(miss > 0.002 && miss < 0.01);
    /* the rule before: the same minutes hold it at the cap */
    miss = run_host(&h, RK_KERNEL_IDLE_DELAY, false, true, 400000, &end, &peak);
    assert_true(end + 40 >= idle_cycles_of(IDLE_WAIT_MAX));
    assert_true(miss < 0.002);
}

/* A millisecond (450 polls) in which every request misses the first read
 * though it came back in its usual time (each reply a little late): the
 * step-a-poll law took the wait ~1 400 cycles up and then 64 000 finds to
 * come back, so for ~0.15 s every round trip waited up to ~0.7 us more;
 * the windows move it at most IDLE_UP_MAX steps, and the quiet windows
 * after take it back. */
static void test_a_burst_of_misses_moves_it_little(void **)
{
    if (IDLE_WIN == 0) /* the step-a-poll law's build: what this test shows it does not do */
        skip();
    const int at = 200000, n = 260000;
    host_model h = {450.0, 520.0, 0.0, 0.0, at, at + 450};
    uint32_t settled, end, peak, old_end, old_peak;
    (void)run(450.0, 520.0, 0.0, at, &settled);
    (void)run_host(&h, RK_KERNEL_IDLE_DELAY, false, false, n, &end, &peak);
    assert_true(peak <= settled + (IDLE_UP_MAX + 2) * RK_KERNEL_IDLE_STEP);
    assert_true(end <= settled + 2 * RK_KERNEL_IDLE_STEP);
    (void)run_host(&h, RK_KERNEL_IDLE_DELAY, true, false, n, &old_end, &old_peak);
    print_message("settled %u cycles; after the burst: most %u, at the end %u (step-a-poll law: %u, %u)\n",
                  settled, peak, end, old_peak, old_end);
    assert_true(old_peak > settled + 1000);
    assert_true(old_end > settled + 400); /* 60 000 polls later */
}

static void test_a_slow_host_stops_it_at_the_bound(void **)
{
    uint32_t end;
    /* a turn past the bound: the wait stops there (every request missed) */
    double miss = run(idle_cycles_of(IDLE_WAIT_MAX) + 100.0, idle_cycles_of(IDLE_WAIT_MAX) + 200.0, 0.0, 200000, &end);
    assert_int_equal(end, idle_cycles_of(IDLE_WAIT_MAX));
    assert_true(miss > 0.99);
}

/* A host whose turn grows by 1 000 cycles: the wait follows within a few
 * windows (IDLE_UP_MAX steps each while every request misses). */
static void test_follows_a_slower_host(void **)
{
    uint32_t end, peak;
    host_model h = {450.0, 520.0, 0.0, 0.0, 400000, 400000};
    (void)run_host(&h, RK_KERNEL_IDLE_DELAY, false, false, 100000, &end, &peak);
    h.turn_lo += 1000.0;
    h.turn_hi += 1000.0;
    const uint32_t before = end;
    double miss = run_host(&h, end, false, false, 80000, &end, &peak);
    print_message("turn +1000 cycles: the wait %u -> %u cycles, misses in the last half %.2f %%\n", before, end,
                  miss * 100);
    assert_true(end > 1500);
    assert_true(miss < 0.02); /* the last half: caught up */
}

/* idle_check's rules, lane by lane as slot_inline_at states them (lane i
 * line L[i], flag: the slot's flag): a complete inline request of
 * generation gen whose lines fit a warp, its reply ring (actor & rmask)
 * rr, with room; an echo or NOP (user false) or a user actor's request
 * (user true). */
static bool checked_path_answers(const uint64_t *L, uint32_t flag, uint32_t msg_max, uint32_t gen, uint32_t room,
                                 uint32_t rmask, uint32_t rr, bool user)
{
    const uint32_t l0 = (uint32_t)L[0];
    const uint32_t len = l0 <= msg_max ? l0 : msg_max;
    const uint32_t nl = 1u + (len + 3u) / 4u;
    bool all = true;
    for (uint32_t lane = 0; lane < 32; lane++)
        all = all && (lane >= nl || (uint32_t)(L[lane] >> 32) == flag);
    const uint32_t w1 = (uint32_t)L[RK__W_TYPE], hlen = (uint32_t)L[RK__W_PLEN];
    const bool inl = all && (uint32_t)L[RK__W_STATUS] == gen && nl <= 32 && len >= sizeof(rk_msg_hdr) &&
                     !((w1 >> 16) & RK_MSG_ARENA) && hlen <= len - sizeof(rk_msg_hdr);
    const uint32_t type = w1 & 0xffffu;
    const uint32_t ring = RK__REPLY_RING((uint32_t)L[RK__W_ACTOR] & 0xffffu, rmask + 1u);
    const bool kind = user ? type >= RK_OP_USER : (type == RK_OP_ECHO || type == RK_OP_NOP);
    return room && inl && ring == rr && kind;
}

/* The words echo_lines_of takes (its vote and five shuffles), on the host. */
static rk::dev::echo_lines lines_of(const uint64_t *L, uint32_t flag)
{
    rk::dev::echo_lines x;
    x.there = 0;
    for (uint32_t lane = 0; lane < 32; lane++)
        x.there |= (uint32_t)((uint32_t)(L[lane] >> 32) == flag) << lane;
    x.l0 = (uint32_t)L[0];
    x.w1 = (uint32_t)L[RK__W_TYPE];
    x.wa = (uint32_t)L[RK__W_ACTOR];
    x.w5 = (uint32_t)L[RK__W_STATUS];
    x.w6 = (uint32_t)L[RK__W_PLEN];
    return x;
}

static uint32_t pick(const uint32_t *v, size_t n)
{
    return v[(size_t)(uniform() * (double)n) % n];
}

static void test_fast_checks_agree(void **)
{
    static const uint32_t lens[] = {0, 1, 23, 24, 25, 27, 28, 88, 120, 123, 124, 125, 127, 128, 200, 0xffffffffu};
    static const uint32_t types[] = {RK_OP_NOP, RK_OP_ECHO, RK_OP_VADD, RK_OP_FAULT, RK_OP_USER, RK_OP_USER + 1,
                                     0xffffu, 0x10000u + RK_OP_ECHO, 0x10000u + RK_OP_NOP, 0x20000u + RK_OP_ECHO,
                                     0x10000u + RK_OP_USER};
    static const uint32_t msg_maxes[] = {88, 120, 124, 128, 232};
    static const uint32_t masks[] = {0, 1, 3, 7, 31};
    const uint32_t flag = 0x5a5a0007u, gen = 3;
    uint64_t L[32];
    long yes[2] = {0, 0}, n = 400000;
    for (long i = 0; i < n; i++) {
        const uint32_t msg_max = pick(msg_maxes, 5), rmask = pick(masks, 5);
        const uint32_t rr = (uint32_t)(uniform() * (rmask + 1)) & rmask;
        const uint32_t room = uniform() < 0.9 ? 1u : 0u;
        uint32_t len = pick(lens, 16);
        if (uniform() < 0.3)
            len = (uint32_t)(uniform() * 140.0);
        /* words: the length, the type, the actor, the status, the payload length */
        uint32_t w[32];
        for (int k = 0; k < 32; k++)
            w[k] = (uint32_t)(uniform() * 4294967296.0);
        w[0] = len;
        w[RK__W_TYPE] = pick(types, sizeof types / sizeof types[0]);
        w[RK__W_ACTOR] = uniform() < 0.7 ? (rr | (uint32_t)(uniform() * 8.0) << 16) : w[RK__W_ACTOR];
        w[RK__W_STATUS] = uniform() < 0.9 ? gen : gen + 1;
        const uint32_t room_for = len >= 24 ? len - 24 : 0;
        w[RK__W_PLEN] = uniform() < 0.8 ? room_for : room_for + (uint32_t)(uniform() * 3.0) - 1u;
        /* the flag on every line, or on all but one, or on a prefix */
        const double u = uniform();
        const uint32_t hole = u < 0.15 ? (uint32_t)(uniform() * 32.0) : 99u;
        const uint32_t prefix = u > 0.9 ? (uint32_t)(uniform() * 33.0) : 32u;
        for (uint32_t lane = 0; lane < 32; lane++) {
            const uint32_t f = lane == hole || lane >= prefix ? flag - 1u : flag;
            L[lane] = (uint64_t)f << 32 | w[lane];
        }
        for (int user = 0; user < 2; user++) {
            const bool want = checked_path_answers(L, flag, msg_max, gen, room, rmask, rr, user);
            const rk::dev::echo_lines x = lines_of(L, flag);
            const bool got = user ? rk::dev::user_fast_ok(x, msg_max, gen, room, rmask, rr)
                                  : rk::dev::echo_fast_ok(x, msg_max, gen, room, rmask, rr);
            if (want != got)
                fail_msg("case %ld: %s %d, the checked path %d (len %u, type 0x%x, actor 0x%x, gen %u, "
                         "plen %u, msg_max %u, rmask %u, rr %u, room %u, hole %u, prefix %u)",
                         i, user ? "user_fast_ok" : "echo_fast_ok", got, want, len, w[RK__W_TYPE], w[RK__W_ACTOR],
                         w[RK__W_STATUS], w[RK__W_PLEN], msg_max, rmask, rr, room, hole, prefix);
            yes[user] += want;
        }
    }
    /* both answers of each were drawn often enough to mean something */
    for (int user = 0; user < 2; user++)
        assert_true(yes[user] > n / 50 && yes[user] < n - n / 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bounds_and_directions),
        cmocka_unit_test(test_slow_first_read),
        cmocka_unit_test(test_settles_near_half_a_percent),
        cmocka_unit_test(test_late_replies_do_not_raise_it),
        cmocka_unit_test(test_a_burst_of_misses_moves_it_little),
        cmocka_unit_test(test_a_slow_host_stops_it_at_the_bound),
        cmocka_unit_test(test_follows_a_slower_host),
        cmocka_unit_test(test_fast_checks_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
