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

static void diff_counts_moves(void **state)
{
    (void)state;
    const char *from[] = {"a", "b", "c"}, *to[] = {"a", "b", "c", "d"};
    rl_ring_t *ra = test_ring("default", 160, from, 3), *rb = test_ring("default", 160, to, 4);
    char *input = malloc(20000);
    input[0] = 0;
    int moved = 0;
    for (int i = 0; i < 1000; i++) {
        char key[16];
        snprintf(key, sizeof key, "user%d", i);
        strcat(input, key);
        strcat(input, "\n");
        moved += strcmp(test_owner(ra, key), test_owner(rb, key)) != 0;
    }
    run_result r = run("diff --from a,b,c --to a,b,c,d", input);
    assert_int_equal(r.status, 0);
    char head[64];
    sprintf(head, "moved %d of 1000\n", moved);
    assert_memory_equal(r.out, head, strlen(head));
    /* Rows: every move goes to d, so at most three rows, and their counts add up. */
    int sum = 0, rows = 0;
    char *save = NULL;
    for (char *line = strtok_r(r.out + strlen(head), "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char old[16], new_[16];
        int count;
        assert_int_equal(sscanf(line, "%15[^\t]\t%15[^\t]\t%d", old, new_, &count), 3);
        assert_string_equal(new_, "d");
        sum += count;
        rows++;
    }
    assert_int_equal(sum, moved);
    assert_true(rows >= 1 && rows <= 3);
    run_free(&r);
    free(input);
    rl_ring_free(ra);
    rl_ring_free(rb);
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

/* --profile all: one "<profile>\tmoved <m> of <k>" line per profile that can route these keys,
 * each equal to the library's count; a single profile keeps the detailed output. */
static void diff_compares_profiles(void **state)
{
    (void)state;
    const char *from[] = {"a", "b", "c"}, *to[] = {"a", "b", "c", "d"};
    char *input = user_keys(500);
    run_result r = run("diff --profile all --from a,b,c --to a,b,c,d", input);
    assert_int_equal(r.status, 1); /* turnstone cannot route "user..." keys */
    assert_non_null(strstr(r.err, "turnstone: 500 keys could not be routed"));
    assert_int_equal(count_lines(r.out), (int)rl_profile_count());
    char *line = r.out;
    for (size_t i = 0; i < rl_profile_count(); i++) {
        const char *name = rl_profile_at(i)->name;
        char want[128];
        int moved = 0, total = 0;
        if (strcmp(name, "turnstone") != 0) {
            rl_ring_t *ra = profile_ring(name, from, 3), *rb = profile_ring(name, to, 4);
            for (int k = 0; k < 500; k++) {
                char key[16];
                snprintf(key, sizeof key, "user%d", k);
                moved += strcmp(test_owner(ra, key), test_owner(rb, key)) != 0;
                total++;
            }
            rl_ring_free(ra);
            rl_ring_free(rb);
        }
        snprintf(want, sizeof want, "%s\tmoved %d of %d\n", name, moved, total);
        assert_memory_equal(line, want, strlen(want));
        line += strlen(want);
    }
    run_free(&r);

    /* a list, in its order; jump refuses weights and says so, the others still count */
    r = run("diff --profile jump,ketama --from a=2,b --to a=2,b,c", input);
    assert_int_equal(r.status, 1);
    assert_int_equal(count_lines(r.out), 1);
    assert_memory_equal(r.out, "ketama\tmoved ", 13);
    assert_non_null(strstr(r.err, "jump: cannot build the rings: jump buckets take no weights"));
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
    assert_int_equal(count_lines(r.out), 4); /* b -> a, b -> c, b -> d: nothing else */
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
    assert_non_null(strstr(r.err, "memento buckets take no weights"));
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

static void help_everywhere(void **state)
{
    (void)state;
    const char *cmds[] = {"--help",       "route --help", "diff --help",     "table --help",
                          "stats --help", "hash --help",  "profiles --help", "route --nodes a -h"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        run_result r = run(cmds[i], "");
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "usage: ringlane"));
        run_free(&r);
    }
    run_result r = run("profiles", "");
    assert_int_equal(r.status, 0);
    assert_true(count_lines(r.out) == (int)rl_profile_count());
    assert_non_null(strstr(r.out, "turnstone"));
    run_free(&r);
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
        cmocka_unit_test(diff_compares_profiles),
        cmocka_unit_test(diff_follows_a_history),
        cmocka_unit_test(every_profile_routes),
        cmocka_unit_test(table_and_stats),
        cmocka_unit_test(hash_command),
        cmocka_unit_test(bad_arguments),
        cmocka_unit_test(help_everywhere),
    };
    return cmocka_run_group_tests_name("cli", tests, NULL, NULL);
}
