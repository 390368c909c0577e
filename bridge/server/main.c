/* bridge/server/main.c - rk-bridge: the command line, signals, then
 * rkb_run(). Exit status: 0 clean shutdown, 1 run-time failure, 2 a command
 * line that cannot or must not run (config.h). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"

static const char rkb__usage[] =
"usage: rk-bridge [options]\n"
"Relays protocol v1.1 requests (msgpack over a ZeroMQ ROUTER socket, see\n"
"bridge/PROTOCOL.md) into the ringkernel runtime and the replies back.\n"
"\n"
"Endpoints\n"
"  -b, --bind ENDPOINT        bind here; repeatable (default tcp://127.0.0.1:5555,\n"
"                             loopback only). tcp://HOST:*, ipc://PATH and\n"
"                             inproc:// work too; the start-up line names the\n"
"                             endpoints actually bound. An ipc:// path is never\n"
"                             bound over a file that is not a socket, nor over a\n"
"                             socket a live process answers on; it is removed at exit\n"
"      --status-bind ENDPOINT  also bind an endpoint for operators that serves\n"
"                             only `status` (other ops get UNKNOWN_OP) and is read\n"
"                             even while --queue is full and the main endpoint is\n"
"                             left unread (back-pressure, a stalled runtime). Not a\n"
"                             --bind endpoint; the same rules for remote binds, ipc\n"
"                             files and CURVE keys. E.g. ipc:///run/rk-bridge.status,\n"
"                             then: rk-client -e ipc:///run/rk-bridge.status status\n"
"      --ipc-mode MODE        permission bits of ipc:// socket files, octal\n"
"                             (default 0600: only this user may connect)\n"
"Actors\n"
"      --actors PATH          load the actor modules in PATH (a module .so, or a\n"
"                             directory of them, loaded in name order); repeatable.\n"
"                             Each actor is an op of its name (bridge/PROTOCOL.md);\n"
"                             a module that fails to load stops the start (exit 2).\n"
"                             SIGHUP loads them again into the running bridge\n"
"                             (a deploy: no restart, no request lost)\n"
"Runtime and kernel (an invalid kernel configuration prints LAUNCH_INVALID and\n"
"exits with status 2 before binding anything)\n"
"      --backend auto|cuda|cpu  auto (default) uses a GPU that passes launch\n"
"                             validation and the self-test, else the CPU backend\n"
"      --device N             CUDA device ordinal (default 0)\n"
"      --devices all|LIST     several GPUs (LIST: ordinals like 0,1,3): one worker and\n"
"                             ring kernel each, a request loop pinned to each (so at\n"
"                             least that many --io-threads); on the CPU backend, one\n"
"                             CPU worker each\n"
"      --grid N               blocks of the ring kernel; 0 = as many as can be\n"
"                             co-resident (default 0); at most 2147483647\n"
"      --block N              threads per block, at most 1024; 0 = the largest the\n"
"                             kernel allows (default 0)\n"
"      --smem BYTES           dynamic shared memory per block, at most 227K (the\n"
"                             most any GPU gives a block) (default 0)\n"
"                             These maxima hold on every backend; on CUDA the\n"
"                             device's own limits are checked too\n"
"      --ring-slots N         slots per ring, power of two 2..16M (default 4096)\n"
"      --slot-size BYTES      bytes per ring slot, power of two 128..4096 (default 256)\n"
"      --arena-bytes BYTES    data arena for payloads that do not fit a slot, at\n"
"                             least 256 (default 256M: a request and its reply\n"
"                             live there)\n"
"      --window N             requests in flight per I/O thread, 1..32768 (default 4096)\n"
"When a worker faults (the runtime's backend runs in a supervised worker\n"
"process; README.md, \"When a GPU actor faults\")\n"
"      --isolation process|auto|none  process (default): every backend in a worker\n"
"                             process; auto: only CUDA; none: all in this process (a\n"
"                             GPU fault then fails the bridge's runtime for good)\n"
"      --standby N            warm standby workers, 0 or 1 (default 1): a fault costs\n"
"                             a take-over, not a cold CUDA start\n"
"      --fault-limit K        after K faults within --fault-window-ms, stop\n"
"                             restarting the GPU: built-ins run on the CPU, the rest\n"
"                             gets DEVICE_FAULT until the admin op retry_gpu\n"
"                             (default 10)\n"
"      --fault-window-ms MS   (default 60000)\n"
"      --request-deadline-ms MS  a user actor running longer is a fault (an endless\n"
"                             loop); 0: none (default 10000)\n"
"      --heartbeat-ms MS      a worker silent this long is replaced (default 1000)\n"
"      --share-gpu            run even where another ring kernel holds the GPU\n"
"                             (both slow down; refused by default, naming the holder)\n"
"      --test-faults          TESTING ONLY: serve the ops `fault` (an illegal\n"
"                             address on the GPU, SIGSEGV in a CPU worker) and `hang`\n"
"Limits and back-pressure\n"
"      --max-message-bytes BYTES  largest request frame (default 129M: a vadd of\n"
"                             2^24 float32 elements). Larger frames up to the\n"
"                             transport cap, 4 times this, get TOO_LARGE; ZeroMQ\n"
"                             closes the connection of a frame above the cap\n"
"      --queue N              requests that may wait for ring/arena room, in the\n"
"                             whole bridge (default 4096)\n"
"      --queue-bytes BYTES    bytes of frames that may wait, in the whole bridge\n"
"                             (default 512M; the frame that reaches it is still\n"
"                             taken); when either is full the bridge stops\n"
"                             reading its socket. Each of N > 1 --io-threads\n"
"                             holds at most 1/N of both\n"
"      --admission-ms MS      how long a request may wait for room before BUSY\n"
"                             (default 100)\n"
"      --sndhwm N, --rcvhwm N ZeroMQ high-water marks in messages per client\n"
"                             (default 10000 and 1000)\n"
"Threads\n"
"      --io-threads N|auto    auto (default): 1 on up to 3 CPUs, 2 on up to 8,\n"
"                             else 3 (the CPUs it may use: its affinity, its\n"
"                             cgroup's CPU quota). 1: one thread owns the\n"
"                             socket and the runtime actor and does all the\n"
"                             work. N > 1 (up to 64): a frontend thread owns\n"
"                             the socket and hands requests to N worker\n"
"                             threads through lock-free rings, each worker\n"
"                             with its own actor\n"
"      --zmq-io-threads N|auto  ZeroMQ's background I/O threads, which do the\n"
"                             tcp/ipc framing; auto (default): 2 with a tcp\n"
"                             --bind on more than 5 CPUs, else 1\n"
"Shutdown (SIGINT or SIGTERM: every request read is answered, then exit 0)\n"
"      --shutdown-quiet-ms MS after the signal, keep reading (answering\n"
"                             SHUTTING_DOWN) until no request came for this long\n"
"                             (default 200): requests sent before the signal get\n"
"                             their reply\n"
"      --shutdown-grace-ms MS ... and at least this long (default 0)\n"
"      --drain-ms MS          exit at most this long after the signal, whatever is\n"
"                             still in flight (default 10000)\n"
"Security (default: loopback, no encryption, no admin operations)\n"
"      --curve-secret-key-file FILE  serve CURVE-encrypted with this server secret\n"
"                             key (a file only its owner may read)\n"
"      --curve-allow-dir DIR  clients whose public key is in DIR/*.pub may connect\n"
"      --curve-admin-dir DIR  ... and those in DIR/*.pub may connect and use admin\n"
"                             operations (launch)\n"
"      --allow-admin-ops      every client may use admin operations (without\n"
"                             CURVE the only way to allow them)\n"
"      --allow-insecure-remote  allow a bind other hosts can reach without CURVE\n"
"                             (refused otherwise; then warned about)\n"
"      --allow-insecure-key   use a secret key file that group or others may read\n"
"      --gen-keys PREFIX      write a keypair to PREFIX.key (secret, 0600) and\n"
"                             PREFIX.pub, then exit; never replaces a file\n"
"      --force                with --gen-keys: replace existing key files\n"
"Other\n"
"      --log-level LEVEL      error, warn, info (default) or debug (stderr); lines\n"
"                             a client can cause are limited to 10 a second per kind\n"
"  -V, --version              print the version and exit\n"
"  -h, --help                 this text\n"
"\n"
"Numbers are decimal (--ipc-mode: octal); sizes take a K, M or G suffix (powers\n"
"of 1024). Exit status: 0 after a clean shutdown, 1 when something failed at run\n"
"time, 2 for a bad command line.\n";

enum {
    O_BACKEND = 256, O_DEVICE, O_DEVICES, O_GRID, O_BLOCK, O_SMEM, O_RING_SLOTS, O_SLOT_SIZE, O_ARENA,
    O_WINDOW, O_MAXMSG, O_QUEUE, O_QUEUE_BYTES, O_ADMISSION, O_SNDHWM, O_RCVHWM, O_GRACE,
    O_QUIET, O_DRAIN, O_LOG, O_CURVE_KEY, O_CURVE_ALLOW, O_CURVE_ADMIN, O_GEN_KEYS, O_FORCE,
    O_IO_THREADS, O_ZMQ_IO_THREADS, O_IPC_MODE, O_INSECURE_KEY, O_INSECURE_REMOTE, O_ADMIN_OPS,
    O_ISOLATION, O_STANDBY, O_FAULT_LIMIT, O_FAULT_WINDOW, O_DEADLINE, O_HEARTBEAT, O_SHARE_GPU,
    O_TEST_FAULTS, O_ACTORS, O_STATUS_BIND,
};

static const struct option rkb__opts[] = {
    {"bind", required_argument, 0, 'b'},
    {"status-bind", required_argument, 0, O_STATUS_BIND},
    {"backend", required_argument, 0, O_BACKEND},
    {"device", required_argument, 0, O_DEVICE},
    {"devices", required_argument, 0, O_DEVICES},
    {"grid", required_argument, 0, O_GRID},
    {"block", required_argument, 0, O_BLOCK},
    {"smem", required_argument, 0, O_SMEM},
    {"ring-slots", required_argument, 0, O_RING_SLOTS},
    {"slot-size", required_argument, 0, O_SLOT_SIZE},
    {"arena-bytes", required_argument, 0, O_ARENA},
    {"window", required_argument, 0, O_WINDOW},
    {"max-message-bytes", required_argument, 0, O_MAXMSG},
    {"queue", required_argument, 0, O_QUEUE},
    {"queue-bytes", required_argument, 0, O_QUEUE_BYTES},
    {"admission-ms", required_argument, 0, O_ADMISSION},
    {"sndhwm", required_argument, 0, O_SNDHWM},
    {"rcvhwm", required_argument, 0, O_RCVHWM},
    {"shutdown-grace-ms", required_argument, 0, O_GRACE},
    {"shutdown-quiet-ms", required_argument, 0, O_QUIET},
    {"drain-ms", required_argument, 0, O_DRAIN},
    {"log-level", required_argument, 0, O_LOG},
    {"curve-secret-key-file", required_argument, 0, O_CURVE_KEY},
    {"curve-allow-dir", required_argument, 0, O_CURVE_ALLOW},
    {"curve-admin-dir", required_argument, 0, O_CURVE_ADMIN},
    {"gen-keys", required_argument, 0, O_GEN_KEYS},
    {"force", no_argument, 0, O_FORCE},
    {"io-threads", required_argument, 0, O_IO_THREADS},
    {"zmq-io-threads", required_argument, 0, O_ZMQ_IO_THREADS},
    {"ipc-mode", required_argument, 0, O_IPC_MODE},
    {"allow-insecure-key", no_argument, 0, O_INSECURE_KEY},
    {"allow-insecure-remote", no_argument, 0, O_INSECURE_REMOTE},
    {"allow-admin-ops", no_argument, 0, O_ADMIN_OPS},
    {"isolation", required_argument, 0, O_ISOLATION},
    {"standby", required_argument, 0, O_STANDBY},
    {"fault-limit", required_argument, 0, O_FAULT_LIMIT},
    {"fault-window-ms", required_argument, 0, O_FAULT_WINDOW},
    {"request-deadline-ms", required_argument, 0, O_DEADLINE},
    {"heartbeat-ms", required_argument, 0, O_HEARTBEAT},
    {"share-gpu", no_argument, 0, O_SHARE_GPU},
    {"test-faults", no_argument, 0, O_TEST_FAULTS},
    {"actors", required_argument, 0, O_ACTORS},
    {"version", no_argument, 0, 'V'},
    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

#define RKB_HINT "(see rk-bridge --help)"

/* A number with an optional K/M/G suffix in [min, max]: 0, or -1 (silent). */
static int rkb__parse_num(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end;
    /* digits first: strtoull skips blanks and negates, so " -1" would be
     * 2^64 - 1, inside the SIZE_MAX ranges. Decimal: base 0 read
     * "--window 010" as 8 and took 0x10 */
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned shift = 0;
    if (errno || end == s)
        return -1;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (*end || v > (max >> shift) || (v << shift) < min)
        return -1;
    *out = v << shift;
    return 0;
}

