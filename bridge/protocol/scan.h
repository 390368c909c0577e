/* bridge/protocol/scan.h - the bounded header pre-scan shared by the
 * decoder and rkb_peek_id (internal to the codec). */
#ifndef RKB_SCAN_H
#define RKB_SCAN_H

#include "codec.h"

typedef struct rkb__scan {
    size_t end;   /* offset just past the first object (when it completed) */
    bool has_id;  /* first top-level `id` key holds a uint64 ... */
    uint64_t id;  /* ... of this value */
} rkb__scan;

/* Scan the first object of p[0..len). Returns RKB_OK (out->end set) or
 * RKB_E_MALFORMED (err set when not NULL). out->has_id/id are set as soon
 * as the id is read, so they are valid even on failure. No allocation, no
 * recursion. */
int rkb__scan_frame(const uint8_t *p, size_t len, const rkb_limits *lim, rkb__scan *out,
                    rkb_error *err);

/* The n-byte big-endian unsigned integer at p (n <= 8). */
uint64_t rkb__be(const uint8_t *p, unsigned n);

/* The id the scan reached (RKB_OK) or why there is none. */
int rkb__peek(const uint8_t *p, size_t len, const rkb_limits *lim, uint64_t *id);

#endif
