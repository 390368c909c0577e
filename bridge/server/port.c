/* bridge/server/port.c - the client ROUTER: opening it, reading one
 * request's frames, sending one reply's (see server.h); the status
 * endpoint's ROUTER (statusep.c) is read and written the same way. The
 * thread that owns the port (the single request loop, or the frontend) is
 * the only one that touches it. */
#include "server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading ---------------------------------------------------------------
 * Envelope rule (PROTOCOL.md): the routing id, then every frame up to and
 * including the first empty frame that is not the last frame. A message of
 * up to RKB_FRAMES_FAST frames (every client that is not behind a deep
 * proxy chain) is read into the stack; longer ones go through the heap. */
#define RKB_FRAMES_FAST 8
/* frames kept of a long message: a full envelope and one body frame */
#define RKB_FRAMES_KEEP (RKB_ENV_MAX + 1)

static void rkb__close_frames(zmq_msg_t *fr, int from, int to)
{
    for (int k = from; k < to; k++)
        zmq_msg_close(&fr[k]);
}

/* A message read and not routable: its envelope is too deep (or there was
 * no memory for it). It is counted and its frames are closed. */
static int rkb__drop(rkb_port *p, zmq_msg_t *fr, int nf, const char *why)
{
    rkb__close_frames(fr, 0, nf);
    RKB_INC(p->n, unroutable);
    rkb_logk(RKB_LK_ENVELOPE, RKB_LOG_WARN, "dropped a message: %s", why);
    return -1;
}

/* Splits the nf frames read (of `total`; late_delim: an empty frame that
 * was not the last came after the frames kept) into envelope and body. */
static int rkb__split(rkb_port *p, zmq_msg_t *fr, int nf, uint32_t total, bool late_delim,
                      rkb_env *env, zmq_msg_t *body, uint32_t *n_body)
{
    int env_n = 0;
    /* the last frame kept is the message's last only when none followed */
    int cand = (uint32_t)nf < total ? nf : nf - 1;
    for (int k = 1; k < cand; k++)
        if (zmq_msg_size(&fr[k]) == 0) {
            env_n = k + 1;
            break;
        }
    if ((!env_n && late_delim) || env_n > RKB_ENV_MAX)
        return rkb__drop(p, fr, nf, "its envelope has more than 255 frames");
    if (!env_n)
        env_n = 1;
    /* set either way: a ring slot holds what its last item left there */
    env->more = NULL;
    if (env_n > RKB_ENV_INLINE) {
        env->more = malloc((size_t)(env_n - RKB_ENV_INLINE) * sizeof(zmq_msg_t));
        if (!env->more)
            return rkb__drop(p, fr, nf, "no memory for its envelope");
    }
    env->n = (uint8_t)env_n;
    for (int k = 0; k < env_n; k++)
        *rkb_env_at(env, k) = fr[k]; /* moves: the caller owns them now */
    if (nf > env_n)
        *body = fr[env_n];
    rkb__close_frames(fr, env_n + 1, nf);
    *n_body = total - (uint32_t)env_n;
    return 1;
}

/* The rest of a message longer than RKB_FRAMES_FAST frames. */
static int rkb__recv_long(rkb_port *p, void *sock, zmq_msg_t *fast, rkb_env *env, zmq_msg_t *body,
                          uint32_t *n_body)
{
    zmq_msg_t *fr = malloc(RKB_FRAMES_KEEP * sizeof *fr);
    if (!fr) {
        rkb__close_frames(fast, 0, RKB_FRAMES_FAST);
        zmq_msg_t m;
        zmq_msg_init(&m);
        while (zmq_msg_recv(&m, sock, 0) >= 0 && zmq_msg_more(&m))
            ;
        zmq_msg_close(&m);
        return rkb__drop(p, fast, 0, "no memory for its frames");
    }
    memcpy(fr, fast, RKB_FRAMES_FAST * sizeof *fr);
    int nf = RKB_FRAMES_FAST;
    uint32_t total = RKB_FRAMES_FAST;
    bool more = true, late_delim = false;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, sock, 0) < 0) { /* parts of a message arrive together */
            zmq_msg_close(&m);
            break;
        }
        more = zmq_msg_more(&m);
        total++;
        if (nf < RKB_FRAMES_KEEP) {
            fr[nf++] = m;
            continue;
        }
        late_delim |= more && zmq_msg_size(&m) == 0;
        zmq_msg_close(&m);
    }
    int r = rkb__split(p, fr, nf, total, late_delim, env, body, n_body);
    free(fr);
    return r;
}

