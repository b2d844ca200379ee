/* SPDX-License-Identifier: BSD-2-Clause */
/* Closing a cooperative-sticky consumer before its first assignment. librdkafka before 2.3.0
 * aborts in rd_kafka_destroy ("Assertion `assignor_state' failed", librdkafka issue 4312) when
 * the group has answered the consumer's JoinGroup but no SyncGroup has brought an assignment
 * yet: the assignor is chosen, its state is not made, and destroy frees a NULL state.
 *
 * Each case runs the consumer in a child process (this program with --child), so an abort is a
 * failed case and not a dead suite. The mock cluster lives in this process; the group's
 * coordinator is broker 1, which holds its SyncGroup answers back (an RTT injected by the mock)
 * so that the child can close in the window: its JoinGroup is answered (the rebalance protocol
 * is known) and its assignment has not come. */
#define _POSIX_C_SOURCE 200809L
#include "consumer_test_util.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define PARTITIONS 4
#define API_JOIN_GROUP 11 /* the Kafka protocol's ApiKeys */
#define API_SYNC_GROUP 14

/* --- the child --- */

static int nop_handler(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt)
{
    (void)c;
    (void)m;
    (void)attempt;
    return 0;
}

static bool join_answered(rd_kafka_t *rk)
{
    const char *p = rd_kafka_rebalance_protocol(rk); /* "NONE" until a JoinGroup answer */
    return p && strcmp(p, "NONE") != 0;
}

/* argv: --child BOOTSTRAPS GROUP TOPIC STRATEGY WHEN REVOKE_TIMEOUT_MS
 * FIRST_ASSIGNMENT_TIMEOUT_MS. WHEN is "at-once" (close right after making the consumer) or
 * "joined" (close once the JoinGroup is answered). Exits 0 after a clean close, 3 when the case
 * could not be set up; an abort is SIGABRT. Prints what it saw and how long the close took. */
static int child_main(char **argv)
{
    cluster parent = {.bootstraps = argv[2]}; /* the parent's mock cluster */
    const char *topics[] = {argv[4]};
    bool wait_join = strcmp(argv[6], "joined") == 0;
    cthread t;
    ct_init(&t, consumer_conf(&parent, argv[3], argv[5]), topics, 1, nop_handler, NULL);
    t.opts.revoke_timeout_ms = (uint32_t)strtoul(argv[7], NULL, 10);
    t.opts.first_assignment_timeout_ms = (uint32_t)strtoul(argv[8], NULL, 10);
    if (ct_start(&t) != 0)
        return 3;
    if (wait_join) {
        rd_kafka_t *rk = rl_consumer_kafka(t.c);
        WAIT_FOR(join_answered(rk), 30);
        if (!join_answered(rk) || ct_assigned(&t) != 0) {
            fprintf(stderr, "child: the join was not answered, or the assignment came early\n");
            return 3;
        }
    }
    double close_start = now_s();
    ct_stop(&t);
    long close_ms = (long)((now_s() - close_start) * 1000);
    printf("closed assigned=%" PRIu64 " errors=%ld close_ms=%ld\n", t.last.assigned, t.errors,
           close_ms);
    fflush(stdout);
    ct_free(&t);
    return 0;
}

/* The late-assignment children. Each closes at once and then keeps its loop from running until
 * the close's wait for the first assignment has run out (first_assignment_timeout_ms 500) and
 * librdkafka has queued that assignment for the consumer (its queue holds `queued` events):
 * the consumer sees the end of its wait and the assignment at the same time, as when the
 * 100 ms tick that gives up and the SyncGroup answer coincide. */
enum { LATE_FIRST_ASSIGNMENT_MS = 500, LATE_CHILD_BOUND_S = 60 };

typedef struct late_state {
    uint64_t assigned, revoked; /* the statistics at close_cb */
    long errors;
    bool left_undestroyed; /* on_error said the librdkafka handle was kept */
    bool issue4527;        /* ... because librdkafka would never finish closing */
    bool closed;
} late_state;

static void late_error(rl_consumer_t *c, rd_kafka_resp_err_t err, const char *reason)
{
    late_state *s = rl_consumer_get_data(c);
    s->errors++;
    if (strstr(reason, "left undestroyed"))
        s->left_undestroyed = true;
    if (strstr(reason, "issue 4527"))
        s->issue4527 = true;
    fprintf(stderr, "child: on_error %s: %s\n", rd_kafka_err2name(err), reason);
}

