/* barrier.h - the host side's memory-ordering vocabulary (C11 atomics).
 *
 * Names mirror device/ring.cuh (rk__ld_acquire / rk__st_release / ...), so
 * each edge of the ring protocol reads the same on both sides. Words shared
 * with the device or another process are plain integers in shared memory,
 * accessed through these helpers (never through ordinary loads/stores).
 */
#ifndef RK_BARRIER_H
#define RK_BARRIER_H

#include <stdatomic.h>
#include <stdint.h>

/* C11 atomics on plain shared integers: the region is raw memory shared
 * with the device, so the words cannot be declared _Atomic. GCC and clang
 * guarantee that the __atomic builtins work on suitably aligned plain
 * integers, which is what these wrap. */
#define rk__ld_relaxed(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define rk__ld_acquire(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define rk__st_relaxed(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define rk__st_release(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define rk__cas_acq_rel(p, expp, v)                                                                \
    __atomic_compare_exchange_n((p), (expp), (v), 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)
#define rk__fetch_add(p, v) __atomic_fetch_add((p), (v), __ATOMIC_ACQ_REL)

/* Fences: acquire after validating a message, release before publishing one,
 * seq_cst for the sleep/wake handshake (a Dekker pattern: "I set sleeping,
 * then re-check the ring" vs "I publish, then check sleeping"). */
#define rk__fence_acquire() atomic_thread_fence(memory_order_acquire)
#define rk__fence_release() atomic_thread_fence(memory_order_release)
#define rk__fence_seq_cst() atomic_thread_fence(memory_order_seq_cst)


/* ThreadSanitizer sees release/acquire pairs inside this process only. A
 * request's path to its reply can pass through a worker process (H2D
 * store-release here, its acquire and its D2H store-release there, our
 * acquire of the reply): rk__tsan_release/acquire state that edge for TSan
 * on the pending record; they compile to nothing otherwise. */
#if defined(__SANITIZE_THREAD__)
#define RK__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RK__TSAN 1
#endif
#endif
#ifdef RK__TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define rk__tsan_acquire(p) __tsan_acquire((void *)(p))
#define rk__tsan_release(p) __tsan_release((void *)(p))
#else
#define rk__tsan_acquire(p) ((void)(p))
#define rk__tsan_release(p) ((void)(p))
#endif

#endif
