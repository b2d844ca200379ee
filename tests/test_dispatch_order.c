/* SPDX-License-Identifier: BSD-2-Clause */
/* The order checker, over every ring profile the dispatcher accepts and every way jobs run (a
 * worker per lane, a shared pool, asynchronous handlers, one shared worker fed by the loop
 * thread as well): submitter threads (and the loop), many keys with one hot key, random handler
 * failures (retried) and dead letters, lane additions and removals (down to no lane and back),
 * take_tag + wait_tag of random tags, small max_jobs and lane capacities so that blocking
 * submitters wait on both, statistics and wait_tag from another thread, and a close (both modes, in
 * turn) while submitters are still blocked.
 *
 * The checker knows only the public header's promises, nothing of lanes, fences or queues:
 *  - handler: a key is never in two handlers at once (an atomic flag per key), and a key's
 *    handler calls go up in submission order (a retry repeats the same job; jobs handed back
 *    are skipped, never run out of turn);
 *  - on_done: every accepted job ends exactly once; a key's jobs end in submission order, with
 *    the header's one exception: jobs handed back by take_tag may end before one job of their
 *    key that is still in its handler (one gap, closed when that job ends); DONE only for a job
 *    whose handler succeeded, DEAD only after max_attempts failures, RETURNED only for a job
 *    never completed;
 *  - take_tag: for each key of the tag, the jobs it hands back are every job of the key from
 *    the first one handed back up to the last one submitted before the call (a job that had
 *    not started when take_tag was called cannot be left behind while a later one is taken);
 *  - take_tag + wait_tag (both 0): every job of the tag submitted before them has ended;
 *  - close: blocked submitters wake with RL_ECLOSED; every accepted job ends before close_cb.
 * A hang (a lost wake-up) is caught by a watchdog that fails the run after WATCHDOG_S seconds
 * without progress, naming what was waiting.
 *
 * Default: a short run per profile. `--long`: at least 1,000 lane changes over the profiles
 * (CTest: test_dispatch_stress). Built with a sanitizer the job counts shrink, the number of
 * lane changes does not. `--seconds N [--profile P]`: the soak (tests/soak/soak.sh), one
 * profile (default jump, which moves the most keys on a change), a lane change every 50 ms for
 * N seconds, with a line of counts and resident memory every 10 seconds. `--base-lanes N`: N
 * lanes "base-<i>", every profile that takes that many, removes aimed at the lanes of random
 * keys; `--point-lanes M`: M lanes instead for the profiles that place points, whose every
 * change costs a build of that many lanes (CTest's test_dispatch_order_many_lanes: 65,536 and
 * 8,192; 4,096 under sanitizers). */
#define _POSIX_C_SOURCE 200809L
#include "dispatch_util.h"

#include <limits.h>
#include <sched.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SLOW_BUILD 1
#else
#define SLOW_BUILD 0
#endif

#define KEYS 500
#define HOT_KEY 0
#define TAGS 16
#define SUBMITTERS 3
#define LANE_POOL 8
#define MAX_ATTEMPTS 4
#define WATCHDOG_S 120
#define BARRIER_KEY KEYS /* the job that holds the close open until the submitters are gone */

typedef struct job_rec {
    int key;
    int seq;
    atomic_bool completed; /* its handler returned 0 */
    atomic_uint calls;     /* handler calls */
} job_rec;

#define JOB_BATCH_MAX 8 /* the batch modes' batch_max */

/* An asynchronous attempt waiting for a completer thread: one job, or a batch (r[0..n-1] were
 * started, the last one failed when fail; a batch of `len` jobs in all). */
typedef struct pending {
    uint64_t ticket;
    job_rec *r[JOB_BATCH_MAX];
    size_t n, len;
    bool fail;
} pending;

typedef struct key_state {
    atomic_int inside;       /* a handler of the key is running */
    atomic_int last_started; /* seq of the last handler call, -1 before the first */
    atomic_int submitted;    /* jobs accepted so far (the next seq) */
    /* loop thread only */
    int next_end;   /* every job below it has ended, but for the gap */
    bool gap_open;  /* next_end (up to gap_first - 1: a batch) is still in its handler while
                       later ones were handed back */
    int gap_first;  /* with a gap: the first job that ended ahead */
    int ahead_next; /* with a gap: the next seq expected to end after it */
    int barrier, take_min, take_max, take_n;
} key_state;

typedef struct world {
    const char *profile;
    uv_loop_t loop;
    uv_idle_t idle;
    rl_dispatcher_t *d;
    int target_changes;
    uint64_t target_jobs;
    int close_mode;

    key_state keys[KEYS];
    atomic_int violations; /* handler-side */
    int done_violations;   /* on_done-side (loop thread) */
    int take_violations;
    char first_violation[256];
    uv_mutex_t msg_mu;

    atomic_uint_fast64_t failures, progress, submitted_total, ended;
    uint64_t ended_by[3];
    atomic_int running; /* submitter and watcher threads still calling the dispatcher */
    atomic_bool close_called, barrier_started;
    bool taking;
    int takes, taken_jobs;

    uint64_t rng;
    bool lane_in[LANE_POOL];
    int lanes_in;
    int changes, adds, removes, empty_rounds, busy_refusals;
    bool shrinking;
    uint64_t max_change_ns;
    uint64_t rate_limited; /* the dispatcher's count at the close */
    bool closing;
    int closed;
    job_rec *barrier;
    int mode;    /* how jobs run: a mode_names entry */
    int gap_max; /* jobs of one key in flight at once: 1, JOB_BATCH_MAX in the batch modes */
    atomic_uint_fast64_t batches, batched_jobs; /* batch modes: handler calls with more than
                                                   one job, and their jobs */
    /* MODE_LOOPFED: the loop thread is submitter 0 (from on_done and its idle turns) */
    bool loop_feeds;
    uint64_t loop_rng;

    /* asynchronous mode: attempts waiting for a completer thread */
    uv_mutex_t pend_mu;
    uv_cond_t pend_cv;
    pending *pend;
    size_t npend, pend_head, pend_cap;
    bool completers_stop;
    _Atomic uint64_t barrier_ticket;

    /* --base-lanes: the lanes are "base-<i>"; a shadow ring made with the same calls as the
     * dispatcher's (public API) names a key's lane, so that removes hit lanes with jobs */
    rl_ring_t *shadow;
    char **base_names;
    const char *gone[64]; /* removed lanes, added back last out first */
    int ngone;

    /* the soak: run for soak_ns, report every 10 s */
    uint64_t soak_ns, start_ns, next_change_ns;
    uv_timer_t report;
} world;

