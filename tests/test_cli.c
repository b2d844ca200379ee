/* SPDX-License-Identifier: BSD-2-Clause */
/* The ringlane CLI's contract, checked by running the real binary (RINGLANE_CLI). */
#define _POSIX_C_SOURCE 200809L
#include "test_util.h"

#include <sys/wait.h>
#include <unistd.h>

typedef struct run_result {
    char *out;
    size_t out_len;
    char *err;
    int status;
} run_result;

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n - 1 == 0)
            buf = realloc(buf, cap *= 2);
    }
    buf[n] = 0;
    fclose(f);
    if (len)
        *len = n;
    return buf;
}

/* Runs "ringlane <args>" with `input` on stdin. */
static run_result run(const char *args, const char *input)
{
    const char *cli = getenv("RINGLANE_CLI");
    assert_non_null(cli);
    char in[] = "/tmp/rl_cli_in_XXXXXX", out[] = "/tmp/rl_cli_out_XXXXXX",
         err[] = "/tmp/rl_cli_err_XXXXXX";
    int fi = mkstemp(in), fo = mkstemp(out), fe = mkstemp(err);
    assert_true(fi >= 0 && fo >= 0 && fe >= 0);
    size_t n = strlen(input);
    assert_int_equal(write(fi, input, n), (ssize_t)n);
    close(fi);
    close(fo);
    close(fe);
    char *cmd = malloc(strlen(cli) + strlen(args) + 200);
    sprintf(cmd, "'%s' %s <%s >%s 2>%s", cli, args, in, out, err);
    int status = system(cmd);
    free(cmd);
    run_result r;
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out, &r.out_len);
    r.err = slurp(err, NULL);
    unlink(in);
    unlink(out);
    unlink(err);
    return r;
}

static void run_free(run_result *r)
{
    free(r->out);
    free(r->err);
}

/* s begins with prefix */
#define assert_starts(s, prefix) assert_memory_equal((s), (prefix), strlen(prefix))

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void route_prints_key_tab_node(void **state)
{
    (void)state;
    const char *names[] = {"a", "b", "c"};
    rl_ring_t *ring = test_ring("default", 160, names, 3);
    char input[4096] = "", want[8192] = "";
    for (int i = 0; i < 100; i++) {
        char key[16];
        snprintf(key, sizeof key, "user%d", i);
        strcat(input, key);
        strcat(input, "\n");
        sprintf(want + strlen(want), "%s\t%s\n", key, test_owner(ring, key));
    }
    run_result r = run("route --nodes a,b,c", input);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, want);
    run_free(&r);
    rl_ring_free(ring);
}

static void route_keys_are_exact_bytes(void **state)
{
    (void)state;
    /* An empty line is the empty key; the last line needs no newline. */
    const char *names[] = {"a", "b", "c"};
    rl_ring_t *ring = test_ring("ds09", 160, names, 3);
    run_result r = run("route --profile ds09 --nodes a,b,c", "\nlast");
    char want[256];
    sprintf(want, "\t%s\nlast\t%s\n", test_owner(ring, ""), test_owner(ring, "last"));
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, want);
    run_free(&r);
    rl_ring_free(ring);
}

static void route_weights_profiles_vnodes(void **state)
{
    (void)state;
    rl_member m[] = {{"a", 1, NULL}, {"b", 2, NULL}, {"c", 1, NULL}};
    rl_ring_options o = {.profile = "xmur3", .vnodes = 7};
    rl_ring_t *ring;
    assert_rl_ok(rl_ring_build(m, 3, &o, &ring));
    run_result r = run("route --profile xmur3 --vnodes 7 --nodes a,b=2,c", "k1\nk2\nk3\n");
    char want[256];
    sprintf(want, "k1\t%s\nk2\t%s\nk3\t%s\n", test_owner(ring, "k1"), test_owner(ring, "k2"),
            test_owner(ring, "k3"));
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, want);
    run_free(&r);
    rl_ring_free(ring);

    /* seed 003 through the CLI, default vnodes 3 for xmur3 */
    r = run("route --profile xmur3 --nodes A,B,C", "k1\nk2\nk3\nk207\n");
    assert_string_equal(r.out, "k1\tC\nk2\tA\nk3\tC\nk207\tB\n");
    run_free(&r);
}

static void route_replicas(void **state)
{
    (void)state;
    const char *names[] = {"a", "b", "c", "d"};
    rl_ring_t *ring = test_ring("default", 160, names, 4);
    uint32_t list[4];
    size_t got;
    assert_rl_ok(rl_ring_replicas(ring, "key", 3, list, 3, &got));
    char want[64];
    sprintf(want, "key\t%s,%s,%s\n", rl_ring_node_name(ring, list[0]),
            rl_ring_node_name(ring, list[1]), rl_ring_node_name(ring, list[2]));
    run_result r = run("route --nodes a,b,c,d --replicas 3", "key\n");
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, want);
    run_free(&r);
    r = run("route --nodes a,b --replicas 5", "key\n"); /* capped at the member count */
    assert_int_equal(r.status, 0);
    assert_true(strcmp(r.out, "key\ta,b\n") == 0 || strcmp(r.out, "key\tb,a\n") == 0);
    run_free(&r);
    r = run("route --nodes a,b,c,d --replicas 2 --zones a=x,b=x,c=x,d=y", "key\n");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "d")); /* the only node in zone y is always second or first */
    run_free(&r);
    rl_ring_free(ring);
}

static void route_bounded_places_in_order(void **state)
{
    (void)state;
    const char *names[] = {"a", "b", "c"};
    rl_ring_t *ring = test_ring("default", 160, names, 3);
    uint64_t loads[3] = {0};
    uint32_t a;
    assert_rl_ok(rl_ring_find(ring, "a", &a));
    loads[a] = 5;
    char want[1024] = "";
    for (int i = 0; i < 20; i++) {
        uint32_t n;
        assert_rl_ok(rl_ring_lookup_bounded(ring, "hot", 3, loads, 1.25, &n));
        loads[n]++;
        sprintf(want + strlen(want), "hot\t%s\n", rl_ring_node_name(ring, n));
    }
    char input[256] = "";
    for (int i = 0; i < 20; i++)
        strcat(input, "hot\n");
    run_result r = run("route --nodes a,b,c --bounded 1.25 --loads a=5", input);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, want);
    run_free(&r);
    rl_ring_free(ring);
}

