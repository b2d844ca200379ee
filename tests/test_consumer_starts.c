/* SPDX-License-Identifier: BSD-2-Clause */
/* No handler call starts once its partition's revoke or loss began. A lane worker takes a job
 * from its lane and then calls the handler; the loop may begin a loss in between (it cannot
 * take that job back, and does not wait for a lost partition's jobs), and the handler would
 * then begin after on_rebalance said LOST. That moment cannot be staged through the public
 * API, so this suite plays it out on the consumer's own job callbacks: a job taken in the
 * partition's epoch, the loss begun (rl__stop_starts, as the revoke does before it takes the
 * jobs back), then the worker's call. The end-to-end check is test_fault_matrix's "handled
 * without holding the partition" under partitions lost. */
#define _POSIX_C_SOURCE 200809L
#include "test_util.h"

#include "consumer_internal.h"

#include <stdatomic.h>
#include <uv.h>

typedef struct fixture {
    uv_loop_t loop;
    rl_dispatcher_t *d;
    rl_consumer_t c;
    rl__topic topic;
    rl__part part;
    rl__cjob jobs[4];
    rl_dispatch_job pub[4];
    int calls;       /* handler calls */
    int batch_calls; /* batch handler calls */
} fixture;

static fixture *F;

static int handler(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt)
{
    (void)c;
    (void)m;
    (void)attempt;
    F->calls++;
    return 0;
}

static int batch_handler(rl_consumer_t *c, const rd_kafka_message_t *const *msgs, size_t n,
                         int *status)
{
    (void)c;
    (void)msgs;
    for (size_t i = 0; i < n; i++)
        status[i] = 0;
    F->batch_calls++;
    return 0;
}

static int never(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    (void)d;
    (void)job;
    return 0;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    F = f;
    assert_int_equal(uv_loop_init(&f->loop), 0);
    rl_dispatch_options o;
    rl_dispatch_options_init(&o);
    o.handler = never; /* the dispatcher only carries the consumer here (rl_dispatch_get_data) */
    o.lane_count = 1;
    o.data = &f->c;
    assert_rl_ok(rl_dispatch_init(&f->loop, &o, &f->d));
    f->c.d = f->d;
    f->c.opts.handler = handler;
    f->c.opts.batch_handler = batch_handler;
    f->topic.name = "t";
    f->part.topic = &f->topic;
    f->part.partition = 3;
    f->part.tag = 3;
    assert_rl_ok(rl__offsets_init(&f->part.win, 64));
    /* Assigned, as assign() leaves it: epoch 7, whose jobs may start. */
    f->part.epoch = 7;
    atomic_store(&f->part.start_epoch, 7);
    f->part.assigned = true;
    for (int i = 0; i < 4; i++) {
        rl__cjob *j = &f->jobs[i];
        j->c = &f->c;
        j->part = &f->part;
        j->epoch = 7;
        j->offset = 100 + i;
        assert_rl_ok(rl__offsets_push(&f->part.win, j->offset));
        f->pub[i].data = j;
        f->pub[i].tag = 3;
    }
    *state = f;
    return 0;
}

static void on_closed(rl_dispatcher_t *d)
{
    (void)d;
}

static int teardown(void **state)
{
    fixture *f = *state;
    assert_rl_ok(rl_dispatch_close(f->d, RL_DISPATCH_DRAIN, on_closed));
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    rl__offsets_free(&f->part.win);
    free(f);
    return 0;
}

/* The job's end as the dispatcher delivers it (on the loop), without freeing it: the jobs are
 * the fixture's. rl__job_done frees what it does not dead-letter, so it gets a heap copy. */
static void end_job(fixture *f, int i, int outcome)
{
    rl__cjob *copy = malloc(sizeof *copy);
    assert_non_null(copy);
    memcpy(copy, &f->jobs[i], sizeof *copy);
    rl_dispatch_job pub = f->pub[i];
    pub.data = copy;
    rl__job_done(f->d, &pub, outcome);
}

static void held_partition_starts_its_jobs(void **state)
{
    fixture *f = *state;
    assert_int_equal(rl__job_handler(f->d, &f->pub[0]), 0);
    assert_int_equal(f->calls, 1);
    assert_false(f->jobs[0].not_started);
    end_job(f, 0, RL_DISPATCH_DONE);
    assert_int_equal(f->c.stats.done, 1);
    assert_int_equal(f->c.stats.stale, 0);
    assert_int_equal(rl__offsets_watermark(&f->part.win), 101); /* offset 100 completed */
}

