/* bridge/protocol/encode.c - every reply the bridge sends, packed by
 * msgpack-c (see codec.h). */
#include "codec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the pieces -------------------------------------------------------- */

int rkb_pack_key(msgpack_packer *pk, const char *key)
{
    size_t n = strlen(key);
    return msgpack_pack_str_with_body(pk, key, n) ? RKB_E_INTERNAL : RKB_OK;
}

static int rkb__head(msgpack_packer *pk, bool has_id, uint64_t id, bool ok, uint32_t n)
{
    int e = msgpack_pack_map(pk, n);
    e |= rkb_pack_key(pk, "v");
    e |= msgpack_pack_uint8(pk, RKB_PROTOCOL_VERSION);
    e |= rkb_pack_key(pk, "id");
    e |= has_id ? msgpack_pack_uint64(pk, id) : msgpack_pack_nil(pk);
    e |= rkb_pack_key(pk, "ok");
    e |= ok ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
    return e ? RKB_E_INTERNAL : RKB_OK;
}

int rkb_reply_begin_ok(msgpack_packer *pk, bool has_id, uint64_t id, uint32_t nfields)
{
    if (nfields > UINT32_MAX - 3)
        return RKB_E_INTERNAL;
    return rkb__head(pk, has_id, id, true, 3 + nfields);
}

int rkb_reply_error(msgpack_packer *pk, bool has_id, uint64_t id, int code,
                    const char *message)
{
    if (!message)
        message = "";
    int e = rkb__head(pk, has_id, id, false, 4);
    e |= rkb_pack_key(pk, "error");
    e |= msgpack_pack_map(pk, 2);
    e |= rkb_pack_key(pk, "code");
    e |= rkb_pack_key(pk, rkb_code_name(code));
    e |= rkb_pack_key(pk, "message");
    e |= msgpack_pack_str_with_body(pk, message, strlen(message));
    return e ? RKB_E_INTERNAL : RKB_OK;
}

static int rkb__kv_uint(msgpack_packer *pk, const char *k, uint64_t v)
{
    return rkb_pack_key(pk, k) | msgpack_pack_uint64(pk, v);
}

static int rkb__kv_str(msgpack_packer *pk, const char *k, const char *v)
{
    return rkb_pack_key(pk, k) | rkb_pack_key(pk, v ? v : "");
}

/* ---- the encoder ------------------------------------------------------- */

/* A packer that writes into a fixed buffer (a data reply's head). */
typedef struct rkb__fixbuf {
    uint8_t *p;
    size_t len, cap;
} rkb__fixbuf;

static int rkb__fixbuf_write(void *data, const char *buf, size_t len)
{
    rkb__fixbuf *f = data;
    if (len > f->cap - f->len)
        return -1;
    memcpy(f->p + f->len, buf, len);
    f->len += len;
    return 0;
}

int rkb_encoder_init(rkb_encoder *enc)
{
    memset(enc, 0, sizeof *enc);
    msgpack_sbuffer_init(&enc->sbuf);
    msgpack_packer_init(&enc->pk, &enc->sbuf, msgpack_sbuffer_write);
    /* the constant parts of a data reply: {v: 1, id: <id>, ok: true, data|c: <bin>} */
    rkb__fixbuf fb = {enc->pre, 0, sizeof enc->pre};
    msgpack_packer pk;
    msgpack_packer_init(&pk, &fb, rkb__fixbuf_write);
    int e = msgpack_pack_map(&pk, 4) | rkb_pack_key(&pk, "v") |
            msgpack_pack_uint8(&pk, RKB_PROTOCOL_VERSION) | rkb_pack_key(&pk, "id");
    enc->pre_len = (uint8_t)fb.len;
    static const char *const keys[2] = {"data", "c"};
    for (int i = 0; i < 2; i++) {
        fb = (rkb__fixbuf){enc->suf[i], 0, sizeof enc->suf[i]};
        e |= rkb_pack_key(&pk, "ok") | msgpack_pack_true(&pk) | rkb_pack_key(&pk, keys[i]);
        enc->suf_len[i] = (uint8_t)fb.len;
    }
    return e ? RKB_E_INTERNAL : RKB_OK;
}