/* --partitions N is the nodes 0..N-1 in order, under the Kafka partitioner's default profile
 * (balanced) unless --profile says otherwise. */
static void route_partitions_shortcut(void **state)
{
    (void)state;
    const char *input = "order-1\norder-2\norder-3\ncustomer-77\n";
    const char *pairs[][2] = {
        {"route --partitions 6", "route --profile balanced --nodes 0,1,2,3,4,5"},
        {"route --profile default --partitions 6", "route --nodes 0,1,2,3,4,5"},
        {"route --profile ds09 --vnodes 40 --partitions 6",
         "route --profile ds09 --vnodes 40 --nodes 0,1,2,3,4,5"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        run_result a = run(pairs[i][0], input);
        run_result b = run(pairs[i][1], input);
        assert_int_equal(a.status, 0);
        assert_string_equal(a.out, b.out);
        run_free(&a);
        run_free(&b);
    }
    /* The default profile of --partitions is not the one of --nodes (on some key). */
    char many[8000] = "";
    for (int i = 0; i < 400; i++)
        sprintf(many + strlen(many), "k%d\n", i);
    run_result a = run("route --partitions 6", many);
    run_result b = run("route --nodes 0,1,2,3,4,5", many);
    assert_int_equal(a.status, 0);
    assert_true(strcmp(a.out, b.out) != 0);
    run_free(&a);
    run_free(&b);
}

static void route_bad_keys_are_reported_and_skipped(void **state)
{
    (void)state;
    run_result r = run("route --profile turnstone --nodes n1", "a3f1\nnot-hex\nffff00\n");
    assert_int_equal(r.status, 1);
    assert_string_equal(r.out, "a3f1\tn1\nffff00\tn1\n");
    assert_non_null(strstr(r.err, "line 2"));
    assert_int_equal(count_lines(r.err), 1);
    run_free(&r);
}

/* "user0\nuser1\n..." and the owners on two rings built in-process, for any profile. */
static char *user_keys(int n)
{
    char *input = malloc((size_t)n * 16 + 1);
    input[0] = 0;
    for (int i = 0; i < n; i++)
        sprintf(input + strlen(input), "user%d\n", i);
    return input;
}

static rl_ring_t *profile_ring(const char *profile, const char *const *names, size_t n)
{
    return test_ring(profile, RL_VNODES_PROFILE, names, n);
}

typedef struct expected_move {
    const char *from, *to;
    unsigned long count;
} expected_move;

static int cmp_expected_move(const void *pa, const void *pb)
{
    const expected_move *a = pa, *b = pb;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    int c = strcmp(a->from, b->from);
    return c ? c : strcmp(a->to, b->to);
}

/* What diff prints for the keys user0..user<k-1> between two rings built in-process: the moved
 * count, the rows of moves in its order, and the shares table (nodes of `from`, then the new
 * ones of `to`; ideal = weight 1 over the node count of `to`). */
static char *expected_diff(const rl_ring_t *ra, const rl_ring_t *rb, int k)
{
    size_t na = rl_ring_member_count(ra), nb = rl_ring_member_count(rb);
    unsigned long before[16] = {0}, after[16] = {0}, moves[16][16] = {{0}};
    int moved = 0;
    for (int i = 0; i < k; i++) {
        char key[16];
        snprintf(key, sizeof key, "user%d", i);
        uint32_t a, b;
        assert_rl_ok(rl_ring_lookup(ra, key, strlen(key), &a));
        assert_rl_ok(rl_ring_lookup(rb, key, strlen(key), &b));
        before[a]++;
        after[b]++;
        if (strcmp(rl_ring_node_name(ra, a), rl_ring_node_name(rb, b)) != 0) {
            moves[a][b]++;
            moved++;
        }
    }
    /* the rows: most keys first, then by old and new name */
    expected_move rows[256];
    size_t n_rows = 0;
    for (uint32_t a = 0; a < na; a++)
        for (uint32_t b = 0; b < nb; b++)
            if (moves[a][b])
                rows[n_rows++] = (expected_move){rl_ring_node_name(ra, a), rl_ring_node_name(rb, b),
                                                 moves[a][b]};
    qsort(rows, n_rows, sizeof *rows, cmp_expected_move);
    char *out = malloc(8192);
    int at = sprintf(out, "moved %d of %d\n", moved, k);
    for (size_t i = 0; i < n_rows; i++)
        at += sprintf(out + at, "%s\t%s\t%lu\n", rows[i].from, rows[i].to, rows[i].count);
    at += sprintf(out + at, "\nnode\tbefore\tafter\tideal\n");
    for (uint32_t a = 0; a < na; a++) {
        uint32_t b;
        int in_b = rl_ring_find(rb, rl_ring_node_name(ra, a), &b) == 0;
        at += sprintf(out + at, "%s\t%.4f\t%.4f\t%.4f\n", rl_ring_node_name(ra, a),
                      (double)before[a] / k, in_b ? (double)after[b] / k : 0.0,
                      in_b ? 1.0 / (double)nb : 0.0);
    }
    for (uint32_t b = 0; b < nb; b++) {
        uint32_t a;
        if (rl_ring_find(ra, rl_ring_node_name(rb, b), &a) != 0)
            at += sprintf(out + at, "%s\t%.4f\t%.4f\t%.4f\n", rl_ring_node_name(rb, b), 0.0,
                          (double)after[b] / k, 1.0 / (double)nb);
    }
    return out;
}

static void diff_counts_moves(void **state)
{
    (void)state;
    const char *from[] = {"a", "b", "c"}, *to[] = {"a", "b", "c", "d"}, *less[] = {"a", "c"};
    rl_ring_t *ra = test_ring("default", 160, from, 3), *rb = test_ring("default", 160, to, 4);
    char *input = user_keys(1000), *want = expected_diff(ra, rb, 1000);
    run_result r = run("diff --from a,b,c --to a,b,c,d", input);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, want);
    /* every move goes to d; its share before is 0, and the ideal share is 1/4 */
    assert_non_null(strstr(r.out, "\td\t"));
    assert_non_null(strstr(r.out, "\nd\t0.0000\t"));
    assert_non_null(strstr(r.out, "\t0.2500\n"));
    run_free(&r);
    free(want);
    rl_ring_free(rb);

    /* b leaves: its row says after 0 and ideal 0; the others' ideal is 1/2 */
    rb = test_ring("default", 160, less, 2);
    want = expected_diff(ra, rb, 1000);
    r = run("diff --from a,b,c --to a,c", input);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, want);
    assert_non_null(strstr(r.out, "\t0.0000\t0.0000\n"));
    run_free(&r);
    free(want);
    free(input);
    rl_ring_free(ra);
    rl_ring_free(rb);
}

