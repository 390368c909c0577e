/* device/idle.cuh - the dispatcher's idle path: one read of the next
 * slot in flight, and the request it finds answered from the registers
 * (echo/NOP, a small user actor) or staged for the dispatcher loop. */
#ifndef RK_DEVICE_IDLE_CUH
#define RK_DEVICE_IDLE_CUH

#include <stdint.h>

#include "crew.cuh"
#include "dispatch.cuh"
#include "ops.cuh"

namespace rk {
namespace dev {

/* The reply side of what the idle poll answers at once (an echo/NOP, a
 * small user actor's request), worked out before the poll's read while
 * nothing waits on it: lane r holds reply ring r's next slot, its flag and
 * whether it has room (lanes >= nrings: ring 0's, unused). Worked out
 * after the read returned, behind local-memory loads of the ring views,
 * this cost the round trip ~0.1 us (H200: 548 against 332 cycles from the
 * find to the reply's stores; device/NOTES.md, "The idle answer"). */
struct echo_ready {
    unsigned long long slot;
    uint32_t flag, room, msg_max, gen;
};

__device__ __forceinline__ echo_ready echo_prepare(const dispatch &d, const dispatch_ref &p, const rk_kargs &ka)
{
    const ring_view o = ring_at(p.out, ka.d2h_stride, d.lane < d.nrings ? d.lane : 0u);
    echo_ready e;
    e.slot = (unsigned long long)ring_slot(o, p.dpos);
    e.flag = ring_flag(o, p.dpos);
    e.room = p.dpos - p.dhead < o.slots;
    e.msg_max = p.in.msg_max;
    e.gen = d.gen;
    /* in registers from here: the compiler would otherwise work them out
     * again where they are used, after the read */
    asm volatile("" : "+l"(e.slot), "+r"(e.flag), "+r"(e.room), "+r"(e.msg_max), "+r"(e.gen));
    return e;
}

/* What echo_fast needs besides the lines, in registers: the request's
 * flag, the ring's message size, the generation, the lane, the reply
 * rings' mask, and the reply ring the next echo most likely answers on
 * (rr: the last idle answer's, sh.idle_rr; a host thread's ping-pong stays
 * on its actor's ring) with its next slot, flag and room in every lane,
 * worked out before the read from e. */
struct echo_pins {
    unsigned long long slot;
    uint32_t flag, msg_max, gen, lane, rmask, rr, rflag, room;
};

__device__ __forceinline__ echo_pins echo_pins_of(const echo_ready &e, const shared0 &sh, const rk_kargs &ka,
                                                  uint32_t flag, uint32_t lane)
{
    echo_pins q;
    q.rr = sh.idle_rr;
    q.slot = __shfl_sync(FULL, e.slot, q.rr);
    q.rflag = __shfl_sync(FULL, e.flag, q.rr);
    q.room = __shfl_sync(FULL, e.room, q.rr);
    q.flag = flag;
    q.msg_max = e.msg_max;
    q.gen = e.gen;
    q.lane = lane;
    q.rmask = ka.d2h_rings - 1u;
    return q;
}

/* Keeps q in registers from here (the poll pins it between issuing its
 * read and waiting for it): without this the compiler built the flag
 * again after the read, from the H2D position in local memory (three
 * LDL and a shift before the find's compare; SASS, sm_90). ptxas may
 * still read the lane again from SR_TID: an empty asm hides nothing from
 * it. */
__device__ __forceinline__ void echo_pin(echo_pins &q)
{
    asm volatile("" : "+l"(q.slot), "+r"(q.flag), "+r"(q.msg_max), "+r"(q.gen), "+r"(q.lane), "+r"(q.rmask),
                 "+r"(q.rr), "+r"(q.rflag), "+r"(q.room));
}

/* What echo_fast reads of the lines (lane i line i: L): which carry the
 * request's flag (a vote) and words 0, 1, the actor, the status and the
 * payload length (five shuffles), taken in the poll loop as the read's
 * data comes, so that they issue back to back. */
struct echo_lines {
    uint32_t there, l0, w1, wa, w5, w6;
};

__device__ __forceinline__ echo_lines echo_lines_of(const echo_pins &q, uint64_t L)
{
    const uint32_t lo = (uint32_t)L;
    echo_lines x;
    x.there = __ballot_sync(FULL, (uint32_t)(L >> 32) == q.flag);
    x.l0 = __shfl_sync(FULL, lo, 0);
    x.w1 = __shfl_sync(FULL, lo, RK__W_TYPE);
    x.wa = __shfl_sync(FULL, lo, RK__W_ACTOR);
    x.w5 = __shfl_sync(FULL, lo, RK__W_STATUS);
    x.w6 = __shfl_sync(FULL, lo, RK__W_PLEN);
    return x;
}

/* echo_fast's header rules, as one predicate (&, not &&: no branch per
 * check): the lines x hold a complete inline request of generation gen
 * (messages up to msg_max bytes; slot_inline_at's checks) whose reply
 * ring (its actor & rmask) is rr, and that ring has room. Plain
 * functions, this and the two below: test idle_wait checks them against
 * slot_inline_at's rules on the host (it caught w6 + 24 <= len passing a
 * payload length near 2^32). The subtraction wraps when len < 24, where
 * the length check fails. They restate slot_inline_at's header rules
 * rather than sharing a function with it: shared, the busy path's code
 * changed too (PTX), unmeasured. */
__host__ __device__ inline bool fast_inline_ok(const echo_lines &x, uint32_t msg_max, uint32_t gen, uint32_t room,
                                               uint32_t rmask, uint32_t rr)
{
    const uint32_t len = x.l0 <= msg_max ? x.l0 : msg_max;
    const uint32_t nl = 1u + (len + 3u) / 4u; /* lines the message uses */
    const uint32_t need = nl >= 32u ? 0xffffffffu : (1u << nl) - 1u;
    return ((x.there & need) == need) & (nl <= 32u) & (x.w5 == gen) & (len >= sizeof(rk_msg_hdr)) &
           !((x.w1 >> 16) & RK_MSG_ARENA) & (x.w6 <= len - (uint32_t)sizeof(rk_msg_hdr)) & (room != 0u) &
           ((x.wa & 0xffffu & rmask) == rr);
}

/* ... and an echo or a NOP: what echo_fast answers */
__host__ __device__ inline bool echo_fast_ok(const echo_lines &x, uint32_t msg_max, uint32_t gen, uint32_t room,
                                             uint32_t rmask, uint32_t rr)
{
    const uint32_t type = x.w1 & 0xffffu;
    return fast_inline_ok(x, msg_max, gen, room, rmask, rr) & ((type == RK_OP_ECHO) | (type == RK_OP_NOP));
}

/* ... and a user actor's request: what serve_user answers on the guessed
 * ring, without idle_check's shuffles */
__host__ __device__ inline bool user_fast_ok(const echo_lines &x, uint32_t msg_max, uint32_t gen, uint32_t room,
                                             uint32_t rmask, uint32_t rr)
{
    return fast_inline_ok(x, msg_max, gen, room, rmask, rr) & ((x.w1 & 0xffffu) >= RK_OP_USER);
}

/* The idle poll's echo/NOP answer in the fewest dependent steps: the
 * checks of slot_inline_at on the lines' words (x) as one predicate, and
 * the reply stored at the guessed ring's slot under it, no branch between
 * the read's data and the stores. Through idle_check the answer waited
 * for the reply ring's shuffles behind the one that names it: 340 cycles
 * from the find to the reply's stores, 262 this way (RK_KF_STAMP, H200;
 * device/NOTES.md, "The idle answer"). Returns false, having stored
 * nothing, for anything else: another type, another reply ring than
 * guessed, no room, a line not there yet; idle_serve then decides (a
 * user actor's request on the guessed ring without idle_check). */
__device__ __forceinline__ bool echo_fast(const echo_pins &q, uint64_t L, const echo_lines &x)
{
    const bool ok = echo_fast_ok(x, q.msg_max, q.gen, q.room, q.rmask, q.rr);
    const uint32_t type = x.w1 & 0xffffu;
    uint32_t rl;
    const uint32_t dw = reply_word_of(L, type, x.w6, q.lane, rl);
    /* strong LL reply lines, no fence, as echo_answer's: the host takes
     * the reply once every line carries q.rflag (rk/ring.h, the LL lines) */
    if (ok & (q.lane < rl))
        rk__st_relaxed_sys((uint64_t *)q.slot + q.lane, ring_line(dw, q.rflag));
    return ok;
}

/* What the idle poll found (lane i line i: L, its lines' flag: flag): its
 * reply ring rr, that ring's next slot s and flag rf (from e: only the
 * reply ring's three shuffles wait for another, the one that names the
 * ring; the request's checks run beside them), its type and payload
 * length, inl: a complete inline request of this generation whose reply
 * ring has room, and lines: every line its length names is there. */
struct idle_find {
    uint64_t *s;
    uint32_t rr, rf, type, plen;
    bool inl, lines;
};

__device__ __forceinline__ idle_find idle_check(const echo_ready &e, const rk_kargs &ka, uint64_t L, uint32_t flag,
                                                uint32_t lane)
{
    idle_find f;
    f.rr = reply_ring_of(ka, __shfl_sync(FULL, (uint32_t)L, RK__W_ACTOR));
    f.s = (uint64_t *)__shfl_sync(FULL, e.slot, f.rr);
    f.rf = __shfl_sync(FULL, e.flag, f.rr);
    const uint32_t room = __shfl_sync(FULL, e.room, f.rr);
    const bool inl = slot_inline_at(L, flag, e.msg_max, lane, e.gen, &f.type, &f.plen, &f.lines);
    f.inl = room && inl;
    return f;
}

/* What user_fast_ok passed, as idle_check would have found it: the
 * guessed reply ring's slot and flag (q), the lines' type and payload
 * length (x). */
__device__ __forceinline__ idle_find guessed_find(const echo_pins &q, const echo_lines &x)
{
    idle_find f;
    f.s = (uint64_t *)q.slot;
    f.rr = q.rr;
    f.rf = q.rflag;
    f.type = x.w1 & 0xffffu;
    f.plen = x.w6;
    f.inl = true;
    f.lines = true;
    return f;
}

/* Answers an echo/NOP the idle poll found (f.inl): strong reply lines,
 * no fence (LL lines need none between them; measured 0.65 us quicker
 * than weak stores + fence.sc.sys). */
__device__ __forceinline__ void echo_answer(const idle_find &f, const rk_kargs &ka, uint64_t L, uint32_t lane)
{
#ifdef RK_KERNEL_EXPERIMENTS
    if (ka.flags & RK_KF_IDLE_SC) {
        /* comparison: weak reply lines + fence.sc.sys (before 2026-11) */
        reply_fast_of<true>(f.s, f.rf, L, f.type, f.plen, lane);
        rk__fence_seq_cst_sys();
        return;
    }
#endif
    reply_fast_of<false>(f.s, f.rf, L, f.type, f.plen, lane);
}

/* A request the idle poll found that it does not answer now, handed to
 * the dispatcher loop through sh.lines. Counter 7: line 0 there but a
 * later line not yet (f.lines false: the read overtook the producer's
 * stores, one more poll). */
__device__ __forceinline__ void idle_stage(const idle_find &f, shared0 &sh, uint64_t a, uint32_t lane)
{
    if (!f.lines)
        stat_add(sh, 7, 1, lane);
    sh.lines[lane] = a;
}

/* A user actor's request that the idle poll found complete in its
 * registers (lane i line i, L; one warp's lines, inline, this generation,
 * its reply ring's slot and room checked: f), served as echo is: no
 * staging into a batch, no out-of-line calls, the handler inlined, the
 * reply stored from the registers. The staged path (serve_staged,
 * serve_slow) cost a lone warp ~2 600 cycles for a 64-B request (H100:
 * device/NOTES.md, "User actors on the GPU"). The caller moves ring
 * f.rr's position. */
template <class... A>
__device__ __forceinline__ void serve_user(dispatch &d, const dispatch_ref &p, const rk_kargs &ka, shared0 &sh,
                                           uint64_t L, const idle_find &f)
{
    const uint32_t lane = d.lane;
    const uint16_t type = (uint16_t)f.type;
    const uint32_t hlen = f.plen;
    /* from the registers: run_word of the words in shared memory made
     * the round trip 2.99-3.00 us, against 2.91-2.93 (H100) */
    const uint64_t run = run_word(__shfl_sync(FULL, (uint32_t)L, 0), type, __shfl_sync(FULL, (uint32_t)L, RK__W_ACTOR),
                                  __shfl_sync(FULL, (uint32_t)L, RK__W_ID_LO));
    sh.words[lane] = (uint32_t)L; /* the request's words: the handler's input at word 7 */
    __syncwarp();
    if (run && lane == 0)
        rk__st_relaxed_sys(&ka.region->running[0], run);
    uint32_t *r = sh.reply;
    const uint32_t cap = p.out.msg_max - (uint32_t)sizeof(rk_msg_hdr);
    int status = -RK_ENOTSUP;
    uint32_t out_len = 0;
    gpu_ctx c{lane, 32, false};
    actor_list<A...>::run(type, c, sh.words + 7, hlen, r + 7, cap, &out_len, &status);
    status = __shfl_sync(FULL, status, 0);
    out_len = __shfl_sync(FULL, out_len, 0);
    reply_room_check(cap, status, out_len);
    actor_fence();
    const uint32_t olen = reply_has_data(status) ? out_len : 0u;
    const uint32_t rl = 1u + ((uint32_t)sizeof(rk_msg_hdr) + olen + 3u) / 4u;
    __syncwarp(); /* the handler's reply words (shared memory) before we read them */
    /* lane i's reply word: the request's header words, or the handler's */
    uint32_t wd = lane < 7 ? (uint32_t)L : r[lane];
    if (lane == 0)
        wd = (uint32_t)sizeof(rk_msg_hdr) + olen;
    if (lane == 5)
        wd = (uint32_t)status;
    if (lane == 6)
        wd = olen;
    /* at its reply ring's next slot (f.s, flag f.rf), whose room the idle
     * poll checked; strong lines, no fence, as echo's */
    if (rl <= 32) {
        if (lane < rl)
            rk__st_relaxed_sys(f.s + lane, ring_line(wd, f.rf));
    } else { /* a reply longer than a warp's lines (slots over 256 B) */
        if (lane < 7)
            r[lane] = wd;
        __syncwarp();
        ring_warp_store(ring_at(p.out, ka.d2h_stride, f.rr), __shfl_sync(FULL, p.dpos, f.rr), r, lane);
    }
    if (run && lane == 0) /* answered: no longer running */
        rk__st_relaxed_sys(&ka.region->running[0], 0ull);
    __syncwarp();
}

/* The wait after an idle-path reply, from what the poll after it found:
 * the next request at its first read (reads == 1), or at its second
 * (reads == 2: the request came just after the first read, a whole read
 * time, ~1.1 us, late). A fixed wait suits one host's turn: the actor API's
 * (~300 ns from seeing a reply to the next request's lines) missed the
 * first read 1-25 % of the time at 400 cycles where the raw loop's (~100 ns)
 * missed 0.2-1.7 %, and a later read costs every round trip. A quantile
 * tracker instead (steps: dispatch.cuh IDLE_WAIT_*) settles where ~0.5 %
 * miss, per host and minute; finds after more reads (a reply late on its
 * way, a host busy elsewhere) move nothing, nor does a second-read find
 * whose first read came back slow (lat1: it queued behind a late reply;
 * idle_reads_seen), and a host that comes much later stops it at
 * IDLE_WAIT_MAX (device/NOTES.md, "The adaptive idle wait"). */
__device__ __forceinline__ void idle_adapt(shared0 &sh, const rk_kargs &ka, uint32_t reads, uint32_t lat1,
                                           uint32_t lane)
{
    if (lane == 0) { /* lane 0 alone reads and writes the wait and the usual first read */
        uint32_t seen = idle_reads_seen(reads, lat1, sh.read1);
        bool step = true;
#ifdef RK_KERNEL_EXPERIMENTS
        if (ka.flags & RK_KF_READ1_HIST)
            read1_hist_add(ka, reads, lat1, seen);
        if (ka.flags & RK_KF_IDLE_NOLAT) /* comparison: every second-read find steps up */
            seen = reads;
        step = !(ka.flags >> 16 & 0xffu); /* RK_KF_IDLE_DELAY(x): a fixed wait */
        if (step && (ka.flags & RK_KF_WAIT_MIN150)) {
            idle_wait_next(sh.idle_fx, sh.idle_win, seen, IDLE_WAIT_MIN_OLD);
            step = false;
        }
#endif
        if (step)
            idle_wait_next(sh.idle_fx, sh.idle_win, seen);
        sh.read1 = idle_read_base(sh.read1, reads, lat1);
    }
    __syncwarp(); /* lane 0's stores before the warp reads them (at the answer) */
}

/* What the poll's reads found: lane i's line i (a), lane 0's line 0 of
 * the next slot (b), echo_fast's words of the lines (x), whether line 0
 * carried the flag (got), the reads it took and the first one's cycles
 * (lat1). */
struct idle_read {
    uint64_t a, b;
    echo_lines x;
    bool got;
    uint32_t reads, lat1;
};

/* What is left to do after an idle answer, done once the next poll read
 * is out (idle_reads), or at the dispatcher loop's top before a busy poll:
 * the wait's step from the answered poll's reads (idle_adapt: the next
 * wait lags it by one poll), the counters of answers idle_poll made
 * without returning (d.pend), and the two steps with a block fence each
 * (h2d_done's publish, the stop check). Done before the read, they kept
 * it behind the reply (device/NOTES.md, "The read after a reply goes out
 * first"). A stop seen here ends the reads and the loop at its top. */
__device__ __forceinline__ void after_read(dispatch &d, shared0 &sh, const rk_kargs &ka, uint32_t lane)
{
    if (d.ad_reads) {
        idle_adapt(sh, ka, d.ad_reads, d.ad_lat1, lane);
        d.ad_reads = 0;
    }
    if (d.pend) { /* a poll and a message each (the loop's counters 0 and 2) */
        stat_add(sh, 0, d.pend, lane);
        stat_add(sh, 2, d.pend, lane);
        d.pend = 0;
    }
    if (!d.defer)
        return;
    if (lane == 0)
        flag_st(&sh.h2d_done, (unsigned long long)d.hpos);
    d.stop_seen = warp_stop(sh, 1);
    d.defer = false;
}

/* Reads the slot (lane i line i) until line 0 carries its flag, at most
 * 64 times, or once after ~20 ms idle (then naps: d.ns). */
__device__ __forceinline__ idle_read idle_reads(dispatch &d, shared0 &sh, const rk_kargs &ka, echo_pins &q,
                                               const uint64_t *slot, const uint64_t *next, uint32_t lane)
{
    idle_read r = {};
    uint32_t long_idle = d.idle > 300000; /* idle for a while (~20+ ms): back off */
    while (r.reads < 64 && !r.got && !d.stop_seen) {
        r.reads++;
        const long long t_read = clock64();
        r.a = rk__ld_relaxed_sys(slot);
        /* the next slot: its line 0 only (is a burst coming?) */
        r.b = lane == 0 ? rk__ld_cv(next) : 0ull;
        after_read(d, sh, ka, lane); /* the read is out */
#ifdef RK_KERNEL_EXPERIMENTS
        if (d.t_ans) { /* RK_KF_GAP: from the last answer's stores to this read */
            stat_add(sh, 3, (unsigned long long)(t_read - d.t_ans), lane);
            d.t_ans = 0;
        }
#endif
        echo_pin(q);
        asm volatile("" : "+r"(long_idle));
        r.x = echo_lines_of(q, r.a);
        /* how long the first read took: a clock read behind the vote
         * that waits for it (idle_adapt) */
        if (r.reads == 1)
            r.lat1 = (uint32_t)(clock64() - t_read);
        r.got = r.x.there & 1u; /* line 0 */
        if (!r.got && long_idle) {
            __nanosleep(d.ns);
            d.ns = d.ns < 32000 ? d.ns * 2 + 64 : d.ns;
            break;
        }
    }
    return r;
}

/* What the idle poll does with a request it found that echo_fast did
 * not answer: a small user actor's request on the guessed reply ring
 * (user_fast_ok: q and x say all idle_check would) or, as idle_check
 * decides, an echo/NOP or a user actor's request on another ring,
 * answered from the registers, its reply ring returned; else staged for
 * the dispatcher loop (IDLE_STAGED). One call of serve_user (inlined at
 * two sites, the module kernel was 4.8 KB larger). A staged built-in op
 * in a kernel with user actors pays 0.05-0.1 us for the guessed path
 * either way, not explained yet (H100; device/NOTES.md, "A user actor's
 * request on the guessed ring"). t_found: the find's clock (RK_KF_STAMP). */
constexpr uint32_t IDLE_STAGED = 0xffffffffu;

template <class... A>
__device__ __forceinline__ uint32_t idle_serve(dispatch &d, const dispatch_ref &p, const rk_kargs &ka, shared0 &sh,
                                               const echo_ready &e, const echo_pins &q, const idle_read &r,
                                               uint32_t flag, bool fast, long long t_found)
{
    const uint32_t lane = d.lane;
    const bool guessed = sizeof...(A) > 0 && fast && user_fast_ok(r.x, q.msg_max, q.gen, q.room, q.rmask, q.rr);
    const idle_find f = guessed ? guessed_find(q, r.x) : idle_check(e, ka, r.a, flag, lane);
    const bool echo = f.inl && (f.type == RK_OP_ECHO || f.type == RK_OP_NOP);
    const bool user = sizeof...(A) > 0 && f.inl && f.type >= RK_OP_USER;
    if ((echo || user) && !guessed) {
        /* the next guess: this reply ring (lane 0 writes; the warp
         * reads it at the next poll) */
        if (lane == 0)
            sh.idle_rr = f.rr;
        __syncwarp();
    }
    if (echo) {
        /* answered straight from the registers (no staging in shared
         * memory, no batch bookkeeping before the reply) */
        echo_answer(f, ka, r.a, lane);
#ifdef RK_KERNEL_EXPERIMENTS
        if (ka.flags & RK_KF_STAMP)
            stat_add(sh, 3, (unsigned long long)(clock64() - t_found), lane);
#endif
        return f.rr;
    }
    if (user) {
        serve_user<A...>(d, p, ka, sh, r.a, f);
        return f.rr;
    }
    idle_stage(f, sh, r.a, lane);
    return IDLE_STAGED;
}

/* Idle: polls the next slot, one strong read in flight (a strong read
 * notices a message ~0.2 us sooner than .cv; two strong reads of one
 * address in flight are served one after the other, and two staggered .cv
 * reads measured 1.5 us slower: device/NOTES.md). Answers an echo/NOP
 * on the guessed reply ring at once (echo_fast), else what idle_serve
 * decides: answered from the registers (quick = 1) or staged (nload = 1).
 * After an answer from the registers with nothing else waiting (no
 * burst, no grid job's reply to post, no stop) it polls the next slot
 * itself: the dispatcher loop's bookkeeping for that answer (the H2D
 * position's publish, the stop check, the counters, the wait's step) is
 * left to after_read, done while the next read is in flight. Back in the
 * loop it cost ~2 000 cycles between a reply's stores and the next read
 * (RK_KF_GAP, H100), all of it on the round trip (device/NOTES.md, "The
 * idle poll polls again itself"). Returns false when no message came;
 * quick / nload describe the last message. */
template <class... A>
__device__ __forceinline__ bool idle_poll(dispatch &d, const dispatch_ref &p, const rk_kargs &ka, shared0 &sh,
                                          uint32_t &nload, uint32_t &quick)
{
    const uint32_t lane = d.lane;
    for (;;) {
        const uint32_t flag = ring_flag(p.in, d.hpos);
        const uint64_t *slot = ring_slot(p.in, d.hpos) + lane;
        const uint64_t *next = ring_slot(p.in, d.hpos + 1);
        const echo_ready e = echo_prepare(d, p, ka);
        echo_pins q = echo_pins_of(e, sh, ka, flag, lane);
        if (d.idle_wait) {
            /* just answered a message here: a read issued now reaches
             * the host right behind the reply (PCIe reads do not pass
             * writes), before a host waiting for that reply can send
             * its next request, and the read after it comes a whole
             * read time (~1 us) later. Issued later, the first read
             * finds that request nearly always (measured: round-trip
             * p99 3.6 -> 3.0 us for +0.3 us at p50), if the host's turn
             * is short (device/NOTES.md, "The host's turn"). The wait
             * adapts (idle_adapt) down to none. */
            spin_cycles(d.idle_wait);
        }
        const idle_read r = idle_reads(d, sh, ka, q, slot, next, lane);
        /* the first poll after a reply: how many reads it took (0: not that poll) */
        const uint32_t after_reply = d.after ? r.reads : 0u;
        if (!r.got) {
            d.idle_wait = 0;
            d.after = false;
            d.idle += 64;
            stat_add(sh, 6, 1, lane);
            return false;
        }
#ifdef RK_KERNEL_EXPERIMENTS
        const long long t_found = clock64();
        const bool fast = !(ka.flags & (RK_KF_IDLE_SC | RK_KF_IDLE_CHAIN));
#else
        const long long t_found = 0;
        const bool fast = true;
#endif
        uint32_t rr; /* the reply ring of the answer, or IDLE_STAGED */
        if (fast && echo_fast(q, r.a, r.x)) {
            rr = q.rr;
#ifdef RK_KERNEL_EXPERIMENTS
            if (ka.flags & RK_KF_STAMP)
                stat_add(sh, 3, (unsigned long long)(clock64() - t_found), lane);
            if (ka.flags & RK_KF_GAP)
                d.t_ans = clock64();
#endif
        } else {
            rr = idle_serve<A...>(d, p, ka, sh, e, q, r, flag, fast, t_found);
        }
        quick = rr != IDLE_STAGED;
        nload = !quick;
        if (lane == rr)
            p.dpos++;
        if (after_reply) { /* the wait's step: once the next read is out (after_read) */
            d.ad_reads = after_reply;
            d.ad_lat1 = r.lat1;
        }
        d.idle_wait = quick ? idle_cycles_of(sh.idle_fx) : 0u; /* (lane 0 stored it before after_read's __syncwarp) */
        d.after = quick;
        /* a second message already there: read a busy batch next */
        d.burst = (uint32_t)(__shfl_sync(FULL, r.b, 0) >> 32) == ring_flag(p.in, d.hpos + 1);
        bool stay = quick && !d.burst && !d.stop_seen && p.posted == p.replied;
#ifdef RK_KERNEL_EXPERIMENTS
        if (ka.flags & (RK_KF_IDLE_ONE | RK_KF_EARLY_FENCE)) /* comparison: back to the loop each time */
            stay = false;
#endif
        if (!stay)
            return true;
        /* the dispatcher loop's steps for one answer (counters: after_read) */
        d.hpos++;
        d.pend++;
        d.defer = true;
        d.idle = 0;
        d.ns = 0;
    }
}

} // namespace dev
} // namespace rk

#endif
