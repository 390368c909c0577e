/* tests/bridge/harness.c - see harness.h. */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *g_bridge_path;
char g_client_path[4096];
const char *g_extra[16];
int g_n_extra;
char *g_last_err;

int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* In the child: what the options ask for, then exec. err_fd < 0: stderr
 * goes to err_dir/stderr.PID. */
static void child_exec(const char *const *argv, const bridge_opts *o, int out_fd, int err_fd,
                       const char *err_dir)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test must not leave a bridge behind */
    if (err_fd < 0) {
        char path[128];
        snprintf(path, sizeof path, "%s/stderr.%d", err_dir, (int)getpid());
        err_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
    }
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    if (o->nofile > 0) {
        struct rlimit rl = {(rlim_t)(o->nofile_soft > 0 ? o->nofile_soft : o->nofile),
                            (rlim_t)o->nofile};
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (o->umask >= 0)
        umask((mode_t)o->umask);
    for (const char *const *e = o->env; e && *e; e++)
        putenv((char *)*e);
    execv(argv[0], (char *const *)argv);
    _exit(127);
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return strdup("");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = s ? fread(s, 1, (size_t)n, f) : 0;
    fclose(f);
    if (s)
        s[got] = 0;
    return s;
}

/* Reads the start-up line from fd (60 s at most). */
static void read_line(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    int64_t deadline = now_ms() + 60000;
    buf[0] = 0;
    while (!memchr(buf, '\n', len) && now_ms() < deadline && len < cap - 1) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 1000) <= 0)
            continue;
        ssize_t r = read(fd, buf + len, cap - 1 - len);
        if (r <= 0)
            break;
        len += (size_t)r;
        buf[len] = 0;
    }
}

/* Bridges started and not yet reaped (copies: a failed assertion leaves
 * the test's stack), for bridge_teardown. */
static struct {
    pid_t pid;
    char dir[64];
    bool own_dir;
} g_live[16];

static void live_add(const bridge *b)
{
    for (size_t i = 0; i < sizeof g_live / sizeof *g_live; i++)
        if (g_live[i].pid == 0) {
            g_live[i].pid = b->pid;
            snprintf(g_live[i].dir, sizeof g_live[i].dir, "%s", b->dir);
            g_live[i].own_dir = b->own_dir;
            return;
        }
}

static void live_remove(pid_t pid)
{
    for (size_t i = 0; i < sizeof g_live / sizeof *g_live; i++)
        if (g_live[i].pid == pid)
            g_live[i].pid = 0;
}

int bridge_teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof g_live / sizeof *g_live; i++) {
        if (g_live[i].pid == 0)
            continue;
        bridge b = {.pid = g_live[i].pid, .own_dir = g_live[i].own_dir};
        snprintf(b.dir, sizeof b.dir, "%s", g_live[i].dir);
        fprintf(stderr, "-- the test left rk-bridge %d running; its stderr:\n", (int)b.pid);
        kill(b.pid, SIGKILL);
        bridge_reap(&b, 60000);
    }
    return 0;
}

