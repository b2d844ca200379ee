/* SPDX-License-Identifier: BSD-2-Clause */
/* The growth fence on the loop (docs/partition_growth.md, "The consumer's fence"): which
 * messages of a grown topic's new partitions wait, in which order, and when they go.
 *
 * Per message m of partition q of topic T, key k (rl__growth_fence_admit):
 *   - no complete read of the records since q was assigned (or none at all): q is held whole
 *     (its messages stay in the partition's kept queue, in order: BLOCK);
 *   - no growth of T made q: PASS (old partitions never wait);
 *   - the growth G that made q is unusable (its record refused, or another ring): BLOCK;
 *   - G aborted: PASS;
 *   - k NULL or empty, or the ring over G's `to` does not put k in q: PASS, counted unrouted;
 *   - else p = ring_over_from(k): HOLD while G is announced, or while earlier messages of
 *     (q, p) are held, or until the group's committed offset of p reaches g_p (sealed).
 * A held message is a job taken like any other (its offset in the window, unfinished, and
 * linked as a holder), parked in q's queue for p instead of a lane: the commit of q never
 * passes it. Queues are per (q, p), so keys whose old partition caught up go on while others
 * wait, and a key's messages (all of one p) keep their order. rl__growth_fence_release hands the
 * fronts of the released queues to the lanes; one the lanes refuse stays first in its queue.
 * A revoke, a loss or a close drops the held jobs: never dispatched, never committed, read
 * again by the next owner, which holds them the same way. */
#include "consumer_internal.h"
#include "error_detail_internal.h"
#include "growth_fence.h"
#include "ringlane/profile.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The held messages of one new partition: a queue per source (old) partition. */
struct rl__growth_holds {
    uint32_t n; /* source partitions: the growth's from */
    rl__cjob **head, **tail;
    uint64_t count;
};

int rl__growth_fence_new(rl_consumer_t *c, const rl_consumer_options *o,
                         const rd_kafka_conf_t *conf)
{
    rl__growth_fence *f = calloc(1, sizeof *f);
    if (!f)
        return rl_error_detail_set(RL_ENOMEM, "out of memory: the growth fence");
    const rl_profile_info *info =
        rl_profile_find(o->growth_profile ? o->growth_profile : RL_CONSUMER_GROWTH_PROFILE);
    char group[512];
    size_t size = sizeof group;
    f->profile = info ? strdup(info->name) : NULL;
    f->vnodes = rl__growth_record_vnodes(f->profile ? f->profile : RL_CONSUMER_GROWTH_PROFILE,
                                         o->growth_vnodes ? o->growth_vnodes : RL_VNODES_PROFILE);
    f->reread_ms = o->growth_reread_ms;
    f->read_timeout_ms = o->growth_read_timeout_ms;
    f->stall_ms = o->growth_stall_ms;
    f->wake_arg = c;
    f->read_req = 1; /* the first read */
    if (rd_kafka_conf_get(conf, "group.id", group, &size) == RD_KAFKA_CONF_OK)
        f->group = strdup(group);
    if (!f->profile || !f->group || uv_mutex_init(&f->mu) != 0) {
        free(f->profile);
        free(f->group);
        free(f);
        return rl_error_detail_set(RL_ENOMEM, "out of memory: the growth fence");
    }
    c->fence = f;
    int rc = rl__growth_fence_reader_start(f, conf);
    if (rc)
        rl__growth_fence_free(c);
    return rc;
}

void rl__growth_fence_free(rl_consumer_t *c)
{
    rl__growth_fence *f = c->fence;
    if (!f)
        return;
    rl__growth_fence_reader_stop(f);
    rl__growth_view_free(f->published);
    rl__growth_view_free(f->view);
    if (f->want)
        rd_kafka_topic_partition_list_destroy(f->want);
    if (f->answer)
        rd_kafka_topic_partition_list_destroy(f->answer);
    if (f->committed)
        rd_kafka_topic_partition_list_destroy(f->committed);
    uv_mutex_destroy(&f->mu);
    free(f->stalls);
    free(f->profile);
    free(f->group);
    free(f);
    c->fence = NULL;
}

