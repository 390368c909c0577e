/* bridge/client/json.c - a msgpack object as JSON text (rk-client status
 * --json): maps with str keys become objects (other keys are written as
 * their JSON text in a string), bin becomes a string of hex digits, ext
 * an object {"ext": type, "hex": "..."}; strings are escaped per RFC 8259
 * (quotes, backslashes, control characters) and otherwise written as they
 * are: the bridge's strings are UTF-8. */
#include "json.h"

#include <inttypes.h>
#include <math.h>

void rkc_json_str(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void rkc__json_hex(FILE *f, const char *p, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%02x", (unsigned char)p[i]);
    fputc('"', f);
}

static void rkc__json_map(FILE *f, const msgpack_object_map *m)
{
    fputc('{', f);
    for (uint32_t i = 0; i < m->size; i++) {
        const msgpack_object *k = &m->ptr[i].key;
        if (i)
            fputc(',', f);
        if (k->type == MSGPACK_OBJECT_STR) {
            rkc_json_str(f, k->via.str.ptr, k->via.str.size);
        } else {
            char buf[64];
            msgpack_object_print_buffer(buf, sizeof buf, *k);
            rkc_json_str(f, buf, strlen(buf));
        }
        fputc(':', f);
        rkc_print_json(f, &m->ptr[i].val);
    }
    fputc('}', f);
}

void rkc_print_json(FILE *f, const msgpack_object *o)
{
    switch (o->type) {
    case MSGPACK_OBJECT_NIL: fputs("null", f); break;
    case MSGPACK_OBJECT_BOOLEAN: fputs(o->via.boolean ? "true" : "false", f); break;
    case MSGPACK_OBJECT_POSITIVE_INTEGER: fprintf(f, "%" PRIu64, o->via.u64); break;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: fprintf(f, "%" PRId64, o->via.i64); break;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        if (isfinite(o->via.f64))
            fprintf(f, "%.17g", o->via.f64);
        else
            fputs("null", f); /* JSON has no NaN or infinity */
        break;
    case MSGPACK_OBJECT_STR: rkc_json_str(f, o->via.str.ptr, o->via.str.size); break;
    case MSGPACK_OBJECT_BIN: rkc__json_hex(f, o->via.bin.ptr, o->via.bin.size); break;
    case MSGPACK_OBJECT_EXT:
        fprintf(f, "{\"ext\":%d,\"hex\":", (int)o->via.ext.type);
        rkc__json_hex(f, o->via.ext.ptr, o->via.ext.size);
        fputc('}', f);
        break;
    case MSGPACK_OBJECT_ARRAY:
        fputc('[', f);
        for (uint32_t i = 0; i < o->via.array.size; i++) {
            if (i)
                fputc(',', f);
            rkc_print_json(f, &o->via.array.ptr[i]);
        }
        fputc(']', f);
        break;
    case MSGPACK_OBJECT_MAP: rkc__json_map(f, &o->via.map); break;
    }
}
