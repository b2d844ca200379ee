/* SPDX-License-Identifier: BSD-2-Clause */
/* Lane membership changes (add_lane, remove_lane) that keep every key's order.
 *
 * THE PROTOCOL
 *
 * Routing is a ring over lane names. A key's jobs live in exactly one place at a time: its
 * lane's queue, or the parked list of a fence (below). A lane has at most one job in flight (or
 * one batch of one key's jobs: BATCHES, below):
 * in a blocking handler on a pool worker, pending an asynchronous completion, or waiting for
 * its retry on the loop's timer (lane.busy, under the lane's mutex). What runs it does not
 * matter here: the protocol reads only the lane's state, so it is the same for every kind of
 * lane. A change computes the new ring, then, in one critical section under the route lock
 * held for writing (submitters excluded; jobs in flight go on, and executors take a lane's
 * mutex only for a moment):
 *
 *  0. Make room. Count, for each lane, the jobs that steps A to C may bring to it, and grow its
 *     queue to hold them. This is the only step that can fail (RL_ENOMEM), and it changes no
 *     routing state.
 *  A. Retarget fences. Each lane L has at most one fence: "the key of L's in-flight job (hash h)
 *     now belongs to lane H (the holder); jobs of h wait in the fence's parked list until L has
 *     finished that job". If the new ring gives h back to L, the fence dissolves: its parked jobs
 *     go to the end of L's queue (L runs them after its in-flight job, so order holds). If it
 *     gives h to another lane, the fence with its parked list moves there whole.
 *  B. Arm fences. Each lane L with a job in flight (in its handler or waiting for a retry) and
 *     no fence, whose key h the new ring gives to another lane D, gets a fence for h held by D.
 *     Arming and the "job finished" step (whichever thread ends the job: a worker, a
 *     completing thread, the loop's timer, take_tag) both happen under L's mutex, so a fence is
 *     armed only while the job is still in flight and its end always sees it.
 *  C. Move queued jobs. Every lane that holds jobs is scanned front to back, on add and on
 *     remove alike (a lane holding nothing has nothing to move: see HELD LANES); each
 *     job whose key the new ring gives to another lane D is taken out and appended, in scan
 *     order, to D's fence for that key if D holds one, else to the end of D's queue. (Removing
 *     a member moves only its own keys in some profiles, but not in all: jump and balanced
 *     renumber the members after the removed one, and ketama, envoy and maglev move some keys
 *     between survivors. The dispatcher takes every profile, so it assumes nothing about
 *     which lanes lose keys.)
 *     B and C run for one lane under one hold of its mutex. Apart, an executor could pop the
 *     next job of a key between them: B would see the lane idle, and C would move the key's
 *     later jobs to a lane that starts them at once, beside the one just popped.
 *  D. Publish the new route. A removed lane is marked retiring: it gets no new jobs, finishes
 *     its in-flight job, releases its fence, and the loop thread frees it once it is idle and
 *     no timer names it.
 *
 * When a lane's job ends, its completion is published, the lane is marked idle and, if its
 * fence is active, the route lock is taken for reading and the parked list spliced to the front
 * of the holder's queue (release). The lane starts no other job until the release is done: it
 * stays held (owned) meanwhile, so it never has a second fence. Submitters, under the same read
 * lock and the holder's mutex, append a job whose key has a fence at the holder to the parked
 * list instead of the queue.
 *
 * INVARIANTS
 *
 *  I1 Single place: all not-yet-started jobs of a key are either in its owner's queue or, when a
 *     fence for the key exists, in that fence's parked list (which is held by the owner). A
 *     key's jobs are never split between two queues.
 *  I2 One fence per key, one per lane: a fence exists only for the key of its lane's in-flight
 *     job, and a lane starts no other job before releasing it, so a key never has two.
 *  I3 Order: moving, parking, splicing and dissolving keep relative order; a key's jobs that
 *     were queued before a change come before those submitted after it (submitters wait for the
 *     critical section, then route by the new ring to the same place the moved jobs went).
 *  I4 Exclusion: a job of key h starts only when no other job of h is in flight: the lane that
 *     owns h either is the lane running h (so it is busy with it) or holds h's jobs behind a
 *     fence until the lane running h finishes.
 *  I5 Nothing lost or duplicated: jobs are only ever moved between lists, under the locks that
 *     guard both lists. Every lane keeps room in its queue for the jobs parked at it, and a
 *     change first counts what may arrive at each lane and makes room for it; only then does it
 *     modify anything, so it either fails (RL_ENOMEM) having changed nothing, or cannot fail.
 *  I6 Keys that do not move are not held: no fence is placed on them; their lane pauses only
 *     while its queue is scanned (under its mutex) for the keys that leave.
 *
 * HELD LANES
 *
 * Steps A to C look only at the lanes on the dispatcher's list of held lanes. Whoever puts
 * something in a lane (a submission, a park, a fence linked to it, a change's moves) puts the
 * lane on that list first, under its mutex, unless it is there already (rl__lane_hold: a
 * relaxed load per submission); a change takes the lanes pushed since the last one (the route
 * lock held for writing keeps every pusher out) and, after its moves, drops the lanes that hold
 * nothing (nothing queued or parked, no job in flight, no fence of its own or held, no park).
 * A lane off the list holds nothing, and nothing can arrive while the route lock is held for
 * writing (submissions, parks and fence releases take it for reading), so A to C have nothing
 * to do for it. take_tag and wait_tag look at the list the same way (revoke.c; take_tag prunes
 * it too), and the bounded statistics read it under the lock for reading. A removed lane leaves the
 * list at its change and is never put on it again (its fence and parks are looked at through
 * d->retiring).
 *
 * BATCHES
 *
 * With batch_max over 1 a lane's "job in flight" is a batch: up to batch_max jobs of one key and
 * one tag, the key's next ones, taken from its queue in order (batch.c; other keys' jobs
 * between them stay queued in their order). Everything above
 * reads "the lane's in-flight job" as the batch: cur_hash is its key, so step B arms the one
 * fence the batch needs when a change takes its key away; the fence is released when the last
 * job of the batch has ended, so the key's jobs at the holder wait for the whole batch (I4);
 * the batch's jobs are on no list (like a lone job in flight), so steps 0 to C neither count
 * nor move them. A batch of several keys would break I2 (one fence per lane: it would need one
 * per key), and a key moving away would wait for other keys' jobs; a batch of one key changes
 * nothing here. Why that costs little: keys share a lane only when they outnumber the lanes,
 * and then a batch is the run of one key's jobs at the head of the queue.
 *
 * When a job of a batch fails, the jobs of the batch after it are of its key and have not ended:
 *  - a retry parks them behind it, first in the park (retry_park.c), before the key's jobs
 *    queued at the owner or parked at a fence (which came later): I1 and I3 hold, and the park
 *    makes room for them at its holder as for the others (I5; RL_ENOMEM: the lane keeps the job
 *    and them in flight and waits for the retry, as a lone job does);
 *  - a dead letter ends the job, and they stay the lane's unit in flight and run again at once
 *    (retry_due): the lane never let the key go, so neither a fence nor room is needed, and no
 *    other job of the key can start before them;
 *  - a STOP close hands them back with it, in order.
 * take_tag and a STOP close take a batch waiting for its retry in place (RL_ENOMEM above, or a
 * dead letter's rest) whole: cur_job and the jobs after it. test_dispatch_batch checks each case
 * and test_dispatch_order runs the checker with batches through lane changes.
 *
 * LOCAL REMOVES
 *
 * Under a profile whose remove moves only the removed member's keys (rl_profile_info's
 * local_remove: default, ds09, turnstone, xmur3, groupcache, memento; tests/test_profile_moves.c
 * checks the flag against what each profile does), remove_lane looks at the removed lane R
 * alone. Every other lane L keeps the keys it owns, so: its queue holds only keys it owns (I1)
 * and keeps them; its job in flight, when L has no fence, is of a key it owns (a lane starts
 * only its own keys, and a change that takes the key away arms a fence), so it needs none;
 * a fence held at L stays. What changes is R's: the fences held at R (A: each goes to its
 * key's new owner, or dissolves into its own lane's queue), R's parks (A), R's job in flight
 * (B: a fence held by the key's new owner) and R's queue (C: every job goes to its key's new
 * owner, or to the fence A put there). Step 0 counts the same, and D is unchanged. Such a
 * remove costs R's jobs, whatever the other lanes hold.
 *
 * LOCAL ADDS
 *
 * Under a profile whose add moves keys only to the new member (rl_profile_info's local_add:
 * those of local_remove, and jump and balanced), every move of an add goes to the new lane A,
 * and no more jobs can move than are not ended (d->jobs; submissions are kept out by the
 * route lock, so it can only fall). Step 0 then counts nothing: it makes room at A for that
 * many (the memory is taken lazily, so only what is written is touched; above
 * LOCAL_ADD_ROOM_MAX jobs it counts as other changes do), and A's queue is cut back to what it
 * holds once the moves are done. Steps A to D are unchanged.
 *
 * Cost: the critical section walks the held lanes' queues twice (count, then move; once for a
 * local add, none but the removed lane's for a local remove), and the route's lane array once
 * (room for the moves); lanes that hold nothing are not touched.
 * Queues are arrays of (key position, job), and a change remembers the new ring's answer for
 * the positions it saw last (route_memo: a key's queued jobs sit in one lane, mostly one after
 * another), so routing a queued job touches neither the job nor, mostly, the ring. Everything else
 * (the new ring, the lane array, the new lane and its worker) is made before it. At 65,536 idle
 * lanes with `memento` the whole add_lane or remove_lane call takes about 3.5 ms, most of it the
 * new ring (bench_async lanes).
 */