int bridge_start_opts(bridge *b, const bridge_opts *o, const char *const *args)
{
    if (!o->keep_dir) {
        snprintf(b->dir, sizeof b->dir, "/tmp/rkbt-XXXXXX");
        assert_non_null(mkdtemp(b->dir));
    }
    b->own_dir = !o->keep_dir;
    b->status = -1;
    if (o->bind)
        snprintf(b->ep, sizeof b->ep, "%s", o->bind);
    else
        snprintf(b->ep, sizeof b->ep, "ipc://%s/b.sock", b->dir);
    const char *argv[80] = {g_bridge_path, "--backend", "cpu", "--bind", b->ep, "--log-level", "warn"};
    int n = 7;
    char sep[256];
    b->sep[0] = 0;
    if (o->status_bind) {
        if (o->status_bind[0])
            snprintf(sep, sizeof sep, "%s", o->status_bind);
        else
            snprintf(sep, sizeof sep, "ipc://%s/s.sock", b->dir);
        argv[n++] = "--status-bind";
        argv[n++] = sep;
    }
    for (int i = 0; !o->no_extra && i < g_n_extra; i++)
        argv[n++] = g_extra[i];
    for (int i = 0; args && args[i] && n < 78; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    b->pid = fork();
    assert_true(b->pid >= 0);
    if (b->pid == 0)
        child_exec(argv, o, pfd[1], -1, b->dir);
    close(pfd[1]);
    live_add(b);
    read_line(pfd[0], b->line, sizeof b->line);
    close(pfd[0]); /* the bridge writes nothing more to stdout */
    if (strstr(b->line, "listening on")) {
        /* a tcp://HOST:* bind: the endpoint it got */
        const char *l = strstr(b->line, "listening on ") + 13;
        if (!strncmp(b->ep, "tcp://", 6))
            snprintf(b->ep, sizeof b->ep, "%.*s", (int)strcspn(l, " \n"), l);
        /* "status endpoint E; " comes before "listening on" */
        const char *s = strstr(b->line, "status endpoint ");
        if (s)
            snprintf(b->sep, sizeof b->sep, "%.*s", (int)strcspn(s + 16, ";"), s + 16);
        return 0;
    }
    b->status = bridge_reap(b, 60000);
    if (o->may_fail)
        return -1;
    fprintf(stderr, "rk-bridge did not start (status %d): \"%s\"\n", b->status, b->line);
    fail();
    return -1;
}

void bridge_start(bridge *b, const char *first, ...)
{
    const char *args[48];
    int n = 0;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < 47; a = va_arg(ap, const char *))
        args[n++] = a;
    va_end(ap);
    args[n] = NULL;
    bridge_opts o = {.umask = -1};
    bridge_start_opts(b, &o, args);
}

static int bridge_wait(bridge *b, int ms)
{
    int st = 0;
    int64_t deadline = now_ms() + ms;
    pid_t r;
    while ((r = waitpid(b->pid, &st, WNOHANG)) == 0 && now_ms() < deadline)
        usleep(10000);
    if (r == 0) {
        kill(b->pid, SIGKILL);
        waitpid(b->pid, &st, 0);
        return -1;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int bridge_reap(bridge *b, int ms)
{
    b->status = bridge_wait(b, ms);
    live_remove(b->pid);
    char path[128];
    snprintf(path, sizeof path, "%s/stderr.%d", b->dir, (int)b->pid);
    free(g_last_err);
    g_last_err = read_file(path);
    unlink(path);
    size_t n = strlen(g_last_err);
    /* in the test's log: the bridge's words (the tail of a long one) */
    fputs(n > 4000 ? g_last_err + n - 4000 : g_last_err, stderr);
    if (b->own_dir) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s", b->dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", b->dir);
    }
    return b->status;
}

int bridge_stop(bridge *b)
{
    kill(b->pid, SIGTERM);
    return bridge_reap(b, 60000);
}

rkc *client_ep(const char *ep)
{
    rkc *c;
    assert_int_equal(rkc_connect(&c, ep, NULL), 0);
    return c;
}

rkc *client(const bridge *b) { return client_ep(b->ep); }

void assert_alive(const bridge *b)
{
    rkc *c = client(b);
    rkc_reply r;
    rkc_request rq = {.op = RKC_ECHO, .data = "still here", .len = 10};
    assert_int_equal(rkc_call(c, &rq, &r, TMO), 0);
    assert_true(r.ok);
    assert_int_equal(r.len, 10);
    assert_memory_equal(r.data, "still here", 10);
    rkc_reply_free(&r);
    float a[3] = {1.5f, -2.0f, 1e30f}, bb[3] = {2.25f, 0.5f, 1e30f};
    rkc_request vq = {.op = RKC_VADD, .a = a, .b = bb, .n = 3};
    assert_int_equal(rkc_call(c, &vq, &r, TMO), 0);
    assert_true(r.ok);
    assert_int_equal(r.len, 12);
    for (int i = 0; i < 3; i++) {
        float want = a[i] + bb[i], got;
        memcpy(&got, r.data + 4 * i, 4);
        assert_memory_equal(&got, &want, 4);
    }
    rkc_reply_free(&r);
    rkc_close(c);
}

