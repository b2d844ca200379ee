/* SPDX-License-Identifier: BSD-2-Clause */
/* The table of topics and partitions the consumer was ever assigned, and pausing them. */
#include "consumer_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RL__PARTITION_MAX 1000000 /* a partition number beyond any real topic's */

/* --- the FIFO of refused messages --- */

int rl__msgq_push(rl__msgq *q, rd_kafka_message_t *m)
{
    if (q->len == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 8;
        rd_kafka_message_t **v = malloc(cap * sizeof *v);
        if (!v)
            return RL_ENOMEM;
        for (size_t i = 0; i < q->len; i++)
            v[i] = q->v[(q->head + i) % q->cap];
        free(q->v);
        q->v = v;
        q->cap = cap;
        q->head = 0;
    }
    q->v[(q->head + q->len) % q->cap] = m;
    q->len++;
    return 0;
}

rd_kafka_message_t *rl__msgq_front(const rl__msgq *q)
{
    return q->len ? q->v[q->head] : NULL;
}

void rl__msgq_pop(rl__msgq *q)
{
    if (q->len) {
        q->head = (q->head + 1) % q->cap;
        q->len--;
    }
}

void rl__msgq_clear(rl__msgq *q)
{
    rd_kafka_message_t *m;
    while ((m = rl__msgq_front(q))) {
        rl__msgq_pop(q);
        rd_kafka_message_destroy(m);
    }
}

void rl__msgq_free(rl__msgq *q)
{
    rl__msgq_clear(q);
    free(q->v);
    q->v = NULL;
    q->cap = q->head = 0;
}

/* --- topics and partitions --- */

static rl__topic *topic_get(rl_consumer_t *c, const char *name, bool create)
{
    for (uint32_t i = 0; i < c->ntopics; i++)
        if (strcmp(c->topics[i]->name, name) == 0)
            return c->topics[i];
    if (!create || c->ntopics == UINT32_MAX / 2)
        return NULL;
    rl__topic **v = realloc(c->topics, (c->ntopics + 1) * sizeof *v);
    if (!v)
        return NULL;
    c->topics = v;
    rl__topic *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->name = strdup(name);
    if (c->dlq_enabled) {
        if (c->opts.dlq_topic) {
            t->dlq = strdup(c->opts.dlq_topic);
        } else if (t->name) {
            size_t n = strlen(name) + sizeof ".dlq";
            t->dlq = malloc(n);
            if (t->dlq)
                snprintf(t->dlq, n, "%s.dlq", name);
        }
    }
    if (!t->name || (c->dlq_enabled && !t->dlq)) {
        free(t->name);
        free(t->dlq);
        free(t);
        return NULL;
    }
    t->index = c->ntopics;
    c->topics[c->ntopics++] = t;
    return t;
}

rl__part *rl__part_get(rl_consumer_t *c, const char *topic, int32_t partition, bool create)
{
    if (!topic || partition < 0 || partition > RL__PARTITION_MAX)
        return NULL;
    rl__topic *t = topic_get(c, topic, create);
    if (!t)
        return NULL;
    if (partition < t->nparts && t->parts[partition])
        return t->parts[partition];
    if (!create)
        return NULL;
    if (partition >= t->nparts) {
        int32_t n = partition + 1;
        rl__part **v = realloc(t->parts, (size_t)n * sizeof *v);
        if (!v)
            return NULL;
        memset(v + t->nparts, 0, (size_t)(n - t->nparts) * sizeof *v);
        t->parts = v;
        t->nparts = n;
    }
    rl__part *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    if (rl__offsets_init(&p->win, c->opts.window) != 0) {
        free(p);
        return NULL;
    }
    p->topic = t;
    p->partition = partition;
    p->tag = (int64_t)t->index << 32 | partition;
    p->next_offset = p->committed = p->stored = -1;
    /* Starts with 4 hex digits so that every ring profile can hash it (turnstone reads them);
     * the separators make a clash with a real key practically impossible, and harmless: a clash
     * only serialises the two keys. */
    int len = snprintf(p->null_key, sizeof p->null_key, "%04x\x1fringlane-null-key\x1f%u\x1f%d",
                       (unsigned)partition & 0xffffu, t->index, (int)partition);
    p->null_key_len = len > 0 && (size_t)len < sizeof p->null_key ? (size_t)len : 0;
    t->parts[partition] = p;
    return p;
}

