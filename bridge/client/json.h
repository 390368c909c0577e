/* bridge/client/json.h - rk-client's JSON output (see json.c). */
#ifndef RKC_JSON_H
#define RKC_JSON_H

#include <stdio.h>
#include <string.h>

#include <msgpack.h>

/* Writes s (n bytes) as a JSON string, escaped per RFC 8259. */
void rkc_json_str(FILE *f, const char *s, size_t n);

/* Writes o as one JSON value (no newline). */
void rkc_print_json(FILE *f, const msgpack_object *o);

#endif