#include "dispatch_internal.h"
#include "error_detail_internal.h"
#include "ringlane/profile.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* The lane of `hash` in a route whose ring is not empty. */
static rl__lane *owner(const rl__route *r, uint64_t hash)
{
    return r->lanes[rl__route_node(r, hash)];
}

/* The lane whose in-flight job a fence waits for (the fence is part of it). */
static rl__lane *lane_of_fence(rl__fence *f)
{
    return (rl__lane *)(void *)((char *)f - offsetof(rl__lane, fence));
}

static void unlink_fence(rl__lane *holder, rl__fence *f)
{
    for (rl__fence **p = &holder->fences; *p; p = &(*p)->next_held) {
        if (*p == f) {
            *p = f->next_held;
            break;
        }
    }
    f->next_held = NULL;
    holder->parked -= f->parked.len;
    rl__lane_set_depth(holder);
}

static void link_fence(rl__lane *holder, rl__fence *f)
{
    rl__lane_hold(holder);
    f->next_held = holder->fences;
    holder->fences = f;
    f->holder = holder;
    holder->parked += f->parked.len;
    rl__lane_set_depth(holder);
}

rl__fence *rl__fence_for(const rl__lane *holder, uint64_t hash)
{
    for (rl__fence *f = holder->fences; f; f = f->next_held)
        if (f->hash == hash)
            return f;
    return NULL;
}

