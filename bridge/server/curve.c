/* bridge/server/curve.c - the ZAP handler (RFC 27) that decides which
 * CURVE clients may connect: those whose public key is in --curve-allow-dir
 * or --curve-admin-dir (*.pub). It runs in a thread of its own on
 * inproc://zeromq.zap.01 and tells ZeroMQ the client's role as its
 * User-Id: "admin" for a key from the admin directory, "client" otherwise;
 * ZeroMQ attaches it to every frame of that connection, which is how the
 * request loop knows who may use admin operations (admin.c). */
#include "server.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rkb__key {
    uint8_t k[32];
    bool admin;
} rkb__key;

struct rkb_zap {
    void *sock;
    rkb__key *keys;
    size_t n_keys;
    pthread_t thread;
    bool running;
};

static int rkb__load(rkb_zap *z, const char *dir, bool admin)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "rk-bridge: cannot open %s %s: %s\n",
                admin ? "--curve-admin-dir" : "--curve-allow-dir", dir, strerror(errno));
        return -1;
    }
    size_t before = z->n_keys;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n < 5 || strcmp(de->d_name + n - 4, ".pub"))
            continue;
        char path[4096], z85[41];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (rkb_key_read(path, z85, false, false))
            continue;
        rkb__key *k = realloc(z->keys, (z->n_keys + 1) * sizeof *z->keys);
        if (!k)
            break;
        z->keys = k;
        zmq_z85_decode(z->keys[z->n_keys].k, z85);
        z->keys[z->n_keys++].admin = admin;
    }
    closedir(d);
    rkb_log(RKB_LOG_INFO, "CURVE %s: %zu client key(s) from %s", admin ? "admins" : "allow-list",
            z->n_keys - before, dir);
    return 0;
}

/* The role of a client key: 2 admin, 1 client, 0 refused. */
static int rkb__role(const rkb_zap *z, const uint8_t *key)
{
    int role = 0;
    for (size_t i = 0; i < z->n_keys; i++)
        if (!memcmp(z->keys[i].k, key, 32))
            role = z->keys[i].admin ? 2 : role > 1 ? role : 1;
    return role;
}

/* Answers one request: version, request_id, domain, address, identity,
 * mechanism, credentials. */
static void rkb__answer(rkb_zap *z, zmq_msg_t *fr, int n)
{
    int role = 0;
    if (n >= 7 && zmq_msg_size(&fr[5]) == 5 && !memcmp(zmq_msg_data(&fr[5]), "CURVE", 5) &&
        zmq_msg_size(&fr[6]) == 32)
        role = rkb__role(z, zmq_msg_data(&fr[6]));
    if (!role) {
        char addr[64] = "?";
        if (n >= 4)
            snprintf(addr, sizeof addr, "%.*s", (int)zmq_msg_size(&fr[3]),
                     (const char *)zmq_msg_data(&fr[3]));
        rkb_logk(RKB_LK_CURVE, RKB_LOG_WARN,
                 "CURVE: refused a client key not on the allow-list (from %s)", addr);
    }
    const char *code = role ? "200" : "400";
    const char *text = role ? "OK" : "client key not allowed";
    const char *user = role == 2 ? "admin" : role ? "client" : "";
    zmq_send(z->sock, "1.0", 3, ZMQ_SNDMORE);
    if (n >= 2)
        zmq_send(z->sock, zmq_msg_data(&fr[1]), zmq_msg_size(&fr[1]), ZMQ_SNDMORE);
    else
        zmq_send(z->sock, "", 0, ZMQ_SNDMORE);
    zmq_send(z->sock, code, 3, ZMQ_SNDMORE);
    zmq_send(z->sock, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(z->sock, user, strlen(user), ZMQ_SNDMORE);
    zmq_send(z->sock, "", 0, 0);
}

static void *rkb__zap_main(void *arg)
{
    rkb_zap *z = arg;
    for (;;) {
        zmq_msg_t fr[8];
        int n = 0, more = 1;
        while (more) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            if (zmq_msg_recv(&m, z->sock, 0) < 0) {
                zmq_msg_close(&m);
                for (int i = 0; i < n; i++)
                    zmq_msg_close(&fr[i]);
                if (errno == EINTR)
                    break;
                return NULL; /* ETERM: the context is shutting down */
            }
            more = zmq_msg_more(&m);
            if (n < 8)
                fr[n++] = m;
            else
                zmq_msg_close(&m);
        }
        if (more)
            continue; /* interrupted */
        rkb__answer(z, fr, n);
        for (int i = 0; i < n; i++)
            zmq_msg_close(&fr[i]);
    }
}

size_t rkb_zap_keys(const rkb_zap *z) { return z ? z->n_keys : 0; }

int rkb_zap_start(rkb_zap **out, void *ctx, const char *allow_dir, const char *admin_dir)
{
    rkb_zap *z = calloc(1, sizeof *z);
    *out = z;
    if (!z || (allow_dir && rkb__load(z, allow_dir, false)) ||
        (admin_dir && rkb__load(z, admin_dir, true)))
        return -1;
    z->sock = zmq_socket(ctx, ZMQ_REP);
    int linger = 0;
    zmq_setsockopt(z->sock, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_bind(z->sock, "inproc://zeromq.zap.01") != 0) {
        fprintf(stderr, "rk-bridge: binding the ZAP handler failed: %s\n", zmq_strerror(errno));
        return -1;
    }
    /* the thread inherits the blocked SIGINT/SIGTERM of the caller */
    if (pthread_create(&z->thread, NULL, rkb__zap_main, z) != 0) {
        fprintf(stderr, "rk-bridge: cannot start the ZAP handler thread\n");
        return -1;
    }
    z->running = true;
    return 0;
}

void rkb_zap_stop(rkb_zap *z)
{
    if (!z)
        return;
    if (z->running)
        pthread_join(z->thread, NULL);
    if (z->sock)
        zmq_close(z->sock);
    free(z->keys);
    free(z);
}