void rkb_encoder_destroy(rkb_encoder *enc)
{
    msgpack_sbuffer_destroy(&enc->sbuf);
}

void *rkb_encoder_release(rkb_encoder *enc)
{
    return msgpack_sbuffer_release(&enc->sbuf);
}

size_t rkb_encode_data_head(const rkb_encoder *enc, uint8_t *out, bool has_id, uint64_t id,
                            rkb_op op, size_t len)
{
    rkb__fixbuf fb = {out, 0, RKB_DATA_HEAD_MAX};
    msgpack_packer hp;
    msgpack_packer_init(&hp, &fb, rkb__fixbuf_write);
    int k = op == RKB_OP_ECHO ? 0 : 1;
    if (has_id) {
        memcpy(out, enc->pre, enc->pre_len);
        fb.len = enc->pre_len;
        msgpack_pack_uint64(&hp, id);
        memcpy(out + fb.len, enc->suf[k], enc->suf_len[k]);
        fb.len += enc->suf_len[k];
    } else {
        rkb_reply_begin_ok(&hp, false, 0, 1);
        rkb_pack_key(&hp, k ? "c" : "data");
    }
    msgpack_pack_bin(&hp, len);
    return fb.len;
}

size_t rkb_encode_key_head(uint8_t *out, bool has_id, uint64_t id, const char *key, size_t len)
{
    rkb__fixbuf fb = {out, 0, RKB_KEY_HEAD_MAX};
    msgpack_packer hp;
    msgpack_packer_init(&hp, &fb, rkb__fixbuf_write);
    rkb_reply_begin_ok(&hp, has_id, id, 1);
    rkb_pack_key(&hp, key);
    msgpack_pack_bin(&hp, len);
    return fb.len;
}

/* ---- whole replies ------------------------------------------------------ */

static msgpack_packer *rkb__begin(rkb_encoder *enc)
{
    enc->sbuf.size = 0;
    return &enc->pk;
}

int rkb_encode_error(rkb_encoder *enc, bool has_id, uint64_t id, int code, const char *message)
{
    return rkb_reply_error(rkb__begin(enc), has_id, id, code, message);
}

int rkb_encode_fields(rkb_encoder *enc, bool has_id, uint64_t id, const char *const *keys,
                      const rk_field *fields, uint32_t n)
{
    msgpack_packer *pk = rkb__begin(enc);
    int e = rkb_reply_begin_ok(pk, has_id, id, n);
    for (uint32_t i = 0; i < n; i++) {
        e |= rkb_pack_key(pk, keys[i]);
        e |= msgpack_pack_bin(pk, fields[i].len);
        e |= msgpack_pack_bin_body(pk, fields[i].data, fields[i].len);
    }
    return e ? RKB_E_INTERNAL : RKB_OK;
}

int rkb_encode_ping(rkb_encoder *enc, bool has_id, uint64_t id, const char *backend)
{
    msgpack_packer *pk = rkb__begin(enc);
    int e = rkb_reply_begin_ok(pk, has_id, id, 1);
    e |= rkb__kv_str(pk, "backend", backend);
    return e ? RKB_E_INTERNAL : RKB_OK;
}

static int rkb__kernel_map(msgpack_packer *pk, uint64_t grid, uint64_t block, uint64_t smem)
{
    return msgpack_pack_map(pk, 3) | rkb__kv_uint(pk, "grid", grid) |
           rkb__kv_uint(pk, "block", block) | rkb__kv_uint(pk, "smem", smem);
}

int rkb_encode_launch(rkb_encoder *enc, bool has_id, uint64_t id, const char *backend,
                      uint32_t grid, uint32_t block, uint32_t smem)
{
    msgpack_packer *pk = rkb__begin(enc);
    int e = rkb_reply_begin_ok(pk, has_id, id, 2);
    e |= rkb__kv_str(pk, "backend", backend);
    e |= rkb_pack_key(pk, "kernel") | rkb__kernel_map(pk, grid, block, smem);
    return e ? RKB_E_INTERNAL : RKB_OK;
}

