/* SPDX-License-Identifier: BSD-2-Clause */
/* ringlane grow: grows a keyed topic from P to P' partitions by the protocol of
 * docs/partition_growth.md. The steps, each resumable from the growth record's state:
 *
 *   check     the topic's count, the profile (local_add), every earlier growth sealed
 *   announce  the record `announced` (a transaction), read back
 *   wait      --announce-wait when the new partitions existed before (consumers re-read)
 *   add       CreatePartitions, unless the partitions exist
 *   switch    --switch-wait for the producers (or stop here: --announce-only; or the operator
 *             has switched them: --pinned)
 *   seal      the topic has P' partitions, the old partitions' high watermarks, the record
 *             `sealed` (a transaction)
 *
 * Every run draws a nonce of its own and takes the growth over by writing it (--pinned too).
 * Before each write, and again inside the write's transaction, the run reads the record and
 * goes on only if it is still the one it saw or wrote (its nonce) and not sealed: with the
 * transactional id's fencing at the broker, at most one run owns a growth, and a sealed record
 * is written once. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "grow_kafka.h"
#include "growth_record.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char usage[] =
    "usage: ringlane grow --bootstrap-servers B --topic T --partitions P2 --profile X\n"
    "                     --vnodes N|default [--switch-wait S | --announce-only | --pinned]\n"
    "                     [--from P] [--announce-wait S] [--timeout S] [-X NAME=VALUE]...\n"
    "       ringlane grow --bootstrap-servers B --topic T --status\n"
    "       ringlane grow --bootstrap-servers B --topic T --partitions P2 --abort\n"
    "\n"
    "Grows topic T to P2 partitions without breaking per-key order (the ring\n"
    "partitioner moves keys only to new partitions): records the growth in the\n"
    "topic __ringlane_growth, adds the partitions, waits for the producers to switch,\n"
    "and seals it with each old partition's high watermark. Interrupted, the same\n"
    "command resumes. docs/partition_growth.md has the protocol.\n"
    "  --bootstrap-servers B  the Kafka cluster\n"
    "  --topic T              the topic\n"
    "  --partitions P2        the count after the growth (2..100000)\n"
    "  --profile X            the producers' ringlane.profile (one with local_add)\n"
    "  --vnodes N|default     the producers' ringlane.vnodes (default: not set)\n"
    "  --from P               the count the producers' ring used, when the topic has P2\n"
    "                         partitions already (ringlane.partitions.used=P)\n"
    "  --switch-wait S        seconds the producers get to switch (631: metadata\n"
    "                         refresh, message timeout and request timeout at\n"
    "                         librdkafka's defaults, plus 1)\n"
    "  --announce-only        announce and add the partitions (or wait --announce-wait\n"
    "                         when they existed), then stop: switch the producers\n"
    "                         yourself, then run again with --pinned\n"
    "  --pinned               every producer routes over P2 and has drained: seal now\n"
    "                         (the topic must have P2 partitions)\n"
    "  --announce-wait S      how long consumers get to see an announcement before\n"
    "                         producers may use partitions that existed (60, at least 30)\n"
    "  --timeout S            the limit of each Kafka request (30)\n"
    "  --status               print the topic's growth records\n"
    "  --abort                end an announced growth that will not happen\n"
    "  -X NAME=VALUE          a librdkafka property for the command's clients\n"
    "Exit status: 0 done, 1 a Kafka request failed or timed out (run it again to\n"
    "resume), 2 bad arguments, 3 refused by the topic's state or records, 4 another\n"
    "run took the growth over.\n";

#define DEFAULT_SWITCH_WAIT_S 631  /* 300 s metadata refresh + 300 s message timeout + 30 s + 1 */
#define DEFAULT_ANNOUNCE_WAIT_S 60 /* twice the longest re-read of a consumer's fence */
#define MIN_ANNOUNCE_WAIT_S 30     /* the longest re-read of a consumer's fence */

static const char *const cmd = "grow";

typedef struct grow_run {
    grow_kafka k;
    const char *topic;
    uint32_t from, to;
    const char *profile; /* the profile's own name */
    uint32_t vnodes;     /* as in a record */
    uint64_t ring_from, ring_to;
    char key[RL__GROWTH_KEY_MAX + 1];
    char err[1024];
    grow_log log;               /* the topic's records as last read */
    rl__growth_record *records; /* parsed, one per log entry (zeroed when unreadable) */
    const char **why;           /* per entry: "" or why it is unreadable */
} grow_run;

static int exit_for(int kafka_rc)
{
    return kafka_rc == GROW_KAFKA_FENCED ? CLI_EXIT_FENCED
           : kafka_rc == 2               ? CLI_EXIT_USAGE
                                         : CLI_EXIT_FAILURE;
}

/* Reports a failed Kafka call and gives its exit status. */
static int kafka_failed(grow_run *r, int rc)
{
    if (rc == GROW_KAFKA_FENCED)
        cli_error(cmd,
                  "%s: another run of ringlane grow on topic %s has started (this one is "
                  "fenced and stops)",
                  r->err, r->topic);
    else if (rc == 2)
        cli_error(cmd, "%s", r->err);
    else
        cli_error(cmd, "%s", r->err);
    return exit_for(rc);
}