static long soak_seconds; /* 0: the test runs; else the soak's length */
static int base_lanes;    /* --base-lanes N: N lanes "base-<i>" instead of the churn lanes */
static int point_lanes;   /* --point-lanes M: M of them instead for the point profiles */
/* test_order_with_rate_limit: the dispatcher's max_rate and max_burst (0: no limit). */
static double rate_limit;
static uint32_t rate_burst;
static const char *soak_profile = "jump";
static int soak_mode; /* --mode dedicated|pool|async|loopfed */

static void violation(world *w, const char *fmt, int key, int seq, int other)
{
    uv_mutex_lock(&w->msg_mu);
    if (!w->first_violation[0])
        snprintf(w->first_violation, sizeof w->first_violation, fmt, key, seq, other);
    uv_mutex_unlock(&w->msg_mu);
}

/* Resident memory in KiB, from /proc (0 where there is none). */
static long rss_kib(void)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static void on_report(uv_timer_t *t)
{
    world *w = t->data;
    uint64_t now = uv_hrtime(), jobs = atomic_load(&w->submitted_total);
    double secs = (double)(now - w->start_ns) / 1e9;
    printf("soak t=%.0fs jobs=%llu rate=%.0f/s lanes=%d changes=%d failures=%llu "
           "violations=%d rss_kib=%ld\n",
           secs, (unsigned long long)jobs, (double)jobs / secs, w->lanes_in, w->changes,
           (unsigned long long)atomic_load(&w->failures),
           atomic_load(&w->violations) + w->done_violations + w->take_violations, rss_kib());
    fflush(stdout);
}

static const char *lane_name(int i)
{
    static const char *names[LANE_POOL] = {"lane-0", "lane-1", "lane-2", "lane-3",
                                           "lane-4", "lane-5", "lane-6", "lane-7"};
    return names[i];
}

/* Keys start with four hex digits: the turnstone profile reads its bucket from them. */
static int key_name(int key, char *buf, size_t cap)
{
    return snprintf(buf, cap, "%04x-key-%d", (unsigned)key * 131u % 65536u, key);
}

/* The start of an attempt: the checks, and whether it fails. `held`: a later job of a batch,
 * whose key its first job took. */
static bool attempt_start_in(world *w, job_rec *r, const rl_dispatch_job *job, bool held)
{
    atomic_fetch_add(&r->calls, 1);
    key_state *k = &w->keys[r->key];
    if (!held && atomic_exchange(&k->inside, 1) != 0) {
        atomic_fetch_add(&w->violations, 1);
        violation(w, "key %d: job %d started while another job of the key was in its handler",
                  r->key, r->seq, 0);
    }
    int last = atomic_load(&k->last_started);
    bool retry = job->attempts > 0;
    if (retry ? r->seq != last : r->seq <= last) {
        atomic_fetch_add(&w->violations, 1);
        violation(w, "key %d: job %d started after job %d", r->key, r->seq, last);
    }
    atomic_store(&k->last_started, r->seq);
    uint64_t h =
        rl_mix64(((uint64_t)r->key << 32) ^ (uint64_t)r->seq ^ ((uint64_t)job->attempts << 56));
    /* About 1 call in 64 fails and is retried; 1 job in 2,048 fails every attempt (dead). */
    bool dead = rl_mix64(((uint64_t)r->key << 32) ^ (uint64_t)r->seq) % 2048 == 7;
    return dead || (h % 64 == 0 && job->attempts + 1 < MAX_ATTEMPTS);
}

static bool attempt_start(world *w, job_rec *r, const rl_dispatch_job *job)
{
    return attempt_start_in(w, r, job, false);
}

/* The end of an attempt (before the dispatcher hears of it); `release`: the key is let go (a
 * lone job, or the last job of a batch the handler runs). */
static void attempt_end_in(world *w, job_rec *r, bool fail, bool release)
{
    if (fail)
        atomic_fetch_add(&w->failures, 1);
    else
        atomic_store(&r->completed, true);
    if (release)
        atomic_store(&w->keys[r->key].inside, 0);
}

static void attempt_end(world *w, job_rec *r, bool fail)
{
    attempt_end_in(w, r, fail, true);
}

/* A batch handed to a handler: one key, consecutive jobs of it (each job's own order is checked
 * as it starts). */
static void check_batch(world *w, rl_dispatch_job *const *jobs, size_t n)
{
    const job_rec *first = jobs[0]->data;
    if (n > JOB_BATCH_MAX) {
        atomic_fetch_add(&w->violations, 1);
        violation(w, "key %d: job %d came in a batch of %d", first->key, first->seq, (int)n);
    }
    for (size_t i = 1; i < n; i++) {
        const job_rec *r = jobs[i]->data;
        const job_rec *prev = jobs[i - 1]->data;
        if (r->key != first->key || r->seq <= prev->seq) {
            atomic_fetch_add(&w->violations, 1);
            violation(w, "key %d: job %d in a batch after key %d's job", r->key, r->seq, prev->key);
        }
    }
    if (n > 1) {
        atomic_fetch_add(&w->batches, 1);
        atomic_fetch_add(&w->batched_jobs, n);
    }
}

/* Blocking: a worker thread, a dedicated one or one of a shared pool. */
static int handler(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    world *w = rl_dispatch_get_data(d);
    job_rec *r = job->data;
    if (r->key == BARRIER_KEY) {
        /* Close was called after this started: hold it open until no thread calls any more. */
        atomic_fetch_add(&r->calls, 1);
        atomic_store(&w->barrier_started, true);
        while (!atomic_load(&w->close_called) || atomic_load(&w->running) > 0)
            sched_yield();
        atomic_store(&r->completed, true);
        return 0;
    }
    bool fail = attempt_start(w, r, job);
    if (rl_mix64((uint64_t)r->seq ^ ((uint64_t)r->key << 40)) % 97 == 1)
        sched_yield(); /* let other lanes interleave */
    attempt_end(w, r, fail);
    return fail ? -1 : 0;
}

/* Blocking batches: the key is taken once for the batch; its jobs run in order up to the first
 * failure, which ends the call (the jobs after it come again behind it, so their statuses are
 * left as they are: the dispatcher must not read them). */