/* Under l->mu: jobs arrived at l; an executor takes it if it can start one. */
static void wake(rl__lane *l)
{
    rl__lane_ready(l);
}

/* l's job that its fence waits for has ended. The holder has room for the parked
 * jobs (it keeps cap >= len + parked), so this cannot fail. */
void rl__fence_release(rl__lane *l)
{
    rl_dispatcher_t *d = l->d;
    pthread_rwlock_rdlock(&d->route_lock);
    rl__fence *f = &l->fence;
    if (f->active) { /* a change may have dissolved it meanwhile */
        rl__lane *h = f->holder;
        rl__lock(&h->mu);
        unlink_fence(h, f);
        rl__lq_prepend(&h->queue, &f->parked);
        rl__lane_set_depth(h);
        wake(h);
        rl__unlock(&h->mu);
        rl__lock(&l->mu);
        f->active = false;
        f->holder = NULL;
        rl__unlock(&l->mu);
    }
    pthread_rwlock_unlock(&d->route_lock);
}

/* The new ring's answers during one change. A change routes every queued job of the held
 * lanes twice (count, then move), and a key's queued jobs all sit in one lane, usually one
 * after another, so most positions repeat: a direct-mapped table remembers the node of the
 * positions seen last. A slot i holds a position whose low bits are i, or its initial value
 * i ^ 1, which no position can match there. */
/* A local add makes room for every job not ended, uncounted, up to this many (16 MiB of
 * queue entries, twice: the moves and the new lane's queue, mapped as written); above, it
 * counts the moves first as other changes do. */
#define LOCAL_ADD_ROOM_MAX ((size_t)1 << 20)

#define ROUTE_MEMO_SLOTS 8192 /* 96 KiB: within a core's cache, beside the queues it reads */

typedef struct route_memo {
    uint64_t hash[ROUTE_MEMO_SLOTS];
    uint32_t node[ROUTE_MEMO_SLOTS];
} route_memo;

static void route_memo_init(route_memo *m)
{
    for (uint64_t i = 0; i < ROUTE_MEMO_SLOTS; i++)
        m->hash[i] = i ^ 1;
}

/* What a change needs, made before its critical section (or, for sizes only known inside it,
 * at its start, before anything is modified). */
