/* samples/client.c - the smallest C client of rk-bridge, on librkc
 * (<rk/client.h>): any actor by name with named fields, a pipelined batch,
 * the actor list. Build it against an installed ringkernel with
 *
 *   cc client.c $(pkg-config --cflags --libs rkc) -o client
 *   ./client [ENDPOINT]          # default tcp://127.0.0.1:5555, rk-bridge's
 *
 * Exit status 0 when every call succeeded, 1 when one failed (said on
 * stderr), 2 for a bad command line. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rk/client.h>

int main(int argc, char **argv)
{
    if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
        fprintf(stderr, "usage: client [ENDPOINT]   (default tcp://127.0.0.1:5555, where rk-bridge "
                "listens by default)\n");
        return 2;
    }
    const char *ep = argc > 1 ? argv[1] : "tcp://127.0.0.1:5555";
    rkc *c;
    if (rkc_connect(&c, ep, NULL)) {
        fprintf(stderr, "client: %s\n", rkc_last_error()); /* says what is wrong with ep */
        return 1;
    }
    int bad = 1, rc = 0;
    const char *what = "echo"; /* the call under way, for the error line */
    rkc_reply r = {0};
    /* echo: data -> data */
    rkc_field in[] = {RKC_FIELD("data", "hello", 5)};
    const void *p;
    size_t n;
    if ((rc = rkc_actor_call(c, "echo", in, 1, &r, 5000)))
        goto out; /* no reply: rkc_errmsg(c) says why */
    if (!r.ok || rkc_reply_bin(&r, "data", &p, &n))
        goto out;
    printf("echo: %.*s (%.1f us)\n", (int)n, (const char *)p, r.rtt_us);
    rkc_reply_free(&r);

    /* vadd: a, b -> c, float32; 8 in flight at once, each waited for by id */
    what = "vadd";
    float a[4] = {1, 2, 3, 4}, b[4] = {0.5f, 0.5f, 0.5f, 0.5f};
    rkc_field ab[] = {RKC_FIELD("a", a, sizeof a), RKC_FIELD("b", b, sizeof b)};
    uint64_t ids[8];
    for (int i = 0; i < 8; i++)
        if ((rc = rkc_actor_send(c, "vadd", ab, 2, &ids[i], 5000)))
            goto out;
    float got[4];
    for (int i = 0; i < 8; i++) {
        if ((rc = rkc_wait(c, ids[i], &r, 5000)))
            goto out;
        if (!r.ok || rkc_reply_bin(&r, "c", &p, &n) || n != sizeof got)
            goto out;
        memcpy(got, p, sizeof got); /* p points into r: copy before rkc_reply_free */
        rkc_reply_free(&r);
        for (int k = 0; k < 4; k++)
            if (got[k] != a[k] + b[k]) {
                fprintf(stderr, "client: vadd: c[%d] = %g, not %g\n", k, got[k], a[k] + b[k]);
                goto out;
            }
    }
    printf("vadd: 8 pipelined calls, c = %g %g %g %g\n", got[0], got[1], got[2], got[3]);

    /* the actors this bridge serves */
    what = "status";
    rkc_actor_list l;
    rc = rkc_actors(c, &l, 5000);
    if (rc == 0) {
        for (size_t i = 0; i < l.n; i++)
            printf("actor %s: %zu input(s) -> %zu output(s)\n", l.actors[i].name, l.actors[i].n_inputs,
                   l.actors[i].n_outputs);
        rkc_actor_list_free(&l);
    } else if (rc != -ENOENT) { /* -ENOENT: a bridge older than protocol 1.1 */
        goto out;
    }
    bad = 0;
out:
    if (bad && r.impl_ && !r.ok)
        fprintf(stderr, "client: %s: %s: %s\n", what, r.code, r.message);
    else if (bad) /* a timeout: most often no bridge at ep */
        fprintf(stderr, "client: %s %s: %s%s\n", what, ep, rkc_errmsg(c),
                rc == -ETIMEDOUT ? " (is rk-bridge running there? Start one, or name its endpoint: "
                                   "client ENDPOINT)" : "");
    rkc_reply_free(&r);
    rkc_close(c);
    return bad;
}