static void free_records(grow_run *r)
{
    for (size_t i = 0; i < r->log.n; i++)
        rl__growth_record_free(&r->records[i]);
    free(r->records);
    free(r->why);
    r->records = NULL;
    r->why = NULL;
    grow_log_free(&r->log);
}

/* Reads the topic's records and parses them. */
static int read_records(grow_run *r)
{
    free_records(r);
    int rc = grow_kafka_read_log(&r->k, r->topic, &r->log, r->err, sizeof r->err);
    if (rc)
        return rc;
    r->records = calloc(r->log.n + 1, sizeof *r->records);
    r->why = calloc(r->log.n + 1, sizeof *r->why);
    if (!r->records || !r->why) {
        snprintf(r->err, sizeof r->err, "out of memory");
        return GROW_KAFKA_FAILED;
    }
    for (size_t i = 0; i < r->log.n; i++) {
        const grow_entry *e = &r->log.entries[i];
        if (rl__growth_value_parse(e->value, e->value_len, &r->records[i], &r->why[i]) ==
                RL__GROWTH_OK &&
            !rl__growth_record_matches_key(&r->records[i], e->key, strlen(e->key))) {
            rl__growth_record_free(&r->records[i]);
            r->why[i] = "its value names another topic or growth than its key";
        }
    }
    return 0;
}