typedef struct plan {
    rl__route next;
    route_memo *memo;
    rl__lane *removed;
    bool local;        /* a remove under a profile that moves only the removed member's keys */
    bool local_add;    /* an add under a profile that moves keys only to the new member */
    bool room_for_all; /* ... made room at the new lane for every job not ended, uncounted */
    size_t *incoming;  /* per new node: jobs that may land there (queue or parked) */
    size_t *parked_in; /* per new node: jobs put into fences already held there */
    size_t *moved_n;   /* per new node: entries in moved[] */
    rl__qent **moved;  /* per new node: entries for its queue, in order */
    rl__qent *buf;     /* backs moved[] */
} plan;

/* The node of `hash` in the new route. */
static uint32_t next_node(plan *p, uint64_t hash)
{
    size_t i = hash & (ROUTE_MEMO_SLOTS - 1);
    if (p->memo->hash[i] != hash) {
        p->memo->hash[i] = hash;
        p->memo->node[i] = rl__route_node(&p->next, hash);
    }
    return p->memo->node[i];
}

/* Step A, counting: where an active fence's parked jobs go. */
static void count_fence(rl__lane *l, plan *p)
{
    rl__fence *f = &l->fence;
    if (!f->active)
        return;
    uint32_t node = rl__route_node(&p->next, f->hash);
    if (p->next.lanes[node] != f->holder)
        p->incoming[node] += f->parked.len;
}

/* Step A for one lane's fence. */
static void retarget_fence(rl__lane *l, const rl__route *next)
{
    rl__fence *f = &l->fence;
    if (!f->active)
        return;
    rl__lane *to = owner(next, f->hash), *from = f->holder;
    if (to == from)
        return;
    rl__lock(&from->mu);
    unlink_fence(from, f);
    rl__unlock(&from->mu);
    if (to == l) { /* the key came home: l runs its parked jobs after its in-flight one */
        rl__lock(&l->mu);
        rl__lq_append(&l->queue, &f->parked);
        f->active = false;
        f->holder = NULL;
        rl__lane_set_depth(l);
        wake(l);
        rl__unlock(&l->mu);
    } else {
        rl__lock(&to->mu);
        link_fence(to, f);
        rl__unlock(&to->mu);
    }
}

/* Step C, counting: the jobs that leave l, by destination. */
static void count_leaving(rl__lane *l, plan *p)
{
    rl__lock(&l->mu);
    for (size_t i = 0; i < l->queue.len; i++) {
        uint32_t node = next_node(p, rl__lq_at(&l->queue, i)->hash);
        if (p->next.lanes[node] != l)
            p->incoming[node]++;
    }
    rl__unlock(&l->mu);
}

/* Steps B and C for one lane, under one hold of its mutex: were they apart, an executor could
 * start a job after B found it idle, and C would then move that key's later jobs unfenced.
 * Jobs that stay are compacted in place, jobs that leave go to p->moved or to the fence of
 * their key. */
static void fence_and_move(rl_dispatcher_t *d, rl__lane *l, plan *p)
{
    const rl__route *next = &p->next;
    d->change_looks++;
    rl__lock(&l->mu);
    rl__lane *armed_at = NULL;
    if (l->busy && !l->fence.active) {
        rl__lane *to = owner(next, l->cur_hash);
        if (to != l) {
            l->fence.active = true;
            l->fence.hash = l->cur_hash;
            l->fence.parked = (rl__jobq){0};
            armed_at = to;
        }
    }
    rl__lq *q = &l->queue;
    size_t kept = 0;
    for (size_t i = 0; i < q->len; i++) {
        rl__qent e = *rl__lq_at(q, i);
        uint32_t node = next_node(p, e.hash);
        rl__lane *to = next->lanes[node];
        if (to == l) {
            *rl__lq_at(q, kept++) = e;
        } else if (to == armed_at && e.hash == l->fence.hash) {
            rl__jobq_push(&l->fence.parked, e.job); /* counted when the fence is linked */
        } else {
            /* Fence lists of other lanes change only under the route lock, held here for
             * writing, so they can be read without their lane's mutex. */
            rl__fence *f = rl__fence_for(to, e.hash);
            if (f) {
                rl__jobq_push(&f->parked, e.job);
                p->parked_in[node]++;
            } else if (p->moved_n[node] < p->incoming[node]) {
                p->moved[node][p->moved_n[node]++] = e;
            } else {
                /* Not reached: step 0 made room for every move (a local add trusts its
                 * profile, which tests/test_profile_moves.c checks); were it reached, the job
                 * stays rather than be written past the room. */
                *rl__lq_at(q, kept++) = e;
            }
        }
    }
    q->len = kept;
    rl__lane_set_depth(l);
    rl__unlock(&l->mu);
    if (armed_at) {
        rl__lock(&armed_at->mu);
        link_fence(armed_at, &l->fence);
        rl__unlock(&armed_at->mu);
    }
}

