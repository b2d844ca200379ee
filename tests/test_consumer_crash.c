/* SPDX-License-Identifier: BSD-2-Clause */
/* Committed offsets never pass an unfinished message, even when the consumer dies without a
 * word. A child process (this program with --child) consumes from the mock cluster that lives
 * in this process, writing "partition offset" to a file as each handler finishes, with handlers
 * of different speeds so that completions come out of order, until it is killed with SIGKILL.
 * Then: every offset below the group's committed offset must be in the child's file, and a new
 * consumer must start exactly there and bring every partition to its end. */
#define _POSIX_C_SOURCE 200809L
#include "consumer_test_util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define PARTITIONS 4
#define KEYS 100
#define PER_KEY (SLOW_BUILD ? 20 : 40)
#define MAX_OFFSETS (KEYS * PER_KEY)

/* --- the child --- */

static int child_fd = -1;

static int child_handler(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt)
{
    (void)c;
    (void)attempt;
    int key;
    int64_t seq;
    /* Slow keys: the other lanes finish later offsets first. The pace leaves time for a few
     * commits before the kill. */
    sleep_ms(msg_parse(m, &key, &seq) && key % 5 == 0 ? 5 : 1);
    char line[48];
    int n = snprintf(line, sizeof line, "%d %" PRId64 "\n", (int)m->partition, m->offset);
    if (write(child_fd, line, (size_t)n) != n) /* one append: finished before we return */
        _exit(3);
    return 0;
}

static int child_main(char **argv)
{
    /* argv: --child BOOTSTRAPS GROUP TOPIC FILE */
    child_fd = open(argv[5], O_WRONLY | O_APPEND | O_CREAT, 0600);
    if (child_fd < 0)
        return 2;
    cluster parent = {.bootstraps = argv[2]}; /* the parent's mock cluster */
    const char *topics[] = {argv[4]};
    cthread t;
    ct_init(&t, consumer_conf(&parent, argv[3], "cooperative-sticky"), topics, 1, child_handler,
            NULL);
    t.opts.commit_interval_ms = 50;
    if (ct_start(&t) != 0)
        return 2;
    for (;;)
        pause(); /* until SIGKILL */
}

/* --- the test --- */

typedef struct seen {
    uv_mutex_t mu;
    bool done[PARTITIONS][MAX_OFFSETS];
    int64_t first[PARTITIONS]; /* the first offset the new consumer saw, -1 before */
    long again;                /* offsets the new consumer handled that the child had done */
} seen;

static seen s;

static int restart_handler(rl_consumer_t *c, const rd_kafka_message_t *m, uint32_t attempt)
{
    (void)c;
    (void)attempt;
    uv_mutex_lock(&s.mu);
    if (m->partition >= 0 && m->partition < PARTITIONS && m->offset >= 0 &&
        m->offset < MAX_OFFSETS) {
        if (s.first[m->partition] < 0)
            s.first[m->partition] = m->offset;
        if (s.done[m->partition][m->offset])
            s.again++;
        s.done[m->partition][m->offset] = true;
    }
    uv_mutex_unlock(&s.mu);
    return 0;
}

static long lines_in(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    long n = 0;
    int ch;
    while ((ch = fgetc(f)) != EOF)
        n += ch == '\n';
    fclose(f);
    return n;
}

static bool all_done(const int64_t *high)
{
    uv_mutex_lock(&s.mu);
    bool all = true;
    for (int p = 0; p < PARTITIONS && all; p++)
        for (int64_t o = 0; o < high[p] && all; o++)
            all = s.done[p][o];
    uv_mutex_unlock(&s.mu);
    return all;
}

static void committed_offsets_survive_a_kill(void **state)
{
    (void)state;
    const char *topic = "crash", *group = "g-crash";
    cluster_start(&k, 3);
    assert_int_equal(rd_kafka_mock_topic_create(k.mock, topic, PARTITIONS, 1), 0);
    producer p;
    producer_start(&p, &k);
    for (int q = 0; q < PER_KEY; q++)
        for (int key = 0; key < KEYS; key++)
            produce_seq(&p, topic, key, q);
    producer_flush(&p);
    int64_t high[PARTITIONS], low;
    for (int i = 0; i < PARTITIONS; i++)
        assert_int_equal(rd_kafka_query_watermark_offsets(p.rk, topic, i, &low, &high[i], 10000),
                         0);

    char path[512];
    close(temp_file(path, sizeof path, "crash"));
    char self[512];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(len > 0);
    self[len] = '\0';
    char *argv[] = {self, "--child", (char *)k.bootstraps, (char *)group, (char *)topic,
                    path, NULL};
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, self, NULL, NULL, argv, environ), 0);
    /* Kill it mid-run: a third of the messages handled, the rest queued or unfetched. */
    const long target = MAX_OFFSETS / 3;
    WAIT_FOR(lines_in(path) >= target, 60);
    assert_true(lines_in(path) >= target);
    assert_int_equal(kill(pid, SIGKILL), 0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));

    uv_mutex_init(&s.mu);
    long child_done = 0;
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    int part;
    long long off;
    while (fscanf(f, "%d %lld", &part, &off) == 2) {
        assert_true(part >= 0 && part < PARTITIONS && off >= 0 && off < MAX_OFFSETS);
        s.done[part][off] = true;
        child_done++;
    }
    fclose(f);
    unlink(path);

    /* The property itself, on the offsets committed when it died. */
    int64_t committed[PARTITIONS];
    committed_offsets(&k, group, topic, PARTITIONS, committed);
    long committed_total = 0;
    for (int i = 0; i < PARTITIONS; i++) {
        for (int64_t o = 0; o < committed[i]; o++)
            if (!s.done[i][o])
                fail_msg("partition %d: offset %lld committed (%lld) but never handled", i,
                         (long long)o, (long long)committed[i]);
        committed_total += committed[i] > 0 ? committed[i] : 0;
        s.first[i] = -1;
    }
    assert_true(committed_total > 0); /* commits did happen before the kill */

    /* A new consumer of the group takes over once the dead member's session expires. */
    const char *topics[] = {topic};
    cthread t;
    ct_init(&t, consumer_conf(&k, group, "cooperative-sticky"), topics, 1, restart_handler, NULL);
    assert_rl_ok(ct_start(&t));
    WAIT_FOR(all_done(high), 90);
    ct_stop(&t);
    assert_true(all_done(high));
    for (int i = 0; i < PARTITIONS; i++) {
        /* It starts at the final committed offset (any commit still in flight at the kill
         * included): everything below was handled by the child. */
        if (s.first[i] < 0)
            continue; /* the child had finished this partition and committed its end */
        assert_true(s.first[i] >= (committed[i] > 0 ? committed[i] : 0));
        for (int64_t o = 0; o < s.first[i]; o++)
            assert_true(s.done[i][o]);
    }
    printf("  child handled %ld of %d before SIGKILL; committed %ld; the new consumer handled "
           "%ld again (at-least-once)\n",
           child_done, MAX_OFFSETS, committed_total, s.again);
    ct_free(&t);
    uv_mutex_destroy(&s.mu);
    producer_stop(&p);
    cluster_stop(&k);
}

int main(int argc, char **argv)
{
    if (argc == 6 && strcmp(argv[1], "--child") == 0)
        return child_main(argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(committed_offsets_survive_a_kill),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