rl__part *rl__part_of_message(rl_consumer_t *c, const rd_kafka_message_t *m)
{
    if (!m->rkt || m->partition < 0)
        return NULL;
    /* One subscription usually has one topic: compare the handle before the name. */
    for (uint32_t i = 0; i < c->ntopics; i++) {
        rl__topic *t = c->topics[i];
        if (t->last_rkt == m->rkt)
            return m->partition < t->nparts ? t->parts[m->partition] : NULL;
    }
    const char *name = rd_kafka_topic_name(m->rkt);
    for (uint32_t i = 0; i < c->ntopics; i++) {
        rl__topic *t = c->topics[i];
        if (strcmp(t->name, name) == 0) {
            t->last_rkt = m->rkt;
            return m->partition < t->nparts ? t->parts[m->partition] : NULL;
        }
    }
    return NULL;
}

static void pause_resume(rl_consumer_t *c, rl__part *p, bool pause)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, p->topic->name, p->partition);
    rd_kafka_resp_err_t err =
        pause ? rd_kafka_pause_partitions(c->rk, l) : rd_kafka_resume_partitions(c->rk, l);
    if (!err)
        err = l->elems[0].err;
    rd_kafka_topic_partition_list_destroy(l);
    if (err)
        rl__consumer_error(c, err, "%s %s [%d]", pause ? "pause" : "resume", p->topic->name,
                           (int)p->partition);
}

void rl__part_pause(rl_consumer_t *c, rl__part *p)
{
    if (p->paused)
        return;
    /* librdkafka drops what it had fetched for the partition beyond the last message polled,
     * and fetches it again from there on resume: the kept messages plus that is everything. */
    pause_resume(c, p, true);
    p->paused = true;
    c->stats.pauses++;
}

/* Asks librdkafka to fetch `p` from `offset` on, without waiting (the answer comes as an
 * error message on the queue if any). */
void rl__part_seek(rl_consumer_t *c, rl__part *p, int64_t offset)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, p->topic->name, p->partition)->offset = offset;
    rd_kafka_error_t *error = rd_kafka_seek_partitions(c->rk, l, 0);
    if (error) {
        rl__consumer_error(c, rd_kafka_error_code(error), "seek %s [%d] to %" PRId64 ": %s",
                           p->topic->name, (int)p->partition, offset, rd_kafka_error_string(error));
        rd_kafka_error_destroy(error);
    }
    rd_kafka_topic_partition_list_destroy(l);
}

void rl__part_resume(rl_consumer_t *c, rl__part *p)
{
    if (!p->paused)
        return;
    pause_resume(c, p, false);
    /* A resume alone restarts the partition's fetching only when its broker's thread next
     * wakes up: up to a second later (librdkafka 2.0 to 2.15 at least) when that broker has
     * nothing else to fetch, and the paused partition's messages were dropped at the pause.
     * A seek to where the resume starts anyway (the offset after the last message taken)
     * wakes that thread at once; what was fetched meanwhile at the old position is dropped
     * by librdkafka, and anything seen twice is skipped by next_offset. */
    if (p->next_offset >= 0)
        rl__part_seek(c, p, p->next_offset);
    p->paused = false;
    c->stats.resumes++;
}

void rl__topics_free(rl_consumer_t *c)
{
    for (uint32_t i = 0; i < c->ntopics; i++) {
        rl__topic *t = c->topics[i];
        for (int32_t k = 0; k < t->nparts; k++) {
            rl__part *p = t->parts[k];
            if (!p)
                continue;
            rl__msgq_free(&p->pending);
            rl__growth_fence_drop(c, p);
            rl__growth_fence_part_free(p);
            rl__offsets_free(&p->win);
            rl__map_forget(p);
            free(p);
        }
        free(t->parts);
        free(t->name);
        free(t->dlq);
        free(t);
    }
    free(c->topics);
    c->topics = NULL;
    c->ntopics = 0;
}