/* Under the route lock (write), which keeps out everyone who pushes: the lanes pushed since
 * the last change join the list. */
void rl__held_take(rl_dispatcher_t *d)
{
    rl__lane *l = atomic_exchange_explicit(&d->held_new, NULL, memory_order_acquire);
    while (l) {
        rl__lane *nx = l->next_held_lane;
        l->next_held_lane = d->held_lanes;
        d->held_lanes = l;
        l = nx;
    }
}

/* Under the route lock (write), after the moves: lanes that hold nothing leave the list, and
 * so does the lane being removed (a retiring lane is looked at through d->retiring, is never
 * put on the list again, and is freed). */
void rl__held_prune(rl_dispatcher_t *d, const rl__lane *removed)
{
    for (rl__lane **pp = &d->held_lanes, *l; (l = *pp);) {
        rl__lock(&l->mu);
        bool empty = l == removed || (!l->queue.len && !l->parked && !l->busy && !l->fence.active &&
                                      !l->fences && !l->parks);
        if (empty) {
            *pp = l->next_held_lane; /* unlinked before its flag goes down */
            l->next_held_lane = NULL;
            atomic_store_explicit(&l->held, false, memory_order_relaxed);
        } else {
            pp = &l->next_held_lane;
        }
        rl__unlock(&l->mu);
    }
}

/* Under the route lock (write): the removed lane leaves the list, and the others stay, whether
 * they hold something or not (a local remove looks at no other lane; the next change or
 * take_tag prunes them). */
static void held_unlink(rl_dispatcher_t *d, rl__lane *removed)
{
    rl__lock(&removed->mu);
    bool held = atomic_load_explicit(&removed->held, memory_order_relaxed);
    rl__unlock(&removed->mu);
    if (!held)
        return; /* (pushed lanes were taken at the change's start: held is on the list) */
    for (rl__lane **pp = &d->held_lanes; *pp; pp = &(*pp)->next_held_lane) {
        if (*pp == removed) {
            *pp = removed->next_held_lane;
            removed->next_held_lane = NULL;
            rl__lock(&removed->mu);
            atomic_store_explicit(&removed->held, false, memory_order_relaxed);
            rl__unlock(&removed->mu);
            return;
        }
    }
}

/* Jobs a lane holds (queued, parked at it, in flight). Under its mutex. */
static bool lane_holds_jobs(const rl__lane *l)
{
    return l->queue.len || l->parked || l->busy || l->fence.active;
}

/* Sizes and allocates what the moves need, and gives every destination room for what may
 * arrive, so that the steps after it cannot fail. Modifies no routing state. */
static int prepare_moves(rl_dispatcher_t *d, plan *p)
{
    size_t n = p->next.n, total = 0;
    memset(p->incoming, 0, n * sizeof *p->incoming);
    size_t jobs = (size_t)atomic_load(&d->jobs);
    p->room_for_all = p->local_add && jobs <= LOCAL_ADD_ROOM_MAX;
    if (p->room_for_all) {
        /* LOCAL ADDS: whatever moves goes to the new lane (the last node), and at most every
         * job not ended can (d->jobs: submissions are kept out, so it only falls); room for that
         * many, taken where it is not touched (lazily mapped), saves counting. */
        p->incoming[n - 1] = jobs;
    } else if (p->local) {
        /* LOCAL REMOVES: only the removed lane's keys move (see the top of this file). */
        rl__lane *r = p->removed;
        for (rl__fence *f = r->fences; f; f = f->next_held)
            count_fence(lane_of_fence(f), p);
        rl__parks_count(r, &p->next, p->incoming);
        count_leaving(r, p);
    } else {
        /* Only the lanes that may hold something: the others have nothing to count. */
        for (rl__lane *l = d->held_lanes; l; l = l->next_held_lane) {
            if (l->retiring)
                continue;
            count_fence(l, p);
            rl__parks_count(l, &p->next, p->incoming);
            count_leaving(l, p);
        }
        for (rl__lane *r = d->retiring; r; r = r->next_retiring) {
            count_fence(r, p);
            rl__parks_count(r, &p->next, p->incoming);
        }
    }
    for (size_t i = 0; i < n; i++)
        total += p->incoming[i]; /* moved[i] gets a slice of incoming[i], an upper bound */
    p->buf = malloc((total ? total : 1) * sizeof *p->buf);
    if (!p->buf)
        return RL_ENOMEM;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        p->moved[i] = p->buf + at;
        p->moved_n[i] = 0;
        p->parked_in[i] = 0;
        at += p->incoming[i];
        if (!p->incoming[i])
            continue;
        rl__lane *x = p->next.lanes[i];
        rl__lock(&x->mu);
        int rc = rl__lq_reserve(&x->queue, x->queue.len + x->parked + p->incoming[i]);
        rl__unlock(&x->mu);
        if (rc)
            return rc;
    }
    return 0;
}

