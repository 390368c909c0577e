/* bridge/bridge.h - the rk-bridge daemon's core (rkb_ = bridge internal).
 *
 * By default one I/O thread owns the ROUTER socket and one host actor of
 * the runtime and loops: read requests (non-blocking) -> decode -> send into the H2D
 * ring; drain replies from the actor -> encode -> send on the socket. No
 * inproc hop and no router thread sit on the request->reply path. When
 * the ring, the actor's window or the arena is full, requests wait in a
 * bounded queue (admission time --admission-ms, then BUSY); when that queue
 * is full the bridge stops reading the socket, so ZeroMQ's high-water marks
 * push back on clients. With --io-threads N > 1 a frontend thread owns the
 * ROUTER and does only ZeroMQ recv/send; N workers, each with its own actor,
 * run that loop in parallel, fed through a pair of lock-free single-producer
 * single-consumer rings each (bridge/spsc.h). See bridge/PROTOCOL.md for the
 * wire contract. */
#ifndef RKB_BRIDGE_H
#define RKB_BRIDGE_H

#include <stddef.h>
#include <stdint.h>

#include <rk/rk.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RKB_MAX_BINDS 16

enum { RKB_LOG_ERROR = 0, RKB_LOG_WARN = 1, RKB_LOG_INFO = 2, RKB_LOG_DEBUG = 3 };

typedef struct rkb_config {
    const char *binds[RKB_MAX_BINDS];
    int n_binds;
    rk_config rk;             /* runtime configuration (backend, kernel, rings, arena) */
    size_t max_message_bytes; /* largest request body frame (TOO_LARGE above it) */
    uint32_t queue;           /* requests that may wait for admission */
    uint32_t admission_ms;    /* how long a request may wait before BUSY */
    int sndhwm, rcvhwm;       /* ZeroMQ high-water marks (messages per peer) */
    uint32_t shutdown_grace_ms; /* after a signal, keep answering SHUTTING_DOWN this long */
    uint32_t drain_ms;        /* after a signal, wait at most this long for in-flight replies */
    int log_level;            /* RKB_LOG_* */
    /* CURVE: server secret key file (Z85) and a directory of allowed client
     * public keys (*.pub, Z85); NULL = plain (no encryption) */
    const char *curve_secret_file;
    const char *curve_allow_dir;
    /* 1 (default): one I/O thread owns the ROUTER and the actor (lowest
     * latency). N > 1 (at most 64): a frontend thread owns the ROUTER and
     * moves frames through a request and a reply ring per worker to N
     * worker threads, each with its own actor, so decode, encode and the
     * runtime's ring run in parallel. */
    int io_threads;     /* 0: auto (1 on <= 4 cores, 2 on <= 8, else 3) */
    int zmq_io_threads; /* ZMQ_IO_THREADS of the context (default 1) */
} rkb_config;

void rkb_config_init(rkb_config *c);

/* Runs the bridge until SIGINT/SIGTERM (which the caller must have blocked
 * in every thread, see main.c: the loop waits on a signalfd). Opens the
 * runtime, binds, prints the start-up line. Returns the process exit code:
 * 0 after a clean shutdown, 1 when start-up failed (an invalid kernel
 * configuration prints the LAUNCH_INVALID message and returns 2 before
 * binding). */
int rkb_run(const rkb_config *c);

/* Key files: a file holds one Z85 key (40 characters) on its first line.
 * rkb_key_read returns 0 and fills z85[41], or -1 with a message on stderr. */
int rkb_key_read(const char *path, char z85[41]);
/* Writes PREFIX.key (secret, mode 0600) and PREFIX.pub; returns 0 or -1. */
int rkb_keys_generate(const char *prefix);

void rkb_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
extern int rkb_log_level;

#ifdef __cplusplus
}
#endif
#endif
