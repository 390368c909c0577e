/* bridge/server/pool.h - the small pool operations every request goes
 * through (one call each per message), inline: see pool.c for the pool. */
#ifndef RKB_POOL_H
#define RKB_POOL_H

#include <stdlib.h>

static inline void rkb_env_close(rkb_env *e)
{
    for (int k = 0; k < e->n; k++)
        zmq_msg_close(rkb_env_at(e, k));
    if (e->more) {
        free(e->more);
        e->more = NULL;
    }
    e->n = 0;
}

static inline void rkb_pool_take(rkb_pool *p)
{
    int32_t i = p->free_head;
    p->free_head = p->e[i].next;
    p->n_free--;
    /* env.n == 0 and !body_open already (calloc, rkb_pool_put): a reader
     * may have filled the frames of e[free_head] before taking it */
    p->e[i].next = -1;
}

static inline void rkb_pool_put(rkb_pool *p, int32_t i)
{
    rkb_entry *e = &p->e[i];
    rkb_env_close(&e->env);
    if (e->body_open)
        zmq_msg_close(&e->body);
    e->body_open = false;
    e->state = RKB_FREE;
    e->next = p->free_head;
    p->free_head = i;
    p->n_free++;
}

static inline uint32_t rkb__hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (uint32_t)k;
}

static inline void rkb_pool_map_put(rkb_pool *p, uint64_t key, uint32_t idx)
{
    uint32_t i = rkb__hash(key) & p->map_mask;
    while (p->map_val[i])
        i = (i + 1) & p->map_mask;
    p->map_key[i] = key;
    p->map_val[i] = idx + 1;
}

/* Removes key; returns its entry index or -1. Backward-shift deletion keeps
 * every probe chain unbroken without tombstones. */
static inline int32_t rkb_pool_map_take(rkb_pool *p, uint64_t key)
{
    uint32_t i = rkb__hash(key) & p->map_mask;
    while (p->map_val[i] && p->map_key[i] != key)
        i = (i + 1) & p->map_mask;
    if (!p->map_val[i])
        return -1;
    int32_t idx = (int32_t)p->map_val[i] - 1;
    uint32_t hole = i;
    for (uint32_t j = (i + 1) & p->map_mask; p->map_val[j]; j = (j + 1) & p->map_mask) {
        uint32_t home = rkb__hash(p->map_key[j]) & p->map_mask;
        /* can the element at j move to the hole? yes unless home is in (hole, j] */
        bool in_range = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!in_range) {
            p->map_key[hole] = p->map_key[j];
            p->map_val[hole] = p->map_val[j];
            hole = j;
        }
    }
    p->map_val[hole] = 0;
    return idx;
}

#endif