/* A bystander's echoes, sent before a bad request and read after its
 * reply: every one answered, its bytes back. */
rkc *bystander_send(const bridge *b, uint64_t base)
{
    rkc *c = client(b);
    buf e = {0};
    for (uint64_t k = 0; k < BYSTANDER; k++) {
        put_echo(&e, base + k, 64);
        assert_int_equal(rkc_send_raw(c, e.p, e.n, TMO), 0);
    }
    free(e.p);
    return c;
}

void bystander_check(rkc *c, uint64_t base)
{
    bool seen[BYSTANDER] = {false};
    for (int k = 0; k < BYSTANDER; k++) {
        rkc_reply r;
        assert_int_equal(rkc_recv(c, &r, TMO), 0);
        assert_true(r.ok);
        assert_int_equal(r.len, 64);
        assert_true(r.id >= base && r.id < base + BYSTANDER && !seen[r.id - base]);
        seen[r.id - base] = true;
        rkc_reply_free(&r);
    }
    rkc_close(c);
}

uint64_t map_uint(const msgpack_object *m, const char *k)
{
    const msgpack_object *o = rkc_map_get(m, k);
    if (!o || o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        fail_msg("status: `%s` is missing or not a uint", k);
    return o->via.u64;
}

void status_get(const bridge *b, rkc_reply *r)
{
    rkc *c = client(b);
    rkc_request sq = {.op = RKC_STATUS};
    assert_int_equal(rkc_call(c, &sq, r, TMO), 0);
    assert_true(r->ok);
    rkc_close(c); /* the reply owns its storage */
}

uint64_t status_counter(const bridge *b, const char *name)
{
    rkc_reply r;
    status_get(b, &r);
    uint64_t v = map_uint(rkc_reply_get(&r, "counters"), name);
    rkc_reply_free(&r);
    return v;
}

int run_prog(const char *const *argv, int umask_v, const char *const *env, char *out, size_t cap)
{
    char path[] = "/tmp/rkbt-out-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        bridge_opts o = {.umask = umask_v, .env = env};
        child_exec(argv, &o, fd, fd, NULL);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    lseek(fd, 0, SEEK_SET);
    ssize_t n = read(fd, out, cap - 1);
    out[n > 0 ? n : 0] = 0;
    close(fd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int count_lines(const char *s)
{
    int n = 0;
    for (const char *p = s; *p; p++)
        n += *p == '\n';
    return n + (*s && s[strlen(s) - 1] != '\n');
}

int count_str(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

long proc_kb(pid_t pid, const char *key)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, strlen(key)))
            v = strtol(line + strlen(key) + 1, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

uint64_t proc_cpu_us(pid_t pid)
{
    char path[64], s[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(s, 1, sizeof s - 1, f) : 0;
    if (f)
        fclose(f);
    s[n] = 0;
    const char *p = strrchr(s, ')'); /* the command may hold spaces */
    unsigned long long ut = 0, st = 0;
    if (p)
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st);
    return (ut + st) * 1000000ull / (uint64_t)sysconf(_SC_CLK_TCK);
}

/* ---- frames ------------------------------------------------------------- */

void put(buf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

void put_s(buf *b, const char *s)
{
    uint8_t h = (uint8_t)(0xa0 | strlen(s));
    put(b, &h, 1);
    put(b, s, strlen(s));
}

void put_byte(buf *b, uint8_t x) { put(b, &x, 1); }

void put_head(buf *b, int nkeys, int with_v, int with_id, uint64_t id, const char *op)
{
    put_byte(b, (uint8_t)(0x80 | nkeys));
    if (with_v)
        put_s(b, "v"), put_byte(b, 1);
    if (with_id) {
        put_s(b, "id");
        put_byte(b, 0xcf);
        for (int i = 7; i >= 0; i--)
            put_byte(b, (uint8_t)(id >> (8 * i)));
    }
    if (op)
        put_s(b, "op"), put_s(b, op);
}

void put_bin(buf *b, const char *key, size_t n)
{
    put_s(b, key);
    if (n < 256) {
        put_byte(b, 0xc4), put_byte(b, (uint8_t)n);
    } else {
        put_byte(b, 0xc6);
        for (int i = 3; i >= 0; i--)
            put_byte(b, (uint8_t)(n >> (8 * i)));
    }
    size_t at = b->n;
    if (b->n + n > b->cap) {
        b->cap = b->n + n + 64;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    for (size_t i = 0; i < n; i++)
        b->p[at + i] = (uint8_t)i;
    b->n += n;
}

void put_echo(buf *b, uint64_t id, size_t n)
{
    b->n = 0;
    put_head(b, 4, 1, 1, id, "echo");
    put_bin(b, "data", n);
}

echo_kind echo_reply(const void *frame, size_t len, uint64_t max_id, uint64_t *id)
{
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    echo_kind k = ECHO_BAD;
    if (msgpack_unpack_next(&up, frame, len, NULL) == MSGPACK_UNPACK_SUCCESS) {
        const msgpack_object *i = rkc_map_get(&up.data, "id");
        const msgpack_object *ok = rkc_map_get(&up.data, "ok");
        const msgpack_object *d = rkc_map_get(&up.data, "data");
        const msgpack_object *er = rkc_map_get(&up.data, "error");
        const msgpack_object *code = er ? rkc_map_get(er, "code") : NULL;
        bool right = ok && ok->type == MSGPACK_OBJECT_BOOLEAN && ok->via.boolean && d &&
                     d->type == MSGPACK_OBJECT_BIN && d->via.bin.size == 64 &&
                     d->via.bin.ptr[63] == 63;
        bool shut = code && code->type == MSGPACK_OBJECT_STR && code->via.str.size == 13 &&
                    !memcmp(code->via.str.ptr, "SHUTTING_DOWN", 13);
        if (i && i->type == MSGPACK_OBJECT_POSITIVE_INTEGER && i->via.u64 >= 1 && i->via.u64 <= max_id &&
            (right || shut)) {
            *id = i->via.u64;
            k = right ? ECHO_OK : ECHO_SHUT;
        }
    }
    msgpack_unpacked_destroy(&up);
    return k;
}

void read_z85(const char *path, char out[41])
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(out, 41, f));
    fclose(f);
    out[40] = 0;
}

void curve_keys_make(curve_keys *k)
{
    snprintf(k->dir, sizeof k->dir, "/tmp/rkbk-XXXXXX");
    assert_non_null(mkdtemp(k->dir));
    char cmd[1024], p[256];
    const char *d = k->dir, *g = g_bridge_path;
    snprintf(cmd, sizeof cmd, "mkdir -p %s/allowed %s/admins && %s --gen-keys %s/server >/dev/null && "
             "%s --gen-keys %s/allowed/alice >/dev/null && %s --gen-keys %s/mallory >/dev/null && "
             "%s --gen-keys %s/admins/root >/dev/null", d, d, g, d, g, d, g, d, g, d);
    assert_int_equal(system(cmd), 0);
    snprintf(p, sizeof p, "%s/server.pub", k->dir);
    read_z85(p, k->server_pub);
    snprintf(p, sizeof p, "%s/allowed/alice.key", k->dir);
    read_z85(p, k->alice);
    snprintf(p, sizeof p, "%s/mallory.key", k->dir);
    read_z85(p, k->mallory);
    snprintf(p, sizeof p, "%s/admins/root.key", k->dir);
    read_z85(p, k->root);
    snprintf(k->server_key, sizeof k->server_key, "%s/server.key", k->dir);
    snprintf(k->allow_dir, sizeof k->allow_dir, "%s/allowed", k->dir);
    snprintf(k->admin_dir, sizeof k->admin_dir, "%s/admins", k->dir);
}

void curve_keys_remove(const curve_keys *k)
{
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", k->dir);
    assert_int_equal(system(cmd), 0);
}

uint32_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (uint32_t)(*s >> 11);
}
