/* bridge/client/call.c - rk-client call ACTOR FIELD=VALUE... (any actor by
 * name: the values become named fields, the reply's fields are printed for
 * a person or written to files) and rk-client actors (signatures from the
 * bridge's status). */
#include "call.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "json.h"

int rkc__call_format(rkc__call *cl, const char *fmt)
{
    static const char *names[] = {"auto", "hex", "f32", "text"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(fmt, names[i])) {
            cl->format = i;
            return 0;
        }
    fprintf(stderr, "rk-client: --format %s: expected auto, hex, f32 or text (see rk-client --help)\n", fmt);
    return -1;
}

int rkc__call_output(rkc__call *cl, const char *spec)
{
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec || !eq[1]) {
        fprintf(stderr, "rk-client: --output %s: expected FIELD=FILE (see rk-client --help)\n", spec);
        return -1;
    }
    if (cl->n_out == RKC_MAX_OUTPUTS) {
        fprintf(stderr, "rk-client: more than %d --output options\n", RKC_MAX_OUTPUTS);
        return -1;
    }
    cl->out_spec[cl->n_out++] = spec;
    return 0;
}

/* A file past what a msgpack bin carries: a bad command line, as --size
 * 4294967296 is, said before it is read (librkc's -E2BIG came after all
 * of it was read, exit 1); -1. */
static int rkc__too_big(const char *field, const char *path, uint64_t n)
{
    fprintf(stderr, "rk-client: field %s: %s is %s%" PRIu64 " bytes, more than the %" PRIu32 " a field "
            "carries (see rk-client --help)\n", field, strcmp(path, "-") ? path : "standard input",
            strcmp(path, "-") ? "" : "at least ", n, UINT32_MAX);
    return -1;
}

/* A whole file (path "-": standard input) into *buf; -2 said on stderr, -1
 * one too large (said). */
static int rkc__slurp(const char *field, const char *path, void **buf, size_t *len)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) {
        fprintf(stderr, "rk-client: field %s: cannot read %s: %s\n", field, path, strerror(errno));
        return -2;
    }
    struct stat st;
    if (f != stdin && !fstat(fileno(f), &st) && S_ISREG(st.st_mode) && (uint64_t)st.st_size > UINT32_MAX) {
        fclose(f);
        return rkc__too_big(field, path, (uint64_t)st.st_size);
    }
    /* a stream stops one byte past the most: cap doubles up to it exactly */
    const size_t most = (size_t)UINT32_MAX + 1;
    size_t cap = 1 << 16, n = 0;
    char *p = malloc(cap);
    bool oom = !p;
    while (!oom && n < most) {
        if (n == cap) {
            char *q = realloc(p, cap *= 2);
            if (!q) {
                oom = true;
                break;
            }
            p = q;
        }
        size_t got = fread(p + n, 1, cap - n, f);
        n += got;
        if (!got)
            break;
    }
    bool bad = oom || ferror(f);
    if (f != stdin)
        fclose(f);
    if (!bad && n == most) {
        free(p);
        return rkc__too_big(field, path, n);
    }
    if (bad) {
        fprintf(stderr, "rk-client: field %s: cannot read all of %s%s\n", field, path,
                oom ? ": out of memory" : "");
        free(p);
        return -2;
    }
    *buf = p, *len = n;
    return 0;
}

static int rkc__hexdigit(char ch)
{
    int lc = ch | 0x20;
    return ch >= '0' && ch <= '9' ? ch - '0' : lc >= 'a' && lc <= 'f' ? lc - 'a' + 10 : -1;
}

static int rkc__hex(const char *field, const char *s, void **buf, size_t *len)
{
    size_t n = strlen(s);
    uint8_t *p = malloc(n / 2 + 1);
    if (!p)
        return -2;
    for (size_t i = 0; i < n; i += 2) {
        int hi = rkc__hexdigit(s[i]), lo = i + 1 < n ? rkc__hexdigit(s[i + 1]) : -1;
        if (hi < 0 || lo < 0) {
            fprintf(stderr, "rk-client: field %s: hex:%s is not an even number of hex digits "
                    "(see rk-client --help)\n", field, s);
            free(p);
            return -1;
        }
        p[i / 2] = (uint8_t)(hi << 4 | lo);
    }
    *buf = p, *len = n / 2;
    return 0;
}