int rkb_port_recv_on(rkb_port *p, void *sock, rkb_env *env, zmq_msg_t *body, uint32_t *n_body)
{
    zmq_msg_t fr[RKB_FRAMES_FAST];
    zmq_msg_init(&fr[0]);
    if (zmq_msg_recv(&fr[0], sock, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&fr[0]);
        if (errno != EAGAIN && errno != EINTR)
            rkb_logk(RKB_LK_SYSTEM, RKB_LOG_ERROR, "zmq_msg_recv: %s", zmq_strerror(errno));
        return 0;
    }
    RKB_INC(p->n, requests);
    int nf = 1;
    int more = zmq_msg_more(&fr[0]);
    while (more && nf < RKB_FRAMES_FAST) {
        zmq_msg_init(&fr[nf]);
        if (zmq_msg_recv(&fr[nf], sock, 0) < 0) {
            zmq_msg_close(&fr[nf]);
            break;
        }
        more = zmq_msg_more(&fr[nf++]);
    }
    if (more)
        return rkb__recv_long(p, sock, fr, env, body, n_body);
    return rkb__split(p, fr, nf, (uint32_t)nf, false, env, body, n_body);
}

/* ---- sending ------------------------------------------------------------- */

static void rkb__count_refusal(rkb_port *p, int err)
{
    if (err == EHOSTUNREACH) {
        RKB_INC(p->n, unroutable);
        rkb_logk(RKB_LK_UNROUTABLE, RKB_LOG_DEBUG, "reply to a client that is gone: dropped");
    } else {
        RKB_INC(p->n, dropped_replies);
        rkb_logk(RKB_LK_DROPPED, RKB_LOG_WARN,
                 "reply dropped: the client's queue is full (%d replies unread, --sndhwm) or %s",
                 p->sh->cfg->sndhwm, zmq_strerror(err));
    }
}

void rkb_port_send_on(rkb_port *p, void *sock, rkb_env *env, zmq_msg_t *body)
{
    int rc = 0, k = 0, n = env->n;
    for (; k < n && rc >= 0; k++) {
        rc = zmq_msg_send(rkb_env_at(env, k), sock, ZMQ_SNDMORE | ZMQ_DONTWAIT);
        if (rc < 0 && k > 0) /* cannot happen: a ROUTER accepts or refuses at the first frame */
            rkb_logk(RKB_LK_INTERNAL, RKB_LOG_ERROR, "INTERNAL: envelope frame %d refused: %s", k,
                     zmq_strerror(errno));
    }
    int err = rc < 0 ? errno : 0;
    /* frames that went out belong to ZeroMQ; the refused one and the rest
     * are still ours */
    for (int j = rc >= 0 ? k : k - 1; j < n; j++)
        zmq_msg_close(rkb_env_at(env, j));
    if (env->more) {
        free(env->more);
        env->more = NULL;
    }
    env->n = 0;
    if (rc >= 0) {
        rc = zmq_msg_send(body, sock, ZMQ_DONTWAIT);
        if (rc < 0)
            err = errno;
    }
    if (rc < 0) {
        zmq_msg_close(body);
        rkb__count_refusal(p, err);
        return;
    }
    RKB_INC(p->n, replies);
}

/* ---- opening and closing --------------------------------------------------- */

static int rkb__curve(rkb_port *p)
{
    const rkb_config *c = p->sh->cfg;
    char sec[41], pub[41];
    if (rkb_key_read(c->curve_secret_file, sec, true, c->allow_insecure_key))
        return RKB_EXIT_FAIL;
    if (rkb_zap_start(&p->zap, p->sh->ctx, c->curve_allow_dir, c->curve_admin_dir))
        return RKB_EXIT_FAIL;
    if (!rkb_zap_keys(p->zap)) { /* read once: nobody could ever connect */
        fprintf(stderr, "rk-bridge: no client key (a readable *.pub) in %s%s%s: no client could connect\n",
                c->curve_allow_dir ? c->curve_allow_dir : "", c->curve_allow_dir && c->curve_admin_dir ? " or " : "",
                c->curve_admin_dir ? c->curve_admin_dir : "");
        return RKB_EXIT_FAIL;
    }
    /* the status endpoint too: the same key and the same allow-list (the
     * ZAP handler answers for every socket of the context), no back door */
    int srv = 1, rc = 0;
    void *socks[2] = {p->router, p->st.router};
    for (int i = 0; i < 2 && rc == 0 && socks[i]; i++) {
        zmq_setsockopt(socks[i], ZMQ_CURVE_SERVER, &srv, sizeof srv);
        rc = zmq_setsockopt(socks[i], ZMQ_CURVE_SECRETKEY, sec, 40);
    }
    zmq_curve_public(pub, sec);
    explicit_bzero(sec, sizeof sec);
    if (rc != 0) {
        fprintf(stderr, "rk-bridge: CURVE unavailable: %s\n", zmq_strerror(errno));
        return RKB_EXIT_FAIL;
    }
    rkb_log(RKB_LOG_INFO, "CURVE on: server public key %s", pub);
    return 0;
}

