/* bridge/client/impl.h - librkc's internals shared by client.c (the
 * socket: connect, send, receive), reply.c (a reply's storage and fields)
 * and actors.c (status' actor list). Not installed. */
#ifndef RKC_IMPL_H
#define RKC_IMPL_H

#include "rk/client.h"

#include <zmq.h>

struct rkc {
    void *ctx, *sock;
    int type;
    uint64_t next_id;
    char err[256];
    /* replies rkc_wait set aside: FIFO */
    rkc_reply *stash;
    size_t stash_n, stash_cap;
    /* ids of rkc_call requests that got no reply in time (ids start at 1;
     * 0 is a free slot), the latest 64: their caller is gone and
     * nobody else knows the id, so a late reply is dropped, not kept */
    uint64_t gone[64];
    unsigned gone_next;
    msgpack_sbuffer sbuf;
    msgpack_packer pk;
};

/* What a reply owns: its frame, the unpacked map, code and message. */
typedef struct rkc_impl {
    zmq_msg_t msg;
    msgpack_unpacked up;
    char *text; /* "code\0message\0" */
} rkc_impl;

/* Sets c's message (when c is not NULL) and returns code. */
int rkc__fail(rkc *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Parses im->msg (received) into *out, which takes im; on failure frees im. */
int rkc__parse(rkc *c, rkc_impl *im, rkc_reply *out);

#endif