static int rkc__f32(const char *field, const char *list, void **buf, size_t *len)
{
    const char *s = list;
    size_t n = *s ? 1 : 0;
    for (const char *q = s; *q; q++)
        n += *q == ',';
    float *p = malloc(n * 4 + 4);
    if (!p)
        return -2;
    for (size_t i = 0; i < n; i++) {
        char *end;
        p[i] = strtof(s, &end);
        if (end == s || (*end && *end != ',')) {
            fprintf(stderr, "rk-client: field %s: f32:%s: element %zu is not a number "
                    "(see rk-client --help)\n", field, list, i);
            free(p);
            return -1;
        }
        s = *end ? end + 1 : end;
    }
    *buf = p, *len = n * 4; /* float32 in memory is little-endian on every host this targets */
    return 0;
}

/* One FIELD=VALUE word into f (and *buf, what it owns). */
static int rkc__value(char *word, rkc_field *f, void **buf)
{
    char *eq = strchr(word, '=');
    if (!eq || eq == word) {
        fprintf(stderr, "rk-client: %s: expected FIELD=VALUE (see rk-client --help)\n", word);
        return -1;
    }
    *eq = 0;
    const char *v = eq + 1;
    f->name = word;
    int rc = 1; /* 1: not one of the forms that own a buffer */
    if (!strncmp(v, "hex:", 4))
        rc = rkc__hex(word, v + 4, buf, &f->len);
    else if (!strncmp(v, "f32:", 4))
        rc = rkc__f32(word, v + 4, buf, &f->len);
    else if (*v == '@')
        rc = rkc__slurp(word, v + 1, buf, &f->len);
    if (rc != 1) {
        f->data = *buf;
        return rc;
    }
    if (!strncmp(v, "uint:", 5)) {
        char *end;
        errno = 0;
        f->type = RKC_UINT;
        f->u = strtoull(v + 5, &end, 10);
        /* a digit first: strtoull skips blanks and negates, " -1" is 2^64 - 1;
         * decimal, as the options (base 0 read uint:010 as 8) */
        if (errno || end == v + 5 || *end || v[5] < '0' || v[5] > '9') {
            fprintf(stderr, "rk-client: field %s: %s is not a whole number (see rk-client --help)\n",
                    word, v);
            return -1;
        }
        return 0;
    }
    if (!strncmp(v, "str:", 4))
        f->type = RKC_STR, v += 4;
    else if (!strncmp(v, "text:", 5))
        v += 5;
    f->data = v;
    f->len = strlen(v);
    return 0;
}

int rkc__call_build(rkc__call *cl, char **words, int n)
{
    cl->fields = calloc((size_t)n + 1, sizeof *cl->fields);
    cl->bufs = calloc((size_t)n + 1, sizeof *cl->bufs);
    if (!cl->fields || !cl->bufs) {
        fprintf(stderr, "rk-client: out of memory\n");
        return -2;
    }
    for (int i = 0; i < n; i++) {
        int rc = rkc__value(words[i], &cl->fields[i], &cl->bufs[i]);
        if (rc)
            return rc;
        cl->n++;
    }
    return 0;
}

void rkc__call_free(rkc__call *cl)
{
    for (size_t i = 0; cl->bufs && i <= cl->n; i++)
        free(cl->bufs[i]);
    free(cl->bufs);
    free(cl->fields);
    cl->bufs = NULL, cl->fields = NULL, cl->n = 0;
}

static bool rkc__printable(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((p[i] < 0x20 && p[i] != '\n' && p[i] != '\t' && p[i] != '\r') || p[i] >= 0x7f)
            return false;
    return n > 0;
}

/* One bin field, as cl->format says; long ones cut unless cl->full. */
static void rkc__print_bin(const rkc__call *cl, FILE *f, const uint8_t *p, size_t n)
{
    int fmt = cl->format;
    if (fmt == RKC_FMT_AUTO)
        fmt = rkc__printable(p, n) ? RKC_FMT_TEXT : RKC_FMT_HEX;
    if (fmt == RKC_FMT_F32 && n % 4) {
        fprintf(f, "(%zu B: not whole float32 elements) ", n);
        fmt = RKC_FMT_HEX;
    }
    if (fmt == RKC_FMT_TEXT) {
        rkc_json_str(f, (const char *)p, n);
        fprintf(f, " (%zu B)\n", n);
        return;
    }
    size_t unit = fmt == RKC_FMT_F32 ? 4 : 1, count = n / unit;
    size_t show = cl->full || count <= 256 / unit ? count : 256 / unit;
    fputs(fmt == RKC_FMT_F32 ? "f32:" : "hex:", f);
    for (size_t i = 0; i < show; i++) {
        if (fmt == RKC_FMT_F32) {
            float v;
            memcpy(&v, p + 4 * i, 4);
            fprintf(f, "%s%.9g", i ? "," : "", v);
        } else {
            fprintf(f, "%02x", p[i]);
        }
    }
    if (show < count)
        fprintf(f, " ... (%zu %s in all; --full prints them, -o FIELD=FILE writes them)", count,
                unit == 4 ? "elements" : "bytes");
    fprintf(f, "  (%zu B)\n", n);
}

