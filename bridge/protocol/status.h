/* bridge/protocol/status.h - what a `status` reply carries, as data (rkb_ =
 * bridge internal). The server fills an rkb_status; rkb_encode_status()
 * (encode.c) writes every byte of it.
 *
 * Two X-macros decide the shape, so nothing is counted by hand:
 *   RKB_STATUS_FIELDS    the top-level keys after v, id, ok, each with the
 *                        encoder function that writes its value;
 *   RKB_STATUS_COUNTERS  the keys of the `counters` map (all uint), each with
 *                        the sentence bridge/PROTOCOL.md gives it.
 * Adding a key is one line in a list (and, for a field, its encoder
 * function in encode.c and its data in rkb_status). */
#ifndef RKB_STATUS_H
#define RKB_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The counters map. The invariant every snapshot taken while no other
 * request is being handled satisfies (bridge/PROTOCOL.md, "Counters"):
 *   requests = replies + dropped_replies + unroutable + in_flight + queued + 1
 * (the 1: the status request itself, counted and not yet answered). */
#define RKB_STATUS_COUNTERS(X)                                                                     \
    X(requests, "messages read from the socket, each owed exactly one reply")                      \
    X(replies, "replies ZeroMQ accepted for sending (zmq_msg_send succeeded)")                     \
    X(errors, "error replies built (each also counted in replies, dropped_replies or unroutable)")  \
    X(restarts, "kernel relaunches: each launch, and each worker started after a fault "           \
                "(worker.restarts counts the worker processes alone)")                             \
    X(busy, "BUSY replies")                                                                        \
    X(too_large, "TOO_LARGE replies")                                                              \
    X(malformed, "MALFORMED replies")                                                              \
    X(shutting_down, "SHUTTING_DOWN replies")                                                      \
    X(device_fault, "DEVICE_FAULT replies")                                                        \
    X(internal, "INTERNAL replies and internal errors logged")                                    \
    X(permission_denied, "PERMISSION_DENIED replies")                                             \
    X(in_flight, "requests in the runtime now")                                                    \
    X(queued, "requests waiting for admission now")                                                \
    X(queued_bytes, "bytes of the frames waiting for admission now")                               \
    X(queued_total, "requests that ever waited for admission")                                     \
    X(dropped_replies, "replies ZeroMQ refused: the client's queue was full (--sndhwm)")           \
    X(unroutable, "replies ZeroMQ refused: the client was gone; and messages whose envelope "     \
                  "had more than 255 frames")                                                      \
    X(connections, "client connections open now")                                                 \
    X(accepted, "client connections accepted")                                                     \
    X(disconnects, "client connections closed, by the client or by ZeroMQ (a frame above "        \
                   "transport_cap_bytes closes its connection)")                                   \
    X(accept_failures, "connections the listener could not accept (e.g. no file descriptor left)") \
    X(listen_pauses, "times an endpoint stopped taking new connections for a while after accept "  \
                     "failures")                                                                   \
    X(connections_shed, "connections accepted and closed at once during such a pause (they were "  \
                        "waiting when it began)")                                                  \
    X(log_suppressed, "log lines left out by the per-kind rate limit")                            \
    X(deploys, "module sets deployed into the running bridge (SIGHUP)")                            \
    X(deploy_failures, "deploys that changed nothing: refused, rolled back or given up")           \
    X(ring_requests, "requests the runtime enqueued")                                              \
    X(ring_replies, "replies the runtime delivered")                                               \
    X(ring_errors, "replies with an error status and failed sends, in the runtime")                \
    X(arena_used, "arena bytes allocated now")                                                     \
    X(arena_peak, "most arena bytes ever allocated")                                               \
    X(max_message_bytes, "the message limit (TOO_LARGE above it)")                                 \
    X(transport_cap_bytes, "the transport cap: a frame above it closes its connection")            \
    X(window, "requests in flight per I/O thread (--window)")                                      \
    X(io_threads, "request loops (--io-threads)")                                                  \
    X(zmq_io_threads, "ZeroMQ background I/O threads")                                             \
    X(cpus, "the CPUs the bridge may use (affinity, cgroup quota): what auto counts")              \
    X(fd_limit, "the process's file descriptor limit after start-up raised it")                   \
    X(cpu_user_us, "user CPU time of the whole process, microseconds")                             \
    X(cpu_sys_us, "system CPU time of the whole process, microseconds")

typedef struct rkb_status_counters {
#define RKB__SC_FIELD(name, doc) uint64_t name;
    RKB_STATUS_COUNTERS(RKB__SC_FIELD)
#undef RKB__SC_FIELD
} rkb_status_counters;

/* An operation a client can call with its inputs and outputs (v1.1
 * `actors`). NULL-terminated name lists. */
typedef struct rkb_status_actor {
    const char *name;
    const char *const *inputs;
    const char *const *outputs;
    bool gpu, cpu;
} rkb_status_actor;

/* One device serving the runtime (`devices`: one entry unless --devices). */
typedef struct rkb_status_device {
    const char *backend, *name, *state; /* name: the GPU's, or "cpu"; state: its worker's */
    uint64_t pid, requests, replies, restarts, faults;
} rkb_status_device;

typedef struct rkb_status {
    const char *backend, *backend_why;
    /* `worker`: the supervised worker process; nil when the backend runs in
     * the bridge's own process (--isolation none, or auto on the CPU) */
    bool has_worker;
    const char *worker_state, *worker_backend, *worker_why;
    uint64_t worker_pid, worker_restarts, worker_faults, worker_poisoned;
    bool standby_ready;
    uint64_t standby_pid, last_recovery_ns;
    bool has_last_fault;             /* false: `last_fault` is nil */
    uint64_t fault_actor, fault_request, fault_type, fault_age_ms;
    const char *fault_error, *fault_detail;
    bool has_device;                 /* false: `device` is nil */
    const char *device_name;
    uint64_t sm_count;
    int cc_major, cc_minor;
    uint64_t grid, block, smem;       /* `kernel` */
    uint64_t max_grid, max_block, max_smem; /* `limits` */
    const char *endpoints;
    const char *status_endpoint;     /* --status-bind as bound, or NULL (nil) */
    const char *allocator;           /* rk-bridge's malloc: "jemalloc", "libc" or "sanitizer" (NULL: nil) */
    uint64_t ring_p50_ns, ring_p99_ns, ring_count;
    const rkb_status_actor *actors;
    size_t n_actors;
    const rkb_status_device *devices;
    size_t n_devices;
    const char *const *warnings;     /* sentences an operator should read */
    size_t n_warnings;
    rkb_status_counters counters;
} rkb_status;

/* The top-level keys, in order, and the encode.c function for each value. */
#define RKB_STATUS_FIELDS(X)                                                   \
    X(backend, rkb__put_backend)                                               \
    X(backend_why, rkb__put_backend_why)                                       \
    X(worker, rkb__put_worker)                                                 \
    X(devices, rkb__put_devices)                                               \
    X(device, rkb__put_device)                                                 \
    X(kernel, rkb__put_kernel)                                                 \
    X(limits, rkb__put_limits)                                                 \
    X(endpoints, rkb__put_endpoints)                                           \
    X(status_endpoint, rkb__put_status_endpoint)                               \
    X(ring, rkb__put_ring)                                                     \
    X(allocator, rkb__put_allocator)                                           \
    X(actors, rkb__put_actors)                                                 \
    X(warnings, rkb__put_warnings)                                             \
    X(counters, rkb__put_counters)

#endif /* RKB_STATUS_H */