static int batch_handler(rl_dispatcher_t *d, rl_dispatch_job *const *jobs, size_t n, int *status)
{
    world *w = rl_dispatch_get_data(d);
    if (((job_rec *)jobs[0]->data)->key == BARRIER_KEY && n == 1)
        return handler(d, jobs[0]);
    check_batch(w, jobs, n);
    for (size_t i = 0; i < n; i++) {
        job_rec *r = jobs[i]->data;
        bool fail = attempt_start_in(w, r, jobs[i], i > 0);
        if (rl_mix64((uint64_t)r->seq ^ ((uint64_t)r->key << 40)) % 97 == 1)
            sched_yield();
        attempt_end_in(w, r, fail, fail || i + 1 == n);
        if (fail) {
            if (i == 0 && r->seq % 2)
                return -1; /* the whole batch's status: the first job's failure */
            status[i] = -1;
            return 0;
        }
    }
    return 0;
}

/* Asynchronous: started on the loop; a third of the attempts complete at once (inside the
 * handler), the rest on one of the completer threads, in the order they were started. */
static void async_handler(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    world *w = rl_dispatch_get_data(d);
    job_rec *r = job->data;
    if (r->key == BARRIER_KEY) { /* completed by a completer once the threads have stopped */
        atomic_fetch_add(&r->calls, 1);
        atomic_store(&w->barrier_ticket, job->ticket);
        atomic_store(&w->barrier_started, true);
        return;
    }
    bool fail = attempt_start(w, r, job);
    if (rl_mix64((uint64_t)r->seq ^ ((uint64_t)r->key << 40)) % 3 == 0) {
        attempt_end(w, r, fail);
        int rc = rl_dispatch_complete(d, job->ticket, fail ? -1 : 0);
        if (rc != 0)
            fail_msg("complete inside the handler: %s", rl_err_name(rc));
        return;
    }
    uv_mutex_lock(&w->pend_mu);
    if (w->npend == w->pend_cap) {
        w->pend_cap = w->pend_cap ? w->pend_cap * 2 : 1024;
        w->pend = realloc(w->pend, w->pend_cap * sizeof *w->pend);
        assert_non_null(w->pend);
    }
    w->pend[w->npend++] = (pending){job->ticket, {r}, 1, 1, fail};
    uv_cond_signal(&w->pend_cv);
    uv_mutex_unlock(&w->pend_mu);
}

/* Ends a started batch: its jobs' ends (the key let go with the last one started), then its
 * completion, one status per job (rl_dispatch_complete_batch) or, when it can say the same,
 * one for the batch (rl_dispatch_complete). */
static void complete_pending(world *w, const pending *p)
{
    int status[JOB_BATCH_MAX] = {0};
    for (size_t i = 0; i < p->n; i++)
        attempt_end_in(w, p->r[i], p->fail && i + 1 == p->n, i + 1 == p->n);
    if (p->fail)
        status[p->n - 1] = -1;
    int rc;
    if (p->len == 1 || (!p->fail && p->ticket % 2) || (p->fail && p->n == 1 && p->ticket % 2))
        rc = rl_dispatch_complete(w->d, p->ticket, p->fail ? -1 : 0);
    else
        rc = rl_dispatch_complete_batch(w->d, p->ticket, status, p->len);
    if (rc != 0) {
        atomic_fetch_add(&w->violations, 1);
        violation(w, "complete: %d (key %d, job %d)", rc, p->r[0]->key, p->r[0]->seq);
    }
}

/* Asynchronous batches: started on the loop up to the first failure, completed as the
 * asynchronous jobs are (at once for a third of them, else by a completer thread). */
static void async_batch_handler(rl_dispatcher_t *d, rl_dispatch_job *const *jobs, size_t n)
{
    world *w = rl_dispatch_get_data(d);
    if (((job_rec *)jobs[0]->data)->key == BARRIER_KEY && n == 1) {
        async_handler(d, jobs[0]);
        return;
    }
    check_batch(w, jobs, n);
    pending p = {jobs[0]->ticket, {0}, 0, n, false};
    for (size_t i = 0; i < n && i < JOB_BATCH_MAX && !p.fail; i++) {
        p.r[p.n++] = jobs[i]->data;
        p.fail = attempt_start_in(w, jobs[i]->data, jobs[i], i > 0);
    }
    if (rl_mix64(p.ticket) % 3 == 0) {
        complete_pending(w, &p);
        return;
    }
    uv_mutex_lock(&w->pend_mu);
    if (w->npend == w->pend_cap) {
        w->pend_cap = w->pend_cap ? w->pend_cap * 2 : 1024;
        w->pend = realloc(w->pend, w->pend_cap * sizeof *w->pend);
        assert_non_null(w->pend);
    }
    w->pend[w->npend++] = p;
    uv_cond_signal(&w->pend_cv);
    uv_mutex_unlock(&w->pend_mu);
}

static void completer_thread(void *arg)
{
    world *w = arg;
    uv_mutex_lock(&w->pend_mu);
    while (!w->completers_stop) {
        if (w->pend_head == w->npend) {
            w->pend_head = w->npend = 0;
            /* The barrier: completed once close was called and no other thread calls. */
            uint64_t bt = atomic_load(&w->barrier_ticket);
            if (bt && atomic_load(&w->close_called) && atomic_load(&w->running) == 0 &&
                atomic_compare_exchange_strong(&w->barrier_ticket, &bt, 0)) {
                uv_mutex_unlock(&w->pend_mu);
                w->barrier->completed = true;
                int rc = rl_dispatch_complete(w->d, bt, 0);
                if (rc != 0)
                    fail_msg("complete the barrier: %s", rl_err_name(rc));
                uv_mutex_lock(&w->pend_mu);
                continue;
            }
            uv_cond_timedwait(&w->pend_cv, &w->pend_mu, 1000000); /* 1 ms: the barrier */
            continue;
        }
        pending p = w->pend[w->pend_head++];
        uv_mutex_unlock(&w->pend_mu);
        if (rl_mix64(p.ticket) % 7 == 0)
            sched_yield();
        complete_pending(w, &p);
        uv_mutex_lock(&w->pend_mu);
    }
    uv_mutex_unlock(&w->pend_mu);
}

/* The order of one key's on_done calls (see the top of the file). */
static void check_end(world *w, key_state *k, const job_rec *r, int outcome)
{
    int s = r->seq;
    if (s == k->next_end) {
        k->next_end = s + 1;
        if (k->gap_open && k->next_end == k->gap_first) {
            k->next_end = k->ahead_next;
            k->gap_open = false;
        }
    } else if (s > k->next_end && outcome == RL_DISPATCH_RETURNED &&
               (k->gap_open ? s == k->ahead_next : s - k->next_end <= w->gap_max)) {
        /* next_end (a batch: up to s - 1) is still in its handler: the header's exception */
        if (!k->gap_open)
            k->gap_first = s;
        k->gap_open = true;
        k->ahead_next = s + 1;
    } else {
        w->done_violations++;
        violation(w, "key %d: job %d ended when job %d was the next to end", r->key, s,
                  k->next_end);
    }
    bool completed = atomic_load(&r->completed);
    unsigned calls = atomic_load(&r->calls);
    bool ok = outcome == RL_DISPATCH_DONE       ? completed
              : outcome == RL_DISPATCH_DEAD     ? !completed && calls == MAX_ATTEMPTS
              : outcome == RL_DISPATCH_RETURNED ? !completed
                                                : false;
    if (!ok) {
        w->done_violations++;
        violation(w, "key %d: job %d ended with outcome %d against its handler calls", r->key, s,
                  outcome);
    }
}