/* --- lookups --- */

/* The partition's growths in the view, looked up again after each view taken and cached in
 * the partition meanwhile: the one that made q (from <= q < to), and the newest sealed one q
 * is an old partition of (q < from: its ring over `to` is where producers put keys since).
 * False when no read of the records succeeded yet. */
static bool look_up_growths(rl__growth_fence *f, rl__part *p)
{
    if (!f->view)
        return false;
    if (p->fence_gen == f->view_gen)
        return true;
    p->fence_gen = f->view_gen;
    p->fence_growth = p->late_growth = NULL;
    uint32_t q = (uint32_t)p->partition;
    for (size_t i = 0; i < f->view->n; i++) {
        const rl__growth *g = &f->view->v[i];
        if (strcmp(g->topic, p->topic->name) != 0)
            continue;
        if (g->from <= q && q < g->to)
            p->fence_growth = g;
        else if (q < g->from && g->state == RL__GROWTH_SEALED &&
                 (!p->late_growth || g->to > p->late_growth->to))
            p->late_growth = g;
    }
    return true;
}

/* The growth that made q, NULL when none did. */
static const rl__growth *growth_of_part(rl__growth_fence *f, rl__part *p)
{
    return look_up_growths(f, p) ? p->fence_growth : NULL;
}

/* The newest sealed growth q is an old partition of, NULL when none. */
static const rl__growth *late_growth_of(rl__growth_fence *f, rl__part *p)
{
    return look_up_growths(f, p) ? p->late_growth : NULL;
}

/* A message of old partition p at or above its growth point whose key the ring over the
 * growth's `to` puts elsewhere: a producer routed over the old count after the seal. It is
 * handled as any message of p (its key's later messages may have run already): counted and
 * reported once per assignment of p. */
static void watch_late(rl_consumer_t *c, rl__part *p, const rd_kafka_message_t *m)
{
    const rl__growth *g = late_growth_of(c->fence, p);
    uint32_t node, q = (uint32_t)p->partition;
    if (!g || m->offset < g->points[q] || !m->key || !m->key_len ||
        rl_ring_lookup(g->ring_to, m->key, m->key_len, &node) != 0 || node == q)
        return;
    c->stats.growth_late++;
    if (p->late_reported)
        return;
    p->late_reported = true;
    rl__consumer_error(c, RD_KAFKA_RESP_ERR__STATE,
                       "growth fence: %s [%u]: the message at offset %" PRId64
                       " (at or above the growth point %" PRId64 ") has a key the ring over %u "
                       "partitions puts in %u: a producer still routes over %u after the seal, "
                       "and that key's order across the growth is not kept (growth_late; "
                       "reported once per assignment)",
                       g->topic, (unsigned)q, m->offset, g->points[q], (unsigned)g->to,
                       (unsigned)node, (unsigned)g->from);
}

/* The group's committed offset of (topic, partition) in the last answer, -1 for none; false
 * when the answer did not name it or named an error (unknown). */
static bool committed_known(const rl__growth_fence *f, const char *topic, uint32_t partition,
                            int64_t *offset)
{
    const rd_kafka_topic_partition_t *e =
        f->committed ? rd_kafka_topic_partition_list_find(f->committed, topic, (int32_t)partition)
                     : NULL;
    *offset = e && !e->err && e->offset >= 0 ? e->offset : -1;
    return e && !e->err;
}

static int64_t committed_of(const rl__growth_fence *f, const char *topic, uint32_t partition)
{
    int64_t offset;
    committed_known(f, topic, partition, &offset);
    return offset;
}

/* Sealed, and the group has consumed source partition s up to its growth point. */
static bool released(const rl__growth_fence *f, const rl__growth *g, uint32_t s)
{
    if (g->state != RL__GROWTH_SEALED || s >= g->from)
        return g->state == RL__GROWTH_SEALED;
    return g->points[s] <= 0 || committed_of(f, g->topic, s) >= g->points[s];
}

