/* SPDX-License-Identifier: BSD-2-Clause */
/* Restarting librdkafka's fetching as soon as it can go on, rather than up to a second later.
 *
 * librdkafka stops fetching a partition when the consumer's queue holds queued.min.messages
 * (or queued.max.messages.kbytes), and when the partition is paused. It decides to fetch again
 * only on its broker thread's next pass, and a broker thread with nothing to fetch sleeps until
 * an event or its one-second timeout: neither draining the queue nor a resume wakes it (2.0.2;
 * 2.1.0 and later make the first wait explicit, fetch.queue.backoff.ms, default 1000). A
 * consumer that drains 100,000 queued messages in a third of a second then waits two thirds of
 * a second for more (bench/RESULTS.md, the consumer with asynchronous handlers).
 *
 * A seek to an absolute offset does wake it ("seek done"). So, when the queue has been seen at
 * or above queued.min.messages and is then found empty, every partition we fetch is sought to
 * where it is anyway: the offset after the last message taken (next_offset). The queue is
 * empty, so nothing fetched is dropped; a fetch answer already on its way is dropped by
 * librdkafka (the seek's new version) and fetched again from the same offset, and anything
 * delivered twice is skipped by next_offset (stats.refetched). A resume does the same for its
 * partition (rl__part_resume). */
#include "consumer_internal.h"

#include <stdlib.h>

void rl__fetch_restart_init(rl_consumer_t *c, rd_kafka_conf_t *conf)
{
    char value[32];
    size_t size = sizeof value;
    c->queued_min_messages = 100000; /* librdkafka's default */
    if (rd_kafka_conf_get(conf, "queued.min.messages", value, &size) == RD_KAFKA_CONF_OK)
        c->queued_min_messages = strtoull(value, NULL, 10);
}

void rl__fetch_restart_before_poll(rl_consumer_t *c)
{
    if (!c->fetch_stopped && rd_kafka_queue_length(c->q) >= c->queued_min_messages)
        c->fetch_stopped = true;
}

void rl__fetch_restart_after_poll(rl_consumer_t *c, bool queue_empty)
{
    if (!c->fetch_stopped || !queue_empty || c->closing)
        return;
    c->fetch_stopped = false;
    c->stats.fetch_restarts++;
    for (uint32_t i = 0; i < c->ntopics; i++) {
        rl__topic *t = c->topics[i];
        for (int32_t k = 0; k < t->nparts; k++) {
            rl__part *p = t->parts[k];
            if (p && p->assigned && !p->revoking && !p->paused && p->next_offset >= 0)
                rl__part_seek(c, p, p->next_offset);
        }
    }
}