static void late_closed(rl_consumer_t *c)
{
    late_state *s = rl_consumer_get_data(c);
    rl_consumer_stats st;
    rl_consumer_stats_get(c, &st, NULL, 0, NULL);
    s->assigned = st.assigned;
    s->revoked = st.revoked;
    s->closed = true;
}

/* argv: --late-child BOOTSTRAPS GROUP TOPICS STRATEGY POLL_BATCH QUEUED, TOPICS one or two names
 * separated by a comma. A close that never ends is SIGALRM after LATE_CHILD_BOUND_S. */
static int late_child_main(char **argv)
{
    alarm(LATE_CHILD_BOUND_S);
    cluster parent = {.bootstraps = argv[2]};
    char *second = strchr(argv[4], ',');
    if (second)
        *second++ = '\0';
    const char *topics[] = {argv[4], second};
    long queued = strtol(argv[7], NULL, 10);
    const char *lanes[] = {"a", "b"};
    late_state s = {0};
    uv_loop_t loop;
    if (uv_loop_init(&loop) != 0)
        return 3;
    rl_consumer_options o;
    rl_consumer_options_init(&o);
    o.conf = consumer_conf(&parent, argv[3], argv[5]);
    o.topics = topics;
    o.topic_count = second ? 2 : 1;
    o.handler = nop_handler;
    o.dispatch.lanes = lanes;
    o.dispatch.lane_count = 2;
    o.poll_batch = (uint32_t)strtoul(argv[6], NULL, 10);
    o.first_assignment_timeout_ms = LATE_FIRST_ASSIGNMENT_MS;
    o.on_error = late_error;
    o.data = &s;
    rl_consumer_t *c = NULL;
    if (rl_consumer_new(&loop, &o, &c) != 0)
        return 3;
    double close_start = now_s();
    if (rl_consumer_close(c, late_closed) != 0)
        return 3;
    rd_kafka_queue_t *q = rd_kafka_queue_get_consumer(rl_consumer_kafka(c));
    double waited = close_start + LATE_FIRST_ASSIGNMENT_MS / 1000.0 + 0.1;
    WAIT_FOR(now_s() >= waited && rd_kafka_queue_length(q) >= (size_t)queued, 30);
    bool ready = rd_kafka_queue_length(q) >= (size_t)queued;
    rd_kafka_queue_destroy(q);
    if (!ready) {
        fprintf(stderr, "child: librdkafka queued no assignment in 30 s\n");
        return 3;
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    long close_ms = (long)((now_s() - close_start) * 1000);
    printf("closed=%d assigned=%" PRIu64 " revoked=%" PRIu64 " errors=%ld left_undestroyed=%d "
           "issue4527=%d close_ms=%ld\n",
           s.closed, s.assigned, s.revoked, s.errors, s.left_undestroyed, s.issue4527, close_ms);
    fflush(stdout);
    return uv_loop_close(&loop) == 0 ? 0 : 4;
}

/* --- the cases --- */

typedef struct child_result {
    int status;    /* waitpid's */
    char out[256]; /* what it printed */
} child_result;

/* The librdkafka version with the fix for issue 4312. */
#define KAFKA_COOP_DESTROY_FIXED 0x020300ff

/* The environment for a child, with LeakSanitizer off when keep_leaks (a consumer that must
 * leave its librdkafka handle undestroyed). */
static char **child_env(bool keep_leaks, char *asan, size_t size)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 2, sizeof *env);
    assert_non_null(env);
    size_t j = 0;
    for (size_t i = 0; i < n; i++)
        if (!keep_leaks || strncmp(environ[i], "ASAN_OPTIONS=", 13) != 0)
            env[j++] = environ[i];
    if (keep_leaks) {
        const char *old = getenv("ASAN_OPTIONS");
        snprintf(asan, size, "ASAN_OPTIONS=%s%sdetect_leaks=0", old ? old : "",
                 old && *old ? ":" : "");
        env[j++] = asan;
    }
    env[j] = NULL;
    return env;
}