/* Applies a change under the route lock. Returns RL_EBUSY, changing nothing, when the last
 * lane would go while it still holds jobs; RL_ENOMEM, changing nothing, when the room for the
 * moves cannot be had. */
static int apply_change(rl_dispatcher_t *d, plan *p)
{
    rl__route *cur = &d->route, *next = &p->next;
    rl__lane *removed = p->removed;
    uint64_t t0 = uv_hrtime();
    pthread_rwlock_wrlock(&d->route_lock);
    if (atomic_load(&d->closing)) {
        pthread_rwlock_unlock(&d->route_lock);
        return RL_ECLOSED;
    }
    rl__held_take(d);
    if (next->n == 0) {
        /* The last lane goes: only when nothing is left anywhere for a ring to route. */
        rl__lock(&removed->mu);
        bool busy = lane_holds_jobs(removed);
        rl__unlock(&removed->mu);
        for (rl__lane *r = d->retiring; r && !busy; r = r->next_retiring) {
            rl__lock(&r->mu);
            busy = r->fence.active || r->parks;
            rl__unlock(&r->mu);
        }
        if (busy) {
            pthread_rwlock_unlock(&d->route_lock);
            return RL_EBUSY;
        }
    } else {
        int rc = prepare_moves(d, p);
        if (rc) {
            pthread_rwlock_unlock(&d->route_lock);
            return rc;
        }
        if (p->local) {
            /* A: the fences held at the removed lane (each unlinks itself from its list), and
             * its parks. B and C: the removed lane alone. */
            while (removed->fences)
                retarget_fence(lane_of_fence(removed->fences), next);
            rl__parks_retarget(removed, next);
            fence_and_move(d, removed, p);
        } else {
            /* A: fences, and keys parked for a retry (a lane not held has neither) */
            for (rl__lane *l = d->held_lanes; l; l = l->next_held_lane) {
                if (l->retiring)
                    continue;
                retarget_fence(l, next);
                rl__parks_retarget(l, next);
            }
            for (rl__lane *r = d->retiring; r; r = r->next_retiring) {
                retarget_fence(r, next);
                rl__parks_retarget(r, next);
            }
            /* B and C (a lane not held has no job in flight and nothing queued) */
            for (rl__lane *l = d->held_lanes; l; l = l->next_held_lane)
                if (!l->retiring)
                    fence_and_move(d, l, p);
        }
        for (size_t i = 0; i < next->n; i++) {
            if (!p->moved_n[i] && !p->parked_in[i])
                continue;
            rl__lane *to = next->lanes[i];
            rl__lock(&to->mu);
            rl__lane_hold(to);
            for (size_t k = 0; k < p->moved_n[i]; k++) {
                *rl__lq_at(&to->queue, to->queue.len) = p->moved[i][k];
                to->queue.len++;
            }
            to->parked += p->parked_in[i];
            if (p->room_for_all) /* the room made for every job not ended */
                rl__lq_fit(&to->queue, to->queue.len + to->parked);
            rl__lane_set_depth(to);
            wake(to);
            rl__unlock(&to->mu);
        }
    }
    /* D */
    if (p->local)
        held_unlink(d, removed);
    else
        rl__held_prune(d, removed);
    rl__route old = *cur;
    *cur = *next;
    *next = old;
    if (removed) {
        rl__lock(&removed->mu);
        removed->retiring = true;
        bool idle = rl__lane_idle(removed);
        rl__unlock(&removed->mu);
        removed->next_retiring = d->retiring;
        d->retiring = removed;
        d->n_retiring++;
        if (idle)
            uv_async_send(&d->async); /* freed on the loop's next turn */
    }
    pthread_rwlock_unlock(&d->route_lock);

    uint64_t took = uv_hrtime() - t0;
    atomic_fetch_add(&d->changes, 1);
    atomic_store(&d->last_change_ns, took);
    if (took > atomic_load(&d->max_change_ns))
        atomic_store(&d->max_change_ns, took);
    return 0;
}

