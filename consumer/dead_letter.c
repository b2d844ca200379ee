/* SPDX-License-Identifier: BSD-2-Clause */
/* The dead-letter topic: messages the handler gave up on, or the bad-input policy refused, are
 * produced there with their key, value and headers, plus headers saying where they came from
 * and why. Their offset completes only on a successful delivery report; a failed produce is
 * tried again every dlq_retry_ms, and its offset stays unfinished meanwhile. */
#include "consumer_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rl__wake_cb(rd_kafka_t *rk, void *opaque);

int rl__dlq_new(rl_consumer_t *c, rd_kafka_conf_t *conf)
{
    char err[512];
    rd_kafka_conf_set_dr_msg_cb(conf, rl__dlq_delivered);
    rd_kafka_conf_set_opaque(conf, c);
    c->dlq = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!c->dlq) {
        rd_kafka_conf_destroy(conf);
        rl__consumer_error(c, RD_KAFKA_RESP_ERR__INVALID_ARG, "dead-letter producer: %s", err);
        return rl_error_detail_set(RL_EKAFKA,
                                   "dlq_conf: librdkafka refused to make the "
                                   "dead-letter producer: %s",
                                   err);
    }
    c->dlq_q = rd_kafka_queue_get_main(c->dlq);
    rd_kafka_queue_cb_event_enable(c->dlq_q, rl__wake_cb, c);
    return 0;
}

static void unlink_job(rl_consumer_t *c, rl__cjob *j)
{
    if (j->prev)
        j->prev->next = j->next;
    else
        c->dead_letters = j->next;
    if (j->next)
        j->next->prev = j->prev;
    j->prev = j->next = NULL;
}

static bool current(const rl__cjob *j)
{
    return j->part->assigned && j->part->epoch == j->epoch;
}

static void add_header(rd_kafka_headers_t *h, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void add_header(rd_kafka_headers_t *h, const char *name, const char *fmt, ...)
{
    char v[192];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(v, sizeof v, fmt, ap);
    va_end(ap);
    if (n >= 0)
        rd_kafka_header_add(h, name, -1, v, n < (int)sizeof v ? n : (int)sizeof v - 1);
}

static void retry_later(rl_consumer_t *c, rl__cjob *j, rd_kafka_resp_err_t err)
{
    c->stats.dlq_failures++;
    rl__consumer_error(c, err, "dead letter %s [%d] offset %" PRId64 " to %s: retried in %u ms",
                       j->part->topic->name, (int)j->part->partition, j->offset,
                       j->part->topic->dlq, (unsigned)c->opts.dlq_retry_ms);
    j->retry_at_ms = rl__now_ms() + c->opts.dlq_retry_ms;
    if (!j->retry_at_ms)
        j->retry_at_ms = 1;
}

static void produce(rl_consumer_t *c, rl__cjob *j)
{
    const rd_kafka_message_t *m = j->msg;
    rd_kafka_headers_t *orig = NULL, *h;
    if (rd_kafka_message_headers(m, &orig) == RD_KAFKA_RESP_ERR_NO_ERROR && orig)
        h = rd_kafka_headers_copy(orig);
    else
        h = rd_kafka_headers_new(5);
    add_header(h, "ringlane.topic", "%s", j->part->topic->name);
    add_header(h, "ringlane.partition", "%d", (int)j->part->partition);
    add_header(h, "ringlane.offset", "%" PRId64, j->offset);
    add_header(h, "ringlane.error", "%s", j->reason);
    add_header(h, "ringlane.attempts", "%u", (unsigned)j->attempts);
    rd_kafka_resp_err_t err = rd_kafka_producev(
        c->dlq, RD_KAFKA_V_TOPIC(j->part->topic->dlq), RD_KAFKA_V_KEY(m->key, m->key_len),
        RD_KAFKA_V_VALUE(m->payload, m->len), RD_KAFKA_V_HEADERS(h),
        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(j), RD_KAFKA_V_END);
    if (err) {
        rd_kafka_headers_destroy(h); /* kept by librdkafka only on success */
        retry_later(c, j, err);
        return;
    }
    j->retry_at_ms = 0;
    j->part->dlq_in_flight++;
}

void rl__dead_letter(rl_consumer_t *c, rl__cjob *j)
{
    if (!j->part->topic->dlq) {
        /* No dead-letter topic: reported, and done. */
        c->stats.dead_lettered++;
        if (c->opts.on_dead_letter)
            c->opts.on_dead_letter(c, j->msg, j->reason);
        rl__complete(c, j->part, j->offset);
        rl__cjob_free(j);
        return;
    }
    j->prev = NULL;
    j->next = c->dead_letters;
    if (j->next)
        j->next->prev = j;
    c->dead_letters = j;
    produce(c, j);
}

void rl__dlq_delivered(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    rl_consumer_t *c = opaque;
    rl__cjob *j = m->_private;
    rl__part *p = j->part;
    bool now = current(j);
    if (now && p->dlq_in_flight)
        p->dlq_in_flight--;
    if (m->err && now && !c->closing) {
        retry_later(c, j, m->err);
        return;
    }
    unlink_job(c, j);
    if (!m->err && now) {
        c->stats.dead_lettered++;
        if (c->opts.on_dead_letter)
            c->opts.on_dead_letter(c, j->msg, j->reason);
        rl__complete(c, p, j->offset);
    }
    rl__cjob_free(j);
}

void rl__dlq_retry(rl_consumer_t *c)
{
    uint64_t now = rl__now_ms();
    for (rl__cjob *j = c->dead_letters, *next; j; j = next) {
        next = j->next;
        if (!j->retry_at_ms || j->retry_at_ms > now)
            continue;
        if (!current(j) || c->closing) {
            unlink_job(c, j);
            rl__cjob_free(j);
        } else {
            produce(c, j);
        }
    }
}

static bool any_in_flight(rl__part *const *parts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (parts[i]->dlq_in_flight)
            return true;
    return false;
}

void rl__dlq_wait(rl_consumer_t *c, rl__part *const *parts, size_t n, uint64_t deadline_ms)
{
    if (!c->dlq)
        return;
    for (;;) {
        uint64_t now = rl__now_ms();
        if (!any_in_flight(parts, n) || now >= deadline_ms)
            return;
        uint64_t left = deadline_ms - now;
        rd_kafka_poll(c->dlq, left < 50 ? (int)left : 50); /* serves delivery reports here */
    }
}

void rl__dlq_forget(rl_consumer_t *c, rl__part *p)
{
    /* Those waiting for a retry go now; those in flight are freed by their delivery report. */
    for (rl__cjob *j = c->dead_letters, *next; j; j = next) {
        next = j->next;
        if (j->part == p && j->retry_at_ms) {
            unlink_job(c, j);
            rl__cjob_free(j);
        }
    }
    p->dlq_in_flight = 0;
}

void rl__dlq_close(rl_consumer_t *c, uint32_t flush_ms)
{
    if (c->dlq) {
        rd_kafka_flush(c->dlq, (int)flush_ms);
        rd_kafka_queue_cb_event_enable(c->dlq_q, NULL, NULL);
        rd_kafka_queue_destroy(c->dlq_q);
        rd_kafka_destroy(c->dlq);
        c->dlq = NULL;
        c->dlq_q = NULL;
    }
    while (c->dead_letters) {
        rl__cjob *j = c->dead_letters;
        unlink_job(c, j);
        rl__cjob_free(j);
    }
}