/* rkb__parse_num, saying what was expected when it fails. or_auto: the
 * option takes "auto" too (its message says so) */
static int rkb__num(const char *opt, const char *s, uint64_t min, uint64_t max, bool or_auto,
                    uint64_t *out)
{
    if (rkb__parse_num(s, min, max, out) == 0)
        return 0;
    fprintf(stderr, "rk-bridge: --%s %s: expected %sa number from %" PRIu64 " to %" PRIu64 " " RKB_HINT "\n",
            opt, s, or_auto ? "auto or " : "", min, max);
    return -1;
}

/* A power of two in [min, max] (a K/M/G suffix allowed). */
static int rkb__pow2(const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    uint64_t v;
    if (rkb__parse_num(s, min, max, &v) == 0 && !(v & (v - 1))) {
        *out = v;
        return 0;
    }
    fprintf(stderr, "rk-bridge: --%s %s: expected a power of two from %" PRIu64 " to %" PRIu64 " "
            RKB_HINT "\n", opt, s, min, max);
    return -1;
}

static const char *rkb__name(int id)
{
    for (const struct option *o = rkb__opts; o->name; o++)
        if (o->val == id)
            return o->name;
    return "?";
}

/* The options with a number: where it goes and its range. */
static int rkb__numeric(rkb_config *c, int id, const char *arg)
{
    uint64_t v;
#define NUM_(lo, hi, a) do { if (rkb__num(rkb__name(id), arg, (lo), (hi), (a), &v)) return -1; } while (0)
#define NUM(lo, hi) NUM_(lo, hi, false)
#define POW2(lo, hi) do { if (rkb__pow2(rkb__name(id), arg, (lo), (hi), &v)) return -1; } while (0)
/* a thread count that may be "auto" (0: worked out at start, run.c) */
#define AUTO_OR_NUM(f, lo, hi) do { if (!strcmp(arg, "auto")) f = 0; else { NUM_(lo, hi, true); f = (int)v; } } while (0)
    switch (id) {
    case O_DEVICE: NUM(0, 1024); c->rk.device = (int)v; break;
    /* beyond what any device runs, on every backend (rk/runtime.h) */
    case O_GRID: NUM(0, RK_GRID_MAX); c->rk.grid = (uint32_t)v; break;
    case O_BLOCK: NUM(0, RK_BLOCK_MAX); c->rk.block = (uint32_t)v; break;
    case O_SMEM: NUM(0, RK_SMEM_MAX); c->rk.smem = (uint32_t)v; break;
    /* the runtime's own rules (rk_config), said here with the option's name */
    case O_RING_SLOTS: POW2(2, RK_RING_SLOTS_MAX); c->rk.ring_slots = (uint32_t)v; break;
    case O_SLOT_SIZE: POW2(128, RK_RING_SLOT_MAX); c->rk.slot_size = (uint32_t)v; break;
    /* the arena's unit: a smaller one holds nothing (the runtime rounds it to 0 B) */
    case O_ARENA: NUM(RK_ARENA_ALIGN, SIZE_MAX); c->rk.arena_size = (size_t)v; break;
    case O_WINDOW: NUM(1, 32768); c->rk.actor_window = (uint32_t)v; break;
    case O_MAXMSG: NUM(1, (uint64_t)1 << 31); c->max_message_bytes = (size_t)v; break;
    case O_QUEUE: NUM(1, 1u << 20); c->queue = (uint32_t)v; break;
    case O_QUEUE_BYTES: NUM(1, SIZE_MAX); c->queue_bytes = (size_t)v; break;
    case O_ADMISSION: NUM(0, 3600000); c->admission_ms = (uint32_t)v; break;
    case O_SNDHWM: NUM(0, INT32_MAX); c->sndhwm = (int)v; break;
    case O_RCVHWM: NUM(0, INT32_MAX); c->rcvhwm = (int)v; break;
    case O_GRACE: NUM(0, 3600000); c->shutdown_grace_ms = (uint32_t)v; break;
    case O_QUIET: NUM(0, 3600000); c->shutdown_quiet_ms = (uint32_t)v; break;
    case O_DRAIN: NUM(0, 3600000); c->drain_ms = (uint32_t)v; break;
    case O_ZMQ_IO_THREADS: AUTO_OR_NUM(c->zmq_io_threads, 1, 64); break;
    case O_STANDBY: NUM(0, 1); c->rk.standby = (int)v; break;
    case O_FAULT_LIMIT: NUM(1, RK_FAULT_LIMIT_MAX); c->rk.fault_limit = (uint32_t)v; break;
    case O_FAULT_WINDOW: NUM(1, UINT32_MAX); c->rk.fault_window_ms = (uint32_t)v; break;
    case O_DEADLINE: NUM(0, UINT32_MAX); c->rk.request_deadline_ms = (uint32_t)v; break;
    case O_HEARTBEAT: NUM(50, RK_HEARTBEAT_MS_MAX); c->rk.heartbeat_ms = (uint32_t)v; break;
    case O_IO_THREADS: AUTO_OR_NUM(c->io_threads, 1, 64); break;
    default: return 1;
    }
#undef AUTO_OR_NUM
#undef POW2
#undef NUM
#undef NUM_
    return 0;
}

