/* bridge/main.c - rk-bridge: command line, signals, then rkb_run(). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge.h"

static void usage(FILE *f)
{
    fprintf(f,
"usage: rk-bridge [options]\n"
"Relays protocol v1 requests (msgpack over a ZeroMQ ROUTER socket, see\n"
"bridge/PROTOCOL.md) into the ringkernel runtime and the replies back.\n"
"\n"
"Endpoints\n"
"  -b, --bind ENDPOINT        bind here; repeatable (default tcp://127.0.0.1:5555,\n"
"                             loopback only). tcp://HOST:*, ipc://PATH and\n"
"                             inproc:// work too; the start-up line names the\n"
"                             endpoints actually bound.\n"
"Runtime and kernel (an invalid kernel configuration prints LAUNCH_INVALID and\n"
"exits with status 2 before binding anything)\n"
"      --backend auto|cuda|cpu  auto (default) uses a GPU that passes launch\n"
"                             validation and the self-test, else the CPU backend\n"
"      --device N             CUDA device ordinal (default 0)\n"
"      --grid N               blocks of the ring kernel; 0 = as many as can be\n"
"                             co-resident (default 0)\n"
"      --block N              threads per block (default 256)\n"
"      --smem BYTES           dynamic shared memory per block (default 0)\n"
"      --ring-slots N         slots per ring, power of two (default 1024)\n"
"      --slot-size BYTES      bytes per ring slot, power of two 128..4096 (default 256)\n"
"      --arena-bytes BYTES    data arena for payloads that do not fit a slot\n"
"                             (default 256M)\n"
"      --window N             requests in flight in the runtime, 1..32768 (default 4096)\n"
"Limits and back-pressure\n"
"      --max-message-bytes BYTES  largest request frame (default 16M); larger ones\n"
"                             get TOO_LARGE, and frames over twice the limit make\n"
"                             ZeroMQ drop the connection\n"
"      --queue N              requests that may wait for ring/arena room (default 4096);\n"
"                             when full the bridge stops reading its socket\n"
"      --admission-ms MS      how long a request may wait for room before BUSY\n"
"                             (default 100)\n"
"      --sndhwm N, --rcvhwm N ZeroMQ high-water marks in messages per client\n"
"                             (default 10000 and 1000)\n"
"Threads\n"
"      --io-threads N|auto    auto (default): 1 on up to 4 cores, 2 on up to 8,\n"
"                             else 3. 1: one thread owns the socket and the\n"
"                             runtime actor and does all the work (fewest\n"
"                             threads). N > 1 (up to 64): a frontend thread owns\n"
"                             the socket and only does ZeroMQ recv/send; it hands\n"
"                             requests to N worker threads through lock-free\n"
"                             in-memory queues, each worker with its own actor,\n"
"                             so decoding, encoding and the ring run in parallel\n"
"                             (throughput on many cores; one more hop)\n"
"      --zmq-io-threads N     ZeroMQ's background I/O threads (default 1); more\n"
"                             spread the tcp/ipc work of many client connections\n"
"Shutdown (SIGINT or SIGTERM: stop accepting, answer what is in flight, exit 0)\n"
"      --shutdown-grace-ms MS keep answering new requests with SHUTTING_DOWN this\n"
"                             long after the signal (default 0)\n"
"      --drain-ms MS          wait at most this long for in-flight replies (default 10000)\n"
"Security (default: no encryption; keep the default loopback bind)\n"
"      --curve-secret-key-file FILE  serve CURVE-encrypted with this server secret key\n"
"                             (a file whose first line is a Z85 key)\n"
"      --curve-allow-dir DIR  only clients whose public key is in DIR/*.pub (Z85)\n"
"                             may connect; with CURVE on and no DIR, nobody may\n"
"      --gen-keys PREFIX      write a keypair to PREFIX.key (secret, 0600) and\n"
"                             PREFIX.pub, then exit\n"
"Other\n"
"      --log-level LEVEL      error, warn, info (default) or debug (stderr)\n"
"  -h, --help                 this text\n"
"\n"
"Sizes take a K, M or G suffix (powers of 1024).\n");
}

static int parse_u64(const char *opt, const char *s, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *s == '-')
        goto bad;
    switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    default: break;
    }
    if (*end || v > max)
        goto bad;
    *out = v;
    return 0;
bad:
    fprintf(stderr, "rk-bridge: --%s %s: expected a number up to %" PRIu64 "\n", opt, s, max);
    return -1;
}

enum {
    O_BACKEND = 256, O_DEVICE, O_GRID, O_BLOCK, O_SMEM, O_RING_SLOTS, O_SLOT_SIZE, O_ARENA,
    O_WINDOW, O_MAXMSG, O_QUEUE, O_ADMISSION, O_SNDHWM, O_RCVHWM, O_GRACE, O_DRAIN, O_LOG,
    O_CURVE_KEY, O_CURVE_ALLOW, O_GEN_KEYS, O_IO_THREADS, O_ZMQ_IO_THREADS,
};

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"bind", required_argument, 0, 'b'},
        {"backend", required_argument, 0, O_BACKEND},
        {"device", required_argument, 0, O_DEVICE},
        {"grid", required_argument, 0, O_GRID},
        {"block", required_argument, 0, O_BLOCK},
        {"smem", required_argument, 0, O_SMEM},
        {"ring-slots", required_argument, 0, O_RING_SLOTS},
        {"slot-size", required_argument, 0, O_SLOT_SIZE},
        {"arena-bytes", required_argument, 0, O_ARENA},
        {"window", required_argument, 0, O_WINDOW},
        {"max-message-bytes", required_argument, 0, O_MAXMSG},
        {"queue", required_argument, 0, O_QUEUE},
        {"admission-ms", required_argument, 0, O_ADMISSION},
        {"sndhwm", required_argument, 0, O_SNDHWM},
        {"rcvhwm", required_argument, 0, O_RCVHWM},
        {"shutdown-grace-ms", required_argument, 0, O_GRACE},
        {"drain-ms", required_argument, 0, O_DRAIN},
        {"log-level", required_argument, 0, O_LOG},
        {"curve-secret-key-file", required_argument, 0, O_CURVE_KEY},
        {"curve-allow-dir", required_argument, 0, O_CURVE_ALLOW},
        {"gen-keys", required_argument, 0, O_GEN_KEYS},
        {"io-threads", required_argument, 0, O_IO_THREADS},
        {"zmq-io-threads", required_argument, 0, O_ZMQ_IO_THREADS},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    rkb_config c;
    rkb_config_init(&c);
    bool maxpayload_set = false;
    int ch;
    uint64_t v;
    while ((ch = getopt_long(argc, argv, "b:h", opts, NULL)) != -1) {
        const char *name = "";
        for (const struct option *o = opts; o->name; o++)
            if (o->val == ch)
                name = o->name;
#define NUM(max) do { if (parse_u64(name, optarg, (max), &v)) return 1; } while (0)
        switch (ch) {
        case 'b':
            if (c.n_binds == RKB_MAX_BINDS) {
                fprintf(stderr, "rk-bridge: at most %d --bind options\n", RKB_MAX_BINDS);
                return 1;
            }
            c.binds[c.n_binds++] = optarg;
            break;
        case O_BACKEND:
            if (rk_backend_parse(optarg, &c.rk.backend)) {
                fprintf(stderr, "rk-bridge: --backend %s: expected auto, cuda or cpu\n", optarg);
                return 1;
            }
            break;
        case O_DEVICE: NUM(1024); c.rk.device = (int)v; break;
        case O_GRID: NUM(UINT32_MAX); c.rk.grid = (uint32_t)v; break;
        case O_BLOCK: NUM(UINT32_MAX); c.rk.block = (uint32_t)v; break;
        case O_SMEM: NUM(UINT32_MAX); c.rk.smem = (uint32_t)v; break;
        case O_RING_SLOTS: NUM(UINT32_MAX); c.rk.ring_slots = (uint32_t)v; break;
        case O_SLOT_SIZE: NUM(UINT32_MAX); c.rk.slot_size = (uint32_t)v; break;
        case O_ARENA: NUM(SIZE_MAX); c.rk.arena_size = (size_t)v; break;
        case O_WINDOW: NUM(32768); c.rk.actor_window = (uint32_t)(v ? v : 1); break;
        case O_MAXMSG: NUM((uint64_t)1 << 31); c.max_message_bytes = (size_t)v; maxpayload_set = true; break;
        case O_QUEUE: NUM(1u << 20); c.queue = (uint32_t)v; break;
        case O_ADMISSION: NUM(3600000); c.admission_ms = (uint32_t)v; break;
        case O_SNDHWM: NUM(INT32_MAX); c.sndhwm = (int)v; break;
        case O_RCVHWM: NUM(INT32_MAX); c.rcvhwm = (int)v; break;
        case O_GRACE: NUM(3600000); c.shutdown_grace_ms = (uint32_t)v; break;
        case O_DRAIN: NUM(3600000); c.drain_ms = (uint32_t)v; break;
        case O_LOG:
            if (!strcmp(optarg, "error")) c.log_level = RKB_LOG_ERROR;
            else if (!strcmp(optarg, "warn")) c.log_level = RKB_LOG_WARN;
            else if (!strcmp(optarg, "info")) c.log_level = RKB_LOG_INFO;
            else if (!strcmp(optarg, "debug")) c.log_level = RKB_LOG_DEBUG;
            else {
                fprintf(stderr, "rk-bridge: --log-level %s: expected error, warn, info or debug\n", optarg);
                return 1;
            }
            break;
        case O_CURVE_KEY: c.curve_secret_file = optarg; break;
        case O_CURVE_ALLOW: c.curve_allow_dir = optarg; break;
        case O_IO_THREADS:
            if (!strcmp(optarg, "auto")) {
                c.io_threads = 0;
                break;
            }
            NUM(64);
            c.io_threads = (int)v; /* 0 = auto */
            break;
        case O_ZMQ_IO_THREADS: NUM(64); c.zmq_io_threads = v ? (int)v : 1; break;
        case O_GEN_KEYS: return rkb_keys_generate(optarg) ? 1 : 0;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 1;
        }
#undef NUM
    }
    if (optind < argc) {
        fprintf(stderr, "rk-bridge: unexpected argument %s (see --help)\n", argv[optind]);
        return 1;
    }
    if (c.curve_allow_dir && !c.curve_secret_file) {
        fprintf(stderr, "rk-bridge: --curve-allow-dir needs --curve-secret-key-file\n");
        return 1;
    }
    if (!c.n_binds)
        c.binds[c.n_binds++] = "tcp://127.0.0.1:5555";
    (void)maxpayload_set;
    /* the runtime must accept every payload a frame can carry */
    c.rk.max_payload = c.max_message_bytes;

    /* SIGINT/SIGTERM are blocked in every thread (threads inherit the
     * mask) and read from a signalfd by the I/O loop. */
    sigset_t ss;
    sigemptyset(&ss);
    sigaddset(&ss, SIGINT);
    sigaddset(&ss, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &ss, NULL);
    signal(SIGPIPE, SIG_IGN);
    return rkb_run(&c);
}
