/* SPDX-License-Identifier: BSD-2-Clause */
/* The dead-letter topic: messages the handler gave up on, or the bad-input policy refused, are
 * produced there with their key, value and headers, plus headers saying where they came from
 * and why. Their offset completes only on a successful delivery report; a failed produce is
 * tried again every dlq_retry_ms, and its offset stays unfinished meanwhile. The producer's
 * configuration, unless the application gives one, is the consumer's without its consumer
 * properties. */
#include "consumer_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rl__wake_cb(rd_kafka_t *rk, void *opaque);

/* --- the producer's configuration, made from the consumer's --- */

/* librdkafka's own table of its properties (rd_kafka_conf_properties_show, from which its
 * CONFIGURATION.md is made) marks each one C (consumer only), P (producer only) or * (both),
 * and a producer logs a CONFWARN for every C property set on it. The table is read from the
 * librdkafka this process runs with, so the names follow its version. */
typedef struct property_table {
    char *text; /* the table, each listed name cut out in place */
    size_t size;
    const char **consumer_only; /* global and topic properties marked C */
    size_t n_consumer_only;
    const char **dedicated; /* set through functions of their own (callbacks, pointers) */
    size_t n_dedicated;
} property_table;

static void table_free(property_table *t)
{
    free(t->consumer_only);
    free(t->dedicated);
    free(t->text);
}

static int table_read(property_table *t)
{
    memset(t, 0, sizeof *t);
    FILE *f = open_memstream(&t->text, &t->size);
    if (!f)
        return RL_ENOMEM;
    rd_kafka_conf_properties_show(f);
    if (fclose(f) != 0 || !t->text)
        return RL_ENOMEM;
    size_t lines = 1;
    for (const char *s = t->text; (s = strchr(s, '\n')); s++)
        lines++;
    /* One more slot in consumer_only for the caller's own filter entry. */
    t->consumer_only = calloc(lines + 1, sizeof *t->consumer_only);
    t->dedicated = calloc(lines, sizeof *t->dedicated);
    if (!t->consumer_only || !t->dedicated)
        return RL_ENOMEM;
    for (char *line = t->text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        /* "name | C/P | range | default | importance | description". The header ("Property |
         * C/P | ...") has a '/' after its C. */
        char *bar = strstr(line, " | ");
        size_t name_len = strcspn(line, " ");
        if (!bar || !name_len)
            continue;
        const char *scope = bar + 3;
        while (*scope == ' ')
            scope++;
        if (strstr(bar, "see dedicated API"))
            t->dedicated[t->n_dedicated++] = line;
        if (scope[0] == 'C' && scope[1] == ' ')
            t->consumer_only[t->n_consumer_only++] = line;
        line[name_len] = '\0';
    }
    return 0;
}

static bool listed(const char *const *names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return true;
    return false;
}

/* The value of name in a dump (name, value, name, value, ...), or NULL. */
static const char *dump_value(const char **dump, size_t cnt, const char *name)
{
    for (size_t i = 0; i + 1 < cnt; i += 2)
        if (strcmp(dump[i], name) == 0)
            return dump[i + 1];
    return NULL;
}

/* The consumer's default topic configuration, without its consumer properties: each property
 * that differs from librdkafka's default is set on `to` by name (rd_kafka_conf_set passes
 * topic properties on to the default topic configuration). The same value as the default
 * changes nothing, so it is not set; callbacks and pointers (partitioner_cb, the topic opaque)
 * cannot be copied this way and stay behind: a ring partitioner loaded by
 * plugin.library.paths installs itself again in the copy. */