static int rkb__word(rkb_config *c, int id, const char *arg)
{
    static const char *levels[] = {"error", "warn", "info", "debug"};
    switch (id) {
    case O_BACKEND:
        if (rk_backend_parse(arg, &c->rk.backend) == 0)
            return 0;
        fprintf(stderr, "rk-bridge: --backend %s: expected auto, cuda or cpu " RKB_HINT "\n", arg);
        return -1;
    case O_LOG:
        for (int i = 0; i < 4; i++)
            if (!strcmp(arg, levels[i])) {
                c->log_level = i;
                return 0;
            }
        fprintf(stderr, "rk-bridge: --log-level %s: expected error, warn, info or debug " RKB_HINT "\n", arg);
        return -1;
    case O_ISOLATION: {
        static const char *names[] = {"auto", "process", "none"};
        static const rk_isolation modes[] = {RK_ISOLATION_AUTO, RK_ISOLATION_PROCESS, RK_ISOLATION_NONE};
        for (int i = 0; i < 3; i++)
            if (!strcmp(arg, names[i])) {
                c->rk.isolation = modes[i];
                return 0;
            }
        fprintf(stderr, "rk-bridge: --isolation %s: expected process, auto or none " RKB_HINT "\n", arg);
        return -1;
    }
    case O_DEVICES: {
        if (!strcmp(arg, "all")) {
            c->rk.n_devices = RK_DEVICES_ALL;
            return 0;
        }
        int n = 0;
        for (const char *p = arg; *p;) {
            char *end;
            /* digits first: strtol takes " 1" and "+1" */
            long d = *p >= '0' && *p <= '9' ? strtol(p, &end, 10) : -1;
            if (d < 0 || d > 1024 || n == RK_MAX_DEVICES || (*end && *end != ','))
                break;
            for (int i = 0; i < n; i++)
                if (c->rk.devices[i] == d) { /* the runtime's refusal named no option */
                    fprintf(stderr, "rk-bridge: --devices %s: device %ld is listed twice; each device "
                            "serves once " RKB_HINT "\n", arg, d);
                    return -1;
                }
            c->rk.devices[n++] = (int)d;
            p = *end ? end + 1 : end;
            if (!*end) {
                c->rk.n_devices = n;
                return 0;
            }
        }
        fprintf(stderr, "rk-bridge: --devices %s: expected all, or up to %d device ordinals from 0 to 1024 "
                "like 0,1 " RKB_HINT "\n", arg, RK_MAX_DEVICES);
        return -1;
    }
    case O_IPC_MODE: {
        /* octal digits only: strtoul takes " 600", "+600" and "-0" */
        size_t digits = strspn(arg, "01234567");
        unsigned long m = strtoul(arg, NULL, 8);
        if (*arg && !arg[digits] && m <= 0777) {
            c->ipc_mode = (unsigned)m;
            return 0;
        }
        fprintf(stderr, "rk-bridge: --ipc-mode %s: expected octal permission bits from 0 to 0777, like 0600 "
                "or 0660 " RKB_HINT "\n", arg);
        return -1;
    }
    default: return 1;
    }
}