/* --- the bound on a wait: old partitions whose commits stalled (growth_stall_ms) --- */

static rl__growth_stall *stall_find(const rl__growth_fence *f, const char *topic, uint32_t s)
{
    for (size_t i = 0; i < f->nstalls; i++)
        if (f->stalls[i].s == s && strcmp(f->stalls[i].topic, topic) == 0)
            return &f->stalls[i];
    return NULL;
}

/* Sealed, and source partition s stalled: its moved keys go on without their order. */
static bool stalled(const rl__growth_fence *f, const rl__growth *g, uint32_t s)
{
    if (g->state != RL__GROWTH_SEALED || s >= g->from)
        return false;
    const rl__growth_stall *e = stall_find(f, g->topic, s);
    return e && e->stalled && e->point == g->points[s]; /* this growth's wait, not an earlier */
}

/* Marks (topic, s) waited on now (update_want), made the first time with its clock stopped
 * until an answer names it. Without memory it is not made: no clock, so no release by stall. */
static void stall_waited(rl__growth_fence *f, const char *topic, uint32_t s, int64_t point)
{
    rl__growth_stall *e = stall_find(f, topic, s);
    if (!e) {
        if (f->nstalls == f->capstalls) {
            size_t cap = f->capstalls ? f->capstalls * 2 : 16;
            rl__growth_stall *grown = realloc(f->stalls, cap * sizeof *grown);
            if (!grown)
                return;
            f->stalls = grown;
            f->capstalls = cap;
        }
        e = &f->stalls[f->nstalls++];
        memset(e, 0, sizeof *e);
        snprintf(e->topic, sizeof e->topic, "%s", topic);
        e->s = s;
    }
    if (e->point != point) { /* new, or a later growth of the topic: a wait of its own */
        e->point = point;
        e->stalled = e->known = false;
    }
    e->waited = true;
}

/* After the committed offsets were read again (or at a tick): each waited-on partition's clock
 * starts again when its offset moved or is unknown; one that stayed put for stall_ms stalls
 * (reported once). True when one stalled now. */
static bool stall_look(rl_consumer_t *c, bool answered)
{
    rl__growth_fence *f = c->fence;
    uint64_t now = uv_now(c->loop);
    bool any = false;
    for (size_t i = 0; i < f->nstalls; i++) {
        rl__growth_stall *e = &f->stalls[i];
        if (answered) {
            int64_t off;
            bool known = committed_known(f, e->topic, e->s, &off);
            if (!known || !e->known || off != e->offset) {
                e->known = known;
                e->offset = off;
                e->since_ms = now;
            }
        }
        if (!f->stall_ms || e->stalled || !e->waited || !e->known ||
            now - e->since_ms < f->stall_ms)
            continue;
        e->stalled = true;
        any = true;
        rl__consumer_error(c, RD_KAFKA_RESP_ERR__TIMED_OUT,
                           "growth fence: %s [%u]: the group's committed offset (%" PRId64
                           ") has stayed below the growth point %" PRId64 " for %u ms: the "
                           "moved keys' messages waiting on it go on (growth_stall_ms), "
                           "their order across the growth is not kept",
                           e->topic, (unsigned)e->s, e->offset, e->point, (unsigned)f->stall_ms);
    }
    return any;
}

/* Held whole: no read of the records since its assignment, or its growth's record unusable. */
static bool held_whole(rl__growth_fence *f, rl__part *p)
{
    if (!f->view || p->fence_req > f->view->read_req)
        return true;
    const rl__growth *g = growth_of_part(f, p);
    return g && g->state == RL__GROWTH_UNUSABLE;
}

/* Every message of a partition held whole is kept in order, counted once each. */
static int block(rl_consumer_t *c, rl__part *p, const rd_kafka_message_t *m)
{
    if (m->offset > p->fence_counted) {
        p->fence_counted = m->offset;
        c->stats.growth_held++;
    }
    return RL__GROWTH_FENCE_BLOCK;
}