static void loop_feed(world *w);

static void on_done(rl_dispatcher_t *d, rl_dispatch_job *job, int outcome)
{
    world *w = rl_dispatch_get_data(d);
    job_rec *r = job->data;
    if (outcome >= 0 && outcome <= 2)
        w->ended_by[outcome]++;
    if (r->key != BARRIER_KEY) {
        key_state *k = &w->keys[r->key];
        check_end(w, k, r, outcome);
        if (w->taking && outcome == RL_DISPATCH_RETURNED) {
            if (k->take_n == 0 || r->seq < k->take_min)
                k->take_min = r->seq;
            if (k->take_n == 0 || r->seq > k->take_max)
                k->take_max = r->seq;
            k->take_n++;
        }
    }
    atomic_fetch_add(&w->ended, 1);
    atomic_fetch_add(&w->progress, 1);
    free(r);
    loop_feed(w); /* from inside on_done, as a program feeding the dispatcher from its loop */
}

static void on_closed(rl_dispatcher_t *d)
{
    world *w = rl_dispatch_get_data(d);
    w->closed++;
}

/* take_tag and wait_tag of one tag, checked against what was submitted before them. */
static void take_and_wait(world *w, int64_t tag)
{
    for (int key = (int)tag; key < KEYS; key += TAGS) {
        key_state *k = &w->keys[key];
        k->barrier = atomic_load(&k->submitted);
        k->take_n = 0;
    }
    size_t n = 0;
    w->taking = true;
    assert_rl_ok(rl_dispatch_take_tag(w->d, tag, &n));
    w->taking = false;
    w->takes++;
    w->taken_jobs += (int)n;
    for (int key = (int)tag; key < KEYS; key += TAGS) {
        key_state *k = &w->keys[key];
        if (k->take_n &&
            (k->take_max - k->take_min + 1 != k->take_n || k->take_max + 1 < k->barrier)) {
            w->take_violations++;
            violation(w, "key %d: take_tag handed back from job %d but left job %d behind", key,
                      k->take_min, k->barrier - 1);
        }
    }
    assert_rl_ok(rl_dispatch_wait_tag(w->d, tag, UINT64_MAX));
    for (int key = (int)tag; key < KEYS; key += TAGS) {
        key_state *k = &w->keys[key];
        if (k->gap_open || k->next_end < k->barrier) {
            w->take_violations++;
            violation(w, "key %d: after take_tag and wait_tag, job %d (of %d) had not ended", key,
                      k->next_end, k->barrier);
        }
    }
}

typedef struct submitter {
    world *w;
    int id;
} submitter;

/* A key of submitter `id` (k % SUBMITTERS == id; thread 0 owns the hot key too). */
static int pick_key(int id, uint64_t *rng)
{
    int own = (KEYS - id + SUBMITTERS - 1) / SUBMITTERS;
    if (id == 0 && test_rand(rng) % 4 == 0)
        return HOT_KEY;
    return id + SUBMITTERS * (int)(test_rand(rng) % (uint64_t)own);
}

/* A job record for the key's job `seq` (the dispatcher's once accepted: on_done frees it). */
static job_rec *new_job(int key, int seq)
{
    job_rec *r = calloc(1, sizeof *r);
    assert_non_null(r);
    r->key = key;
    r->seq = seq;
    return r;
}

/* The key's job `seq` was accepted: counted by every submitter alike. */
static void accepted(world *w, key_state *k, int seq)
{
    atomic_store(&k->submitted, seq + 1);
    atomic_fetch_add(&w->submitted_total, 1);
    atomic_fetch_add(&w->progress, 1);
}

/* One rl_dispatch_submit_many of 1..BATCH_MAX items over the thread's keys (a key may come more
 * than once; over 64 items, the call works in more than one chunk). Checks its promise: a key's
 * queued items are the first of its items. False once the dispatcher answers RL_ECLOSED. */
#define BATCH_MAX 150
static bool submit_batch(world *w, int id, uint64_t *rng)
{
    rl_dispatch_item items[BATCH_MAX];
    int keys[BATCH_MAX], status[BATCH_MAX], next_seq[BATCH_MAX];
    char names[BATCH_MAX][48];
    size_t m = 1 + (size_t)(test_rand(rng) % BATCH_MAX);
    for (size_t i = 0; i < m; i++) {
        int key = keys[i] = pick_key(id, rng);
        int seq = atomic_load(&w->keys[key].submitted);
        for (size_t k = 0; k < i; k++)
            seq += keys[k] == key; /* its earlier items in this batch come first */
        next_seq[i] = seq;
        job_rec *r = new_job(key, seq);
        int len = key_name(key, names[i], sizeof names[i]);
        items[i] = (rl_dispatch_item){names[i], (size_t)len, r, key % TAGS};
    }
    size_t queued = 0;
    int rc = rl_dispatch_submit_many(w->d, items, m, status, &queued);
    size_t counted = 0;
    bool open = true;
    for (size_t i = 0; i < m; i++) {
        key_state *k = &w->keys[keys[i]];
        if (status[i] == 0) {
            if (atomic_load(&k->submitted) != next_seq[i]) {
                atomic_fetch_add(&w->violations, 1);
                violation(w, "submit_many: key %d queued item %d while its item %d was refused",
                          keys[i], next_seq[i], atomic_load(&k->submitted));
            }
            accepted(w, k, next_seq[i]);
            counted++;
            continue;
        }
        free(items[i].data); /* not queued: still ours */
        if (status[i] == RL_ECLOSED)
            open = false;
        else if (status[i] != RL_EAGAIN && status[i] != RL_ESTATE)
            fail_msg("submit_many: %s", rl_err_name(status[i]));
    }
    if (counted != queued || (rc == 0) != (queued == m)) {
        atomic_fetch_add(&w->violations, 1);
        violation(w, "submit_many: %d queued by status, %d by count, answer %d", (int)counted,
                  (int)queued, rc);
    }
    if (queued < m)
        sched_yield();
    return open;
}