/* Runs this program with argv (argv[0] is replaced by its path) and collects what it printed. */
static child_result run_argv(char **argv, bool keep_leaks, const char *what)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(n > 0);
    self[n] = '\0';
    argv[0] = self;
    int out[2];
    assert_int_equal(pipe(out), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    pid_t pid;
    char asan[512];
    char **env = child_env(keep_leaks, asan, sizeof asan);
    assert_int_equal(posix_spawn(&pid, self, &fa, NULL, argv, env), 0);
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    close(out[1]);
    child_result r = {0};
    size_t len = 0;
    ssize_t got;
    while (len < sizeof r.out - 1 && (got = read(out[0], r.out + len, sizeof r.out - 1 - len)) > 0)
        len += (size_t)got;
    r.out[len] = '\0';
    close(out[0]);
    assert_int_equal(waitpid(pid, &r.status, 0), pid);
    if (WIFSIGNALED(r.status))
        print_message("child (%s): killed by signal %d (%s)\n", what, WTERMSIG(r.status),
                      strsignal(WTERMSIG(r.status)));
    else
        print_message("child (%s): exit %d: %s", what, WEXITSTATUS(r.status), r.out);
    return r;
}

static child_result run_child(const char *group, const char *topic, const char *strategy,
                              const char *when, unsigned revoke_timeout_ms,
                              unsigned first_assignment_timeout_ms, bool keep_leaks)
{
    char timeout[16], first[16];
    snprintf(timeout, sizeof timeout, "%u", revoke_timeout_ms);
    snprintf(first, sizeof first, "%u", first_assignment_timeout_ms);
    char *argv[] = {NULL,          "--child",     (char *)k.bootstraps,
                    (char *)group, (char *)topic, (char *)strategy,
                    (char *)when,  timeout,       first,
                    NULL};
    return run_argv(argv, keep_leaks, when);
}

/* The group's coordinator is broker 1, and its next SyncGroup answers wait rtt_ms. */
static void hold_sync_group(const char *group, int answers, int rtt_ms)
{
    assert_int_equal(rd_kafka_mock_coordinator_set(k.mock, "group", group, 1), 0);
    for (int i = 0; i < answers; i++)
        assert_int_equal(rd_kafka_mock_broker_push_request_error_rtts(
                             k.mock, 1, API_SYNC_GROUP, 1, RD_KAFKA_RESP_ERR_NO_ERROR, rtt_ms),
                         0);
}

static void close_before_the_join_is_answered(void **state)
{
    (void)state;
    const char *group = "g-close-at-once", *topic = "close-at-once";
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, topic, PARTITIONS, 1), 0);
    child_result r = run_child(group, topic, "cooperative-sticky", "at-once", 10000, 10000, false);
    assert_true(WIFEXITED(r.status));
    assert_int_equal(WEXITSTATUS(r.status), 0);
}

/* The abort of librdkafka issue 4312 on 2.0.2: closed between the JoinGroup answer and the
 * first SyncGroup answer. The consumer waits for the assignment before it leaves, so the child
 * closes cleanly and has held the partitions. */
static void close_between_join_and_first_assignment(void **state)
{
    (void)state;
    const char *group = "g-close-joined", *topic = "close-joined";
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, topic, PARTITIONS, 1), 0);
    hold_sync_group(group, 1, 2000);
    child_result r = run_child(group, topic, "cooperative-sticky", "joined", 10000, 10000, false);
    assert_true(WIFEXITED(r.status));
    assert_int_equal(WEXITSTATUS(r.status), 0);
    if (rd_kafka_version() < KAFKA_COOP_DESTROY_FIXED) /* it waited for the assignment */
        assert_non_null(strstr(r.out, "closed assigned=4 errors=0"));
}

/* The assignment does not come within first_assignment_timeout_ms: the close ends anyway,
 * without an abort, and on librdkafka before 2.3.0 it reports that the handle was left
 * undestroyed. */
static void close_when_the_first_assignment_never_comes(void **state)
{
    (void)state;
    const char *group = "g-close-no-sync", *topic = "close-no-sync";
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, topic, PARTITIONS, 1), 0);
    hold_sync_group(group, 1, 6000);
    child_result r = run_child(group, topic, "cooperative-sticky", "joined", 10000, 1000, true);
    assert_true(WIFEXITED(r.status));
    assert_int_equal(WEXITSTATUS(r.status), 0);
    if (rd_kafka_version() < KAFKA_COOP_DESTROY_FIXED)
        assert_non_null(strstr(r.out, "closed assigned=0 errors=1"));
}

