/* bridge/client/call.h - rk-client's `call` and `actors` commands
 * (call.c): fields from FIELD=VALUE words, a reply's fields printed for a
 * person, an actor list. */
#ifndef RKC_CALL_H
#define RKC_CALL_H

#include <stdbool.h>
#include <stdio.h>

#include "rk/client.h"

enum { RKC_FMT_AUTO, RKC_FMT_HEX, RKC_FMT_F32, RKC_FMT_TEXT };
#define RKC_MAX_OUTPUTS 16

typedef struct rkc__call {
    /* from the options */
    int format;                         /* RKC_FMT_*: how bin fields print */
    bool full;                          /* print long fields whole */
    const char *out_spec[RKC_MAX_OUTPUTS]; /* -o FIELD=FILE, as given */
    int n_out;
    /* from the FIELD=VALUE words */
    rkc_field *fields;
    void **bufs; /* what the values own */
    size_t n;
} rkc__call;

/* `-f FMT`: 0, or -1 with a line on stderr. */
int rkc__call_format(rkc__call *cl, const char *fmt);
/* `-o FIELD=FILE`: 0, or -1 with a line on stderr. */
int rkc__call_output(rkc__call *cl, const char *spec);
/* The fields of FIELD=VALUE words: 0; -1 a bad word or a file over 4 GiB
 * (said on stderr: the command line is wrong); -2 a file that cannot be
 * read, out of memory. */
int rkc__call_build(rkc__call *cl, char **words, int n);
/* Prints an ok reply's fields (besides v, id, ok) on f (NULL: not),
 * writes the -o files.
 * Returns 0, or 1 when a file could not be written. */
int rkc__call_print(const rkc__call *cl, const rkc_reply *r, FILE *f);
void rkc__call_free(rkc__call *cl);

/* `rk-client actors`: the bridge's actor signatures, or the built-in ones
 * with a note on stderr when its status has none. Returns the exit status. */
int rkc__actors(rkc *c, const char *endpoint, int timeout_ms);

#endif