/* Submits until the dispatcher answers RL_ECLOSED; then makes no call again. */
static void submit_thread(void *arg)
{
    submitter *s = arg;
    world *w = s->w;
    uint64_t rng = 0x5eed0000u + (uint64_t)s->id;
    uint64_t n = 0;
    for (bool open = true; open;) {
        if (n++ % 8 == 7) { /* one call in 8 is a batch */
            open = submit_batch(w, s->id, &rng);
            continue;
        }
        int key = pick_key(s->id, &rng);
        key_state *k = &w->keys[key];
        int seq = atomic_load(&k->submitted);
        job_rec *r = new_job(key, seq);
        char name[48];
        int len = key_name(key, name, sizeof name);
        int rc;
        do {
            if (n % 5 == 0)
                rc = rl_dispatch_try_submit(w->d, name, (size_t)len, r, key % TAGS);
            else
                rc = rl_dispatch_submit(w->d, name, (size_t)len, r, key % TAGS, -1);
            if (rc == RL_EAGAIN || rc == RL_ESTATE) /* full, or no lane for a moment */
                sched_yield();
        } while (rc == RL_EAGAIN || rc == RL_ESTATE);
        if (rc == RL_ECLOSED) {
            free(r);
            open = false;
        } else if (rc != 0) {
            fail_msg("submit: %s", rl_err_name(rc));
        } else {
            accepted(w, k, seq);
        }
    }
    atomic_fetch_sub(&w->running, 1);
}

/* MODE_LOOPFED: the loop thread submits for submitter 0's keys (the hot key among them), one
 * call at a time and never waiting: try_submit, or now and then submit_many. Stops at
 * RL_ECLOSED. */
static void loop_feed(world *w)
{
    if (!w->loop_feeds)
        return;
    if (test_rand(&w->loop_rng) % 8 == 7) {
        w->loop_feeds = submit_batch(w, 0, &w->loop_rng);
        return;
    }
    int key = pick_key(0, &w->loop_rng);
    key_state *k = &w->keys[key];
    int seq = atomic_load(&k->submitted);
    job_rec *r = new_job(key, seq);
    char name[48];
    int len = key_name(key, name, sizeof name);
    int rc = rl_dispatch_try_submit(w->d, name, (size_t)len, r, key % TAGS);
    if (rc != 0) {
        free(r);
        if (rc == RL_ECLOSED)
            w->loop_feeds = false;
        else if (rc != RL_EAGAIN && rc != RL_ESTATE)
            fail_msg("loop submit: %s", rl_err_name(rc));
        return;
    }
    accepted(w, k, seq);
}

/* Statistics and wait_tag from a thread that is not the loop, until close has been called. */
static void watch_thread(void *arg)
{
    world *w = arg;
    uint64_t rng = 77;
    while (!atomic_load(&w->close_called)) {
        char buf[2048];
        size_t need;
        int rc = rl_dispatch_stats_json(w->d, buf, sizeof buf, &need);
        assert_true(rc == 0 || rc == RL_ERANGE);
        rc = rl_dispatch_wait_tag(w->d, (int64_t)(test_rand(&rng) % TAGS), 1);
        assert_true(rc == 0 || rc == RL_ETIMEDOUT);
        uv_sleep(1);
    }
    atomic_fetch_sub(&w->running, 1);
}

/* Fails the run when nothing ends, is submitted or changes for WATCHDOG_S seconds. */
static void watchdog_thread(void *arg)
{
    world *w = arg;
    uint64_t last = UINT64_MAX;
    int still = 0; /* 50 ms ticks without progress */
    while (!atomic_load(&w->barrier_started) || atomic_load(&w->running) > 0) {
        uv_sleep(50);
        uint64_t p = atomic_load(&w->progress);
        still = p == last ? still + 1 : 0;
        last = p;
        if (still >= WATCHDOG_S * 20) {
            fprintf(stderr,
                    "order check [%s]: no progress for %d s (a lost wake-up?): %llu submitted, "
                    "%llu ended, %d threads still calling, close called: %d\n",
                    w->profile, WATCHDOG_S, (unsigned long long)atomic_load(&w->submitted_total),
                    (unsigned long long)atomic_load(&w->ended), atomic_load(&w->running),
                    (int)atomic_load(&w->close_called));
            abort();
        }
    }
}

/* --base-lanes: removes the lane of a random key (it likely holds jobs), or adds back the
 * lane removed last; the shadow ring makes the same change. */
static void change_base_lanes(world *w, uint64_t x)
{
    rl_ring_t *next;
    if (w->ngone == 64 || (w->ngone > 0 && x % 3 == 0)) {
        const char *name = w->gone[--w->ngone];
        rl_member m = {.name = name, .weight = 1};
        assert_rl_ok(rl_dispatch_add_lane(w->d, name));
        assert_rl_ok(rl_ring_add(w->shadow, &m, &next));
        w->lanes_in++;
        w->adds++;
    } else {
        char key[48];
        int len = key_name((int)(x % KEYS), key, sizeof key);
        uint32_t node;
        assert_rl_ok(rl_ring_lookup(w->shadow, key, (size_t)len, &node));
        int i = atoi(rl_ring_node_name(w->shadow, node) + strlen("base-"));
        assert_true(i >= 0 && i < base_lanes);
        const char *name = w->base_names[i];
        assert_rl_ok(rl_dispatch_remove_lane(w->d, name));
        assert_rl_ok(rl_ring_remove(w->shadow, name, &next));
        w->gone[w->ngone++] = name;
        w->lanes_in--;
        w->removes++;
    }
    rl_ring_free(w->shadow);
    w->shadow = next;
}