/* ---- status: one function per top-level value (status.h) ---------------- */

static int rkb__put_backend(msgpack_packer *pk, const rkb_status *st)
{
    return rkb_pack_key(pk, st->backend);
}

static int rkb__put_backend_why(msgpack_packer *pk, const rkb_status *st)
{
    return rkb_pack_key(pk, st->backend_why);
}

static int rkb__put_last_fault(msgpack_packer *pk, const rkb_status *st)
{
    if (!st->has_last_fault)
        return msgpack_pack_nil(pk);
    return msgpack_pack_map(pk, 6) | rkb__kv_uint(pk, "actor", st->fault_actor) |
           rkb__kv_uint(pk, "request", st->fault_request) | rkb__kv_uint(pk, "type", st->fault_type) |
           rkb__kv_str(pk, "error", st->fault_error) | rkb__kv_str(pk, "detail", st->fault_detail) |
           rkb__kv_uint(pk, "age_ms", st->fault_age_ms);
}

static int rkb__put_worker(msgpack_packer *pk, const rkb_status *st)
{
    if (!st->has_worker)
        return msgpack_pack_nil(pk);
    int e = msgpack_pack_map(pk, 10) | rkb__kv_uint(pk, "pid", st->worker_pid) |
            rkb__kv_str(pk, "backend", st->worker_backend) | rkb__kv_str(pk, "state", st->worker_state) |
            rkb__kv_uint(pk, "restarts", st->worker_restarts) | rkb__kv_uint(pk, "faults", st->worker_faults) |
            rkb__kv_uint(pk, "poisoned", st->worker_poisoned);
    e |= rkb_pack_key(pk, "standby") | msgpack_pack_map(pk, 2) | rkb_pack_key(pk, "ready") |
         (st->standby_ready ? msgpack_pack_true(pk) : msgpack_pack_false(pk)) |
         rkb__kv_uint(pk, "pid", st->standby_pid);
    e |= rkb__kv_uint(pk, "last_recovery_ns", st->last_recovery_ns);
    e |= rkb_pack_key(pk, "last_fault") | rkb__put_last_fault(pk, st);
    return e | rkb__kv_str(pk, "why", st->worker_why);
}

static int rkb__put_devices(msgpack_packer *pk, const rkb_status *st)
{
    int e = msgpack_pack_array(pk, (uint32_t)st->n_devices);
    for (size_t i = 0; i < st->n_devices; i++) {
        const rkb_status_device *d = &st->devices[i];
        e |= msgpack_pack_map(pk, 9) | rkb__kv_uint(pk, "index", i) | rkb__kv_str(pk, "backend", d->backend) |
             rkb__kv_str(pk, "name", d->name) | rkb__kv_str(pk, "state", d->state) |
             rkb__kv_uint(pk, "pid", d->pid) | rkb__kv_uint(pk, "requests", d->requests) |
             rkb__kv_uint(pk, "replies", d->replies) | rkb__kv_uint(pk, "restarts", d->restarts) |
             rkb__kv_uint(pk, "faults", d->faults);
    }
    return e;
}

static int rkb__put_device(msgpack_packer *pk, const rkb_status *st)
{
    if (!st->has_device)
        return msgpack_pack_nil(pk);
    char cc[24];
    snprintf(cc, sizeof cc, "%d.%d", st->cc_major, st->cc_minor);
    return msgpack_pack_map(pk, 3) | rkb__kv_str(pk, "name", st->device_name) |
           rkb__kv_uint(pk, "sm_count", st->sm_count) | rkb__kv_str(pk, "cc", cc);
}

static int rkb__put_kernel(msgpack_packer *pk, const rkb_status *st)
{
    return rkb__kernel_map(pk, st->grid, st->block, st->smem);
}