void rl__growth_fence_kept(rl_consumer_t *c, rl__part *p, const rd_kafka_message_t *m)
{
    if (held_whole(c->fence, p))
        block(c, p, m);
}

int rl__growth_fence_admit(rl_consumer_t *c, rl__part *p, const rd_kafka_message_t *m,
                           uint32_t *src)
{
    rl__growth_fence *f = c->fence;
    if (held_whole(f, p))
        return block(c, p, m);
    bool first = m->offset > p->fence_seen; /* counters count a message once */
    if (first) {
        p->fence_seen = m->offset;
        watch_late(c, p, m);
    }
    const rl__growth *g = growth_of_part(f, p);
    if (!g || g->state == RL__GROWTH_ABORTED)
        return RL__GROWTH_FENCE_PASS;
    uint32_t to_node, from_node;
    if (!m->key || !m->key_len || rl_ring_lookup(g->ring_to, m->key, m->key_len, &to_node) != 0 ||
        to_node != (uint32_t)p->partition ||
        rl_ring_lookup(g->ring_from, m->key, m->key_len, &from_node) != 0) {
        c->stats.growth_unrouted += first; /* placed by no ring: G1 says nothing about it */
        return RL__GROWTH_FENCE_PASS;
    }
    *src = from_node;
    const struct rl__growth_holds *h = p->holds;
    if (h && from_node < h->n && h->head[from_node])
        return RL__GROWTH_FENCE_HOLD; /* behind the earlier ones of (q, p) */
    if (released(f, g, from_node))
        return RL__GROWTH_FENCE_PASS;
    if (!stalled(f, g, from_node))
        return RL__GROWTH_FENCE_HOLD;
    c->stats.growth_released_by_stall += first;
    return RL__GROWTH_FENCE_PASS;
}

int rl__growth_fence_hold(rl_consumer_t *c, rl__part *p, rl__cjob *j, uint32_t src)
{
    const rl__growth *g = growth_of_part(c->fence, p);
    struct rl__growth_holds *h = p->holds;
    uint32_t n = g ? g->from : src + 1;
    if (n <= src)
        n = src + 1;
    if (!h || h->n < n) {
        struct rl__growth_holds *grown = h ? h : calloc(1, sizeof *grown);
        if (!grown)
            return RL_ENOMEM;
        rl__cjob **head = realloc(grown->head, n * sizeof *head);
        if (head)
            grown->head = head;
        rl__cjob **tail = head ? realloc(grown->tail, n * sizeof *tail) : NULL;
        if (tail)
            grown->tail = tail;
        if (!head || !tail) {
            if (!h) {
                free(grown->head);
                free(grown);
            }
            return RL_ENOMEM;
        }
        uint32_t old = h ? h->n : 0;
        memset(grown->head + old, 0, (n - old) * sizeof *head);
        memset(grown->tail + old, 0, (n - old) * sizeof *tail);
        grown->n = n;
        p->holds = h = grown;
    }
    j->fnext = NULL;
    j->fsrc = src;
    if (h->tail[src])
        h->tail[src]->fnext = j;
    else
        h->head[src] = j;
    h->tail[src] = j;
    h->count++;
    c->fence->held_now++;
    if (j->offset > p->fence_counted) { /* not when it was counted held whole before */
        p->fence_counted = j->offset;
        c->stats.growth_held++;
    }
    return 0;
}

/* Whether the queue of (q, s) may go: q no longer made by a growth that holds. */
static bool queue_free(const rl__growth_fence *f, const rl__growth *g, uint32_t s)
{
    if (!g || g->state == RL__GROWTH_ABORTED)
        return true;
    if (g->state == RL__GROWTH_UNUSABLE || g->state == RL__GROWTH_ANNOUNCED)
        return false;
    return released(f, g, s) || stalled(f, g, s);
}