/* The index of the record of this run's growth, or -1. */
static long own_record(const grow_run *r)
{
    for (size_t i = 0; i < r->log.n; i++)
        if (strcmp(r->log.entries[i].key, r->key) == 0)
            return (long)i;
    return -1;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static uint64_t new_nonce(void)
{
    uint64_t v = 0;
    int fd = open("/dev/urandom", O_RDONLY);
    if (fd >= 0) {
        if (read(fd, &v, sizeof v) != (ssize_t)sizeof v)
            v = 0;
        close(fd);
    }
    if (v == 0) /* no /dev/urandom: the time and the process, mixed */
        v = rl_mix64((uint64_t)wall_ms() ^ ((uint64_t)getpid() << 32));
    return v;
}

/* What a run expects the record of its growth to be before it writes: absent, or the nonce and
 * state it last saw or wrote. */
typedef struct expected {
    int present;
    uint64_t nonce;
    rl__growth_state state;
} expected;

static expected expected_of(const grow_run *r)
{
    long i = own_record(r);
    if (i < 0 || r->why[i][0])
        return (expected){0, 0, RL__GROWTH_ANNOUNCED};
    return (expected){1, r->records[i].nonce, r->records[i].state};
}

/* Re-reads the records: is the growth's record still as expected? 0, or the exit status. */
static int still_ours(grow_run *r, expected want)
{
    int rc = read_records(r);
    if (rc)
        return kafka_failed(r, rc);
    expected now = expected_of(r);
    if (now.present == want.present &&
        (!now.present || (now.nonce == want.nonce && now.state == want.state)))
        return 0;
    if (now.present)
        cli_error(cmd,
                  "%s: another run of ringlane grow took the growth over (its record is now "
                  "%s, nonce %016" PRIx64 "): this run stops",
                  r->key, rl__growth_state_name(now.state), now.nonce);
    else
        cli_error(cmd, "%s: the record this run saw is gone: this run stops", r->key);
    return CLI_EXIT_FENCED;
}

/* What a write checks just before it produces and commits the record: the record read again
 * is still the one this run saw or wrote, and not sealed. On a broker the transactional id
 * fences an older run; the check also stops one the broker would not (the mock cluster, or a
 * run that took the growth over since this one last read). */
struct commit_check {
    grow_run *r;
    uint64_t nonce;
    rl__growth_state state; /* the state being written */
    int status;             /* the exit status when the check refuses */
};

static int before_commit(void *ctx)
{
    struct commit_check *c = ctx;
    grow_run *r = c->r;
    int rc = read_records(r);
    if (rc) {
        c->status = kafka_failed(r, rc);
        return 1;
    }
    expected now = expected_of(r);
    if (now.present && now.state == RL__GROWTH_SEALED) {
        cli_error(cmd,
                  "%s: sealed by another run (nonce %016" PRIx64 ") while this one wrote: a "
                  "sealed record is never written again; this run stops",
                  r->key, now.nonce);
        c->status = CLI_EXIT_FENCED;
        return 1;
    }
    /* An announcement (or an abort) takes over whatever record was there; a seal only the
     * announcement this run wrote itself. */
    if (c->state == RL__GROWTH_SEALED &&
        !(now.present && now.nonce == c->nonce && now.state == RL__GROWTH_ANNOUNCED)) {
        if (now.present)
            cli_error(cmd,
                      "%s: another run of ringlane grow took the growth over (its record is "
                      "now %s, nonce %016" PRIx64 "): this run stops before it seals",
                      r->key, rl__growth_state_name(now.state), now.nonce);
        else
            cli_error(cmd, "%s: the record this run wrote is gone: this run stops", r->key);
        c->status = CLI_EXIT_FENCED;
        return 1;
    }
    return 0;
}

/* Writes the record in `state` with `nonce` (timestamped timestamp_ms, 0: now), then reads it
 * back until it is the key's last committed record. 0, or the exit status. */
static int write_record(grow_run *r, rl__growth_state state, uint64_t nonce, int64_t *points,
                        int64_t timestamp_ms)
{
    rl__growth_record rec = {.from = r->from,
                             .to = r->to,
                             .profile = r->profile,
                             .vnodes = r->vnodes,
                             .ring_from = r->ring_from,
                             .ring_to = r->ring_to,
                             .nonce = nonce,
                             .state = state,
                             .points = points};
    snprintf(rec.topic, sizeof rec.topic, "%s", r->topic);
    const char *why = NULL;
    char *value = rl__growth_value_format(&rec, &why);
    if (!value) {
        cli_error(cmd, "%s: cannot write the record: %s", r->key, why);
        return CLI_EXIT_FAILURE;
    }
    struct commit_check check = {r, nonce, state, 0};
    int rc = grow_kafka_write(&r->k, r->key, value, timestamp_ms, before_commit, &check, r->err,
                              sizeof r->err);
    free(value);
    if (rc == GROW_KAFKA_REFUSED)
        return check.status;
    if (rc)
        return kafka_failed(r, rc);
    /* Read back: a broker writes the transaction's markers after it answers the commit, so
     * the record may take a moment to be readable committed. */
    for (int attempt = 0; attempt < 50; attempt++) {
        if ((rc = read_records(r)) != 0)
            return kafka_failed(r, rc);
        expected now = expected_of(r);
        if (now.present && now.nonce == nonce && now.state == state)
            return 0;
        if (now.present && now.nonce != nonce && attempt > 0)
            return still_ours(r, (expected){1, nonce, state});
        sleep_ms(200);
    }
    cli_error(cmd, "%s: the record written is not readable after 10 s (read committed)", r->key);
    return CLI_EXIT_FAILURE;
}

/* Prints the topic's records: "<key> <value>", or "<key> unreadable (<why>): <value>". */
static int print_status(grow_run *r)
{
    int status = 0;
    for (size_t i = 0; i < r->log.n; i++) {
        const grow_entry *e = &r->log.entries[i];
        if (r->why[i][0]) {
            printf("%s unreadable (%s): %.*s\n", e->key, r->why[i], (int)e->value_len, e->value);
            status = CLI_EXIT_FAILURE;
        } else {
            printf("%s %s\n", e->key, e->value);
        }
    }
    if (r->log.n == 0)
        fprintf(stderr, "ringlane grow: no growth of %s is recorded\n", r->topic);
    return status;
}

/* Every record of the topic readable; none of another growth announced; the last sealed one
 * ending at r->from. 0 or the exit status. */
static int check_history(grow_run *r)
{
    uint32_t last_to = 0;
    const char *last_key = NULL;
    for (size_t i = 0; i < r->log.n; i++) {
        const char *key = r->log.entries[i].key;
        if (r->why[i][0]) {
            cli_error(cmd,
                      "--topic %s: the growth record %s cannot be read (%s): nothing is done "
                      "while it stands (see ringlane grow --status)",
                      r->topic, key, r->why[i]);
            return CLI_EXIT_REFUSED;
        }
        const rl__growth_record *g = &r->records[i];
        if (strcmp(key, r->key) == 0)
            continue;
        if (g->state == RL__GROWTH_ANNOUNCED) {
            cli_error(cmd,
                      "--partitions %" PRIu32 ": another growth of %s is in progress (%s is "
                      "announced): finish it, or end it with --abort",
                      r->to, r->topic, key);
            return CLI_EXIT_REFUSED;
        }
        if (g->state == RL__GROWTH_SEALED && g->to > last_to)
            last_to = g->to, last_key = key;
    }
    if (last_key && last_to != r->from) {
        cli_error(cmd,
                  "--from %" PRIu32 ": the last sealed growth of %s is %s, so the next one "
                  "grows from %" PRIu32,
                  r->from, r->topic, last_key, last_to);
        return CLI_EXIT_REFUSED;
    }
    return 0;
}

/* A record of this growth written by another run must name the same ring. */
static int check_same_ring(grow_run *r, const rl__growth_record *g)
{
    if (strcmp(g->profile, r->profile) != 0 || g->vnodes != r->vnodes) {
        cli_error(cmd,
                  "--profile %s --vnodes %" PRIu32 ": %s was announced with profile %s "
                  "vnodes %" PRIu32 ": give the producers' settings it names, or --abort it",
                  r->profile, r->vnodes, r->key, g->profile, g->vnodes);
        return CLI_EXIT_REFUSED;
    }
    if (g->ring_from != r->ring_from || g->ring_to != r->ring_to) {
        cli_error(cmd,
                  "--profile %s: %s was announced with rings %016" PRIx64 ",%016" PRIx64
                  " but this ringlane builds %016" PRIx64 ",%016" PRIx64
                  " for the same settings (another version's profile?)",
                  r->profile, r->key, g->ring_from, g->ring_to, r->ring_from, r->ring_to);
        return CLI_EXIT_REFUSED;
    }
    return 0;
}

/* The count the producers' ring used until now, by --from or the topic's count and records. */
static int find_from(grow_run *r, const char *from_text, int32_t count)
{
    if (from_text) {
        if ((uint32_t)count != r->from && (uint32_t)count != r->to) {
            cli_error(cmd,
                      "--from %" PRIu32 ": topic %s has %d partitions; --from needs it to "
                      "have --partitions %" PRIu32 " already (or %" PRIu32 ")",
                      r->from, r->topic, (int)count, r->to, r->from);
            return CLI_EXIT_REFUSED;
        }
        return 0;
    }
    if ((uint32_t)count < r->to) {
        r->from = (uint32_t)count;
        return 0;
    }
    if ((uint32_t)count == r->to) /* a growth resumed after its partitions were added */
        for (size_t i = 0; i < r->log.n; i++)
            if (!r->why[i][0] && r->records[i].to == r->to &&
                r->records[i].state != RL__GROWTH_ABORTED) {
                r->from = r->records[i].from;
                return 0;
            }
    cli_error(cmd,
              "--partitions %" PRIu32 ": topic %s has %d partitions already; if they were "
              "created ahead and the producers' ring uses fewer (ringlane.partitions.used), "
              "name that count with --from",
              r->to, r->topic, (int)count);
    return CLI_EXIT_REFUSED;
}

/* A growth is sealed (or its announce-only run ends) only once the topic has its P'
 * partitions: a seal over partitions that do not exist would let producers route over P' and
 * leave the topic with a record no count matches. 0, or the exit status. */
static int check_partitions_exist(grow_run *r)
{
    int32_t count = 0;
    int rc = grow_kafka_partition_count(&r->k, r->topic, &count, r->err, sizeof r->err);
    if (rc)
        return kafka_failed(r, rc);
    if ((uint32_t)count != r->to) {
        cli_error(cmd,
                  "--partitions %" PRIu32 ": topic %s has %d partitions, not %" PRIu32
                  ": %s is not sealed (run the command without --pinned to add the "
                  "partitions, or end the growth with --abort)",
                  r->to, r->topic, (int)count, r->to, r->key);
        return CLI_EXIT_REFUSED;
    }
    return 0;
}

/* After CreatePartitions: waits (up to --timeout) until the metadata has the P' partitions. */
static int wait_for_partitions(grow_run *r)
{
    int32_t count = 0;
    for (int64_t waited = 0;; waited += 200) {
        int rc = grow_kafka_partition_count(&r->k, r->topic, &count, r->err, sizeof r->err);
        if (rc)
            return kafka_failed(r, rc);
        if ((uint32_t)count == r->to)
            return 0;
        if (waited >= r->k.timeout_ms)
            break;
        sleep_ms(200);
    }
    cli_error(cmd,
              "%s: CreatePartitions answered, but the metadata shows %d partitions, not %" PRIu32
              " after %d ms: the growth stays announced; run this command again",
              r->key, (int)count, r->to, r->k.timeout_ms);
    return CLI_EXIT_FAILURE;
}

typedef struct grow_opts {
    const char *partitions, *profile, *vnodes, *switch_wait, *from, *announce_wait;
    int pinned, announce_only;
} grow_opts;

/* The growth itself, after the arguments were checked. */
static int grow(grow_run *r, const grow_opts *o, int32_t count, int64_t switch_wait_s,
                int64_t announce_wait_s)
{
    int rc = find_from(r, o->from, count);
    if (rc)
        return rc;
    if (rl__growth_key_format(r->topic, r->from, r->to, r->key, sizeof r->key) < 0) {
        cli_error(cmd, "--topic %s: cannot name the growth %" PRIu32 "->%" PRIu32, r->topic,
                  r->from, r->to);
        return CLI_EXIT_USAGE;
    }
    if ((rc = check_history(r)) != 0)
        return rc;
    if (rl__growth_ring_fingerprint(r->profile, r->vnodes, r->from, &r->ring_from) ||
        rl__growth_ring_fingerprint(r->profile, r->vnodes, r->to, &r->ring_to)) {
        cli_error(cmd,
                  "--profile %s --vnodes %" PRIu32 ": cannot build the rings over %" PRIu32
                  " and %" PRIu32 " partitions",
                  r->profile, r->vnodes, r->from, r->to);
        return CLI_EXIT_USAGE;
    }
    long i = own_record(r);
    const rl__growth_record *own = i >= 0 ? &r->records[i] : NULL;
    if (own && own->state == RL__GROWTH_SEALED) {
        printf("%s is sealed already: nothing to do\n", r->key);
        return 0;
    }
    if (own && own->state == RL__GROWTH_ANNOUNCED && (rc = check_same_ring(r, own)) != 0)
        return rc;
    int existed = (uint32_t)count == r->to; /* the new partitions were there before */
    if (existed && (!own || own->state == RL__GROWTH_ABORTED)) {
        /* Nothing may be in them before the announcement: that order is lost already. */
        int64_t *marks = calloc(r->to, sizeof *marks);
        if (!marks)
            return cli_error(cmd, "out of memory"), CLI_EXIT_FAILURE;
        rc = grow_kafka_high_watermarks(&r->k, r->topic, (int32_t)r->to, marks, r->err,
                                        sizeof r->err);
        for (uint32_t q = r->from; rc == 0 && q < r->to; q++)
            if (marks[q] > 0) {
                cli_error(cmd,
                          "--from %" PRIu32 ": partition %" PRIu32 " of %s holds %" PRId64
                          " messages already: producers routed over more than %" PRIu32
                          " partitions before the growth was announced, and no record can "
                          "order what they wrote",
                          r->from, q, r->topic, marks[q], r->from);
                free(marks);
                return CLI_EXIT_REFUSED;
            }
        free(marks);
        if (rc)
            return kafka_failed(r, rc);
    }
    uint64_t nonce = new_nonce();
    if (o->pinned) {
        if (!own || own->state != RL__GROWTH_ANNOUNCED) {
            cli_error(cmd,
                      "--pinned: %s is not announced: announce it with --announce-only, "
                      "then switch the producers, then seal with --pinned",
                      r->key);
            return CLI_EXIT_REFUSED;
        }
        int64_t age_ms = wall_ms() - r->log.entries[i].timestamp_ms;
        if (age_ms < announce_wait_s * 1000) {
            cli_error(cmd,
                      "--pinned: %s was announced %" PRId64 " s ago; consumers re-read the "
                      "records every 10-30 s, so producers may route over %" PRIu32
                      " partitions only from %" PRId64 " s after it (--announce-wait)",
                      r->key, age_ms / 1000, r->to, announce_wait_s);
            return CLI_EXIT_REFUSED;
        }
        /* Take the growth over with this run's own nonce: two --pinned runs then tell each
         * other apart, and only the last to announce may seal. */
        if ((rc = check_partitions_exist(r)) != 0)
            return rc;
        /* The announcement keeps its time: consumers have seen it since then. */
        int64_t announced_ms = r->log.entries[i].timestamp_ms;
        if ((rc = still_ours(r, expected_of(r))) != 0)
            return rc;
        if ((rc = write_record(r, RL__GROWTH_ANNOUNCED, nonce, NULL, announced_ms)) != 0)
            return rc;
    } else {
        /* Announce (or take an interrupted announcement over). */
        if ((rc = still_ours(r, expected_of(r))) != 0)
            return rc;
        if ((rc = write_record(r, RL__GROWTH_ANNOUNCED, nonce, NULL, 0)) != 0)
            return rc;
        printf("announced %s (profile %s, vnodes %" PRIu32 ", nonce %016" PRIx64 ")\n", r->key,
               r->profile, r->vnodes, nonce);
        fflush(stdout);
        if (existed && announce_wait_s > 0) {
            printf("waiting %" PRId64 " s for consumers to read the announcement\n",
                   announce_wait_s);
            fflush(stdout);
            sleep_ms(announce_wait_s * 1000);
        }
        if (!existed) {
            if ((rc = grow_kafka_create_partitions(&r->k, r->topic, (int32_t)r->to, r->err,
                                                   sizeof r->err)) != 0) {
                cli_error(cmd,
                          "%s: the growth stays announced; run this command again, or "
                          "end it with --abort if the partitions can never be made",
                          r->err);
                return CLI_EXIT_FAILURE;
            }
            printf("added partitions %" PRIu32 "..%" PRIu32 " to %s\n", r->from, r->to - 1,
                   r->topic);
            /* The brokers' metadata may lag the answer: none of them is used until every
             * partition is there. */
            if ((rc = wait_for_partitions(r)) != 0)
                return rc;
        }
        if (o->announce_only) {
            printf("now raise ringlane.partitions.used to %" PRIu32 " on every producer "
                   "(restart each with it, after it flushed its queue), then seal with "
                   "--pinned\n",
                   r->to);
            return 0;
        }
        printf("producers may route over %" PRIu32 " partitions now; sealing in %" PRId64 " s\n",
               r->to, switch_wait_s);
        fflush(stdout);
        sleep_ms(switch_wait_s * 1000);
    }
    /* Seal: the partitions exist, the high watermarks, then the record, if the growth is
     * still this run's. */
    if ((rc = check_partitions_exist(r)) != 0)
        return rc;
    int64_t *points = calloc(r->from, sizeof *points);
    if (!points)
        return cli_error(cmd, "out of memory"), CLI_EXIT_FAILURE;
    rc = grow_kafka_high_watermarks(&r->k, r->topic, (int32_t)r->from, points, r->err,
                                    sizeof r->err);
    if (rc == 0)
        rc = still_ours(r, (expected){1, nonce, RL__GROWTH_ANNOUNCED});
    else
        rc = kafka_failed(r, rc);
    if (rc == 0)
        rc = write_record(r, RL__GROWTH_SEALED, nonce, points, 0);
    if (rc == 0) {
        printf("sealed %s: points", r->key);
        for (uint32_t p = 0; p < r->from; p++)
            printf("%s%" PRId64, p ? "," : " ", points[p]);
        putchar('\n');
    }
    free(points);
    return rc;
}

/* --abort is refused once a new partition holds messages: producers routed over P' already,
 * and those messages would no longer be held. 0, or the exit status. */
static int check_new_partitions_empty(grow_run *r, uint32_t from)
{
    int32_t count = 0;
    int rc = grow_kafka_partition_count(&r->k, r->topic, &count, r->err, sizeof r->err);
    if (rc)
        return kafka_failed(r, rc);
    if ((uint32_t)count <= from) /* no new partition was made */
        return 0;
    int64_t *marks = calloc((size_t)count, sizeof *marks);
    if (!marks)
        return cli_error(cmd, "out of memory"), CLI_EXIT_FAILURE;
    rc = grow_kafka_high_watermarks(&r->k, r->topic, count, marks, r->err, sizeof r->err);
    for (uint32_t q = from; rc == 0 && q < (uint32_t)count && q < r->to; q++)
        if (marks[q] > 0) {
            cli_error(cmd,
                      "--abort: partition %" PRIu32 " of %s holds %" PRId64 " messages: "
                      "producers routed over %" PRIu32 " partitions already, and an abort "
                      "would release them unordered; switch every producer and seal %s "
                      "with --pinned instead",
                      q, r->topic, marks[q], r->to, r->key);
            free(marks);
            return CLI_EXIT_REFUSED;
        }
    free(marks);
    return rc ? kafka_failed(r, rc) : 0;
}

/* --abort: the announced growth of the topic to --partitions ends. */
static int abort_growth(grow_run *r)
{
    const char *aborted = NULL; /* a record of the growth aborted already */
    for (size_t i = 0; i < r->log.n; i++) {
        const rl__growth_record *g = &r->records[i];
        if (r->why[i][0] || g->to != r->to)
            continue;
        if (g->state == RL__GROWTH_SEALED) {
            cli_error(cmd,
                      "--abort: %s is sealed: its partitions are in use, it cannot be "
                      "aborted",
                      r->log.entries[i].key);
            return CLI_EXIT_REFUSED;
        }
        if (g->state == RL__GROWTH_ABORTED)
            aborted = r->log.entries[i].key;
        if (g->state != RL__GROWTH_ANNOUNCED)
            continue;
        snprintf(r->key, sizeof r->key, "%s", r->log.entries[i].key);
        int rc = check_new_partitions_empty(r, g->from);
        if (rc)
            return rc;
        r->from = g->from;
        r->profile = g->profile;
        r->vnodes = g->vnodes;
        r->ring_from = g->ring_from;
        r->ring_to = g->ring_to;
        rc = still_ours(r, (expected){1, g->nonce, RL__GROWTH_ANNOUNCED});
        if (rc == 0)
            rc = write_record(r, RL__GROWTH_ABORTED, new_nonce(), NULL, 0);
        if (rc == 0)
            printf("aborted %s: nothing is held for it; no producer may route over %" PRIu32
                   " partitions on its account\n",
                   r->key, r->to);
        return rc;
    }
    if (aborted) {
        printf("%s is aborted already: nothing to do\n", aborted);
        return 0;
    }
    cli_error(cmd, "--abort: no growth of %s to %" PRIu32 " partitions is announced", r->topic,
              r->to);
    return CLI_EXIT_REFUSED;
}

/* Takes the -X NAME=VALUE pairs out of argv (into props); the rest stays for cli_parse_opts. */
static int take_props(int *argc, char **argv, const char **props, size_t *nprops)
{
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *value = NULL;
        if (strcmp(argv[i], "-X") == 0) {
            if (i + 1 >= *argc)
                return cli_usage_error(cmd, "-X needs NAME=VALUE (see --help)");
            value = argv[++i];
        } else if (strncmp(argv[i], "-X", 2) == 0) {
            value = argv[i] + 2;
        } else {
            argv[out++] = argv[i];
            continue;
        }
        const char *eq = strchr(value, '=');
        if (!eq || eq == value || eq - value > 200)
            return cli_usage_error(cmd, "-X %s: expected NAME=VALUE, a librdkafka property", value);
        static const char *const ours[] = {"transactional.id", "isolation.level", "group.id",
                                           "enable.partition.eof", "bootstrap.servers"};
        for (size_t j = 0; j < sizeof ours / sizeof *ours; j++)
            if (strlen(ours[j]) == (size_t)(eq - value) &&
                strncmp(value, ours[j], (size_t)(eq - value)) == 0)
                return cli_usage_error(cmd, "-X %s: ringlane grow sets %s itself%s", value, ours[j],
                                       j == 4 ? " (--bootstrap-servers)" : "");
        props[(*nprops)++] = value;
    }
    *argc = out;
    return 0;
}