static atomic_long handled;

static int count_handler(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt)
{
    (void)c;
    (void)m;
    (void)attempt;
    atomic_fetch_add(&handled, 1);
    return 0;
}

static child_result run_late_child(const char *group, const char *topic, const char *strategy,
                                   const char *poll_batch, const char *queued, bool keep_leaks)
{
    char *argv[] = {NULL,          "--late-child",   (char *)k.bootstraps, (char *)group,
                    (char *)topic, (char *)strategy, (char *)poll_batch,   (char *)queued,
                    NULL};
    return run_argv(argv, keep_leaks, "late assignment");
}

/* A consumer of the group that holds every partition when the child joins, so that the child's
 * first assignment is what a consumer joining a busy cooperative group gets: an empty one (the
 * first of cooperative-sticky's two rounds). It handles the topic's messages throughout. The
 * group's coordinator is broker 1, and the holder's answer to the rejoin the child causes
 * comes 1 s after the child's: the mock coordinator answers a member's SyncGroup with
 * INVALID_REQUEST when the leader's came first, and a child that rejoins gets a second,
 * non-empty assignment. */
static void start_holder(cthread *a, const char *group, const char *topic, const char *strategy)
{
    static const char *topics[1];
    topics[0] = topic;
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, topic, PARTITIONS, 1), 0);
    assert_int_equal(rd_kafka_mock_coordinator_set(k.mock, "group", group, 1), 0);
    atomic_store(&handled, 0);
    ct_init(a, consumer_conf(&k, group, strategy), topics, 1, count_handler, NULL);
    assert_rl_ok(ct_start(a));
    WAIT_FOR(ct_assigned(a) == PARTITIONS, 30);
    assert_int_equal(ct_assigned(a), PARTITIONS);
    assert_int_equal(rd_kafka_mock_broker_push_request_error_rtts(k.mock, 1, API_JOIN_GROUP, 2,
                                                                  RD_KAFKA_RESP_ERR_NO_ERROR, 0,
                                                                  RD_KAFKA_RESP_ERR_NO_ERROR, 1000),
                     0);
}

/* After the child: the group goes on without it (at once when it left, after its session timed
 * out when its handle was left undestroyed) and the holder, holding every partition again,
 * handles the messages produced now. */
static void holder_goes_on(cthread *a, const char *topic)
{
    enum { MESSAGES = 40 };
    producer p;
    producer_start(&p, &k);
    for (int i = 0; i < MESSAGES; i++)
        produce_seq(&p, topic, i % 8, i / 8);
    producer_flush(&p);
    producer_stop(&p);
    WAIT_FOR(atomic_load(&handled) >= MESSAGES && ct_assigned(a) == PARTITIONS, 60);
    assert_int_equal(ct_assigned(a), PARTITIONS);
    assert_true(atomic_load(&handled) >= MESSAGES);
    ct_stop(a);
    ct_free(a);
}

/* The hang found in review, made deterministic: a cooperative-sticky consumer joins a group
 * whose other member holds every partition and is closed at once; its wait for the first
 * assignment runs out just as that assignment, an empty one, arrives. The close used to give
 * up first and ask librdkafka to close with the assignment still queued; librdkafka before
 * 2.4.0 then waits forever for an assign call its closing group no longer takes (issue 4527),
 * and the close never ended (the child died of its 60 s alarm). The consumer now serves its
 * queue before it decides to leave: it takes the assignment, leaves as usual, destroys the
 * handle and reports nothing. */
static void close_as_the_first_assignment_arrives(void **state)
{
    (void)state;
    const char *group = "g-close-late", *topic = "close-late";
    cthread a;
    start_holder(&a, group, topic, "cooperative-sticky");
    child_result r = run_late_child(group, topic, "cooperative-sticky", "500", "1", false);
    assert_true(WIFEXITED(r.status));
    assert_int_equal(WEXITSTATUS(r.status), 0);
    assert_non_null(strstr(r.out, "closed=1 assigned=0 revoked=0 errors=0 left_undestroyed=0 "));
    holder_goes_on(&a, topic);
}