typedef struct rkb__cli {
    rkb_config c;
    const char *gen_keys;
    bool force, help, version;
} rkb__cli;

static int rkb__option(rkb__cli *a, int id, const char *arg)
{
    rkb_config *c = &a->c;
    switch (id) {
    case 'b':
        if (c->n_binds == RKB_MAX_BINDS) {
            fprintf(stderr, "rk-bridge: at most %d --bind options " RKB_HINT "\n", RKB_MAX_BINDS);
            return -1;
        }
        c->binds[c->n_binds++] = arg;
        return 0;
    case O_STATUS_BIND:
        if (c->status_bind) {
            fprintf(stderr, "rk-bridge: --status-bind %s: one status endpoint only (--status-bind %s "
                    "came first) " RKB_HINT "\n", arg, c->status_bind);
            return -1;
        }
        c->status_bind = arg;
        return 0;
    case O_ACTORS:
        if (c->n_actors == RKB_MAX_BINDS) {
            fprintf(stderr, "rk-bridge: at most %d --actors options (a directory holds many) " RKB_HINT "\n",
                    RKB_MAX_BINDS);
            return -1;
        }
        c->actors[c->n_actors++] = arg;
        return 0;
    case O_CURVE_KEY: c->curve_secret_file = arg; return 0;
    case O_CURVE_ALLOW: c->curve_allow_dir = arg; return 0;
    case O_CURVE_ADMIN: c->curve_admin_dir = arg; return 0;
    case O_INSECURE_KEY: c->allow_insecure_key = true; return 0;
    case O_INSECURE_REMOTE: c->allow_insecure_remote = true; return 0;
    case O_ADMIN_OPS: c->allow_admin_ops = true; return 0;
    case O_SHARE_GPU: c->rk.share_gpu = 1; return 0;
    case O_TEST_FAULTS: c->rk.test_faults = 1; return 0;
    case O_GEN_KEYS: a->gen_keys = arg; return 0;
    case O_FORCE: a->force = true; return 0;
    case 'V': a->version = true; return 0;
    case 'h': a->help = true; return 0;
    default: break;
    }
    int rc = rkb__numeric(c, id, arg);
    return rc <= 0 ? rc : rkb__word(c, id, arg);
}