/* diff --partitions N..M is diff over the nodes 0..N-1 and 0..M-1 under the partitioner's
 * profile (balanced) unless --profile says otherwise, as route --partitions. */
static void diff_partitions(void **state)
{
    (void)state;
    char *input = user_keys(600);
    const char *pairs[][2] = {
        {"diff --partitions 6..8",
         "diff --profile balanced --from 0,1,2,3,4,5 --to 0,1,2,3,4,5,6,7"},
        {"diff --profile default --partitions 4..3", "diff --from 0,1,2,3 --to 0,1,2"},
        {"diff --profile ds09 --vnodes 40 --partitions 2..3",
         "diff --profile ds09 --vnodes 40 --from 0,1 --to 0,1,2"},
        {"diff --profile all --partitions 3..4", "diff --profile all --from 0,1,2 --to 0,1,2,3"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        run_result a = run(pairs[i][0], input), b = run(pairs[i][1], input);
        assert_int_equal(a.status, b.status);
        assert_string_equal(a.out, b.out);
        assert_true(a.out_len > 0);
        run_free(&a);
        run_free(&b);
    }
    const char *names6[] = {"0", "1", "2", "3", "4", "5"},
               *names8[] = {"0", "1", "2", "3", "4", "5", "6", "7"};
    rl_ring_t *ra = profile_ring("balanced", names6, 6), *rb = profile_ring("balanced", names8, 8);
    char *want = expected_diff(ra, rb, 600);
    run_result r = run("diff --partitions 6..8", input);
    assert_string_equal(r.out, want);
    run_free(&r);
    free(want);
    rl_ring_free(ra);
    rl_ring_free(rb);
    free(input);
}

/* --profile all: one "<profile>\tmoved <m> of <k>" line per profile that can take these keys,
 * each equal to the library's count; a profile that cannot is left out (no line), said once on
 * stderr. `all` still exits 0; a list that names a profile left out exits 1. */
static void diff_compares_profiles(void **state)
{
    (void)state;
    const char *from[] = {"a", "b", "c"}, *to[] = {"a", "b", "c", "d"};
    char *input = user_keys(500);
    run_result r = run("diff --profile all --from a,b,c --to a,b,c,d", input);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.err, "ringlane diff: turnstone: left out: line 1: key is not valid for "
                               "this profile (turnstone keys start with 4 hex digits)\n");
    assert_int_equal(count_lines(r.out), (int)rl_profile_count() - 1);
    assert_null(strstr(r.out, "turnstone"));
    char *line = r.out;
    for (size_t i = 0; i < rl_profile_count(); i++) {
        const char *name = rl_profile_at(i)->name;
        if (strcmp(name, "turnstone") == 0)
            continue;
        char want[128];
        int moved = 0;
        rl_ring_t *ra = profile_ring(name, from, 3), *rb = profile_ring(name, to, 4);
        for (int k = 0; k < 500; k++) {
            char key[16];
            snprintf(key, sizeof key, "user%d", k);
            moved += strcmp(test_owner(ra, key), test_owner(rb, key)) != 0;
        }
        rl_ring_free(ra);
        rl_ring_free(rb);
        snprintf(want, sizeof want, "%s\tmoved %d of 500\n", name, moved);
        assert_memory_equal(line, want, strlen(want));
        line += strlen(want);
    }
    run_free(&r);

    /* keys every profile takes (4 hex digits first): every profile has its line */
    r = run("diff --profile all --from a,b,c --to a,b,c,d", "00ff:1\nab12:2\nffff:3\n");
    assert_int_equal(r.status, 0);
    assert_int_equal(count_lines(r.out), (int)rl_profile_count());
    assert_string_equal(r.err, "");
    run_free(&r);

    /* a list, in its order; jump refuses weights and is left out, the others still count */
    r = run("diff --profile jump,ketama --from a=2,b --to a=2,b,c", input);
    assert_int_equal(r.status, 1);
    assert_int_equal(count_lines(r.out), 1);
    assert_memory_equal(r.out, "ketama\tmoved ", 13);
    assert_string_equal(r.err, "ringlane diff: jump: left out: cannot build the rings: profile "
                               "jump takes no weights (every member counts as one)\n");
    run_free(&r);
    r = run("diff --profile turnstone,default --from a --to a,b", input);
    assert_int_equal(r.status, 1);
    assert_memory_equal(r.out, "default\tmoved ", 14);
    assert_int_equal(count_lines(r.err), 1);
    run_free(&r);
    r = run("diff --profile maglev,envoy --from a,b --to a,b,c", input);
    assert_int_equal(r.status, 0);
    assert_int_equal(count_lines(r.out), 2);
    assert_memory_equal(r.out, "maglev\tmoved ", 13);
    run_free(&r);
    free(input);
}

/* A profile with a history (memento): diff makes the --to ring by rl_ring_remove / rl_ring_add
 * from the --from ring, as a dispatcher's lanes change, so removing b moves only b's keys
 * (jump, built from the list, renumbers c and d). --to in another order is built instead. */