/* The same moment, with an error message ahead of the assignment in the consumer's queue (a
 * second topic it subscribes to is refused: TOPIC_AUTHORIZATION_FAILED) and poll_batch 1: the
 * close's first poll batch ends before the assignment. A closing consumer serves its whole
 * queue before it decides to leave, so the assignment is still served before librdkafka is
 * asked to close. Under cooperative-sticky the assignment is empty; served after the close
 * request, librdkafka before 2.4.0 never finished that close (issue 4527), and the close ended
 * without it, leaving the handle undestroyed (errors=3 left_undestroyed=1 issue4527=1): now
 * the close is a plain one. Under the eager protocol the assignment holds half the partitions:
 * taken, then revoked by the close, none of their messages handled (an older version reported
 * them assigned and never revoked). An assignment queued in the moment between that last
 * poll and the close request is still served after it (assign_late in rebalance.c). */
static void late_assignment_case(const char *group, const char *topic, const char *strategy,
                                 bool stuck, const char *expect, const char *missed)
{
    /* The child waits for two events in its queue; when they are two errors (librdkafka
     * repeats the refused topic's) rather than an error and the assignment, the assignment
     * comes only after the close and the case did not arise: `missed` is that outcome, and
     * the case runs again in a fresh group, three times at most. */
    for (int attempt = 0; attempt < 3; attempt++) {
        char g[96], t[96], topics[160];
        snprintf(g, sizeof g, "%s-%d", group, attempt);
        snprintf(t, sizeof t, "%s-%d", topic, attempt);
        snprintf(topics, sizeof topics, "%s,close-late-denied", t);
        rd_kafka_mock_topic_set_error(k.mock, "close-late-denied",
                                      RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED);
        cthread a;
        start_holder(&a, g, t, strategy);
        child_result r = run_late_child(g, topics, strategy, "1", "2", stuck);
        assert_true(WIFEXITED(r.status));
        assert_int_equal(WEXITSTATUS(r.status), 0);
        bool again = missed && strstr(r.out, missed);
        if (!again)
            assert_non_null(strstr(r.out, expect));
        holder_goes_on(&a, t);
        if (!again)
            return;
        print_message("the assignment was not queued behind the error (attempt %d): again\n",
                      attempt + 1);
    }
    fail_msg("the late assignment did not arise in 3 attempts");
}

static void assignment_served_after_the_close_began_leaving(void **state)
{
    (void)state;
    late_assignment_case("g-close-late-behind", "close-late-behind", "cooperative-sticky", false,
                         "closed=1 assigned=0 revoked=0 errors=1 left_undestroyed=0 issue4527=0 ",
                         NULL);
}

static void eager_assignment_served_after_the_close_began_leaving(void **state)
{
    (void)state;
    late_assignment_case("g-close-late-eager", "close-late-eager", "range", false,
                         "closed=1 assigned=2 revoked=2 errors=1 left_undestroyed=0 ",
                         "closed=1 assigned=0 revoked=0 errors=1 left_undestroyed=0 ");
}

/* The eager protocol has no assignor state: the same window is no danger. */
static void eager_close_between_join_and_first_assignment(void **state)
{
    (void)state;
    const char *group = "g-close-joined-range", *topic = "close-joined-range";
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, topic, PARTITIONS, 1), 0);
    hold_sync_group(group, 1, 2000);
    child_result r = run_child(group, topic, "range", "joined", 10000, 10000, false);
    assert_true(WIFEXITED(r.status));
    assert_int_equal(WEXITSTATUS(r.status), 0);
}

/* A close during start-up, when the group cannot answer at all (its coordinator, broker 3, is
 * down: a cluster out of reach looks the same): the close waits first_assignment_timeout_ms
 * (500 ms here), not revoke_timeout_ms (left at its 30 s default), and leaves. The bound of
 * the test is 10 s: 20 times the option, so a loaded machine or a sanitizer build does not
 * fail it, and a third of the 30 s that the close took before the option (it waited
 * revoke_timeout_ms for an assignment that could not come), so that one does. Then nothing
 * was committed, and the group's next consumer handles every message. */