/* One line naming what was wrong with the command line. */
static void rkb__bad_option(int ch, char **argv)
{
    const char *opt = argv[optind - 1];
    if (ch == ':')
        fprintf(stderr, "rk-bridge: option %s needs a value " RKB_HINT "\n", opt);
    else if (optopt && optopt < 256)
        fprintf(stderr, "rk-bridge: unknown option -%c " RKB_HINT "\n", optopt);
    else
        fprintf(stderr, "rk-bridge: unknown option %s " RKB_HINT "\n", opt);
}

static int rkb__parse(rkb__cli *a, int argc, char **argv)
{
    int ch;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":b:hV", rkb__opts, NULL)) != -1) {
        if (ch == '?' || ch == ':') {
            rkb__bad_option(ch, argv);
            return -1;
        }
        if (rkb__option(a, ch, optarg))
            return -1;
    }
    if (optind < argc) {
        fprintf(stderr, "rk-bridge: unexpected argument %s " RKB_HINT "\n", argv[optind]);
        return -1;
    }
    const rkb_config *c = &a->c;
    if ((c->curve_allow_dir || c->curve_admin_dir) && !c->curve_secret_file) {
        fprintf(stderr, "rk-bridge: --curve-allow-dir and --curve-admin-dir need "
                "--curve-secret-key-file " RKB_HINT "\n");
        return -1;
    }
    /* the allow-list is read once, at start: CURVE with none would
     * listen and admit nobody, for good */
    if (c->curve_secret_file && !c->curve_allow_dir && !c->curve_admin_dir) {
        fprintf(stderr, "rk-bridge: --curve-secret-key-file needs --curve-allow-dir or --curve-admin-dir: "
                "no client could connect " RKB_HINT "\n");
        return -1;
    }
    if (a->force && !a->gen_keys) {
        fprintf(stderr, "rk-bridge: --force goes with --gen-keys " RKB_HINT "\n");
        return -1;
    }
    return 0;
}