/* The lane array of `ring`, made from the current route by position: rl_ring_add appends the
 * new member after the others, rl_ring_remove takes its member out and keeps the others' order,
 * so lanes keep their order too (no search by name per lane). `removed_at`: the index of the
 * removed lane in the current route, or SIZE_MAX for an add. */
static int route_for(rl_dispatcher_t *d, rl_ring_t *ring, rl__lane *added, size_t removed_at,
                     rl__route *out)
{
    size_t n = rl_ring_member_count(ring);
    const rl__route *cur = &d->route;
    *out = (rl__route){.n = n};
    rl__route_set_ring(out, ring);
    out->lanes = malloc((n ? n : 1) * sizeof *out->lanes);
    if (!out->lanes)
        return RL_ENOMEM;
    if (added) {
        memcpy(out->lanes, cur->lanes, cur->n * sizeof *out->lanes);
        out->lanes[cur->n] = added;
    } else {
        memcpy(out->lanes, cur->lanes, removed_at * sizeof *out->lanes);
        memcpy(out->lanes + removed_at, cur->lanes + removed_at + 1,
               (cur->n - removed_at - 1) * sizeof *out->lanes);
    }
    return 0;
}

void rl__route_free(rl__route *r)
{
    rl_ring_free(r->ring);
    free(r->lanes);
    *r = (rl__route){0};
}

/* Runs a change whose new ring is made; frees what is not kept. */
static int change(rl_dispatcher_t *d, rl_ring_t *ring, rl__lane *added, rl__lane *removed,
                  size_t removed_at, bool local)
{
    plan p = {.removed = removed, .local = local && removed, .local_add = local && added};
    int rc = route_for(d, ring, added, removed_at, &p.next);
    size_t n = p.next.n ? p.next.n : 1;
    if (!rc) {
        p.incoming = calloc(n, sizeof *p.incoming);
        p.parked_in = calloc(n, sizeof *p.parked_in);
        p.moved_n = calloc(n, sizeof *p.moved_n);
        p.moved = calloc(n, sizeof *p.moved);
        p.memo = malloc(sizeof *p.memo);
        if (!p.incoming || !p.parked_in || !p.moved_n || !p.moved || !p.memo)
            rc = RL_ENOMEM;
        else
            route_memo_init(p.memo);
    }
    if (!rc)
        rc = apply_change(d, &p);
    if (!rc) {
        /* Keys may have moved from a full lane to one with room. */
        rl__space_notify(d);
        rl__check_capacity(d);
    }
    /* On success p.next holds the old route now; on failure still the new one. */
    rl__route_free(&p.next);
    free(p.incoming);
    free(p.parked_in);
    free(p.moved_n);
    free(p.moved);
    free(p.memo);
    free(p.buf);
    return rc;
}

static int check_call(rl_dispatcher_t *d, const char *name, const char *call)
{
    rl_error_detail_clear();
    if (!d)
        return rl_error_detail_set(RL_EINVAL, "d NULL: no dispatcher");
    if (!name)
        return rl_error_detail_set(RL_EINVAL, "name NULL: a lane is named");
    if (!rl__on_loop_thread(d))
        return rl_error_detail_set(RL_ESTATE,
                                   "%s off the loop thread: lanes change on the thread that "
                                   "called rl_dispatch_init",
                                   call);
    if (atomic_load(&d->closing))
        return rl_error_detail_set(RL_ECLOSED, "%s after rl_dispatch_close: lanes no longer change",
                                   call);
    return 0;
}

/* A refusal of a change that got as far as change(): what it could not do to lane `name`. */
static int change_refusal(int rc, const char *name, size_t jobs_lane_count)
{
    char q[RL__QUOTE_SIZE];
    rl__quote(q, name);
    if (rc == RL_EBUSY)
        return rl_error_detail_set(rc,
                                   "name %s: the last lane, and jobs are left (queued, in flight, "
                                   "or parked for a retry); remove it once they have ended, or "
                                   "add a lane first",
                                   q);
    if (rc == RL_ECLOSED)
        return rl_error_detail_set(rc, "name %s: the dispatcher is closing", q);
    return rl_error_detail_set(rc, "out of memory: moving keys for lane %s (%zu lanes)", q,
                               jobs_lane_count);
}