/* One random membership change (and now and then a wrong one, which must change nothing). */
static void change_lanes(world *w)
{
    uint64_t x = test_rand(&w->rng);
    if (base_lanes) {
        change_base_lanes(w, x);
        w->changes++;
        atomic_fetch_add(&w->progress, 1);
        if (x % 5 == 0)
            take_and_wait(w, (int64_t)(x % TAGS));
        return;
    }
    if (w->lanes_in == 1 && x % 3 == 0) {
        /* The last lane: refused while it holds jobs (nothing lost), else gone until the
         * next change adds one; submitters get RL_ESTATE meanwhile. */
        for (int i = 0; i < LANE_POOL; i++) {
            if (!w->lane_in[i])
                continue;
            int rc = rl_dispatch_remove_lane(w->d, lane_name(i));
            assert_true(rc == 0 || rc == RL_EBUSY);
            w->busy_refusals += rc == RL_EBUSY;
            if (rc == 0) {
                w->lane_in[i] = false;
                w->lanes_in = 0;
                w->removes++;
                w->changes++;
                w->empty_rounds++;
            }
            return;
        }
    }
    /* Now and then a run of removals down to one lane (and, above, to none). */
    if (x % 23 == 0)
        w->shrinking = true;
    if (w->lanes_in <= 1)
        w->shrinking = false;
    bool add = !w->shrinking && (w->lanes_in <= 1 || (w->lanes_in < 6 && x % 2 == 0));
    int pick = (int)((x >> 8) % LANE_POOL);
    while (w->lane_in[pick] == add)
        pick = (pick + 1) % LANE_POOL;
    if (x % 17 == 0 && w->lanes_in > 0) {
        for (int i = 0; i < LANE_POOL; i++) {
            if (w->lane_in[i]) {
                assert_int_equal(rl_dispatch_add_lane(w->d, lane_name(i)), RL_EDUPNAME);
                break;
            }
        }
        for (int i = 0; i < LANE_POOL; i++) {
            if (!w->lane_in[i]) {
                assert_int_equal(rl_dispatch_remove_lane(w->d, lane_name(i)), RL_ENOENT);
                break;
            }
        }
    }
    if (add) {
        assert_rl_ok(rl_dispatch_add_lane(w->d, lane_name(pick)));
        w->lanes_in++;
        w->adds++;
    } else {
        assert_rl_ok(rl_dispatch_remove_lane(w->d, lane_name(pick)));
        w->lanes_in--;
        w->removes++;
    }
    w->lane_in[pick] = add;
    w->changes++;
    atomic_fetch_add(&w->progress, 1);
    if (x % 5 == 0) /* a revoke: hand back a tag's queued jobs and wait for its running ones */
        take_and_wait(w, (int64_t)(x % TAGS));
}

/* Starts the close: first a job whose handler holds the close open until every other thread
 * has stopped calling (the header's rule: no call may begin once close_cb has). */
static void start_close(world *w)
{
    if (!w->barrier) {
        if (w->lanes_in == 0) {
            change_lanes(w); /* the barrier job needs a lane */
            return;
        }
        job_rec *r = calloc(1, sizeof *r);
        assert_non_null(r);
        r->key = BARRIER_KEY;
        char name[48];
        int len = key_name(BARRIER_KEY, name, sizeof name);
        int rc = rl_dispatch_try_submit(w->d, name, (size_t)len, r, TAGS);
        if (rc == RL_EAGAIN) {
            free(r);
            return; /* full: try again on the next turn of the loop */
        }
        assert_rl_ok(rc);
        w->barrier = r;
    }
    if (!atomic_load(&w->barrier_started))
        return;
    rl_dispatch_stats s;
    assert_rl_ok(rl_dispatch_stats_get(w->d, &s, NULL, 0, NULL));
    w->max_change_ns = s.max_change_ns;
    w->rate_limited = s.rate_limited;
    assert_int_equal(s.lane_changes, (uint64_t)w->changes);
    w->closing = true;
    assert_rl_ok(rl_dispatch_close(w->d, w->close_mode, on_closed));
    atomic_store(&w->close_called, true);
    uv_idle_stop(&w->idle);
    uv_close((uv_handle_t *)&w->idle, NULL);
}

static void on_idle(uv_idle_t *h)
{
    world *w = h->data;
    loop_feed(w);
    uint64_t done = atomic_load(&w->submitted_total);
    if (w->soak_ns) { /* the soak: by the clock */
        uint64_t now = uv_hrtime();
        if (now >= w->next_change_ns && now - w->start_ns < w->soak_ns) {
            change_lanes(w);
            w->next_change_ns = now + 50 * 1000000ull;
        }
        if (now - w->start_ns >= w->soak_ns) {
            w->target_changes = w->changes;
            w->target_jobs = done;
            uv_timer_stop(&w->report);
            if (!uv_is_closing((uv_handle_t *)&w->report))
                uv_close((uv_handle_t *)&w->report, NULL);
        }
    }
    if (w->lanes_in == 0 && !w->soak_ns) {
        change_lanes(w); /* bring a lane back soon: submitters spin on RL_ESTATE meanwhile */
        return;
    }
    /* Spread the changes over the run: one per target_jobs / target_changes submissions. */
    bool changes_left = w->changes < w->target_changes;
    if (!w->soak_ns && changes_left &&
        done >= (uint64_t)w->changes * (w->target_jobs / (uint64_t)w->target_changes))
        change_lanes(w);
    if (!changes_left && done >= w->target_jobs)
        start_close(w);
}

typedef struct result {
    uint64_t jobs;
    int changes;
} result;

/* MODE_LOOPFED: one shared worker, and the loop thread submits too (from on_done and its idle
 * turns): the loop then waits a moment for a next completion rather than sleep, with finished
 * jobs not waking it meanwhile (the header's paragraph on the loop thread and its CPU). */
/* The batch modes (batch_max JOB_BATCH_MAX) run in a test of their own. */
enum {
    MODE_DEDICATED,
    MODE_POOL,
    MODE_ASYNC,
    MODE_LOOPFED,
    MODES,
    MODE_BATCH = MODES,
    MODE_ASYNC_BATCH,
    ALL_MODES
};
static const char *const mode_names[ALL_MODES] = {"a thread per lane",
                                                  "2 shared workers",
                                                  "asynchronous",
                                                  "1 shared worker, fed by the loop",
                                                  "batches on 2 shared workers",
                                                  "asynchronous batches"};
#define COMPLETERS 2