/* Writes the -o fields; 0 or 1 (said on stderr). */
static int rkc__write_outputs(const rkc__call *cl, const rkc_reply *r)
{
    int bad = 0;
    for (int i = 0; i < cl->n_out; i++) {
        const char *eq = strchr(cl->out_spec[i], '=');
        /* the whole name: one cut short missed its field or took another */
        char *name = strndup(cl->out_spec[i], (size_t)(eq - cl->out_spec[i]));
        const void *p;
        size_t n;
        int rc = name ? rkc_reply_bin(r, name, &p, &n) : -ENOMEM;
        free(name);
        if (rc) {
            fprintf(stderr, "rk-client: -o %s: %s\n", cl->out_spec[i],
                    rc == -ENOENT ? "the reply has no such field" : rc == -ENOMEM ? "out of memory"
                    : "the reply field is not bytes (bin)");
            bad = 1;
            continue;
        }
        FILE *f = strcmp(eq + 1, "-") ? fopen(eq + 1, "wb") : stdout;
        if (!f || fwrite(p, 1, n, f) != n || (f != stdout ? fclose(f) : fflush(f))) {
            fprintf(stderr, "rk-client: -o %s: cannot write %s: %s\n", cl->out_spec[i], eq + 1,
                    strerror(errno));
            bad = 1;
        }
    }
    return bad;
}

static bool rkc__is_output(const rkc__call *cl, const char *k, size_t kn)
{
    for (int i = 0; i < cl->n_out; i++)
        if (!strncmp(cl->out_spec[i], k, kn) && cl->out_spec[i][kn] == '=')
            return true;
    return false;
}

int rkc__call_print(const rkc__call *cl, const rkc_reply *r, FILE *f)
{
    const msgpack_object_map *m = &r->root->via.map;
    for (uint32_t i = 0; f && i < m->size; i++) {
        const msgpack_object *k = &m->ptr[i].key, *v = &m->ptr[i].val;
        if (k->type != MSGPACK_OBJECT_STR)
            continue;
        const char *ks = k->via.str.ptr;
        size_t kn = k->via.str.size;
        if ((kn == 1 && *ks == 'v') || (kn == 2 && !memcmp(ks, "id", 2)) || (kn == 2 && !memcmp(ks, "ok", 2)))
            continue;
        fprintf(f, "%.*s: ", (int)kn, ks);
        if (v->type == MSGPACK_OBJECT_BIN && rkc__is_output(cl, ks, kn)) {
            fprintf(f, "%" PRIu32 " B written to the -o file\n", v->via.bin.size);
        } else if (v->type == MSGPACK_OBJECT_BIN) {
            rkc__print_bin(cl, f, (const uint8_t *)v->via.bin.ptr, v->via.bin.size);
        } else {
            rkc_print_json(f, v);
            fputc('\n', f);
        }
    }
    return rkc__write_outputs(cl, r);
}

static void rkc__print_sig(const rkc_actor_info *a)
{
    printf("%-12s ", a->name);
    for (size_t i = 0; i < a->n_inputs; i++)
        printf("%s%s", i ? ", " : "", a->inputs[i]);
    printf(" -> ");
    for (size_t i = 0; i < a->n_outputs; i++)
        printf("%s%s", i ? ", " : "", a->outputs[i]);
    printf("   [%s%s%s]\n", a->gpu ? "gpu" : "", a->gpu && a->cpu ? " " : "", a->cpu ? "cpu" : "");
}

int rkc__actors(rkc *c, const char *endpoint, int timeout_ms)
{
    rkc_actor_list l;
    int rc = rkc_actors(c, &l, timeout_ms);
    if (rc == -ENOENT) {
        static const char *const data[] = {"data"}, *const ab[] = {"a", "b"}, *const cc[] = {"c"};
        static const rkc_actor_info builtin[] = {
            {"echo", data, 1, data, 1, true, true},
            {"vadd", ab, 2, cc, 1, true, true},
        };
        fprintf(stderr, "rk-client: the bridge at %s does not report its actors (older than protocol "
                "1.1); these are the built-in actors' signatures\n", endpoint);
        for (size_t i = 0; i < 2; i++)
            rkc__print_sig(&builtin[i]);
        return 0;
    }
    if (rc) {
        fprintf(stderr, "rk-client: actors %s: %s\n", endpoint, rkc_errmsg(c));
        return 1;
    }
    for (size_t i = 0; i < l.n; i++)
        rkc__print_sig(&l.actors[i]);
    rkc_actor_list_free(&l);
    return 0;
}
