/* bridge/server/statusep.c - the status endpoint (--status-bind): a second
 * ROUTER, beside the port's, that serves only `status`.
 *
 * Why: when the bridge holds its whole --queue / --queue-bytes of waiting
 * requests (or every worker ring is full) it stops reading its ROUTER, so
 * that back-pressure reaches the clients; an operator's `status` then
 * waits in ZeroMQ behind the data requests, and with the runtime stalled
 * (when it is needed most) it is never read. This socket is read on every
 * pass of the thread that owns the port, up to RKB_STATUS_BURST requests,
 * whatever the bound: a request here is answered at once and never waits,
 * so it holds nothing that the bound counts.
 *
 * The same protocol as the main endpoint: envelopes, the order of checks,
 * the id echoed, the same `status` reply. Any other op is UNKNOWN_OP naming
 * it (codec: rkb_limits.status_only) and logged under its own rate-limited
 * kind. The same socket options and high-water marks, a transport cap of
 * RKB_STATUS_CAP, and with CURVE the same server key and ZAP allow-list
 * (port.c, rkb__curve). */
#include "server.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int rkb_statusep_open(rkb_port *p)
{
    const rkb_config *c = p->sh->cfg;
    rkb_statusep *s = &p->st;
    if (!c->status_bind)
        return 0;
    int64_t cap = (int64_t)c->max_message_bytes * 4;
    if (!(s->router = rkb_port_router(p, cap < RKB_STATUS_CAP ? cap : RKB_STATUS_CAP)))
        return RKB_EXIT_FAIL;
    rkb_decode_state_init(&s->dec);
    if (rkb_encoder_init(&s->enc)) {
        rkb_decode_state_destroy(&s->dec);
        fprintf(stderr, "rk-bridge: out of memory for the status endpoint's encoder\n");
        return RKB_EXIT_FAIL;
    }
    s->ready = true;
    s->lim = RKB_LIMITS_DEFAULT;
    s->lim.max_frame = c->max_message_bytes;
    s->lim.status_only = true;
    return 0;
}

/* An ipc path that is a main endpoint's socket file under another name
 * (main.c refuses the same string): say so, rather than that "another
 * process" answers there. */
static int rkb__main_file(const rkb_port *p, const char *ep, char *msg, size_t cap)
{
    struct stat st;
    if (strncmp(ep, "ipc://", 6) || lstat(ep + 6, &st) != 0)
        return 0;
    for (int i = 0; i < p->n_eps; i++)
        if (p->eps[i].ipc_file && p->eps[i].dev == (uint64_t)st.st_dev && p->eps[i].ino == (uint64_t)st.st_ino) {
            snprintf(msg, cap, "it is the main endpoint's socket file (--bind %s); the status endpoint "
                     "needs one of its own", p->eps[i].asked);
            return -1;
        }
    return 0;
}

int rkb_statusep_bind(rkb_port *p)
{
    const rkb_config *c = p->sh->cfg;
    rkb_statusep *s = &p->st;
    if (!s->router)
        return 0;
    int rc = rkb_port_monitor(p, s->router, "inproc://rkb-monitor-status", &s->monitor);
    if (rc)
        return rc;
    rkb_endpoint *e = &p->eps[p->n_eps];
    char msg[512];
    *e = (rkb_endpoint){.sock = s->router, .asked = c->status_bind};
    if (rkb__main_file(p, c->status_bind, msg, sizeof msg) || rkb_endpoint_bind(p, e, msg, sizeof msg)) {
        fprintf(stderr, "rk-bridge: cannot bind --status-bind %s: %s\n", c->status_bind, msg);
        return RKB_EXIT_FAIL;
    }
    p->n_eps++;
    s->ep = e;
    snprintf(p->sh->status_endpoint, sizeof p->sh->status_endpoint, "%s", e->bound);
    return 0;
}

/* The reply to one request read here, as a frame in *m (counted when an
 * error): 0, or -1 when there was no memory even for an error reply (m is
 * then empty, never sent; the request goes unanswered, logged). */
static int rkb__answer(rkb_port *p, zmq_msg_t *body, uint32_t n_body, zmq_msg_t *m)
{
    rkb_statusep *s = &p->st;
    rkb_request req = {0};
    rkb_error err = {0};
    int rc;
    if (n_body != 1) {
        if (n_body)
            rkb_peek_into(&req, body);
        rc = rkb_error_set(&err, RKB_E_MALFORMED,
                           "the request has %u body frames; the protocol allows exactly one (behind "
                           "a proxy, send an empty delimiter frame before the body)", n_body);
    } else {
        rc = rkb_decode_request(zmq_msg_data(body), zmq_msg_size(body), &s->lim, &req, &s->dec, &err);
    }
    if (rc == RKB_OK && rkb_status_encode(p->sh, NULL, &s->info, &s->enc, req.has_id, req.id) == 0 &&
        rkb_msg_encoded(&s->enc, m) == 0)
        return 0;
    if (rc == RKB_OK)
        rc = rkb_error_set(&err, RKB_E_INTERNAL, "out of memory encoding the status");
    rkb_count_error(p->n, rc);
    if (rc == RKB_E_UNKNOWN_OP) /* a client sent here by mistake: say so, not too often */
        rkb_logk(RKB_LK_STATUS_OP, RKB_LOG_WARN, "status endpoint %s: refused a request: %s",
                 s->ep->bound, err.message);
    else if (rc == RKB_E_INTERNAL)
        rkb_logk(RKB_LK_INTERNAL, RKB_LOG_ERROR, "INTERNAL error answering on the status endpoint: %s",
                 err.message);
    /* never a reply packed in part (or the one before) */
    if (rkb_encode_error(&s->enc, req.has_id, req.id, rc, err.message) == 0 && rkb_msg_encoded(&s->enc, m) == 0)
        return 0;
    rkb_logk(RKB_LK_INTERNAL, RKB_LOG_ERROR, "INTERNAL: out of memory for a reply on the status endpoint: "
             "the request is not answered");
    return -1;
}

int rkb_statusep_serve(rkb_port *p)
{
    rkb_statusep *s = &p->st;
    if (!s->router)
        return 0;
    int n = 0;
    for (int r; n < RKB_STATUS_BURST; n++) {
        rkb_env env = {0};
        zmq_msg_t body, m;
        uint32_t n_body = 0;
        if ((r = rkb_port_recv_on(p, s->router, &env, &body, &n_body)) == 0)
            break;
        if (r < 0)
            continue; /* dropped and counted (an envelope too deep) */
        int rc = rkb__answer(p, &body, n_body, &m);
        /* the decoded request borrowed the body until now */
        if (n_body)
            zmq_msg_close(&body);
        if (rc == 0)
            rkb_port_send_on(p, s->router, &env, &m);
        else
            rkb_env_close(&env);
    }
    return n;
}

void rkb_statusep_close(rkb_port *p, int linger_ms)
{
    rkb_statusep *s = &p->st;
    if (s->monitor) {
        /* first: the I/O thread must never wait for a reader that is gone */
        zmq_socket_monitor(s->router, NULL, 0);
        zmq_close(s->monitor);
        s->monitor = NULL;
    }
    if (s->router) {
        zmq_setsockopt(s->router, ZMQ_LINGER, &linger_ms, sizeof linger_ms);
        zmq_close(s->router);
        s->router = NULL;
    }
    if (s->ready) {
        rkb_decode_state_destroy(&s->dec);
        rkb_encoder_destroy(&s->enc);
        s->ready = false;
    }
}