int rl_dispatch_add_lane(rl_dispatcher_t *d, const char *name)
{
    int rc = check_call(d, name, "rl_dispatch_add_lane");
    if (rc)
        return rc;
    char q[RL__QUOTE_SIZE];
    rl__quote(q, name);
    rl_member m = {.name = name, .weight = 1, .zone = NULL};
    uint32_t k;
    if (rl_ring_find(d->route.ring, name, &k) == 0)
        return rl_error_detail_set(RL_EDUPNAME, "name %s: already a lane", q);
    if (d->route.n >= RL_DISPATCH_LANES_MAX)
        return rl_error_detail_set(RL_ERANGE,
                                   "name %s: the dispatcher has RL_DISPATCH_LANES_MAX (%u) lanes",
                                   q, RL_DISPATCH_LANES_MAX);
    bool dedicated = !d->async_mode && !d->opts.workers; /* a worker thread per lane */
    if (dedicated && d->route.n + d->n_retiring >= RL_DISPATCH_THREADS_MAX)
        return rl_error_detail_set(RL_ERANGE,
                                   "name %s: a thread per lane (workers 0), and %zu lanes (%zu of "
                                   "them retiring) have the RL_DISPATCH_THREADS_MAX (%u) threads",
                                   q, d->route.n + d->n_retiring, d->n_retiring,
                                   RL_DISPATCH_THREADS_MAX);
    rl_ring_t *ring;
    rc = rl_ring_add(d->route.ring, &m, &ring);
    if (rc) {
        /* The ring names the lane "member"; its other refusals are about the lanes as a whole. */
        if (!rl__detail_reword("member.name ", "name ")) {
            char prefix[RL__QUOTE_SIZE + 8];
            snprintf(prefix, sizeof prefix, "name %s: ", q);
            rl__detail_prefix(rc, prefix);
        }
        return rc;
    }
    rl__lane *lane = NULL;
    rc = rl__lane_new(d, name, &lane);
    if (rc)
        rl_error_detail_set(rc, "%s: lane %s",
                            rc == RL_ENOMEM ? "out of memory" : "libuv could not make a mutex", q);
    if (!rc) {
        pthread_rwlock_wrlock(&d->route_lock);
        rc = rl__slot_take(d, lane);
        pthread_rwlock_unlock(&d->route_lock);
        if (rc) {
            rl_error_detail_set(rc, "out of memory: a slot for lane %s", q);
            rl__lane_free(lane);
        }
    }
    if (!rc && dedicated) {
        rc = rl__pool_resize(d, rl__workers_wanted(d) + 1); /* the lane's worker, first */
        if (rc) {
            pthread_rwlock_wrlock(&d->route_lock);
            rl__slot_free(d, lane);
            pthread_rwlock_unlock(&d->route_lock);
            rl__lane_free(lane);
        }
    }
    if (rc) {
        rl_ring_free(ring);
        if (dedicated)
            rl__pool_resize(d, rl__workers_wanted(d));
        return rc;
    }
    const rl_profile_info *profile = rl_profile_find(rl_ring_profile(d->route.ring));
    rc = change(d, ring, lane, NULL, SIZE_MAX, profile && profile->local_add);
    if (rc) {
        change_refusal(rc, name, d->route.n + 1);
        /* Nothing routes to the new lane, and nothing ever ran on it. */
        pthread_rwlock_wrlock(&d->route_lock);
        rl__slot_free(d, lane);
        pthread_rwlock_unlock(&d->route_lock);
        rl__lane_free(lane);
        if (dedicated)
            rl__pool_resize(d, rl__workers_wanted(d));
    }
    return rc;
}

int rl_dispatch_remove_lane(rl_dispatcher_t *d, const char *name)
{
    int rc = check_call(d, name, "rl_dispatch_remove_lane");
    if (rc)
        return rc;
    char q[RL__QUOTE_SIZE];
    uint32_t k;
    if (rl_ring_find(d->route.ring, name, &k) != 0)
        return rl_error_detail_set(RL_ENOENT, "name %s: no such lane", rl__quote(q, name));
    rl__lane *removed = d->route.lanes[k];
    rl_ring_t *ring;
    rc = rl_ring_remove(d->route.ring, name, &ring);
    if (rc)
        return rc; /* out of memory, said by the ring */
    const rl_profile_info *profile = rl_profile_find(rl_ring_profile(d->route.ring));
    rc = change(d, ring, NULL, removed, k, profile && profile->local_remove);
    return rc ? change_refusal(rc, name, d->route.n - 1) : 0;
}