static int copy_topic_conf(rd_kafka_conf_t *to, const rd_kafka_conf_t *from,
                           const property_table *t, char *err, size_t size)
{
    rd_kafka_topic_conf_t *have =
        rd_kafka_conf_get_default_topic_conf((rd_kafka_conf_t *)from); /* only read */
    if (!have)
        return 0;
    rd_kafka_topic_conf_t *fresh = rd_kafka_topic_conf_new();
    size_t n = 0, nd = 0;
    const char **values = rd_kafka_topic_conf_dump(have, &n);
    const char **defaults = rd_kafka_topic_conf_dump(fresh, &nd);
    int rc = 0;
    for (size_t i = 0; i + 1 < n && !rc; i += 2) {
        const char *name = values[i], *value = values[i + 1], *dflt;
        if (listed(t->consumer_only, t->n_consumer_only, name) ||
            listed(t->dedicated, t->n_dedicated, name) ||
            ((dflt = dump_value(defaults, nd, name)) && strcmp(dflt, value) == 0))
            continue;
        char why[256];
        if (rd_kafka_conf_set(to, name, value, why, sizeof why) != RD_KAFKA_CONF_OK) {
            snprintf(err, size, "topic property %s=%s: %s", name, value, why);
            rc = RL_EKAFKA;
        }
    }
    rd_kafka_conf_dump_free(values, n);
    rd_kafka_conf_dump_free(defaults, nd);
    rd_kafka_topic_conf_destroy(fresh);
    return rc;
}

int rl__dlq_conf(const rd_kafka_conf_t *conf, rd_kafka_conf_t **out, char *err, size_t size)
{
    *out = NULL;
    property_table t;
    int rc = table_read(&t);
    if (rc) {
        table_free(&t);
        snprintf(err, size, "out of memory");
        return rc;
    }
    /* The global part by librdkafka's own copy (it keeps callbacks, certificates, interceptors
     * and plugins), leaving out the consumer-only names and the default topic configuration,
     * which librdkafka would copy whole. The filter matches name prefixes: no consumer-only
     * name is the beginning of another property's (tests/test_consumer_dlq_conf.c checks). */
    t.consumer_only[t.n_consumer_only] = "default_topic_conf";
    rd_kafka_conf_t *d = rd_kafka_conf_dup_filter(conf, t.n_consumer_only + 1, t.consumer_only);
    rc = d ? copy_topic_conf(d, conf, &t, err, size) : RL_ENOMEM;
    table_free(&t);
    char why[256];
    if (!rc &&
        rd_kafka_conf_set(d, "enable.idempotence", "true", why, sizeof why) != RD_KAFKA_CONF_OK) {
        snprintf(err, size, "enable.idempotence=true: %s", why);
        rc = RL_EKAFKA;
    }
    if (rc) {
        if (d)
            rd_kafka_conf_destroy(d);
        else
            snprintf(err, size, "out of memory");
        return rc;
    }
    *out = d;
    return 0;
}

/* --- the producer --- */

static void producer_set(rl_consumer_t *c, rd_kafka_t *rk)
{
    c->dlq = rk;
    c->dlq_q = rd_kafka_queue_get_main(rk);
    rd_kafka_queue_cb_event_enable(c->dlq_q, rl__wake_cb, c);
}

int rl__dlq_new(rl_consumer_t *c, rd_kafka_conf_t *conf)
{
    char err[512];
    rd_kafka_conf_set_dr_msg_cb(conf, rl__dlq_delivered);
    rd_kafka_conf_set_opaque(conf, c);
    /* A copy for the producers that replace one a fatal error ended (rd_kafka_new takes conf);
     * without memory for it there are none, and a fatal error stays (dlq_restart says so). */
    c->dlq_conf = rd_kafka_conf_dup(conf);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        rl__consumer_error(c, RD_KAFKA_RESP_ERR__INVALID_ARG, "dead-letter producer: %s", err);
        return rl_error_detail_set(RL_EKAFKA,
                                   "dlq_conf: librdkafka refused to make the "
                                   "dead-letter producer: %s",
                                   err);
    }
    producer_set(c, rk);
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
    else
        c->dead_letters_tail = j->prev;
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
    /* Appended: the list is in the order the messages died, and the retries after a failed
     * produce or a producer's replacement go in that order too (a key's dead letters were
     * produced newest first when it was kept newest first). */
    j->next = NULL;
    j->prev = c->dead_letters_tail;
    if (j->prev)
        j->prev->next = j;
    else
        c->dead_letters = j;
    c->dead_letters_tail = j;
    produce(c, j);
}