static int rkb__put_limits(msgpack_packer *pk, const rkb_status *st)
{
    return msgpack_pack_map(pk, 3) | rkb__kv_uint(pk, "max_grid", st->max_grid) |
           rkb__kv_uint(pk, "max_block", st->max_block) |
           rkb__kv_uint(pk, "max_smem", st->max_smem);
}

static int rkb__put_endpoints(msgpack_packer *pk, const rkb_status *st)
{
    return rkb_pack_key(pk, st->endpoints);
}

static int rkb__put_status_endpoint(msgpack_packer *pk, const rkb_status *st)
{
    return st->status_endpoint ? rkb_pack_key(pk, st->status_endpoint) : msgpack_pack_nil(pk);
}

static int rkb__put_allocator(msgpack_packer *pk, const rkb_status *st)
{
    return st->allocator ? rkb_pack_key(pk, st->allocator) : msgpack_pack_nil(pk);
}

static int rkb__put_ring(msgpack_packer *pk, const rkb_status *st)
{
    return msgpack_pack_map(pk, 3) | rkb__kv_uint(pk, "p50_ns", st->ring_p50_ns) |
           rkb__kv_uint(pk, "p99_ns", st->ring_p99_ns) | rkb__kv_uint(pk, "count", st->ring_count);
}

static int rkb__str_list(msgpack_packer *pk, const char *const *v)
{
    uint32_t n = 0;
    while (v[n])
        n++;
    int e = msgpack_pack_array(pk, n);
    for (uint32_t i = 0; i < n; i++)
        e |= rkb_pack_key(pk, v[i]);
    return e;
}

static int rkb__put_actors(msgpack_packer *pk, const rkb_status *st)
{
    int e = msgpack_pack_array(pk, (uint32_t)st->n_actors);
    for (size_t i = 0; i < st->n_actors; i++) {
        const rkb_status_actor *a = &st->actors[i];
        e |= msgpack_pack_map(pk, 5) | rkb__kv_str(pk, "name", a->name);
        e |= rkb_pack_key(pk, "inputs") | rkb__str_list(pk, a->inputs);
        e |= rkb_pack_key(pk, "outputs") | rkb__str_list(pk, a->outputs);
        e |= rkb_pack_key(pk, "gpu") | (a->gpu ? msgpack_pack_true(pk) : msgpack_pack_false(pk));
        e |= rkb_pack_key(pk, "cpu") | (a->cpu ? msgpack_pack_true(pk) : msgpack_pack_false(pk));
    }
    return e;
}

static int rkb__put_warnings(msgpack_packer *pk, const rkb_status *st)
{
    int e = msgpack_pack_array(pk, (uint32_t)st->n_warnings);
    for (size_t i = 0; i < st->n_warnings; i++)
        e |= rkb_pack_key(pk, st->warnings[i]);
    return e;
}

static int rkb__put_counters(msgpack_packer *pk, const rkb_status *st)
{
    const rkb_status_counters *c = &st->counters;
#define RKB__SC_ONE(name, doc) +1
    int e = msgpack_pack_map(pk, 0 RKB_STATUS_COUNTERS(RKB__SC_ONE));
#undef RKB__SC_ONE
#define RKB__SC_PUT(name, doc) e |= rkb__kv_uint(pk, #name, c->name);
    RKB_STATUS_COUNTERS(RKB__SC_PUT)
#undef RKB__SC_PUT
    return e;
}

int rkb_encode_status(rkb_encoder *enc, bool has_id, uint64_t id, const rkb_status *st)
{
    msgpack_packer *pk = rkb__begin(enc);
#define RKB__SF_ONE(key, put) +1
    int e = rkb_reply_begin_ok(pk, has_id, id, 0 RKB_STATUS_FIELDS(RKB__SF_ONE));
#undef RKB__SF_ONE
#define RKB__SF_PUT(key, put) e |= rkb_pack_key(pk, #key) | put(pk, st);
    RKB_STATUS_FIELDS(RKB__SF_PUT)
#undef RKB__SF_PUT
    return e ? RKB_E_INTERNAL : RKB_OK;
}