static bool rkb__wildcard(const char *ep)
{
    size_t n = strlen(ep);
    return n && ep[n - 1] == '*';
}

/* Each endpoint once: a --bind given twice failed at its second bind,
 * for ipc saying that "another process" answered there (this one). The
 * status endpoint must be one of its own: on a --bind endpoint it would
 * be read, or left unread, with the data requests. Two wildcard binds (a
 * tcp port or an ipc name of "*") get two endpoints: allowed. */
static int rkb__check_binds(const rkb_config *c, bool default_bind)
{
    for (int i = 0; i < c->n_binds; i++)
        for (int j = 0; j < i && !rkb__wildcard(c->binds[i]); j++)
            if (!strcmp(c->binds[i], c->binds[j])) {
                fprintf(stderr, "rk-bridge: --bind %s is given twice " RKB_HINT "\n", c->binds[i]);
                return -1;
            }
    const char *s = c->status_bind;
    if (!s || rkb__wildcard(s))
        return 0;
    for (int i = 0; i < c->n_binds; i++)
        if (!strcmp(s, c->binds[i])) {
            fprintf(stderr, "rk-bridge: --status-bind %s is also the main endpoint (%s); the status "
                    "endpoint needs one of its own " RKB_HINT "\n", s,
                    default_bind ? "the default --bind" : "a --bind");
            return -1;
        }
    return 0;
}