static void release_part(rl_consumer_t *c, rl__part *p)
{
    struct rl__growth_holds *h = p->holds;
    const rl__growth *g = growth_of_part(c->fence, p);
    uint64_t now = uv_now(c->loop);
    for (uint32_t s = 0; s < h->n && h->count; s++) {
        if (!h->head[s] || !queue_free(c->fence, g, s))
            continue;
        bool by_stall = g && !released(c->fence, g, s);
        rl__cjob *j;
        while ((j = h->head[s])) {
            if (rl__dispatch_held(c, p, j) != 0)
                break; /* the lanes are full (or no token): first in its queue, tried again */
            h->head[s] = j->fnext;
            if (!h->head[s])
                h->tail[s] = NULL;
            h->count--;
            c->fence->held_now--;
            c->stats.growth_released++;
            c->stats.growth_released_by_stall += by_stall;
            c->stats.growth_hold_ms += now - j->taken_ms;
        }
    }
}

void rl__growth_fence_release(rl_consumer_t *c)
{
    if (!c->fence || !c->fence->held_now)
        return;
    for (uint32_t i = 0; i < c->ntopics; i++) {
        rl__topic *t = c->topics[i];
        for (int32_t k = 0; k < t->nparts; k++) {
            rl__part *p = t->parts[k];
            if (p && p->assigned && !p->revoking && p->holds && p->holds->count)
                release_part(c, p);
        }
    }
}

void rl__growth_fence_drop(rl_consumer_t *c, rl__part *p)
{
    struct rl__growth_holds *h = p->holds;
    if (!h)
        return;
    for (uint32_t s = 0; s < h->n; s++) {
        for (rl__cjob *j = h->head[s], *next; j; j = next) {
            next = j->fnext;
            rl__cjob_free(j); /* never dispatched: its offset is never completed */
        }
        h->head[s] = h->tail[s] = NULL;
    }
    if (c->fence)
        c->fence->held_now -= h->count;
    h->count = 0;
}

void rl__growth_fence_part_free(rl__part *p)
{
    if (!p->holds)
        return;
    free(p->holds->head);
    free(p->holds->tail);
    free(p->holds);
    p->holds = NULL;
}

void rl__growth_fence_assigned(rl_consumer_t *c, rl__part *p)
{
    rl__growth_fence *f = c->fence;
    uv_mutex_lock(&f->mu);
    p->fence_req = ++f->read_req; /* a read begun after this assignment */
    uv_mutex_unlock(&f->mu);
    p->fence_gen = 0;
    p->fence_counted = -1;
    p->fence_seen = -1;
    p->late_reported = false;
    p->fence_check_start = false;
}

int64_t rl__growth_fence_start(rl_consumer_t *c, rl__part *p, int64_t committed)
{
    if (committed >= 0)
        return committed;
    const rl__growth *g = growth_of_part(c->fence, p);
    if (g && g->state != RL__GROWTH_ABORTED)
        return RD_KAFKA_OFFSET_BEGINNING;
    p->fence_check_start = true; /* the read this assignment asked for may still say so */
    return committed;
}

/* A partition assigned without a committed offset, before the records said it is new: now
 * they do, and none of its messages was taken (all held whole), so it starts again at its
 * beginning, whatever auto.offset.reset chose. */
static void check_start(rl_consumer_t *c, rl__part *p)
{
    rl__growth_fence *f = c->fence;
    if (!p->fence_check_start || p->fence_req > f->view->read_req)
        return;
    p->fence_check_start = false;
    const rl__growth *g = growth_of_part(f, p);
    if (!g || g->state == RL__GROWTH_ABORTED || p->win.last_pushed >= 0)
        return;
    rl__msgq_clear(&p->pending);
    p->next_offset = -1;
    rl__part_resume(c, p);
    rl__part_seek(c, p, RD_KAFKA_OFFSET_BEGINNING);
}