static void diff_follows_a_history(void **state)
{
    (void)state;
    const char *four[] = {"a", "b", "c", "d"};
    char *input = user_keys(2000);
    rl_ring_t *ra = profile_ring("memento", four, 4), *rb, *rc;
    assert_rl_ok(rl_ring_remove(ra, "b", &rb));
    assert_rl_ok(rl_ring_add(rb, &(rl_member){"e", 1, NULL}, &rc));
    int moved_b = 0, moved_e = 0;
    for (int k = 0; k < 2000; k++) {
        char key[16];
        snprintf(key, sizeof key, "user%d", k);
        int was_b = strcmp(test_owner(ra, key), "b") == 0;
        moved_b += was_b;
        moved_e += was_b && strcmp(test_owner(rc, key), "e") == 0;
    }
    assert_int_equal(moved_e, moved_b); /* e took b's bucket */
    run_result r = run("diff --profile memento --from a,b,c,d --to a,c,d", input);
    assert_int_equal(r.status, 0);
    char want[64];
    snprintf(want, sizeof want, "moved %d of 2000\nb\t", moved_b);
    assert_memory_equal(r.out, want, strlen(want));
    /* b -> a, b -> c, b -> d: nothing else, then the empty line before the shares */
    const char *shares = strstr(r.out, "\n\n");
    assert_non_null(shares);
    int rows = 0;
    for (const char *c = r.out; c <= shares; c++)
        rows += *c == '\n';
    assert_int_equal(rows, 4);
    run_free(&r);
    r = run("diff --profile jump,memento --from a,b,c,d --to a,c,d,e", input);
    assert_int_equal(r.status, 0);
    snprintf(want, sizeof want, "memento\tmoved %d of 2000\n", moved_b);
    assert_non_null(strstr(r.out, want));
    run_free(&r);
    /* Reordered: no sequence of changes gives it; the --to ring is built (jump's placement). */
    r = run("diff --profile memento --from a,b,c --to c,a", input);
    assert_int_equal(r.status, 0);
    rl_ring_t *built = profile_ring("jump", (const char *[]){"c", "a"}, 2);
    rl_ring_t *three = profile_ring("jump", four, 3);
    int moved = 0;
    for (int k = 0; k < 2000; k++) {
        char key[16];
        snprintf(key, sizeof key, "user%d", k);
        moved += strcmp(test_owner(three, key), test_owner(built, key)) != 0;
    }
    snprintf(want, sizeof want, "moved %d of 2000\n", moved);
    assert_memory_equal(r.out, want, strlen(want));
    run_free(&r);
    r = run("diff --profile memento --from a,b --to a,b=2", input);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "profile memento takes no weights"));
    run_free(&r);
    rl_ring_free(built);
    rl_ring_free(three);
    rl_ring_free(rc);
    rl_ring_free(rb);
    rl_ring_free(ra);
    free(input);
}

/* route, diff and stats take every profile; the CLI routes as the library does. */
static void every_profile_routes(void **state)
{
    (void)state;
    const char *names[] = {"10.0.0.1:11211", "10.0.0.2:11212", "cache-c"};
    char *input = user_keys(200);
    for (size_t i = 0; i < rl_profile_count(); i++) {
        const char *name = rl_profile_at(i)->name;
        if (strcmp(name, "turnstone") == 0)
            continue; /* its keys are workspace ids; covered above */
        rl_ring_t *ring = profile_ring(name, names, 3);
        char args[128], *want = malloc(200 * 40);
        want[0] = 0;
        for (int k = 0; k < 200; k++) {
            char key[16];
            snprintf(key, sizeof key, "user%d", k);
            sprintf(want + strlen(want), "%s\t%s\n", key, test_owner(ring, key));
        }
        snprintf(args, sizeof args,
                 "route --profile %s --nodes 10.0.0.1:11211,10.0.0.2:11212,cache-c", name);
        run_result r = run(args, input);
        assert_int_equal(r.status, 0);
        assert_string_equal(r.out, want);
        run_free(&r);
        snprintf(args, sizeof args, "stats --profile %s --nodes a,b,c", name);
        r = run(args, "");
        assert_int_equal(r.status, strcmp(rl_profile_at(i)->kind, "computed") == 0 ? 2 : 0);
        run_free(&r);
        free(want);
        rl_ring_free(ring);
    }
    free(input);

    run_result r = run("stats --profile maglev --nodes a,b=2", "");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "points\t65537\ngap_cv\t0.000000\n"));
    run_free(&r);
    r = run("hash --hash md5 abc", "");
    assert_string_equal(r.out, "2555380112\n"); /* 0x98500190: MD5("abc") = 90 01 50 98 ... */
    run_free(&r);
}

static void table_and_stats(void **state)
{
    (void)state;
    run_result r = run("table --profile turnstone --nodes n1,n2", "");
    assert_int_equal(r.status, 0);
    assert_int_equal(count_lines(r.out), 65536);
    assert_memory_equal(r.out, "0\tn2\n", 5); /* gen_turnstone.py: bucket 0 belongs to n2 */
    run_free(&r);
    r = run("table --profile default --nodes n1,n2", "");
    assert_int_equal(r.status, 2);
    assert_int_equal(count_lines(r.err), 1);
    run_free(&r);

    r = run("stats --profile ds09 --nodes a,b,c,d", "");
    assert_int_equal(r.status, 0);
    double share, sum = 0, cv, mm;
    char name[16];
    char *p = r.out;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(sscanf(p, "%15[^\t]\t%lf\n", name, &share), 2);
        sum += share;
        p = strchr(p, '\n') + 1;
    }
    assert_true(sum > 0.9999 && sum < 1.0001);
    assert_int_equal(sscanf(p, "points\t640\ngap_cv\t%lf\nmax/mean\t%lf\n", &cv, &mm), 2);
    assert_true(cv > 0.5 && mm >= 1.0);
    run_free(&r);
}

static void hash_command(void **state)
{
    (void)state;
    run_result r = run("hash --hash fnv1a32 foobar ''", "");
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "3214735720\n2166136261\n");
    run_free(&r);
    r = run("hash --hash xmur3 k207", "");
    assert_string_equal(r.out, "4285853574\n");
    run_free(&r);
    r = run("hash --hash hash64 foobar", "");
    assert_string_equal(r.out, "4633546387131234498\n"); /* 0x404da9e3b74078c2 */
    run_free(&r);
    r = run("hash --hash sha1 x", "");
    assert_int_equal(r.status, 2);
    run_free(&r);
}