static void close_before_any_answer_ends_within_its_bound(void **state)
{
    (void)state;
    const char *group = "g-close-unreachable", *topic = "close-unreachable";
    enum { MESSAGES = 200 };
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, topic, PARTITIONS, 1), 0);
    producer p;
    producer_start(&p, &k);
    for (int i = 0; i < MESSAGES; i++)
        produce_seq(&p, topic, i % 20, i / 20);
    producer_flush(&p);
    producer_stop(&p);

    assert_int_equal(rd_kafka_mock_coordinator_set(k.mock, "group", group, 3), 0);
    assert_int_equal(rd_kafka_mock_broker_set_down(k.mock, 3), 0);
    child_result r = run_child(group, topic, "cooperative-sticky", "at-once", 30000, 500, false);
    assert_int_equal(rd_kafka_mock_broker_set_up(k.mock, 3), 0);
    assert_true(WIFEXITED(r.status));
    assert_int_equal(WEXITSTATUS(r.status), 0);
    assert_non_null(strstr(r.out, "closed assigned=0 ")); /* errors: broker 3 refused */
    const char *ms = strstr(r.out, "close_ms=");
    assert_non_null(ms);
    long close_ms = strtol(ms + 9, NULL, 10);
    if (close_ms > 10000)
        fail_msg("the close took %ld ms, over the test's bound of 10 s", close_ms);

    int64_t committed[PARTITIONS];
    committed_offsets(&k, group, topic, PARTITIONS, committed);
    for (int i = 0; i < PARTITIONS; i++)
        assert_int_equal(committed[i], -1);
    const char *topics[] = {topic};
    cthread t;
    atomic_store(&handled, 0);
    ct_init(&t, consumer_conf(&k, group, "cooperative-sticky"), topics, 1, count_handler, NULL);
    assert_rl_ok(ct_start(&t));
    WAIT_FOR(atomic_load(&handled) >= MESSAGES, 60);
    ct_stop(&t);
    ct_free(&t);
    assert_int_equal(atomic_load(&handled), MESSAGES);
}

/* --- an eager close as the group rebalances ---
 *
 * Two eager consumers close one after the other, as an application's shutdown does: the
 * first one's LeaveGroup starts a rebalance, and the second one's close meets it (its commit
 * is refused, REBALANCE_IN_PROGRESS, and librdkafka queues a revoke). When that revoke is
 * still queued as the close request goes in, librdkafka 2.0.2 unassigns by itself, sends its
 * LeaveGroup at once and ends its group as soon as that is answered; a commit or an assign
 * call of the revoke, served after, reaches the group in its last moments: it aborted
 * librdkafka (`rd_kafka_cgrp_terminated: assert: !rd_kafka_assignment_in_progress`) or waited
 * forever (the request dropped unanswered), now and then. The consumer now serves a revoke
 * queued during its close's commit before it asks librdkafka to close, and makes no group
 * request once its LeaveGroup is out. librdkafka's own debug lines say
 * which group requests reached the group after its LeaveGroup; there must be none. (The old
 * code hung in the first or second round: a close that never ends is SIGALRM here.) */
static atomic_int ops_after_leave, stale_closes;
static atomic_bool left_seen;

static void watch_cgrp_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk, (void)level;
    if (strcmp(fac, "LEAVE") == 0 && strstr(buf, ": leave (in state"))
        atomic_store(&left_seen, true);
    if (strcmp(fac, "CGRPOP") != 0)
        return;
    if (strstr(buf, "received op TERMINATE") && strstr(buf, "join-state wait-unassign-call"))
        atomic_fetch_add(&stale_closes, 1);
    if (atomic_load(&left_seen) &&
        (strstr(buf, "received op OFFSET_COMMIT") || strstr(buf, "received op ASSIGN"))) {
        atomic_fetch_add(&ops_after_leave, 1);
        fprintf(stderr, "after the LeaveGroup: %s\n", buf);
    }
}