static result run(const char *profile, int changes, uint64_t jobs, int close_mode, int mode)
{
    world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    w->profile = profile;
    w->target_changes = changes;
    w->target_jobs = jobs;
    w->close_mode = close_mode;
    w->mode = mode;
    w->rng = 42;
    assert_int_equal(uv_mutex_init(&w->pend_mu), 0);
    assert_int_equal(uv_cond_init(&w->pend_cv), 0);
    assert_int_equal(uv_mutex_init(&w->msg_mu), 0);
    for (int k = 0; k < KEYS; k++)
        atomic_store(&w->keys[k].last_started, -1);
    assert_int_equal(uv_loop_init(&w->loop), 0);
    const char *initial[] = {lane_name(0), lane_name(1), lane_name(2)};
    for (int i = 0; i < 3; i++)
        w->lane_in[i] = true;
    w->lanes_in = 3;
    rl_ring_options ro;
    rl_ring_options_init(&ro);
    ro.profile = profile;
    rl_dispatch_options o;
    rl_dispatch_options_init(&o);
    o.lanes = initial;
    o.lane_count = 3;
    o.ring = &ro;
    if (base_lanes) {
        w->base_names = calloc((size_t)base_lanes, sizeof *w->base_names);
        rl_member *m = calloc((size_t)base_lanes, sizeof *m);
        assert_non_null(w->base_names);
        assert_non_null(m);
        for (int i = 0; i < base_lanes; i++) {
            char name[24];
            snprintf(name, sizeof name, "base-%d", i);
            w->base_names[i] = strdup(name);
            assert_non_null(w->base_names[i]);
            m[i] = (rl_member){.name = w->base_names[i], .weight = 1};
        }
        assert_rl_ok(rl_ring_build(m, (size_t)base_lanes, &ro, &w->shadow));
        free(m);
        o.lanes = (const char *const *)w->base_names;
        o.lane_count = (size_t)base_lanes;
        w->lanes_in = base_lanes;
    }
    w->gap_max = 1;
    if (mode == MODE_ASYNC)
        o.async_handler = async_handler;
    else if (mode == MODE_BATCH)
        o.batch_handler = batch_handler;
    else if (mode == MODE_ASYNC_BATCH)
        o.async_batch_handler = async_batch_handler;
    else
        o.handler = handler;
    if (mode == MODE_BATCH || mode == MODE_ASYNC_BATCH) {
        o.batch_max = JOB_BATCH_MAX;
        w->gap_max = JOB_BATCH_MAX;
    }
    if (mode == MODE_POOL || mode == MODE_BATCH)
        o.workers = 2; /* fewer than the lanes: each lane by one worker at a time */
    if (mode == MODE_LOOPFED) {
        o.workers = 1;
        w->loop_feeds = true;
        w->loop_rng = 0x5eed0000u;
    }
    o.on_done = on_done;
    o.data = w;
    o.lane_capacity = 64; /* small limits: blocking submitters wait on lanes and on max_jobs */
    o.max_jobs = 160;
    o.max_attempts = MAX_ATTEMPTS;
    o.backoff_ms = 0;
    o.backoff_max_ms = 1;
    o.max_rate = rate_limit;
    o.max_burst = rate_burst;
    assert_rl_ok(rl_dispatch_init(&w->loop, &o, &w->d));

    submitter subs[SUBMITTERS];
    uv_thread_t threads[SUBMITTERS], watcher, watchdog;
    int first_thread = mode == MODE_LOOPFED; /* submitter 0 is the loop then */
    atomic_store(&w->running, SUBMITTERS - first_thread + 1);
    for (int i = first_thread; i < SUBMITTERS; i++) {
        subs[i] = (submitter){w, i};
        assert_int_equal(uv_thread_create(&threads[i], submit_thread, &subs[i]), 0);
    }
    assert_int_equal(uv_thread_create(&watcher, watch_thread, w), 0);
    uv_thread_t completers[COMPLETERS];
    for (int i = 0; i < COMPLETERS && (mode == MODE_ASYNC || mode == MODE_ASYNC_BATCH); i++)
        assert_int_equal(uv_thread_create(&completers[i], completer_thread, w), 0);
    assert_int_equal(uv_thread_create(&watchdog, watchdog_thread, w), 0);
    if (soak_seconds > 0) {
        w->soak_ns = (uint64_t)soak_seconds * 1000000000ull;
        w->start_ns = w->next_change_ns = uv_hrtime();
        w->target_changes = INT_MAX;
        assert_int_equal(uv_timer_init(&w->loop, &w->report), 0);
        w->report.data = w;
        assert_int_equal(uv_timer_start(&w->report, on_report, 10000, 10000), 0);
    }
    assert_int_equal(uv_idle_init(&w->loop, &w->idle), 0);
    w->idle.data = w;
    assert_int_equal(uv_idle_start(&w->idle, on_idle), 0);
    assert_int_equal(uv_run(&w->loop, UV_RUN_DEFAULT), 0);
    for (int i = first_thread; i < SUBMITTERS; i++)
        uv_thread_join(&threads[i]);
    uv_thread_join(&watcher);
    uv_mutex_lock(&w->pend_mu);
    w->completers_stop = true;
    uv_cond_broadcast(&w->pend_cv);
    uv_mutex_unlock(&w->pend_mu);
    for (int i = 0; i < COMPLETERS && (mode == MODE_ASYNC || mode == MODE_ASYNC_BATCH); i++)
        uv_thread_join(&completers[i]);
    free(w->pend);
    uv_cond_destroy(&w->pend_cv);
    uv_mutex_destroy(&w->pend_mu);
    uv_thread_join(&watchdog);
    assert_int_equal(uv_loop_close(&w->loop), 0);

    uint64_t total = 1; /* the barrier job */
    int unended = 0;
    for (int k = 0; k < KEYS; k++) {
        key_state *ks = &w->keys[k];
        total += (uint64_t)atomic_load(&ks->submitted);
        if (ks->next_end != atomic_load(&ks->submitted) || ks->gap_open)
            unended++;
    }
    print_message(
        "order check [%s, %s, close %s]: %llu jobs over %d keys (hot key: %d), %d lane "
        "changes (%d adds, %d removes, %d times no lane, %d refused: busy), "
        "longest change %.3f ms, "
        "%llu injected failures, %d takes handing back %d jobs; ended: %llu done, "
        "%llu dead, %llu returned: %d handler violations, %d completion violations, "
        "%d take violations, %d keys with jobs not ended; %llu batches of %llu jobs%s%s\n",
        profile, mode_names[mode], close_mode == RL_DISPATCH_STOP ? "stop" : "drain",
        (unsigned long long)total, KEYS, atomic_load(&w->keys[HOT_KEY].submitted), w->changes,
        w->adds, w->removes, w->empty_rounds, w->busy_refusals, (double)w->max_change_ns / 1e6,
        (unsigned long long)atomic_load(&w->failures), w->takes, w->taken_jobs,
        (unsigned long long)w->ended_by[RL_DISPATCH_DONE],
        (unsigned long long)w->ended_by[RL_DISPATCH_DEAD],
        (unsigned long long)w->ended_by[RL_DISPATCH_RETURNED], atomic_load(&w->violations),
        w->done_violations, w->take_violations, unended,
        (unsigned long long)atomic_load(&w->batches),
        (unsigned long long)atomic_load(&w->batched_jobs), w->first_violation[0] ? "; first: " : "",
        w->first_violation);
    assert_int_equal(w->closed, 1);
    assert_int_equal(atomic_load(&w->violations), 0);
    assert_int_equal(w->done_violations, 0);
    assert_int_equal(w->take_violations, 0);
    assert_int_equal(unended, 0);
    assert_int_equal(atomic_load(&w->ended), total);
    assert_true(total >= jobs);
    assert_true(w->changes >= changes);
    assert_true(atomic_load(&w->failures) > 0);
    if (rate_limit > 0) {
        print_message("  rate limit %.0f/s, burst %u: %llu submissions refused by it\n", rate_limit,
                      rate_burst, (unsigned long long)w->rate_limited);
        assert_true(w->rate_limited > 0); /* the limit was met, not only set */
    }
    if (mode == MODE_BATCH || mode == MODE_ASYNC_BATCH)
        assert_true(atomic_load(&w->batches) > 0);
    result res = {total, w->changes};
    uv_mutex_destroy(&w->msg_mu);
    rl_ring_free(w->shadow);
    for (int i = 0; w->base_names && i < base_lanes; i++)
        free(w->base_names[i]);
    free(w->base_names);
    free(w);
    return res;
}