/* Each bad argument: exit 2, exactly one line on stderr, nothing on stdout. */
static void bad_arguments(void **state)
{
    (void)state;
    const char *bad[] = {
        "",
        "frobnicate",
        "route",
        "route --nodes",
        "route --nodes ''",
        "route --nodes a,,b",
        "route --nodes a=0",
        "route --nodes a=x",
        "route --nodes a=65537",
        "route --nodes a,b,a",
        "route --nodes a --vnodes 0",
        "route --nodes a --vnodes -3",
        "route --nodes a --vnodes 65537",
        "route --nodes a --profile nope",
        "route --nodes a --replicas 0",
        "route --nodes a --bounded x",
        "route --nodes a --bounded 0",
        "route --nodes a --bounded 1.25 --loads z=1",
        "route --nodes a --bounded 1.25 --loads a=-1",
        "route --nodes a --loads a=1",
        "route --nodes a --replicas 2 --bounded 1",
        "route --nodes a --zones a=x",
        "route --nodes a --partitions 3",
        "route --partitions 0",
        "route --nodes a --frob",
        "route --nodes a extra",
        "diff --from a",
        "diff --from a --to ''",
        "table --nodes a",
        "stats",
        "hash --hash xxh3",
        "hash x",
        "profiles extra",
        "diff --profile all --vnodes 3 --from a --to b",
        "diff --profile default,nope --from a --to b",
        "route --profile maglev --nodes a --replicas 2",
        "route --profile jump --nodes a --bounded 1.5",
        "route --profile jump --nodes a=2",
        "route --profile jump --vnodes 50 --nodes a",
        "route --profile jump --vnodes 1 --partitions 3",
        "route --profile maglev --vnodes 1 --nodes a",
        "route --profile ketama --vnodes 4 --nodes a",
        "route --profile envoy --vnodes 8388609 --nodes a",
        "stats --profile jump --vnodes 2 --nodes a",
        "diff --profile jump --vnodes 50 --from a --to a,b",
        "route --json --nodes a,\xff",
        "diff --json --from a --to a,\xfe",
        "stats --json --nodes \xc0\xaf",
        "table --json --profile turnstone --nodes a",
        "diff --partitions 4",
        "diff --partitions 0..3",
        "diff --partitions 3..100001",
        "diff --partitions x..4",
        "diff --partitions 3..4 --from a --to b",
        "diff --partitions 3..4 --vnodes 0",
        "profiles nope",
        "profiles --long --frob",
        "route --profile maglev --vnodes 8 --nodes a",
        "route --profile ketama --nodes a:x",
        "stats --profile jump --nodes a",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        run_result r = run(bad[i], "k\n");
        if (r.status != 2 || count_lines(r.err) != 1 || r.out_len != 0)
            fail_msg("'ringlane %s': status %d, stderr '%s', stdout '%s'", bad[i], r.status, r.err,
                     r.out);
        run_free(&r);
    }
}

/* --vnodes is checked by the profile's own rule (rl_profile_explain_vnodes, as rl_ring_build and
 * the Kafka plugin check it), and the message quotes that profile's range, not the widest. */
static void vnodes_messages_name_the_profiles_range(void **state)
{
    (void)state;
    const struct {
        const char *args, *says;
    } cases[] = {
        {"route --nodes a --vnodes 0",
         "ringlane route: --vnodes: profile default takes 1..65536 vnodes, got 0\n"},
        {"route --partitions 3 --vnodes 65537",
         "ringlane route: --vnodes: profile balanced takes 1..65536 vnodes, got 65537\n"},
        {"route --nodes a --vnodes -3",
         "ringlane route: --vnodes: profile default takes 1..65536 vnodes, got '-3'\n"},
        {"route --profile jump --nodes a --vnodes 50",
         "ringlane route: --vnodes: profile jump has no vnodes (it computes each key's bucket "
         "from the member count), got 50\n"},
        {"stats --profile maglev --nodes a --vnodes 1000",
         "ringlane stats: --vnodes: profile maglev takes a prime 2..5000011 (its table size), "
         "got 1000\n"},
        {"diff --profile ketama --vnodes 4 --from a --to b",
         "ringlane diff: --vnodes: profile ketama takes 5..65536 vnodes (points per server at "
         "equal weights: vnodes / 4 labels, none below 5), got 4\n"},
        {"route --profile envoy --nodes a --vnodes 8388609",
         "ringlane route: --vnodes: profile envoy takes 1..8388608 vnodes (its "
         "minimum_ring_size), got 8388609\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        run_result r = run(cases[i].args, "k\n");
        assert_int_equal(r.status, 2);
        assert_string_equal(r.err, cases[i].says);
        run_free(&r);
    }
    /* What each takes is taken: the boundaries, and jump with no --vnodes. */
    const char *good[] = {
        "route --nodes a --vnodes 65536", "route --profile ketama --nodes a --vnodes 5",
        "route --profile maglev --nodes a --vnodes 2",
        "route --profile maglev --nodes a --vnodes 5000011", "route --profile jump --nodes a,b"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        run_result r = run(good[i], "k\n");
        if (r.status != 0)
            fail_msg("'ringlane %s': status %d, stderr '%s'", good[i], r.status, r.err);
        run_free(&r);
    }
}

/* The lines of s longer than `width` columns (bytes: the output is ASCII). */
static int lines_over(const char *s, size_t width)
{
    int over = 0;
    while (*s) {
        size_t n = strcspn(s, "\n");
        over += n > width;
        s += n + (s[n] == '\n');
    }
    return over;
}

/* Every command's --help, within 80 columns. */
static void help_everywhere(void **state)
{
    (void)state;
    const char *cmds[] = {
        "--help",         "route --help",         "diff --help",     "table --help",
        "stats --help",   "hash --help",          "profiles --help", "route --nodes a -h",
        "offsets --help", "offsets decode --help"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        run_result r = run(cmds[i], "");
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "usage: ringlane"));
        if (lines_over(r.out, 80))
            fail_msg("'ringlane %s' has lines over 80 columns:\n%s", cmds[i], r.out);
        run_free(&r);
    }
}

/* "ringlane help COMMAND" prints what "ringlane COMMAND --help" prints (it printed the general
 * usage); "ringlane help" the general usage; an unknown or second command is a bad argument. */