int main(int argc, char **argv)
{
    rkb__cli a = {0};
    rkb_config_init(&a.c);
    if (rkb__parse(&a, argc, argv))
        return RKB_EXIT_USAGE;
    if (a.help) {
        fputs(rkb__usage, stdout);
        return RKB_EXIT_OK;
    }
    if (a.version) {
        printf("rk-bridge %s (protocol v1.1)\n", RKB_VERSION);
        return RKB_EXIT_OK;
    }
    if (a.gen_keys)
        return rkb_keys_generate(a.gen_keys, a.force);
    bool default_bind = !a.c.n_binds;
    if (default_bind)
        a.c.binds[a.c.n_binds++] = "tcp://127.0.0.1:5555";
    if (rkb__check_binds(&a.c, default_bind))
        return RKB_EXIT_USAGE;
    /* SIGINT/SIGTERM (a stop) and SIGHUP (a deploy) are blocked in every
     * thread (threads inherit the mask) and read from a signalfd by the
     * thread that owns the socket. */
    sigset_t ss;
    sigemptyset(&ss);
    sigaddset(&ss, SIGINT);
    sigaddset(&ss, SIGTERM);
    sigaddset(&ss, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &ss, NULL);
    signal(SIGPIPE, SIG_IGN);
    return rkb_run(&a.c);
}
