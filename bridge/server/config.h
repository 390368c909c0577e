/* bridge/server/config.h - what the operator configures, and the entry
 * points main.c calls (rkb_ = bridge internal).
 *
 * rk-bridge relays protocol v1.1 requests (bridge/PROTOCOL.md) from a
 * ZeroMQ ROUTER socket into the ringkernel runtime and the replies back.
 * With --io-threads 1 one thread owns the socket and one runtime actor
 * (loop.c); with N > 1 a frontend thread owns the socket (frontend.c) and
 * hands requests to N request loops over lock-free rings (handoff.c). */
#ifndef RKB_CONFIG_H
#define RKB_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rk/rk.h>

#define RKB_MAX_BINDS 16

typedef struct rkb_config {
    const char *binds[RKB_MAX_BINDS];
    int n_binds;
    const char *status_bind;    /* --status-bind: an endpoint serving only `status`, or NULL */
    const char *actors[RKB_MAX_BINDS]; /* --actors: module files or directories (rk.modules) */
    int n_actors;
    rk_config rk;               /* runtime configuration (backend, kernel, rings, arena) */
    size_t max_message_bytes;   /* largest request body frame (TOO_LARGE above it);
                                   the transport cap is 4 times it */
    uint32_t queue;             /* requests that may wait for admission */
    size_t queue_bytes;         /* bytes of frames that may wait for admission */
    uint32_t admission_ms;      /* how long a request may wait before BUSY */
    int sndhwm, rcvhwm;         /* ZeroMQ high-water marks (messages per peer) */
    uint32_t shutdown_grace_ms; /* after a signal, answer SHUTTING_DOWN at least this long */
    uint32_t shutdown_quiet_ms; /* ... and until the socket was quiet this long */
    uint32_t drain_ms;          /* after a signal, exit within this long whatever happens */
    int log_level;              /* RKB_LOG_* (log.h) */
    /* CURVE: server secret key file (Z85), directories of allowed and of
     * admin client public keys (*.pub, Z85); no secret key = plain */
    const char *curve_secret_file;
    const char *curve_allow_dir;
    const char *curve_admin_dir;
    bool allow_insecure_key;    /* use a secret key file others may read */
    bool allow_insecure_remote; /* bind beyond loopback without CURVE */
    bool allow_admin_ops;       /* every client may use admin operations */
    unsigned ipc_mode;          /* permission bits of ipc:// socket files (0600) */
    int io_threads;             /* 0: auto (1 on <= 3 CPUs, 2 on <= 8, else 3; rkb_cpus) */
    int zmq_io_threads;         /* ZMQ_IO_THREADS; 0: auto (2 with tcp on > 5 CPUs, else 1) */
} rkb_config;

/* The defaults documented in rk-bridge --help. */
void rkb_config_init(rkb_config *c);

/* Exit statuses: 0 clean shutdown, 1 a run-time failure (cannot bind, a
 * key file, the runtime), 2 a command line that asks for something that
 * cannot or must not run (bad option, invalid kernel shape, an unsafe
 * bind). */
enum { RKB_EXIT_OK = 0, RKB_EXIT_FAIL = 1, RKB_EXIT_USAGE = 2 };

/* Runs the bridge until SIGINT/SIGTERM (which the caller must have blocked
 * in every thread: the loop reads them from a signalfd). Returns the exit
 * status. */
int rkb_run(const rkb_config *c);

/* --gen-keys: writes PREFIX.key (secret, 0600) and PREFIX.pub, refusing to
 * replace existing files unless force. Returns an exit status. */
int rkb_keys_generate(const char *prefix, bool force);

#endif