static void help_names_a_command(void **state)
{
    (void)state;
    const char *commands[] = {"route", "diff", "table", "stats", "hash", "profiles"};
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) {
        char args[64];
        snprintf(args, sizeof args, "%s --help", commands[i]);
        run_result want = run(args, "");
        snprintf(args, sizeof args, "help %s", commands[i]);
        run_result got = run(args, "");
        assert_int_equal(got.status, 0);
        snprintf(args, sizeof args, "usage: ringlane %s ", commands[i]);
        assert_starts(got.out, args);
        assert_string_equal(got.out, want.out);
        assert_string_equal(got.err, "");
        run_free(&want);
        run_free(&got);
    }
    run_result want = run("--help", ""), got = run("help", "");
    assert_int_equal(got.status, 0);
    assert_string_equal(got.out, want.out);
    run_free(&want);
    run_free(&got);
    const char *bad[] = {"help nope", "help route diff", "help --long"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        run_result r = run(bad[i], "");
        if (r.status != 2 || count_lines(r.err) != 1 || r.out_len != 0)
            fail_msg("'ringlane %s': status %d, stderr '%s', stdout '%s'", bad[i], r.status, r.err,
                     r.out);
        run_free(&r);
    }
}

/* profiles: a table within 80 columns, one row per profile; NAME or --long: in full, wrapped at
 * 80 columns, with the rule of the vnodes it takes. (It printed ~300-column lines.) */
static void profiles_readable(void **state)
{
    (void)state;
    run_result r = run("profiles", "");
    assert_int_equal(r.status, 0);
    assert_starts(r.out, "NAME ");
    assert_int_equal(lines_over(r.out, 80), 0);
    int rows = 0; /* rows start with a name; a wrapped purpose continues indented */
    for (const char *l = r.out; *l; l = strchr(l, '\n') + 1)
        rows += *l != ' ';
    assert_int_equal(rows, (int)rl_profile_count() + 1);
    for (size_t i = 0; i < rl_profile_count(); i++) {
        char row[64];
        snprintf(row, sizeof row, "\n%s ", rl_profile_at(i)->name);
        assert_non_null(strstr(r.out, row));
    }
    assert_non_null(strstr(r.out, "\njump             -  xxh3-64  "));
    assert_non_null(strstr(r.out, "\nmaglev       65537  XXH64    Envoy Maglev load balancer\n"));
    run_free(&r);

    r = run("profiles --long", "");
    assert_int_equal(r.status, 0);
    assert_int_equal(lines_over(r.out, 80), 0);
    for (size_t i = 0; i < rl_profile_count(); i++) {
        char head[64];
        snprintf(head, sizeof head, "%s%s\n  compatible  ", i ? "\n\n" : "",
                 rl_profile_at(i)->name);
        assert_non_null(strstr(r.out, head));
    }
    /* What each profile reproduces is said in words a user can place, not by the names of
     * design documents they cannot read ("seed 003 interview reference", "ds.09 ring"). */
    assert_null(strstr(r.out, "seed 003"));
    assert_null(strstr(r.out, "ds.09"));
    assert_null(strstr(r.out, "reference design"));
    assert_non_null(
        strstr(r.out, "\nturnstone\n  compatible  16-bit bucket ring for hex-prefixed"));
    run_free(&r);

    r = run("profiles jump ketama", "");
    assert_int_equal(r.status, 0);
    assert_starts(r.out, "jump\n");
    assert_non_null(strstr(r.out, "\n  vnodes      none; profile jump has no vnodes"));
    assert_non_null(strstr(r.out, "\n\nketama\n"));
    assert_non_null(strstr(r.out, "\n  vnodes      160 by default; profile ketama takes 5..65536"));
    assert_non_null(strstr(r.out, "\n  kind        ring, 32-bit\n"));
    run_free(&r);
}

/* Writes text to a scratch file and runs `sh_cmd < file` (its stdout into out, when set);
 * returns the exit status. */
static int pipe_through(const char *sh_cmd, const char *text, char **out)
{
    char in[] = "/tmp/rl_cli_pipe_in_XXXXXX", res[] = "/tmp/rl_cli_pipe_out_XXXXXX";
    int fi = mkstemp(in), fo = mkstemp(res);
    assert_true(fi >= 0 && fo >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fi, text, n), (ssize_t)n);
    close(fi);
    close(fo);
    char *cmd = malloc(strlen(sh_cmd) + 200);
    sprintf(cmd, "%s <%s >%s 2>&1", sh_cmd, in, res);
    int status = system(cmd);
    free(cmd);
    if (out)
        *out = slurp(res, NULL);
    unlink(in);
    unlink(res);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int have(const char *program)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", program);
    return system(cmd) == 0;
}

/* python3's JSON parser accepts the text: one document, or JSON lines. */
static void assert_json(const char *text, int lines)
{
    char *said = NULL;
    int status = pipe_through(lines ? "python3 -m json.tool --json-lines" : "python3 -m json.tool",
                              text, &said);
    if (status != 0)
        fail_msg("python3 -m json.tool refused (%s): %s\n%s", lines ? "lines" : "document", said,
                 text);
    free(said);
}

/* --json: route writes JSON lines, diff and stats one document, all parsed by python3; strings
 * are escaped, and keys come back byte for byte: "key" when UTF-8, else "key_hex". */
