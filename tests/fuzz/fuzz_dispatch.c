/* SPDX-License-Identifier: BSD-2-Clause */
/* Fuzz target: the dispatcher driven by an operation stream — submit, add and remove lanes,
 * take and wait for tags, run the loop, failing handlers — then a close in either mode. It
 * checks the dispatcher's promises on every input: jobs of one key never run at once and run
 * in submission order (handed-back jobs may be skipped), every accepted job ends exactly once,
 * and nothing is left when the dispatcher closes. */
#define _POSIX_C_SOURCE 200809L
#include "fuzz_input.h"
#include "ringlane/dispatcher.h"
#include "ringlane/error.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <uv.h>

#define KEYS 8
#define MAX_OPS 200

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_dispatch: broken promise: %s\n", what);
        abort();
    }
}

typedef struct job_rec {
    int key;
    uint64_t order;      /* per key, from 1 */
    uint32_t fail_first; /* the handler fails this many calls first */
    int ended;
} job_rec;

typedef struct state {
    atomic_int busy[KEYS];
    atomic_uint_fast64_t last[KEYS]; /* the last order handled successfully per key */
    uint64_t next_order[KEYS];
    uint64_t accepted, ended, closed;
} state;

static int handler(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    state *st = rl_dispatch_get_data(d);
    job_rec *j = job->data;
    check(atomic_exchange(&st->busy[j->key], 1) == 0, "a key is in one handler at a time");
    uint64_t last = atomic_load(&st->last[j->key]);
    check(j->order > last, "a key's jobs run in submission order");
    int fail = job->attempts <= j->fail_first;
    if (!fail)
        atomic_store(&st->last[j->key], j->order);
    atomic_store(&st->busy[j->key], 0);
    return fail ? -1 : 0;
}

static void on_done(rl_dispatcher_t *d, rl_dispatch_job *job, int outcome)
{
    state *st = rl_dispatch_get_data(d);
    job_rec *j = job->data;
    check(!j->ended, "a job ends once");
    check(outcome == RL_DISPATCH_DONE || outcome == RL_DISPATCH_DEAD ||
              outcome == RL_DISPATCH_RETURNED,
          "a known outcome");
    j->ended = 1;
    st->ended++;
    free(j);
}

static void on_close(rl_dispatcher_t *d)
{
    state *st = rl_dispatch_get_data(d);
    st->closed = 1;
}

static const char *const lane_names[] = {"l0", "l1", "l2", "l3", "l4", "l5"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size, 0};
    static state st;
    memset(&st, 0, sizeof st);
    uv_loop_t loop;
    check(uv_loop_init(&loop) == 0, "a loop");

    rl_dispatch_options o;
    rl_dispatch_options_init(&o);
    o.lanes = lane_names;
    o.lane_count = fuzz_byte(&in) % 4; /* 0 must be refused */
    o.handler = handler;
    o.on_done = on_done;
    o.data = &st;
    o.lane_capacity = 1 + fuzz_byte(&in) % 8;
    o.max_jobs = 1 + fuzz_byte(&in) % 32;
    o.max_attempts = 1 + fuzz_byte(&in) % 3;
    o.backoff_ms = 0;
    o.backoff_max_ms = 1;
    rl_dispatcher_t *d = NULL;
    int rc = rl_dispatch_init(&loop, &o, &d);
    if (rc != 0) {
        check(o.lane_count == 0 && rc == RL_EINVAL, "only zero lanes is refused here");
        uv_loop_close(&loop);
        return 0;
    }

    for (int op = 0; op < MAX_OPS && in.at < in.size; op++) {
        uint8_t b = fuzz_byte(&in);
        uint8_t arg = fuzz_byte(&in);
        switch (b % 8) {
        case 0:
        case 1: { /* submit */
            job_rec *j = calloc(1, sizeof *j);
            check(j != NULL, "memory");
            j->key = arg % KEYS;
            j->order = st.next_order[j->key] + 1;
            j->fail_first = (arg >> 3) % 4;
            char key[8];
            snprintf(key, sizeof key, "k%d", j->key);
            rc = b % 8 == 0 ? rl_dispatch_try_submit(d, key, strlen(key), j, j->key % 3)
                            : rl_dispatch_submit(d, key, strlen(key), j, j->key % 3, 0);
            if (rc == 0) {
                st.next_order[j->key]++;
                st.accepted++;
            } else {
                check(rc == RL_EAGAIN || rc == RL_ESTATE || rc == RL_ETIMEDOUT,
                      "a refusal is backpressure or no lane");
                free(j);
            }
            break;
        }
        case 2:
            rc = rl_dispatch_add_lane(d, lane_names[arg % 6]);
            check(rc == 0 || rc == RL_EDUPNAME, "add: new, or a duplicate");
            break;
        case 3:
            rc = rl_dispatch_remove_lane(d, lane_names[arg % 6]);
            check(rc == 0 || rc == RL_ENOENT || rc == RL_EBUSY, "remove: known answers");
            break;
        case 4: {
            size_t n = 0;
            check(rl_dispatch_take_tag(d, arg % 3, &n) == 0, "take_tag");
            break;
        }
        case 5:
            rc = rl_dispatch_wait_tag(d, arg % 3, arg % 4);
            check(rc == 0 || rc == RL_ETIMEDOUT, "wait_tag");
            break;
        case 6: {
            char json[4096];
            size_t len;
            rc = rl_dispatch_stats_json(d, json, sizeof json, &len);
            check(rc == 0 || rc == RL_ERANGE, "stats json");
            break;
        }
        default:
            uv_run(&loop, UV_RUN_NOWAIT);
            break;
        }
    }

    /* A lane must exist for DRAIN to finish queued jobs; STOP hands them back either way. */
    int mode = fuzz_byte(&in) & 1 ? RL_DISPATCH_STOP : RL_DISPATCH_DRAIN;
    if (mode == RL_DISPATCH_DRAIN)
        (void)rl_dispatch_add_lane(d, "last");
    check(rl_dispatch_close(d, mode, on_close) == 0, "close");
    while (!st.closed)
        uv_run(&loop, UV_RUN_ONCE);
    check(st.ended == st.accepted, "every accepted job ended exactly once");
    check(uv_loop_close(&loop) == 0, "nothing left on the loop");
    return 0;
}
