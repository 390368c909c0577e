/* bridge/server/pool.c - a request loop's entries, its runtime-id map and
 * its admission FIFO (see server.h). One thread uses a pool; the counts
 * status reads are relaxed atomic stores. */
#include "server.h"

#include <stdlib.h>
#include <string.h>


int rkb_pool_init(rkb_pool *p, uint32_t entries, uint32_t window)
{
    memset(p, 0, sizeof *p);
    p->free_head = p->park_head = p->park_tail = -1;
    p->n = entries;
    p->e = calloc(entries, sizeof *p->e);
    /* at most `window` entries are in the map: keep it half empty */
    uint32_t cap = 1;
    while (cap < 2 * window)
        cap <<= 1;
    p->map_key = calloc(cap, sizeof *p->map_key);
    p->map_val = calloc(cap, sizeof *p->map_val);
    p->map_mask = cap - 1;
    if (!p->e || !p->map_key || !p->map_val)
        return -1;
    for (int32_t i = (int32_t)entries - 1; i >= 0; i--) {
        p->e[i].next = p->free_head;
        p->free_head = i;
    }
    p->n_free = entries;
    return 0;
}

/* After the sockets are closed: entries still holding frames (a drain that
 * timed out) are freed. */
void rkb_pool_fini(rkb_pool *p)
{
    for (uint32_t i = 0; p->e && i < p->n; i++)
        if (p->e[i].state != RKB_FREE)
            rkb_pool_put(p, (int32_t)i);
    free(p->e);
    free(p->map_key);
    free(p->map_val);
    memset(p, 0, sizeof *p);
}






static uint64_t rkb__frame_bytes(const rkb_entry *e)
{
    return e->body_open ? zmq_msg_size((zmq_msg_t *)&e->body) : 0;
}

void rkb_pool_park(rkb_pool *p, int32_t idx, int64_t deadline)
{
    rkb_entry *e = &p->e[idx];
    e->state = RKB_PARKED;
    e->deadline = deadline;
    e->next = -1;
    if (p->park_tail >= 0)
        p->e[p->park_tail].next = idx;
    else
        p->park_head = idx;
    p->park_tail = idx;
    RKB_SET(p->n_parked, p->n_parked + 1);
    e->parked_len = rkb__frame_bytes(e);
    RKB_SET(p->parked_bytes, p->parked_bytes + e->parked_len);
}

int32_t rkb_pool_unpark(rkb_pool *p)
{
    int32_t i = p->park_head;
    p->park_head = p->e[i].next;
    if (p->park_head < 0)
        p->park_tail = -1;
    RKB_SET(p->n_parked, p->n_parked - 1);
    RKB_SET(p->parked_bytes, p->parked_bytes - p->e[i].parked_len);
    return i;
}