void rl__dlq_delivered(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    rl_consumer_t *c = opaque;
    rl__cjob *j = m->_private;
    rl__part *p = j->part;
    bool now = current(j);
    if (now && p->dlq_in_flight)
        p->dlq_in_flight--;
    if (m->err && now && !c->closing) {
        if (rk != c->dlq)
            j->retry_at_ms = 1; /* a replaced producer's: the new one produces it (restart) */
        else
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

/* Produces again, at once, every dead letter waiting for a retry (after a restart). */
static void produce_waiting(rl_consumer_t *c)
{
    for (rl__cjob *j = c->dead_letters, *next; j; j = next) {
        next = j->next;
        if (!j->retry_at_ms)
            continue;
        if (!current(j)) {
            unlink_job(c, j);
            rl__cjob_free(j);
        } else {
            produce(c, j);
        }
    }
}

/* A producer that reported a fatal error (with the default enable.idempotence=true, e.g. a
 * Produce answered OUT_OF_ORDER_SEQUENCE_NUMBER) fails every produce from then on. It is
 * replaced by a new one made from a copy of the same configuration, at most once per
 * dlq_retry_ms (a configuration that keeps failing does not spin). The old one's messages are
 * purged and their delivery reports served here: a dead letter it delivered completes as
 * usual, any other goes to the new producer, so none is lost (its offset stays unfinished
 * until a report of delivery) and none completes twice (a job has one produce at a time). One
 * in flight when the old producer was purged may reach the topic twice: the dead-letter topic
 * is at-least-once. */
static void restart(rl_consumer_t *c)
{
    char reason[256] = "";
    rd_kafka_resp_err_t fatal = rd_kafka_fatal_error(c->dlq, reason, sizeof reason);
    c->dlq_restart_at_ms = rl__now_ms() + c->opts.dlq_retry_ms;
    char err[512] = "no copy of its configuration (out of memory)";
    rd_kafka_conf_t *conf = c->dlq_conf ? rd_kafka_conf_dup(c->dlq_conf) : NULL;
    rd_kafka_t *fresh = conf ? rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err) : NULL;
    if (!fresh) {
        if (conf)
            rd_kafka_conf_destroy(conf);
        rl__consumer_error(c, fatal,
                           "dead-letter producer: fatal error (%s), and no new one: %s; tried "
                           "again in %u ms",
                           reason, err, (unsigned)c->opts.dlq_retry_ms);
        return;
    }
    rl__consumer_error(c, fatal,
                       "dead-letter producer: fatal error (%s): replaced by a new one made from "
                       "the same configuration, which produces the waiting dead letters again",
                       reason);
    rd_kafka_t *old = c->dlq;
    rd_kafka_queue_cb_event_enable(c->dlq_q, NULL, NULL);
    rd_kafka_queue_destroy(c->dlq_q);
    producer_set(c, fresh);
    c->stats.dlq_producer_restarts++;
    /* The old producer's messages come back as failed delivery reports (retried on the new
     * one); the wait is bounded: it has no broker round trip left to wait for. */
    rd_kafka_purge(old, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    for (int i = 0; i < 100 && rd_kafka_outq_len(old) > 0; i++)
        rd_kafka_poll(old, 10);
    rd_kafka_destroy(old);
    /* A report the old one never gave: its dead letter goes to the new one too. */
    for (rl__cjob *j = c->dead_letters; j; j = j->next)
        if (!j->retry_at_ms) {
            if (current(j) && j->part->dlq_in_flight)
                j->part->dlq_in_flight--;
            j->retry_at_ms = 1;
        }
    produce_waiting(c);
}

void rl__dlq_retry(rl_consumer_t *c)
{
    uint64_t now = rl__now_ms();
    if (c->dlq && now >= c->dlq_restart_at_ms && rd_kafka_fatal_error(c->dlq, NULL, 0))
        restart(c);
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
    if (c->dlq_conf) {
        rd_kafka_conf_destroy(c->dlq_conf);
        c->dlq_conf = NULL;
    }
    while (c->dead_letters) {
        rl__cjob *j = c->dead_letters;
        unlink_job(c, j);
        rl__cjob_free(j);
    }
}