static void json_output(void **state)
{
    (void)state;
    if (!have("python3"))
        skip();
    /* Keys: plain, empty, quote backslash tab, a control byte, UTF-8 (é), and four that are not
     * UTF-8: bytes ff fe, a surrogate (ed a0 80), an overlong '/' (c0 af), a cut sequence. */
    const char *keys[] = {"user1",
                          "",
                          "q\"\\\t",
                          ("\x01"
                           "ctl"),
                          "caf\xc3\xa9",
                          "\xff\xfe",
                          "\xed\xa0\x80",
                          "\xc0\xaf",
                          "ab\xe2\x82"};
    const size_t n_keys = sizeof keys / sizeof *keys;
    const char *names[] = {"a", "b", "c"};
    rl_ring_t *ring = test_ring("default", 160, names, 3);
    char input[256] = "", want[2048] = "", hex[1024] = "";
    for (size_t i = 0; i < n_keys; i++) {
        sprintf(input + strlen(input), "%s\n", keys[i]);
        for (const unsigned char *p = (const unsigned char *)keys[i]; *p; p++)
            sprintf(hex + strlen(hex), "%02x", *p);
        strcat(hex, "\n");
    }
    const char *json_keys[] = {"\"key\":\"user1\"",        "\"key\":\"\"",
                               "\"key\":\"q\\\"\\\\\\t\"", "\"key\":\"\\u0001ctl\"",
                               "\"key\":\"caf\xc3\xa9\"",  "\"key_hex\":\"fffe\"",
                               "\"key_hex\":\"eda080\"",   "\"key_hex\":\"c0af\"",
                               "\"key_hex\":\"6162e282\""};
    for (size_t i = 0; i < n_keys; i++)
        sprintf(want + strlen(want), "{%s,\"node\":\"%s\"}\n", json_keys[i],
                test_owner(ring, keys[i]));
    run_result r = run("route --json --nodes a,b,c", input);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, want);
    assert_json(r.out, 1);
    /* The bytes of every key, decoded from the JSON by python3. */
    char *decoded = NULL;
    assert_int_equal(pipe_through("python3 -c 'import json, sys\n"
                                  "for l in sys.stdin:\n"
                                  "    o = json.loads(l)\n"
                                  "    b = bytes.fromhex(o[\"key_hex\"]) if \"key_hex\" in o "
                                  "else o[\"key\"].encode()\n"
                                  "    print(b.hex())'",
                                  r.out, &decoded),
                     0);
    assert_string_equal(decoded, hex);
    free(decoded);
    run_free(&r);
    rl_ring_free(ring);

    r = run("route --json --nodes 'a\"1,b\\2,c' --replicas 2", "k\n");
    assert_int_equal(r.status, 0);
    assert_starts(r.out, "{\"key\":\"k\",\"nodes\":[");
    assert_non_null(strstr(r.out, "\"a\\\"1\""));
    assert_non_null(strstr(r.out, "\"b\\\\2\""));
    assert_json(r.out, 1);
    run_free(&r);

    char *users = user_keys(1000);
    run_result text = run("diff --from a,b,c --to a,b,c,d", users);
    r = run("diff --json --from a,b,c --to a,b,c,d", users);
    assert_int_equal(r.status, 0);
    assert_json(r.out, 0);
    int moved;
    assert_int_equal(sscanf(text.out, "moved %d of 1000", &moved), 1);
    char field[64];
    snprintf(field, sizeof field, ",\"keys\":1000,\"moved\":%d,\"unrouted\":0,\"moves\":[", moved);
    assert_starts(r.out, "{\"profile\":\"default\",\"vnodes\":160");
    assert_non_null(strstr(r.out, field));
    assert_non_null(strstr(r.out, "{\"node\":\"d\",\"keys_before\":0,"));
    assert_non_null(strstr(r.out, ",\"ideal\":0.25}]}\n"));
    run_free(&r);
    run_free(&text);

    r = run("diff --json --profile all --partitions 3..4", users);
    assert_int_equal(r.status, 0);
    assert_json(r.out, 0);
    assert_starts(r.out, "{\"keys\":1000,\"profiles\":[{\"profile\":\"default\"");
    assert_non_null(strstr(r.out, "{\"profile\":\"jump\",\"vnodes\":0,"));
    assert_non_null(
        strstr(r.out, "],\"skipped\":[{\"profile\":\"turnstone\",\"reason\":\"line 1: "));
    run_free(&r);
    free(users);

    r = run("stats --json --profile ds09 --nodes a,b,c,d", "");
    assert_int_equal(r.status, 0);
    assert_json(r.out, 0);
    assert_starts(r.out, "{\"profile\":\"ds09\",\"vnodes\":160,\"nodes\":[{\"node\":\"a\",");
    assert_non_null(strstr(r.out, "],\"points\":640,\"gap_cv\":"));
    run_free(&r);
}

/* The directory of the CLI's sources (the man page, the completion). */
static const char *source_dir(void)
{
    const char *dir = getenv("RINGLANE_CLI_SOURCE");
    assert_non_null(dir);
    return dir;
}

/* ringlane.1 formats without a warning, and it and the bash completion know every option each
 * command's --help lists. */
static void man_page_and_completion_know_every_option(void **state)
{
    (void)state;
    char path[4096], cmd[8300];
    snprintf(path, sizeof path, "%s/ringlane.1", source_dir());
    char *man = slurp(path, NULL);
    snprintf(path, sizeof path, "%s/ringlane.bash", source_dir());
    char *completion = slurp(path, NULL);
    const char *commands[] = {"route", "diff",     "table",   "stats",
                              "hash",  "profiles", "offsets", "grow"};
    for (size_t c = 0; c < sizeof commands / sizeof *commands; c++) {
        char args[64], troff[64];
        snprintf(troff, sizeof troff, ".B %s", commands[c]);
        if (!strstr(man, troff))
            fail_msg("ringlane.1 has no \"%s\"", troff);
        if (!strstr(completion, commands[c]))
            fail_msg("ringlane.bash does not complete %s", commands[c]);
        snprintf(args, sizeof args, "%s --help", commands[c]);
        run_result r = run(args, "");
        for (const char *p = strstr(r.out, "--"); p; p = strstr(p + 2, "--")) {
            char opt[32], in_man[40];
            size_t n = strspn(p + 2, "abcdefghijklmnopqrstuvwxyz-"); /* --switch-wait */
            while (n && p[2 + n - 1] == '-')
                n--;
            if (n == 0 || n > 20)
                continue;
            snprintf(opt, sizeof opt, "--%.*s", (int)n, p + 2);
            /* troff writes each '-' of an option as "\-". */
            size_t at = (size_t)snprintf(in_man, sizeof in_man, "\\-\\-");
            for (size_t i = 0; i < n && at + 3 < sizeof in_man; i++)
                at += (size_t)snprintf(in_man + at, sizeof in_man - at, "%s",
                                       p[2 + i] == '-' ? "\\-" : (char[2]){p[2 + i], 0});
            if (!strstr(man, in_man))
                fail_msg("ringlane.1 does not document %s of %s", opt, commands[c]);
            char word[40];
            snprintf(word, sizeof word, "%s ", opt);
            if (strstr(completion, word) == NULL) {
                snprintf(word, sizeof word, "%s\"", opt);
                if (!strstr(completion, word))
                    fail_msg("ringlane.bash does not complete %s of %s", opt, commands[c]);
            }
        }
        run_free(&r);
    }
    free(man);
    free(completion);

    if (!have("groff"))
        skip(); /* scripts/install-deps.sh installs groff-base */
    char *said = NULL;
    snprintf(cmd, sizeof cmd, "groff -man -Tutf8 -ww -z '%s/ringlane.1'", source_dir());
    assert_int_equal(pipe_through(cmd, "", &said), 0);
    assert_string_equal(said, ""); /* no warning */
    free(said);
}