/* The regression: before the look in rl__job_handler, the handler ran here (calls 1) and its
 * end counted as done (the revoke's commit would then have passed a message never handled
 * while the partition was held). */
static void job_taken_before_the_loss_does_not_start(void **state)
{
    fixture *f = *state;
    rl__stop_starts(&f->part); /* the loss begins: the job was already off its lane */
    assert_int_equal(rl__job_handler(f->d, &f->pub[0]), 0);
    assert_int_equal(f->calls, 0);
    assert_true(f->jobs[0].not_started);
    assert_false(atomic_load(&f->jobs[0].running));
    end_job(f, 0, RL_DISPATCH_DONE);
    assert_int_equal(f->c.stats.done, 0);
    assert_int_equal(f->c.stats.stale, 1);
    assert_int_equal(rl__offsets_watermark(&f->part.win), -1); /* nothing completed */
}

/* A revoke (not a loss) stops the starts the same way: the partition is on its way out, its
 * queued jobs were taken back, and the revoke waits only for calls already under way. */
static void job_of_an_earlier_assignment_does_not_start(void **state)
{
    fixture *f = *state;
    /* Revoked and assigned again since the job was taken (epochs 8, then 9). */
    f->part.epoch = 9;
    atomic_store(&f->part.start_epoch, 9);
    assert_int_equal(rl__job_handler(f->d, &f->pub[1]), 0);
    assert_int_equal(f->calls, 0);
    end_job(f, 1, RL_DISPATCH_DONE);
    assert_int_equal(f->c.stats.stale, 1);
    assert_int_equal(f->c.stats.done, 0);
}

/* A retry (a later attempt) of a job whose partition was lost in its backoff does not start:
 * the dispatcher gives back a job waiting for its retry, but one whose retry came due and was
 * taken by a worker a moment before the loss is in the same window. */
static void retry_after_the_loss_does_not_start(void **state)
{
    fixture *f = *state;
    f->pub[2].attempts = 2;
    f->pub[2].status = 1;
    rl__stop_starts(&f->part);
    assert_int_equal(rl__job_handler(f->d, &f->pub[2]), 0);
    assert_int_equal(f->calls, 0);
    assert_int_equal(atomic_load(&f->jobs[2].failures), 0);
    end_job(f, 2, RL_DISPATCH_DONE);
    assert_int_equal(f->c.stats.stale, 1);
}

/* A batch is of one partition: none of it starts once the loss began, all of it before. */
static void batch_starts_whole_or_not_at_all(void **state)
{
    fixture *f = *state;
    rl_dispatch_job *batch[3] = {&f->pub[0], &f->pub[1], &f->pub[2]};
    int status[3] = {0};
    assert_int_equal(rl__job_batch_handler(f->d, batch, 3, status), 0);
    assert_int_equal(f->batch_calls, 1);
    for (int i = 0; i < 3; i++)
        assert_false(f->jobs[i].not_started);

    rl__stop_starts(&f->part);
    assert_int_equal(rl__job_batch_handler(f->d, batch, 3, status), 0);
    assert_int_equal(f->batch_calls, 1);
    for (int i = 0; i < 3; i++) {
        assert_true(f->jobs[i].not_started);
        end_job(f, i, RL_DISPATCH_DONE);
    }
    assert_int_equal(f->c.stats.stale, 3);
    assert_int_equal(f->c.stats.done, 0);
}

/* One job of an earlier epoch in a batch keeps the whole batch from starting. */
static void batch_with_a_job_of_an_earlier_assignment_does_not_start(void **state)
{
    fixture *f = *state;
    f->jobs[1].epoch = 5;
    rl_dispatch_job *batch[3] = {&f->pub[0], &f->pub[1], &f->pub[2]};
    int status[3] = {0};
    assert_int_equal(rl__job_batch_handler(f->d, batch, 3, status), 0);
    assert_int_equal(f->batch_calls, 0);
    for (int i = 0; i < 3; i++)
        assert_true(f->jobs[i].not_started);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(held_partition_starts_its_jobs, setup, teardown),
        cmocka_unit_test_setup_teardown(job_taken_before_the_loss_does_not_start, setup, teardown),
        cmocka_unit_test_setup_teardown(job_of_an_earlier_assignment_does_not_start, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(retry_after_the_loss_does_not_start, setup, teardown),
        cmocka_unit_test_setup_teardown(batch_starts_whole_or_not_at_all, setup, teardown),
        cmocka_unit_test_setup_teardown(batch_with_a_job_of_an_earlier_assignment_does_not_start,
                                        setup, teardown),
    };
    return cmocka_run_group_tests_name("consumer_starts", tests, NULL, NULL);
}
