/* SPDX-License-Identifier: BSD-2-Clause */
/* Job queues: the lane's ring buffer and the linked lists used around it. */
#include "dispatch_internal.h"

#include <stdlib.h>

int rl__lq_grow(rl__lq *q, size_t n)
{
    if (n <= q->cap)
        return 0;
    size_t cap = q->cap ? q->cap : 16;
    while (cap < n) {
        if (cap > SIZE_MAX / 2 / sizeof(rl__qent))
            return RL_ENOMEM;
        cap *= 2;
    }
    rl__qent *v = malloc(cap * sizeof *v);
    if (!v)
        return RL_ENOMEM;
    for (size_t i = 0; i < q->len; i++)
        v[i] = *rl__lq_at(q, i);
    free(q->v);
    q->v = v;
    q->cap = cap;
    q->head = 0;
    return 0;
}

void rl__lq_fit(rl__lq *q, size_t n)
{
    size_t cap = 16;
    while (cap < n)
        cap *= 2;
    if (cap >= q->cap)
        return;
    rl__qent *v = malloc(cap * sizeof *v);
    if (!v)
        return; /* the larger array does as well */
    for (size_t i = 0; i < q->len; i++)
        v[i] = *rl__lq_at(q, i);
    free(q->v);
    q->v = v;
    q->cap = cap;
    q->head = 0;
}

void rl__lq_prepend(rl__lq *q, rl__jobq *src)
{
    if (!src->len)
        return;
    q->head = (q->head - src->len) & (q->cap - 1);
    q->len += src->len;
    size_t i = 0;
    rl__job *j;
    while ((j = rl__jobq_pop(src)))
        *rl__lq_at(q, i++) = (rl__qent){j->pub.hash, j};
}

void rl__lq_append(rl__lq *q, rl__jobq *src)
{
    rl__job *j;
    while ((j = rl__jobq_pop(src)))
        rl__lq_push(q, j);
}

void rl__lq_drain(rl__lq *q, rl__jobq *out)
{
    rl__job *j;
    while ((j = rl__lq_pop(q)))
        rl__jobq_push(out, j);
}

/* Merges two sorted lists (a first on ties, so the sort is stable). */
static rl__job *merge(rl__job *a, rl__job *b)
{
    rl__job *head = NULL, **tail = &head;
    while (a && b) {
        if (a->pub.seq <= b->pub.seq) {
            *tail = a;
            a = a->next;
        } else {
            *tail = b;
            b = b->next;
        }
        tail = &(*tail)->next;
    }
    *tail = a ? a : b;
    return head;
}

void rl__jobq_sort_seq(rl__jobq *q)
{
    /* A natural merge sort: the lists handed back are a few already-sorted runs (one per lane
     * and fence), so this is a few linear passes rather than log2(n) of them. */
    if (q->len < 2)
        return;
    enum { MAX_RUNS = 64 };
    rl__job *stack[MAX_RUNS]; /* stack[k]: a run of about 2^k runs, or NULL */
    for (int k = 0; k < MAX_RUNS; k++)
        stack[k] = NULL;
    rl__job *p = q->head;
    while (p) {
        rl__job *run = p;
        while (p->next && p->next->pub.seq >= p->pub.seq)
            p = p->next;
        rl__job *rest = p->next;
        p->next = NULL;
        p = rest;
        int k = 0;
        while (k < MAX_RUNS - 1 && stack[k]) {
            run = merge(stack[k], run);
            stack[k++] = NULL;
        }
        stack[k] = stack[k] ? merge(stack[k], run) : run;
    }
    rl__job *all = NULL;
    for (int k = 0; k < MAX_RUNS; k++)
        if (stack[k])
            all = all ? merge(stack[k], all) : stack[k];
    q->head = all;
    rl__job *t = all;
    while (t->next)
        t = t->next;
    q->tail = t;
}

size_t rl__jobq_take_tag(rl__jobq *q, int64_t tag, rl__jobq *out)
{
    rl__jobq keep = {0};
    size_t n = 0;
    rl__job *j;
    while ((j = rl__jobq_pop(q))) {
        if (j->pub.tag == tag) {
            rl__jobq_push(out, j);
            n++;
        } else {
            rl__jobq_push(&keep, j);
        }
    }
    *q = keep;
    return n;
}