static bool long_run;

static void test_order_every_profile(void **state)
{
    (void)state;
    if (soak_seconds > 0) {
        run(soak_profile, 1, 1, RL_DISPATCH_DRAIN, soak_mode); /* by the clock */
        return;
    }
    if (base_lanes > 0) {
        /* Many lanes: every profile that takes that many (maglev's default table is too
         * small), asynchronous and on 2 shared workers (a thread per lane is not possible);
         * removes hit the lanes of random keys. */
        int ran = 0;
        for (size_t i = 0; i < rl_profile_count(); i++) {
            const char *profile = rl_profile_at(i)->name;
            if (strcmp(profile, "maglev") == 0)
                continue;
            /* The profiles that change without placing every point again in both modes; the
             * others (a change costs a build of that many lanes) in one, in turn. */
            bool both = rl_profile_at(i)->default_vnodes == 0;
            int all_lanes = base_lanes;
            if (!both && point_lanes > 0 && point_lanes < base_lanes)
                base_lanes = point_lanes;
            for (int mode = MODE_POOL; mode <= MODE_ASYNC; mode++) {
                if (!both && mode != (i % 2 ? MODE_POOL : MODE_ASYNC))
                    continue;
                result r = run(profile, 10, SLOW_BUILD ? 3000 : 10000,
                               mode == MODE_POOL ? RL_DISPATCH_DRAIN : RL_DISPATCH_STOP, mode);
                assert_true(r.changes >= 10);
                ran++;
            }
            base_lanes = all_lanes;
        }
        assert_true(ran >= (int)rl_profile_count() - 1);
        return;
    }
    size_t n = rl_profile_count() * MODES;
    int changes = long_run ? (SLOW_BUILD ? 1200 : 3000) : 100;
    uint64_t jobs = long_run ? (SLOW_BUILD ? 100000 : 3000000) : (SLOW_BUILD ? 10000 : 40000);
    /* Every profile in every mode. The long run spreads its changes and jobs over them; the
     * short one gives each all the changes and a ninth of the jobs. */
    int per_changes = long_run ? (int)((size_t)changes / n + 1) : changes;
    uint64_t per_jobs = long_run ? jobs / n + 1 : jobs / 9;
    int all_changes = 0;
    for (size_t i = 0; i < n; i++) {
        const char *profile = rl_profile_at(i / MODES)->name;
        result r = run(profile, per_changes, per_jobs,
                       (i / MODES) % 2 ? RL_DISPATCH_STOP : RL_DISPATCH_DRAIN, (int)(i % MODES));
        all_changes += r.changes;
    }
    assert_true(all_changes >= (long_run ? changes : 0));
}

/* The same checks with a rate limit (20,000 jobs a second, burst 32), in every way jobs run:
 * submitters refused by it (try_submit and submit_many spin on RL_EAGAIN, blocking submits wait
 * for the token's timer) while lanes change, tags are taken and a close comes. */
static void test_order_with_rate_limit(void **state)
{
    (void)state;
    if (soak_seconds > 0 || base_lanes > 0) /* the soak, or --base-lanes alone */
        return;
    rate_limit = 20000;
    rate_burst = 32;
    for (int mode = 0; mode < MODES; mode++)
        run("memento", 30, SLOW_BUILD ? 1500 : 4000,
            mode % 2 ? RL_DISPATCH_STOP : RL_DISPATCH_DRAIN, mode);
    rate_limit = 0;
    rate_burst = 0;
}

/* Batches (one key per batch, up to JOB_BATCH_MAX jobs) in every profile, blocking and
 * asynchronous, through the same lane changes, failures inside batches, take_tag + wait_tag with
 * batches in flight, and closes. */
static void test_order_batches(void **state)
{
    (void)state;
    if (soak_seconds > 0 || base_lanes > 0) /* the soak, or --base-lanes alone */
        return;
    size_t n = rl_profile_count() * 2;
    int changes = long_run ? (SLOW_BUILD ? 400 : 1000) : 100;
    uint64_t jobs = long_run ? (SLOW_BUILD ? 40000 : 1000000) : (SLOW_BUILD ? 10000 : 40000);
    int per_changes = long_run ? (int)((size_t)changes / n + 1) : changes;
    uint64_t per_jobs = long_run ? jobs / n + 1 : jobs / 9;
    for (size_t i = 0; i < n; i++)
        run(rl_profile_at(i / 2)->name, per_changes, per_jobs,
            (i / 2) % 2 ? RL_DISPATCH_DRAIN : RL_DISPATCH_STOP,
            i % 2 ? MODE_ASYNC_BATCH : MODE_BATCH);
}

int main(int argc, char **argv)
{
    long_run = argc > 1 && strcmp(argv[1], "--long") == 0;
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--seconds") == 0)
            soak_seconds = strtol(argv[i + 1], NULL, 10);
        if (strcmp(argv[i], "--profile") == 0)
            soak_profile = argv[i + 1];
        if (strcmp(argv[i], "--base-lanes") == 0)
            base_lanes = atoi(argv[i + 1]);
        if (strcmp(argv[i], "--point-lanes") == 0)
            point_lanes = atoi(argv[i + 1]);
        if (strcmp(argv[i], "--mode") == 0)
            soak_mode = strcmp(argv[i + 1], "loopfed") == 0 ? MODE_LOOPFED
                        : strcmp(argv[i + 1], "async") == 0 ? MODE_ASYNC
                        : strcmp(argv[i + 1], "pool") == 0  ? MODE_POOL
                                                            : MODE_DEDICATED;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_every_profile),
        cmocka_unit_test(test_order_with_rate_limit),
        cmocka_unit_test(test_order_batches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