static void eager_close_as_the_group_rebalances(void **state)
{
    (void)state;
    enum { ROUNDS = SLOW_BUILD ? 4 : 8, MESSAGES = 80 };
    atomic_init(&ops_after_leave, 0);
    atomic_init(&stale_closes, 0);
    int refused = 0;
    alarm(ROUNDS * 30);
    for (int round = 0; round < ROUNDS; round++) {
        char group[64], topic[64];
        snprintf(group, sizeof group, "g-close-rebalancing-%d", round);
        snprintf(topic, sizeof topic, "close-rebalancing-%d", round);
        const char *topics[] = {topic};
        assert_int_equal(rd_kafka_mock_topic_create(k.mock, topic, PARTITIONS, 1), 0);
        assert_int_equal(rd_kafka_mock_coordinator_set(k.mock, "group", group, 1), 0);
        atomic_store(&handled, 0);
        atomic_store(&left_seen, false);
        cthread a, b;
        ct_init(&a, consumer_conf(&k, group, "range"), topics, 1, count_handler, NULL);
        rd_kafka_conf_t *conf = consumer_conf(&k, group, "range");
        conf_set_ok(conf, "debug", "cgrp");
        rd_kafka_conf_set_log_cb(conf, watch_cgrp_log);
        ct_init(&b, conf, topics, 1, count_handler, NULL);
        /* Its first work is committed at once, then nothing more until the close. */
        b.opts.commit_interval_ms = 600000;
        assert_rl_ok(ct_start(&a));
        assert_rl_ok(ct_start(&b));
        WAIT_FOR(ct_assigned(&a) > 0 && ct_assigned(&b) > 0, 60);
        assert_true(ct_assigned(&a) > 0 && ct_assigned(&b) > 0);
        producer p;
        producer_start(&p, &k);
        for (int batch = 0; batch < 2; batch++) {
            for (int i = 0; i < MESSAGES; i++)
                produce_seq(&p, topic, i % 16, batch * (MESSAGES / 16) + i / 16);
            producer_flush(&p);
            WAIT_FOR(atomic_load(&handled) >= (batch + 1) * MESSAGES, 60);
            sleep_ms(300); /* the first batch's commit */
        }
        producer_stop(&p);
        ct_stop(&a);
        ct_stop(&b);
        refused += b.errors > 0;
        ct_free(&a);
        ct_free(&b);
    }
    alarm(0);
    print_message("%d rounds: %d closes met the rebalance (commit refused), %d with a revoke "
                  "still queued; %d group requests after the LeaveGroup\n",
                  ROUNDS, refused, atomic_load(&stale_closes), atomic_load(&ops_after_leave));
    assert_int_equal(atomic_load(&ops_after_leave), 0);
}

/* A close must wait at least 1 ms for a first assignment: 0 is refused, and says so. */
static void first_assignment_timeout_zero_is_refused(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    const char *topics[] = {"close-refused"};
    const char *lanes[] = {"a"};
    rl_consumer_options o;
    rl_consumer_options_init(&o);
    assert_int_equal(o.first_assignment_timeout_ms, 5000);
    o.conf = consumer_conf(&k, "g-close-refused", "cooperative-sticky");
    o.topics = topics;
    o.topic_count = 1;
    o.handler = count_handler;
    o.dispatch.lanes = lanes;
    o.dispatch.lane_count = 1;
    o.first_assignment_timeout_ms = 0;
    rl_consumer_t *c = (rl_consumer_t *)&c;
    assert_int_equal(rl_consumer_new(&loop, &o, &c), RL_EINVAL);
    assert_null(c);
    assert_non_null(strstr(rl_last_error_detail(), "first_assignment_timeout_ms 0: "));
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(int argc, char **argv)
{
    if (argc == 9 && strcmp(argv[1], "--child") == 0)
        return child_main(argv);
    if (argc == 8 && strcmp(argv[1], "--late-child") == 0)
        return late_child_main(argv);
    print_message("librdkafka %s\n", rd_kafka_version_str());
    if (getenv("RINGLANE_TEST_FILTER"))
        cmocka_set_test_filter(getenv("RINGLANE_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(close_before_the_join_is_answered),
        cmocka_unit_test(close_between_join_and_first_assignment),
        cmocka_unit_test(close_when_the_first_assignment_never_comes),
        cmocka_unit_test(close_as_the_first_assignment_arrives),
        cmocka_unit_test(assignment_served_after_the_close_began_leaving),
        cmocka_unit_test(eager_assignment_served_after_the_close_began_leaving),
        cmocka_unit_test(eager_close_between_join_and_first_assignment),
        cmocka_unit_test(close_before_any_answer_ends_within_its_bound),
        cmocka_unit_test(first_assignment_timeout_zero_is_refused),
        cmocka_unit_test(eager_close_as_the_group_rebalances),
    };
    return cmocka_run_group_tests(tests, suite_setup, suite_teardown);
}