/* The bash completion, sourced in bash: COMP_WORDS and COMP_CWORD in, COMPREPLY out. */
static void bash_completion(void **state)
{
    (void)state;
    if (!have("bash"))
        skip();
    const char *cli = getenv("RINGLANE_CLI");
    const struct {
        const char *words, *want; /* the line, its last word the one completed */
    } cases[] = {
        {"ro", "route"},
        {"p", "profiles"},
        {"route --pr", "--profile"},
        {"route --profile ma", "maglev"},
        {"route --profile = ba", "balanced"}, /* --profile=ba: bash splits at "=" */
        {"route --nodes a,b --j", "--json"},
        {"diff --profile a", "all"},
        {"diff --pa", "--partitions"},
        {"hash --hash xx", "xxh3 xxh64"},
        {"stats --", "--help --json --nodes --profile --vnodes"},
        {"profiles j", "jump"},
        {"profiles --l", "--long"},
        {"help r", "route"},
        {"help", "help"},
        {"help route --", ""},
        {"route --vnodes \"\"", ""},
        {"table --j", ""},
        {"of", "offsets"},
        {"offsets \"\"", "--help decode"},
        {"offsets decode --", "--help --json"},
        {"gr", "grow"},
        {"grow --sw", "--switch-wait"},
        {"grow --a", "--abort --announce-only --announce-wait"},
        {"grow --profile balanced --vnodes d", "default"},
        {"grow --topic \"\"", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char cmd[8192], *got = NULL;
        snprintf(cmd, sizeof cmd,
                 "bash --norc --noprofile -c '. \"$0\"; COMP_WORDS=(\"$1\" %s); "
                 "COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _ringlane; "
                 "printf \"%%s\\n\" \"${COMPREPLY[@]}\" | sort | paste -sd \" \"' "
                 "'%s/ringlane.bash' '%s'",
                 cases[i].words, source_dir(), cli);
        assert_int_equal(pipe_through(cmd, "", &got), 0);
        size_t n = strlen(got);
        if (n && got[n - 1] == '\n')
            got[n - 1] = 0;
        if (strcmp(got, cases[i].want) != 0)
            fail_msg("completing 'ringlane %s': got '%s', want '%s'", cases[i].words, got,
                     cases[i].want);
        free(got);
    }
}

/* offsets decode: the maps of docs/consumer.md's examples, as text and JSON, from arguments and
 * from stdin; a text that is not a map is reported (exit 1) and the others still decoded. */
static void offsets_decode(void **state)
{
    (void)state;
    run_result r =
        run("offsets decode ringlane1:AegHCuwDLa64mQ ringlane1:AOgH6QcB8wMB9AOW2I1M", "");
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "base 1000 (the committed offset), 7 complete offsets up to 1009 "
                               "(bitmap, 24 bytes): 1002-1003 1005-1009\n"
                               "base 1000 (the committed offset), 999 complete offsets up to "
                               "2000 (runs, 30 bytes): 1001-1499 1501-2000\n");
    run_free(&r);
    r = run("offsets decode --json", "ringlane1:AegHCuwDLa64mQ\r\nringlane2:AAAA\n");
    assert_int_equal(r.status, 1);
    assert_json(r.out, 1);
    assert_string_equal(r.out, "{\"base\":1000,\"last\":1009,\"form\":\"bitmap\",\"bytes\":24,"
                               "\"complete\":7,\"spans\":[[1002,1003],[1005,1009]]}\n"
                               "{\"error\":\"version\",\"reason\":\"an offset map of a version "
                               "other than 1\"}\n");
    assert_non_null(strstr(r.err, "ringlane offsets: an offset map of a version other than 1"));
    run_free(&r);
    r = run("offsets decode 'checkpoint 42' ringlane1:AegHCuwDLa64mA ringlane1:AegHCuwDLa64mQ", "");
    assert_int_equal(r.status, 1);
    assert_starts(r.out, "base 1000 ");
    assert_non_null(strstr(r.err, "not a ringlane offset map: checkpoint 42"));
    assert_non_null(strstr(r.err, "checksum mismatch: ringlane1:AegHCuwDLa64mA"));
    run_free(&r);
    const char *bad[] = {"offsets", "offsets encode x", "offsets decode --jsn x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        r = run(bad[i], "");
        assert_int_equal(r.status, 2);
        assert_string_equal(r.out, "");
        run_free(&r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(route_prints_key_tab_node),
        cmocka_unit_test(route_keys_are_exact_bytes),
        cmocka_unit_test(route_weights_profiles_vnodes),
        cmocka_unit_test(route_replicas),
        cmocka_unit_test(route_bounded_places_in_order),
        cmocka_unit_test(route_partitions_shortcut),
        cmocka_unit_test(route_bad_keys_are_reported_and_skipped),
        cmocka_unit_test(diff_counts_moves),
        cmocka_unit_test(diff_partitions),
        cmocka_unit_test(diff_compares_profiles),
        cmocka_unit_test(diff_follows_a_history),
        cmocka_unit_test(every_profile_routes),
        cmocka_unit_test(table_and_stats),
        cmocka_unit_test(hash_command),
        cmocka_unit_test(bad_arguments),
        cmocka_unit_test(vnodes_messages_name_the_profiles_range),
        cmocka_unit_test(help_everywhere),
        cmocka_unit_test(help_names_a_command),
        cmocka_unit_test(profiles_readable),
        cmocka_unit_test(json_output),
        cmocka_unit_test(offsets_decode),
        cmocka_unit_test(man_page_and_completion_know_every_option),
        cmocka_unit_test(bash_completion),
    };
    return cmocka_run_group_tests_name("cli", tests, NULL, NULL);
}