/* Names what the new view says is wrong, once per record and reason. */
static void report_problems(rl_consumer_t *c, const rl__growth_view *old, const rl__growth_view *v)
{
    for (size_t i = 0; i < v->n; i++) {
        const rl__growth *g = &v->v[i];
        if (g->state != RL__GROWTH_UNUSABLE)
            continue;
        bool known = false;
        for (size_t k = 0; old && k < old->n && !known; k++)
            known =
                strcmp(old->v[k].key, g->key) == 0 && strcmp(old->v[k].problem, g->problem) == 0;
        if (!known)
            rl__consumer_error(c, RD_KAFKA_RESP_ERR__BAD_MSG,
                               "growth fence: %s: the partitions %u..%u of %s are held", g->problem,
                               (unsigned)g->from, (unsigned)g->to - 1, g->topic);
    }
}

/* The old partitions whose committed offsets would release something held. */
static void update_want(rl_consumer_t *c)
{
    rl__growth_fence *f = c->fence;
    rd_kafka_topic_partition_list_t *want = NULL;
    for (size_t i = 0; i < f->nstalls; i++)
        f->stalls[i].waited = false;
    for (uint32_t i = 0; f->held_now && i < c->ntopics; i++) {
        rl__topic *t = c->topics[i];
        for (int32_t k = 0; k < t->nparts; k++) {
            rl__part *p = t->parts[k];
            if (!p || !p->assigned || !p->holds || !p->holds->count)
                continue;
            const rl__growth *g = growth_of_part(f, p);
            if (!g || g->state != RL__GROWTH_SEALED)
                continue;
            for (uint32_t s = 0; s < p->holds->n && s < g->from; s++) {
                if (!p->holds->head[s] || released(f, g, s))
                    continue;
                stall_waited(f, t->name, s, g->points[s]);
                if (!want)
                    want = rd_kafka_topic_partition_list_new(8);
                if (!rd_kafka_topic_partition_list_find(want, t->name, (int32_t)s))
                    rd_kafka_topic_partition_list_add(want, t->name, (int32_t)s);
            }
        }
    }
    uv_mutex_lock(&f->mu);
    if (f->want)
        rd_kafka_topic_partition_list_destroy(f->want);
    f->want = want;
    uv_mutex_unlock(&f->mu);
}

void rl__growth_fence_poll(rl_consumer_t *c, bool tick)
{
    rl__growth_fence *f = c->fence;
    uv_mutex_lock(&f->mu);
    rl__growth_view *view = f->published;
    rd_kafka_topic_partition_list_t *answer = f->answer;
    f->published = NULL;
    f->answer = NULL;
    uint64_t errors = f->read_errors, runs = f->read_error_runs;
    char why[sizeof f->read_error];
    memcpy(why, f->read_error, sizeof why);
    uv_mutex_unlock(&f->mu);
    c->stats.growth_read_errors = errors;
    if (runs > f->reported_runs) {
        f->reported_runs = runs;
        rl__consumer_error(c, RD_KAFKA_RESP_ERR__FAIL,
                           "growth fence: %s: %s (retried every second)", why,
                           f->view ? "the records of the last good read stay in force"
                                   : "every partition stays held until a read succeeds");
    }
    if (answer) {
        if (f->committed)
            rd_kafka_topic_partition_list_destroy(f->committed);
        f->committed = answer;
    }
    if (view) {
        report_problems(c, f->view, view);
        rl__growth_view_free(f->view);
        f->view = view;
        f->view_gen++;
        c->stats.growth_records = view->n;
        for (uint32_t i = 0; i < c->ntopics; i++)
            for (int32_t k = 0; k < c->topics[i]->nparts; k++) {
                rl__part *p = c->topics[i]->parts[k];
                if (p && p->assigned && !p->revoking)
                    check_start(c, p);
            }
    }
    bool stall = (answer || tick) && stall_look(c, answer != NULL);
    if (view || answer || stall) {
        rl__growth_fence_release(c);
        if (view)
            rl__drain_all_pending(c); /* partitions held whole may go now */
    }
    if (tick || view || answer)
        update_want(c);
    c->stats.growth_waiting = f->held_now;
}