/* The monitor: accepted and failed connections, and closed ones (a frame
 * above the transport cap closes its connection; ZeroMQ does not say why). */
int rkb_port_monitor(rkb_port *p, void *sock, const char *ep, void **out)
{
    int ev = ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_ACCEPT_FAILED | ZMQ_EVENT_DISCONNECTED;
    if (zmq_socket_monitor(sock, ep, ev) != 0 || !(*out = zmq_socket(p->sh->ctx, ZMQ_PAIR))) {
        fprintf(stderr, "rk-bridge: socket monitor: %s\n", zmq_strerror(errno));
        return RKB_EXIT_FAIL;
    }
    /* ZeroMQ's I/O thread waits when this queue is full: room for the
     * events of a burst of connections between two looks (rkb_port_watch) */
    int hwm = 20000, linger = 0;
    zmq_setsockopt(*out, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(*out, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_connect(*out, ep) != 0) {
        fprintf(stderr, "rk-bridge: socket monitor: %s\n", zmq_strerror(errno));
        return RKB_EXIT_FAIL;
    }
    return 0;
}

static int rkb__bind_all(rkb_port *p)
{
    const rkb_config *c = p->sh->cfg;
    size_t off = 0, cap = sizeof p->sh->endpoints;
    for (int i = 0; i < c->n_binds; i++) {
        rkb_endpoint *e = &p->eps[p->n_eps];
        char msg[512];
        *e = (rkb_endpoint){.sock = p->router, .asked = c->binds[i]};
        if (rkb_endpoint_bind(p, e, msg, sizeof msg)) {
            fprintf(stderr, "rk-bridge: cannot bind %s: %s\n", c->binds[i], msg);
            return RKB_EXIT_FAIL;
        }
        p->n_eps++;
        off += (size_t)snprintf(p->sh->endpoints + off, off < cap ? cap - off : 0, "%s%s",
                                i ? " " : "", e->bound);
        if (off >= cap)
            off = cap - 1;
    }
    return 0;
}

void *rkb_port_router(rkb_port *p, int64_t cap)
{
    const rkb_config *c = p->sh->cfg;
    void *s = zmq_socket(p->sh->ctx, ZMQ_ROUTER);
    if (!s) {
        fprintf(stderr, "rk-bridge: zmq_socket: %s\n", zmq_strerror(errno));
        return NULL;
    }
    int one = 1;
    zmq_setsockopt(s, ZMQ_SNDHWM, &c->sndhwm, sizeof c->sndhwm);
    zmq_setsockopt(s, ZMQ_RCVHWM, &c->rcvhwm, sizeof c->rcvhwm);
    zmq_setsockopt(s, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    /* the transport cap: ZeroMQ closes the connection of a larger frame as
     * soon as its size is read, so it is never buffered; up to the cap a
     * frame is read and answered (TOO_LARGE above the message limit) */
    zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &cap, sizeof cap);
    return s;
}

int rkb_port_open(rkb_port *p, rkb_shared *sh, rkb_counters *n)
{
    const rkb_config *c = sh->cfg;
    p->sh = sh;
    p->n = n;
    rkb_listener_open(p);
    if (!(p->router = rkb_port_router(p, (int64_t)c->max_message_bytes * 4)))
        return RKB_EXIT_FAIL;
    int rc;
    if ((rc = rkb_statusep_open(p)))
        return rc;
    if (c->curve_secret_file && (rc = rkb__curve(p)))
        return rc;
    if ((rc = rkb_port_monitor(p, p->router, "inproc://rkb-monitor", &p->monitor)) ||
        (rc = rkb__bind_all(p)) || (rc = rkb_statusep_bind(p)))
        return rc;
    size_t sz = sizeof p->backlog;
    if (zmq_getsockopt(p->router, ZMQ_BACKLOG, &p->backlog, &sz) != 0)
        p->backlog = 100;
    p->base_fds = rkb_listener_count();
    return 0;
}

void rkb_port_close(rkb_port *p, int linger_ms)
{
    for (int i = 0; i < p->n_eps; i++)
        rkb_listener_resume(p, &p->eps[i]);
    if (p->monitor) {
        /* first: the I/O thread must never wait for a reader that is gone */
        zmq_socket_monitor(p->router, NULL, 0);
        zmq_close(p->monitor);
        p->monitor = NULL;
    }
    if (p->router) {
        zmq_setsockopt(p->router, ZMQ_LINGER, &linger_ms, sizeof linger_ms);
        zmq_close(p->router);
        p->router = NULL;
    }
    rkb_statusep_close(p, linger_ms);
    for (int i = 0; i < p->n_eps; i++)
        rkb_endpoint_remove_file(&p->eps[i]);
    rkb_listener_close(p);
    free(p->conn_fds);
    p->conn_fds = NULL;
    p->n_conn = p->cap_conn = 0;
}