/* A count as a growth record writes it: no leading zero (the codec refuses "08"). */
static int count_text_ok(const char *text)
{
    return !(text[0] == '0' && text[1] != '\0');
}

static int parse_seconds(const char *option, const char *text, long long min, long long max,
                         int64_t *out)
{
    unsigned long long v;
    if (cli_parse_u64(text, (unsigned long long)min, (unsigned long long)max, &v) != 0)
        return cli_usage_error(cmd, "%s %s: expected whole seconds %lld..%lld", option, text, min,
                               max);
    *out = (int64_t)v;
    return 0;
}

int cmd_grow(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return fputs(usage, stdout), 0;
    const char **props = calloc((size_t)argc + 1, sizeof *props);
    if (!props)
        return cli_usage_error(cmd, "out of memory");
    size_t nprops = 0;
    int nrest = 0;
    const char *bootstrap = NULL, *topic = NULL, *timeout = NULL;
    int status = 0, abort_ = 0;
    grow_opts o = {0};
    cli_opt opts[] = {{"--bootstrap-servers", &bootstrap, NULL},
                      {"--topic", &topic, NULL},
                      {"--partitions", &o.partitions, NULL},
                      {"--profile", &o.profile, NULL},
                      {"--vnodes", &o.vnodes, NULL},
                      {"--from", &o.from, NULL},
                      {"--switch-wait", &o.switch_wait, NULL},
                      {"--announce-wait", &o.announce_wait, NULL},
                      {"--timeout", &timeout, NULL},
                      {"--announce-only", NULL, &o.announce_only},
                      {"--pinned", NULL, &o.pinned},
                      {"--status", NULL, &status},
                      {"--abort", NULL, &abort_},
                      {NULL, NULL, NULL}};
    int rc = take_props(&argc, argv, props, &nprops);
    if (rc == 0)
        rc = cli_parse_opts(cmd, argc, argv, opts, NULL, &nrest);
    int64_t switch_wait_s = DEFAULT_SWITCH_WAIT_S, announce_wait_s = DEFAULT_ANNOUNCE_WAIT_S,
            timeout_s = 30;
    unsigned long long to = 0, from = 0;
    uint32_t vnodes = RL_VNODES_PROFILE;
    if (rc == 0 && (!bootstrap || !topic))
        rc = cli_usage_error(cmd, "%s is required (see --help)",
                             bootstrap ? "--topic" : "--bootstrap-servers");
    if (rc == 0 && !rl__growth_topic_valid(topic, strlen(topic)))
        rc = cli_usage_error(cmd, "--topic '%s': a topic name is 1..249 of a-z A-Z 0-9 . _ -",
                             topic);
    if (rc == 0 && strncmp(topic, "__", 2) == 0)
        rc = cli_usage_error(cmd,
                             "--topic %s: %s; ringlane grow grows only the topics producers "
                             "write keyed messages to",
                             topic,
                             strncmp(topic, "__ringlane_", 11) == 0
                                 ? "a topic of ringlane's own (the growth records live in "
                                   "__ringlane_growth)"
                                 : "a name starting with __ is Kafka's own internal topic");
    if (rc == 0 && status + abort_ > 1)
        rc = cli_usage_error(cmd, "--status and --abort go alone");
    if (rc == 0 && status &&
        (o.partitions || o.profile || o.vnodes || o.from || o.switch_wait || o.announce_wait ||
         o.pinned || o.announce_only))
        rc = cli_usage_error(cmd, "--status takes only --bootstrap-servers, --topic, --timeout "
                                  "and -X");
    if (rc == 0 && abort_ &&
        (o.profile || o.vnodes || o.from || o.switch_wait || o.announce_wait || o.pinned ||
         o.announce_only))
        rc = cli_usage_error(cmd, "--abort takes only --bootstrap-servers, --topic, "
                                  "--partitions, --timeout and -X");
    if (rc == 0 && !status && !o.partitions)
        rc = cli_usage_error(cmd, "--partitions is required (see --help)");
    if (rc == 0 && o.partitions &&
        (!count_text_ok(o.partitions) ||
         cli_parse_u64(o.partitions, 2, CLI_PARTITIONS_MAX, &to) != 0))
        rc = cli_usage_error(cmd,
                             "--partitions %s: expected a count 2..%d (no sign, no leading "
                             "zero, as a growth record writes it)",
                             o.partitions, CLI_PARTITIONS_MAX);
    if (rc == 0 && !status && !abort_) {
        if (!o.profile || !o.vnodes)
            rc = cli_usage_error(cmd,
                                 "%s is required: the producers' ringlane.%s, so that the "
                                 "growth names their ring",
                                 o.profile ? "--vnodes" : "--profile",
                                 o.profile ? "vnodes (default: not set)" : "profile");
        else if ((rc = cli_check_profile(cmd, o.profile)) == 0 &&
                 !rl_profile_find(o.profile)->local_add)
            rc = cli_usage_error(cmd,
                                 "--profile %s: it has no local_add (a growth would move "
                                 "keys between old partitions, whose order no record can "
                                 "keep); profiles that can grow: balanced, default, ds09, "
                                 "turnstone, xmur3, groupcache, jump, memento",
                                 o.profile);
        else if (strcmp(o.vnodes, "default") != 0)
            rc = cli_parse_vnodes(cmd, o.profile, o.vnodes, &vnodes);
        if (rc == 0 && o.pinned + o.announce_only + (o.switch_wait != NULL) > 1)
            rc = cli_usage_error(cmd, "--switch-wait, --announce-only and --pinned: one at most");
        if (rc == 0 && o.switch_wait && strcmp(o.switch_wait, "0") == 0)
            rc = cli_usage_error(cmd, "--switch-wait 0: producers need time to switch; if you "
                                      "switch them yourself, run with --announce-only, switch "
                                      "them, then seal with --pinned");
        if (rc == 0 && o.switch_wait)
            rc = parse_seconds("--switch-wait", o.switch_wait, 1, 2592000, &switch_wait_s);
        if (rc == 0 && o.announce_wait)
            rc = parse_seconds("--announce-wait", o.announce_wait, 0, 3600, &announce_wait_s);
        if (rc == 0 && announce_wait_s < MIN_ANNOUNCE_WAIT_S)
            rc = cli_usage_error(cmd,
                                 "--announce-wait %s: at least %d s: consumers re-read the "
                                 "growth records every 10-30 s, and a shorter wait lets "
                                 "producers route over the new partitions before every "
                                 "consumer has seen the announcement",
                                 o.announce_wait, MIN_ANNOUNCE_WAIT_S);
        if (rc == 0 && o.from &&
            (!count_text_ok(o.from) || cli_parse_u64(o.from, 1, to - 1, &from) != 0))
            rc = cli_usage_error(cmd,
                                 "--from %s: expected a count 1..%llu (below --partitions; no "
                                 "sign, no leading zero)",
                                 o.from, to - 1);
    }
    if (rc == 0 && timeout)
        rc = parse_seconds("--timeout", timeout, 1, 3600, &timeout_s);
    if (rc) {
        free(props);
        return rc;
    }

    grow_run r = {.topic = topic, .from = (uint32_t)from, .to = (uint32_t)to};
    if (!status && !abort_) {
        r.profile = rl_profile_find(o.profile)->name;
        r.vnodes = rl__growth_record_vnodes(r.profile, vnodes);
    }
    rc =
        grow_kafka_open(&r.k, bootstrap, props, nprops, (int)timeout_s * 1000, r.err, sizeof r.err);
    int32_t count = 0;
    /* The transactional producer first: from here older runs on this topic are fenced. */
    if (rc == 0 && !status)
        rc = grow_kafka_writer_init(&r.k, topic, r.err, sizeof r.err);
    if (rc == 0)
        rc = grow_kafka_partition_count(&r.k, topic, &count, r.err, sizeof r.err);
    if (rc) {
        rc = kafka_failed(&r, rc);
    } else if (count == 0 && !status) {
        cli_error(cmd, "--topic %s: no such topic at %s", topic, bootstrap);
        rc = CLI_EXIT_REFUSED;
    } else if (status) {
        /* A deleted topic's records still apply to a topic created again under its name:
         * they are printed, so that they can be found and removed. */
        int32_t records = 0;
        rc = grow_kafka_partition_count(&r.k, RL__GROWTH_TOPIC, &records, r.err, sizeof r.err);
        if (rc == 0 && records > 0)
            rc = read_records(&r);
        if (rc) {
            rc = kafka_failed(&r, rc);
        } else if (count == 0 && r.log.n == 0) {
            cli_error(cmd, "--topic %s: no such topic at %s, and no growth of it is recorded",
                      topic, bootstrap);
            rc = CLI_EXIT_REFUSED;
        } else if (records == 0) {
            fprintf(stderr, "ringlane grow: no growth is recorded (no %s topic)\n",
                    RL__GROWTH_TOPIC);
        } else {
            if (count == 0)
                fprintf(stderr,
                        "ringlane grow: topic %s does not exist at %s (deleted?); its growth "
                        "records apply to a topic created again under its name\n",
                        topic, bootstrap);
            rc = print_status(&r);
        }
    } else {
        rc = grow_kafka_ensure_record_topic(&r.k, r.err, sizeof r.err);
        if (rc == 0)
            rc = read_records(&r);
        if (rc)
            rc = kafka_failed(&r, rc);
        else if (abort_)
            rc = abort_growth(&r);
        else
            rc = grow(&r, &o, count, switch_wait_s, announce_wait_s);
    }
    fflush(stdout);
    free_records(&r);
    grow_kafka_close(&r.k);
    free(props);
    return rc;
}
