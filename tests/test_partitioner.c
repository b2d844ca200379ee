/* SPDX-License-Identifier: BSD-2-Clause */
/* The ring partitioner without a cluster: same ring as the CLI, range, key policies, growth,
 * options, and concurrent first use from many threads. */
#define _POSIX_C_SOURCE 200809L
#include "kafka_test_util.h"

#include "ringlane/hash.h"

#include <math.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

static rl_kafka_partitioner_t *make(const char *profile, uint32_t vnodes)
{
    rl_kafka_partitioner_options o;
    rl_kafka_partitioner_options_init(&o);
    o.profile = profile;
    o.vnodes = vnodes;
    rl_kafka_partitioner_t *p = NULL;
    assert_rl_ok(rl_kafka_partitioner_new(&o, &p));
    return p;
}

/* Every key lands where the independently built ring over "0".."P-1" puts it. */
static void same_ring_as_reference(void **state)
{
    (void)state;
    const char *profiles[] = {RL_KAFKA_DEFAULT_PROFILE, "default", "ds09", "xmur3"};
    const int32_t counts[] = {1, 2, 3, 6, 8, 13, 32, 100};
    char key[64];
    for (size_t pi = 0; pi < sizeof profiles / sizeof *profiles; pi++) {
        rl_kafka_partitioner_t *p = make(profiles[pi], RL_VNODES_PROFILE);
        for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++) {
            rl_ring_t *ref = ref_partition_ring(profiles[pi], RL_VNODES_PROFILE, counts[ci]);
            for (uint64_t i = 0; i < 3000; i++) {
                size_t len = test_key(i, key, sizeof key);
                int32_t got;
                assert_rl_ok(rl_kafka_partitioner_partition(p, key, len, counts[ci], &got));
                assert_int_equal(got, ref_partition(ref, key, len));
                /* The callback answers the same without a topic. */
                assert_int_equal(rl_kafka_partitioner_cb(NULL, key, len, counts[ci], p, NULL), got);
            }
            rl_ring_free(ref);
        }
        rl_kafka_partitioner_stats st;
        assert_rl_ok(rl_kafka_partitioner_stats_get(p, &st));
        assert_int_equal(st.rings, sizeof counts / sizeof *counts);
        assert_int_equal(st.fallbacks, 0);
        assert_int_equal(st.null_keys, 0);
        rl_kafka_partitioner_destroy(p);
    }
    /* Explicit vnodes, and turnstone with the keys it can hash. */
    rl_kafka_partitioner_t *p = make("ds09", 40);
    rl_ring_t *ref = ref_partition_ring("ds09", 40, 12);
    for (uint64_t i = 0; i < 2000; i++) {
        size_t len = test_key(i, key, sizeof key);
        int32_t got;
        assert_rl_ok(rl_kafka_partitioner_partition(p, key, len, 12, &got));
        assert_int_equal(got, ref_partition(ref, key, len));
    }
    rl_ring_free(ref);
    rl_kafka_partitioner_destroy(p);
    p = make("turnstone", RL_VNODES_PROFILE);
    ref = ref_partition_ring("turnstone", RL_VNODES_PROFILE, 7);
    for (uint64_t i = 0; i < 2000; i++) {
        int len = snprintf(key, sizeof key, "%04llx-workspace", (unsigned long long)(i * 37));
        int32_t got;
        assert_rl_ok(rl_kafka_partitioner_partition(p, key, (size_t)len, 7, &got));
        assert_int_equal(got, ref_partition(ref, key, (size_t)len));
    }
    rl_ring_free(ref);
    rl_kafka_partitioner_destroy(p);
}

/* Every profile the library has, including any added after this suite was written: the
 * partitioner (ring cache and bucket table) answers exactly what the reference ring does for
 * every key the profile can hash. */
static void every_profile_agrees(void **state)
{
    (void)state;
    const int32_t counts[] = {1, 3, 8, 40};
    char key[64];
    for (size_t pi = 0; pi < rl_profile_count(); pi++) {
        const char *profile = rl_profile_at(pi)->name;
        rl_kafka_partitioner_t *p = make(profile, RL_VNODES_PROFILE);
        for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++) {
            rl_ring_t *ref = ref_partition_ring(profile, RL_VNODES_PROFILE, counts[ci]);
            for (uint64_t i = 0; i < 4000; i++) {
                /* Half the keys start with 4 hex digits, so that turnstone-like profiles
                 * get keys they can hash too. */
                size_t len = i % 2 ? test_key(i, key, sizeof key)
                                   : (size_t)snprintf(key, sizeof key, "%04llx:%llu",
                                                      (unsigned long long)(i * 40503 % 65536),
                                                      (unsigned long long)i);
                uint32_t node;
                int rc = rl_ring_lookup(ref, key, len, &node);
                if (rc == RL_EBADKEY)
                    continue;
                assert_rl_ok(rc);
                int32_t got;
                assert_rl_ok(rl_kafka_partitioner_partition(p, key, len, counts[ci], &got));
                if (got != (int32_t)node)
                    fail_msg("profile %s, %d partitions: key %s -> %d, ring says %u", profile,
                             (int)counts[ci], key, (int)got, node);
            }
            rl_ring_free(ref);
        }
        rl_kafka_partitioner_destroy(p);
    }
}

/* What `ringlane route --partitions P` prints is what the partitioner answers. */
static void same_as_cli(void **state)
{
    (void)state;
    const char *cli = getenv("RINGLANE_CLI");
    if (!cli)
        skip();
    char path[4096];
    int fd = temp_file(path, sizeof path, "partitioner-keys");
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    char key[64];
    for (uint64_t i = 0; i < 2000; i++) {
        test_key(i, key, sizeof key);
        fprintf(f, "%s\n", key);
    }
    fclose(f);
    const struct {
        const char *profile;
        int32_t partitions;
    } cases[] = {{NULL, 6},      {NULL, 12},   {NULL, 100}, {"default", 6},
                 {"default", 8}, {"ds09", 12}, {"xmur3", 5}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        /* No --profile and no profile option: the CLI's --partitions default is the
         * partitioner's. */
        char cmd[9000], prof[64] = "";
        if (cases[c].profile)
            snprintf(prof, sizeof prof, "--profile %s ", cases[c].profile);
        snprintf(cmd, sizeof cmd, "'%s' route %s--partitions %d < '%s'", cli, prof,
                 (int)cases[c].partitions, path);
        FILE *out = popen(cmd, "r");
        assert_non_null(out);
        rl_kafka_partitioner_t *p = make(cases[c].profile, RL_VNODES_PROFILE);
        char line[256];
        uint64_t i = 0;
        while (fgets(line, sizeof line, out)) {
            char *tab = strchr(line, '\t');
            assert_non_null(tab);
            *tab = 0;
            size_t len = test_key(i++, key, sizeof key);
            assert_string_equal(line, key);
            int32_t got;
            assert_rl_ok(rl_kafka_partitioner_partition(p, key, len, cases[c].partitions, &got));
            assert_int_equal(got, atoi(tab + 1));
        }
        assert_int_equal(pclose(out), 0);
        assert_int_equal(i, 2000);
        rl_kafka_partitioner_destroy(p);
    }
    unlink(path);
}

/* Runs the CLI's `route --partitions 1` with this profile and vnodes (NULL: not given) on one
 * key; returns its exit status, its stderr in err. */
static int cli_route_status(const char *cli, const char *profile, const char *vnodes, char *err,
                            size_t size)
{
    char path[4096], cmd[9000];
    int fd = temp_file(path, sizeof path, "cli-stderr");
    close(fd);
    char vn[64] = "";
    if (vnodes)
        snprintf(vn, sizeof vn, "--vnodes %s ", vnodes);
    snprintf(cmd, sizeof cmd,
             "echo 00ff | '%s' route --profile %s %s--partitions 1 >/dev/null 2>'%s'", cli, profile,
             vn, path);
    int status = system(cmd);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(err, 1, size - 1, f);
    err[n] = 0;
    fclose(f);
    unlink(path);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* One rule for profile and vnodes: rl_ring_build, the partitioner's options (the plugin's
 * properties) and the CLI take the same pairs and refuse the others with the same words, those
 * of rl_profile_explain_vnodes, at every boundary (the plugin and the CLI as "<rule>, got V",
 * the library as "vnodes V: <rule>"). jump takes no vnodes anywhere (the CLI took
 * --vnodes 50 before), and every profile builds with vnodes not set. */
static void one_rule_for_profile_and_vnodes(void **state)
{
    (void)state;
    const char *cli = getenv("RINGLANE_CLI");
    const struct {
        const char *profile, *vnodes; /* vnodes NULL: not set */
        int taken;
    } pairs[] = {
        {"default", "0", 0},        {"default", "1", 1},      {"default", "65536", 1},
        {"default", "65537", 0},    {"balanced", "64", 1},    {"balanced", "65537", 0},
        {"ds09", "160", 1},         {"xmur3", "0", 0},        {"turnstone", "150", 1},
        {"groupcache", "65536", 1}, {"ketama", "4", 0},       {"ketama", "5", 1},
        {"envoy", "1", 1},          {"envoy", "8388609", 0},  {"maglev", "1", 0},
        {"maglev", "2", 1},         {"maglev", "1000", 0},    {"maglev", "65536", 0},
        {"maglev", "65537", 1},     {"maglev", "5000011", 1}, {"maglev", "5000012", 0},
        {"jump", "1", 0},           {"jump", "50", 0},        {"jump", NULL, 1},
        {"maglev", NULL, 1},        {"ketama", NULL, 1},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        const char *profile = pairs[i].profile, *vs = pairs[i].vnodes;
        uint32_t v = vs ? (uint32_t)strtoul(vs, NULL, 10) : RL_VNODES_PROFILE;
        char rule[160], want[256], err[512];
        int rc = rl_profile_explain_vnodes(profile, v, rule, sizeof rule);
        assert_int_equal(rc, pairs[i].taken ? 0 : RL_EVNODES);
        snprintf(want, sizeof want, "%s, got %s", rule, vs ? vs : "");

        /* The ring */
        rl_member m = {"0", 1, NULL};
        rl_ring_options ro;
        rl_ring_options_init(&ro);
        ro.profile = profile;
        ro.vnodes = v;
        rl_ring_t *ring = NULL;
        assert_int_equal(rl_ring_build(&m, 1, &ro, &ring), rc);
        rl_ring_free(ring);
        /* The library names the option and its value first, as all its details do. */
        char lib[256];
        snprintf(lib, sizeof lib, "vnodes %s: %s", vs ? vs : "", rule);
        if (rc && strcmp(rl_last_error_detail(), lib) != 0)
            fail_msg("rl_ring_build %s %s said \"%s\", wanted \"%s\"", profile, vs,
                     rl_last_error_detail(), lib);

        /* The partitioner's options, as the plugin sets them, and its constructor */
        rl_kafka_partitioner_options o;
        rl_kafka_partitioner_options_init(&o);
        assert_rl_ok(rl_kafka_partitioner_option_set(&o, "ringlane.profile", profile, err, 512));
        err[0] = 0;
        assert_int_equal(rl_kafka_partitioner_option_set(&o, "ringlane.vnodes", vs, err, 512), rc);
        if (rc && !strstr(err, want))
            fail_msg("ringlane.vnodes=%s with %s said \"%s\", wanted \"%s\"", vs, profile, err,
                     want);
        o.vnodes = v;
        rl_kafka_partitioner_t *p = NULL;
        assert_int_equal(rl_kafka_partitioner_new(&o, &p), rc);
        rl_kafka_partitioner_destroy(p);

        /* The CLI */
        if (!cli)
            continue;
        int status = cli_route_status(cli, profile, vs, err, sizeof err);
        assert_int_equal(status, rc ? 2 : 0);
        if (rc && !strstr(err, want))
            fail_msg("ringlane route --profile %s --vnodes %s said \"%s\", wanted \"%s\"", profile,
                     vs, err, want);
    }
}

/* 0..partition_cnt-1 for any count, including counts whose ring cannot be built. */
static void always_in_range(void **state)
{
    (void)state;
    rl_kafka_partitioner_t *p = make(NULL, RL_VNODES_PROFILE);
    char key[64];
    for (int32_t n = 1; n <= 64; n++)
        for (uint64_t i = 0; i < 200; i++) {
            size_t len = test_key(i, key, sizeof key);
            int32_t got = rl_kafka_partitioner_cb(NULL, key, len, n, p, NULL);
            assert_true(got >= 0 && got < n);
        }
    rl_kafka_partitioner_destroy(p);
    p = make("default", RL_VNODES_PROFILE);
    for (int32_t n = 1; n <= 64; n++)
        for (uint64_t i = 0; i < 200; i++) {
            size_t len = test_key(i, key, sizeof key);
            int32_t got = rl_kafka_partitioner_cb(NULL, key, len, n, p, NULL);
            assert_true(got >= 0 && got < n);
        }
    /* 200,000 partitions x 160 vnodes is over RL_POINTS_MAX: answered by xxh3 % n, counted;
     * the failed build is remembered, not tried again (one ring built in all: the 64 above). */
    for (uint64_t i = 0; i < 100; i++) {
        size_t len = test_key(i, key, sizeof key);
        int32_t got = rl_kafka_partitioner_cb(NULL, key, len, 200000, p, NULL);
        assert_int_equal(got, (int32_t)(rl_xxh3(key, len) % 200000));
    }
    rl_kafka_partitioner_stats st;
    assert_rl_ok(rl_kafka_partitioner_stats_get(p, &st));
    assert_int_equal(st.fallbacks, 100);
    assert_int_equal(st.rings, 64);
    const rl_ring_t *ring;
    assert_int_equal(rl_kafka_partitioner_ring(p, 200000, &ring), RL_ETOOBIG);
    assert_int_equal(rl_kafka_partitioner_ring(p, 0, &ring), RL_ERANGE);
    assert_rl_ok(rl_kafka_partitioner_ring(p, 9, &ring));
    assert_int_equal(rl_ring_member_count(ring), 9);
    assert_int_equal(rl_ring_point_count(ring), 9 * 160);
    /* No partitions: "unassigned", the one answer that names none. */
    assert_int_equal(rl_kafka_partitioner_cb(NULL, "k", 1, 0, p, NULL), RD_KAFKA_PARTITION_UA);
    assert_int_equal(rl_kafka_partitioner_cb(NULL, "k", 1, -3, p, NULL), RD_KAFKA_PARTITION_UA);
    /* Not installed (no opaque): still in range. */
    for (int32_t n = 1; n < 20; n++) {
        assert_in_range(rl_kafka_partitioner_cb(NULL, "k", 1, n, NULL, NULL), 0, n - 1);
        assert_in_range(rl_kafka_partitioner_cb(NULL, NULL, 0, n, NULL, NULL), 0, n - 1);
    }
    rl_kafka_partitioner_destroy(p);
}

/* NULL and empty keys, and keys the profile cannot hash, follow the null-key policy. */
static void null_key_policy(void **state)
{
    (void)state;
    /* random: spread evenly. 8000 calls over 4 partitions, each count within 4 sd (binomial,
     * sd = sqrt(8000 * 1/4 * 3/4) = 38.7) of 2000. */
    rl_kafka_partitioner_t *p = make(NULL, RL_VNODES_PROFILE);
    int counts[4] = {0};
    for (int i = 0; i < 8000; i++) {
        int32_t got;
        assert_rl_ok(rl_kafka_partitioner_partition(p, i % 2 ? NULL : "", 0, 4, &got));
        assert_in_range(got, 0, 3);
        counts[got]++;
    }
    for (int i = 0; i < 4; i++)
        assert_true(fabs(counts[i] - 2000.0) <= 4 * sqrt(8000 * 0.25 * 0.75));
    rl_kafka_partitioner_stats st;
    assert_rl_ok(rl_kafka_partitioner_stats_get(p, &st));
    assert_int_equal(st.null_keys, 8000);
    rl_kafka_partitioner_destroy(p);

    /* fixed: the partition, modulo the partition count. */
    rl_kafka_partitioner_options o;
    rl_kafka_partitioner_options_init(&o);
    o.null_key = RL_KAFKA_NULL_KEY_FIXED;
    o.null_key_partition = 5;
    assert_rl_ok(rl_kafka_partitioner_new(&o, &p));
    for (int32_t n = 1; n < 20; n++) {
        assert_int_equal(rl_kafka_partitioner_cb(NULL, NULL, 0, n, p, NULL), 5 % n);
        assert_int_equal(rl_kafka_partitioner_cb(NULL, "", 0, n, p, NULL), 5 % n);
        /* A one-byte key is a key: it goes by the ring. */
        int32_t got;
        assert_rl_ok(rl_kafka_partitioner_partition(p, "x", 1, n, &got));
        rl_ring_t *ref = ref_partition_ring(RL_KAFKA_DEFAULT_PROFILE, RL_VNODES_PROFILE, n);
        assert_int_equal(got, ref_partition(ref, "x", 1));
        rl_ring_free(ref);
    }
    rl_kafka_partitioner_destroy(p);

    /* turnstone cannot hash a key that does not start with 4 hex digits. */
    o.profile = "turnstone";
    o.null_key_partition = 2;
    assert_rl_ok(rl_kafka_partitioner_new(&o, &p));
    assert_int_equal(rl_kafka_partitioner_cb(NULL, "user:42", 7, 6, p, NULL), 2);
    int32_t got;
    assert_rl_ok(rl_kafka_partitioner_partition(p, "beef:42", 7, 6, &got));
    rl_ring_t *ref = ref_partition_ring("turnstone", RL_VNODES_PROFILE, 6);
    assert_int_equal(got, ref_partition(ref, "beef:42", 7));
    rl_ring_free(ref);
    rl_kafka_partitioner_destroy(p);
}

/* Growth P -> P': keys move only to the new partitions, and as many as the new partitions'
 * arcs hold. Two bounds, both 4 sd:
 *  - exact: moved is Binomial(K, s) where s is the new partitions' measured arc share of the
 *    P' ring, so |moved - K s| <= 4 sqrt(K s (1 - s));
 *  - ideal: around K (P'-P)/P', adding the spread of s itself: each partition's share is a
 *    sum of V gaps of mean 1/(P' V), variance about 1/(P'^2 V), so for m = P'-P new partitions
 *    var(K s) = K^2 m / (P'^2 V), on top of the binomial term K p (1 - p).
 * murmur2 % P is measured on the same keys for the comparison. */
static void growth_moves_keys_to_new_partitions_only(void **state)
{
    (void)state;
    const struct {
        const char *profile;
        int32_t from, to;
    } cases[] = {{"default", 6, 8}, {"default", 4, 5}, {"default", 8, 12}, {"default", 10, 11},
                 {"ds09", 6, 8},    {"ds09", 16, 24},  {"default", 1, 2},  {"default", 3, 32},
                 {NULL, 6, 8},      {NULL, 10, 11},    {NULL, 100, 120},   {NULL, 3, 256}};
    const uint64_t K = 100000;
    char key[64];
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        rl_kafka_partitioner_t *p = make(cases[c].profile, RL_VNODES_PROFILE);
        int32_t P = cases[c].from, Q = cases[c].to;
        uint64_t moved = 0, moved_murmur = 0;
        for (uint64_t i = 0; i < K; i++) {
            size_t len = test_key(i, key, sizeof key);
            int32_t a = rl_kafka_partitioner_cb(NULL, key, len, P, p, NULL);
            int32_t b = rl_kafka_partitioner_cb(NULL, key, len, Q, p, NULL);
            if (a != b) {
                moved++;
                if (b < P)
                    fail_msg("%s %d->%d: key %s moved from %d to old partition %d",
                             cases[c].profile ? cases[c].profile : "(default)", P, Q, key, a, b);
            }
            moved_murmur += rd_kafka_msg_partitioner_murmur2(NULL, key, len, P, NULL, NULL) !=
                            rd_kafka_msg_partitioner_murmur2(NULL, key, len, Q, NULL, NULL);
        }
        const rl_ring_t *ring;
        assert_rl_ok(rl_kafka_partitioner_ring(p, Q, &ring));
        double *shares = calloc((size_t)Q, sizeof *shares);
        assert_non_null(shares);
        rl_ring_stats rs;
        assert_rl_ok(rl_ring_stats_get(ring, &rs, shares));
        double s = 0;
        for (int32_t i = P; i < Q; i++)
            s += shares[i];
        free(shares);
        double k = (double)K, ideal = (double)(Q - P) / Q, V = rl_ring_vnodes(ring);
        double sd_exact = sqrt(k * s * (1 - s));
        double sd_ideal = sqrt(k * ideal * (1 - ideal) + k * k * (Q - P) / ((double)Q * Q * V));
        print_message("growth %-7s %2d -> %2d: ring moved %6.2f%% (ideal %6.2f%%, arc share "
                      "%6.2f%%), murmur2 moved %6.2f%%\n",
                      cases[c].profile ? cases[c].profile : "(default)", P, Q,
                      100.0 * (double)moved / k, 100.0 * ideal, 100.0 * s,
                      100.0 * (double)moved_murmur / k);
        assert_true(fabs((double)moved - k * s) <= 4 * sd_exact);
        assert_true(fabs((double)moved - k * ideal) <= 4 * sd_ideal);
        /* What the ring is for: modulo moves more keys (1 -> 2 is the one case they tie). */
        if (P > 1)
            assert_true(moved_murmur > moved);
        rl_kafka_partitioner_destroy(p);
    }
}

/* partitions_used U on a topic of N partitions: the ring over min(U, N) of them, so a topic
 * created with 12 partitions whose producers use 8 routes every key as a topic of 8 does (keys
 * without a ring answer too: the null-key policy stays within the first U), then switched to
 * 12, as a topic grown from 8 to 12. A negative count is refused. */
static void partitions_used_routes_over_the_first(void **state)
{
    (void)state;
    rl_kafka_partitioner_options o;
    rl_kafka_partitioner_options_init(&o);
    o.partitions_used = 8;
    rl_kafka_partitioner_t *used, *all;
    assert_rl_ok(rl_kafka_partitioner_new(&o, &used));
    assert_rl_ok(rl_kafka_partitioner_new(NULL, &all));
    char key[64];
    uint64_t beyond = 0;
    for (uint64_t i = 0; i < 50000; i++) {
        size_t len = test_key(i, key, sizeof key);
        int32_t a = rl_kafka_partitioner_cb(NULL, key, len, 12, used, NULL);
        assert_int_equal(a, rl_kafka_partitioner_cb(NULL, key, len, 8, all, NULL));
        /* Fewer partitions than U: all of them. */
        assert_int_equal(rl_kafka_partitioner_cb(NULL, key, len, 5, used, NULL),
                         rl_kafka_partitioner_cb(NULL, key, len, 5, all, NULL));
        beyond += rl_kafka_partitioner_cb(NULL, key, len, 12, all, NULL) >= 8;
    }
    assert_true(beyond > 0); /* without it, 12 partitions do get keys past 8 */
    for (int i = 0; i < 200; i++) {
        int32_t n = rl_kafka_partitioner_cb(NULL, NULL, 0, 12, used, NULL);
        assert_true(n >= 0 && n < 8);
    }
    rl_kafka_partitioner_destroy(used);
    rl_kafka_partitioner_destroy(all);
    o.partitions_used = -3;
    rl_kafka_partitioner_t *p = NULL;
    assert_int_equal(rl_kafka_partitioner_new(&o, &p), RL_ERANGE);
    assert_null(p);
    assert_non_null(strstr(rl_last_error_detail(), "partitions_used -3: negative"));
}

/* Every bad option is refused with a message naming the property and what it accepts. */
static void option_errors(void **state)
{
    (void)state;
    rl_kafka_partitioner_options o;
    memset(&o, 0, sizeof o); /* padding too: the struct is compared byte for byte */
    rl_kafka_partitioner_options_init(&o);
    char err[512];
    const struct {
        const char *name, *value;
        int rc;
        const char *says;
    } bad[] = {
        {"ringlane.profile", "nope", RL_EPROFILE,
         "ringlane.profile: unknown profile \"nope\" "
         "(valid: default, ds09"},
        {"ringlane.vnodes", "0", RL_ERANGE, "ringlane.vnodes: expected an integer 1..8388608"},
        {"ringlane.vnodes", "8388609", RL_ERANGE,
         "ringlane.vnodes: expected an integer 1..8388608"},
        {"ringlane.vnodes", "-1", RL_ERANGE, "got \"-1\""},
        {"ringlane.vnodes", "12x", RL_ERANGE, "got \"12x\""},
        {"ringlane.vnodes", "99999999999999999999999", RL_ERANGE, "1..8388608"},
        {"ringlane.null.key", "sticky", RL_ERANGE,
         "ringlane.null.key: expected \"random\" or a partition number 0..2147483646"},
        {"ringlane.null.key", "-1", RL_ERANGE, "ringlane.null.key"},
        {"ringlane.null.key", "2147483647", RL_ERANGE, "0..2147483646"},
        {"ringlane.skip.unavailable", "yes", RL_ERANGE,
         "ringlane.skip.unavailable: expected true or false, got \"yes\""},
        {"ringlane.partitions.used", "-1", RL_ERANGE,
         "ringlane.partitions.used: expected 0 (every partition) or a partition count "
         "1..2147483646, got \"-1\""},
        {"ringlane.partitions.used", "8x", RL_ERANGE, "got \"8x\""},
        {"ringlane.vnode", "3", RL_EINVAL, "ringlane.vnode: unknown ringlane property"},
        {"vnodes", "0", RL_ERANGE, "vnodes: expected an integer 1..8388608"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        rl_kafka_partitioner_options before;
        memcpy(&before, &o, sizeof o);
        err[0] = 0;
        assert_int_equal(
            rl_kafka_partitioner_option_set(&o, bad[i].name, bad[i].value, err, sizeof err),
            bad[i].rc);
        if (!strstr(err, bad[i].says))
            fail_msg("%s=%s said \"%s\", wanted \"%s\"", bad[i].name, bad[i].value, err,
                     bad[i].says);
        assert_string_equal(rl_last_error_detail(), err); /* the same words */
        assert_memory_equal(&before, &o, sizeof o);
    }
    assert_int_equal(rl_kafka_partitioner_option_set(NULL, "vnodes", "1", err, sizeof err),
                     RL_EINVAL);
    assert_int_equal(rl_kafka_partitioner_option_set(&o, NULL, "1", NULL, 0), RL_EINVAL);
    assert_string_equal(rl_last_error_detail(), "ringlane: no option given"); /* no errstr */

    /* Good values, then the defaults again. */
    assert_rl_ok(rl_kafka_partitioner_option_set(&o, "ringlane.profile", "ds09", err, 0));
    assert_no_detail(); /* a success right after a refusal */
    assert_rl_ok(rl_kafka_partitioner_option_set(&o, "vnodes", "65536", err, sizeof err));
    assert_rl_ok(rl_kafka_partitioner_option_set(&o, "null.key", "0", err, sizeof err));
    assert_rl_ok(rl_kafka_partitioner_option_set(&o, "skip.unavailable", "true", err, 1));
    assert_string_equal(o.profile, "ds09");
    assert_int_equal(o.vnodes, 65536);
    assert_int_equal(o.null_key, RL_KAFKA_NULL_KEY_FIXED);
    assert_int_equal(o.null_key_partition, 0);
    assert_int_equal(o.skip_unavailable, 1);
    assert_rl_ok(rl_kafka_partitioner_option_set(&o, "null.key", "random", err, sizeof err));
    assert_int_equal(o.null_key, RL_KAFKA_NULL_KEY_RANDOM);
    assert_rl_ok(rl_kafka_partitioner_option_set(&o, "skip.unavailable", "0", err, sizeof err));
    assert_int_equal(o.skip_unavailable, 0);
    /* NULL restores each default, and so does "" (librdkafka hands the plugin "" as NULL). */
    assert_rl_ok(rl_kafka_partitioner_option_set(&o, "partitions.used", "8", err, sizeof err));
    assert_int_equal(o.partitions_used, 8);
    const char *names[] = {"profile", "vnodes", "null.key", "skip.unavailable", "partitions.used"};
    for (size_t i = 0; i < 5; i++)
        assert_rl_ok(
            rl_kafka_partitioner_option_set(&o, names[i], i % 2 ? NULL : "", err, sizeof err));
    rl_kafka_partitioner_options d;
    memset(&d, 0, sizeof d);
    rl_kafka_partitioner_options_init(&d);
    assert_memory_equal(&d, &o, sizeof o);

    /* The constructor checks the struct too. */
    rl_kafka_partitioner_t *p = (rl_kafka_partitioner_t *)&o; /* must be reset to NULL */
    assert_refused(rl_kafka_partitioner_new(NULL, NULL), RL_EINVAL, "out NULL", "");
    o.profile = "nope";
    assert_refused(rl_kafka_partitioner_new(&o, &p), RL_EPROFILE, "profile \"nope\"",
                   "unknown profile (one of: default, ds09");
    assert_null(p);
    rl_kafka_partitioner_options_init(&o);
    o.vnodes = 0;
    assert_refused(rl_kafka_partitioner_new(&o, &p), RL_EVNODES, "vnodes 0: outside 1..8388608",
                   "");
    o.vnodes = RL_VNODES_MAX + 1; /* over what the default profile (balanced) takes */
    assert_refused(rl_kafka_partitioner_new(&o, &p), RL_EVNODES, "vnodes 65537",
                   "profile balanced takes");
    assert_null(p);
    rl_kafka_partitioner_options_init(&o);
    o.null_key = (rl_kafka_null_key)7;
    assert_refused(rl_kafka_partitioner_new(&o, &p), RL_EINVAL, "null_key 7",
                   "RL_KAFKA_NULL_KEY_RANDOM");
    o.null_key = RL_KAFKA_NULL_KEY_FIXED;
    o.null_key_partition = -1;
    assert_refused(rl_kafka_partitioner_new(&o, &p), RL_ERANGE, "null_key_partition -1",
                   "0..2147483646");
    o.null_key_partition = 3;
    assert_rl_ok(rl_kafka_partitioner_new(&o, &p));
    assert_no_detail();
    rl_kafka_partitioner_options got;
    assert_rl_ok(rl_kafka_partitioner_get_options(p, &got));
    assert_string_equal(got.profile, RL_KAFKA_DEFAULT_PROFILE);
    assert_int_equal(got.null_key_partition, 3);

    /* Argument checks of the other entry points. */
    int32_t part;
    const rl_ring_t *ring;
    rl_kafka_partitioner_stats st;
    assert_int_equal(rl_kafka_partitioner_partition(NULL, "k", 1, 3, &part), RL_EINVAL);
    assert_int_equal(rl_kafka_partitioner_partition(p, "k", 1, 3, NULL), RL_EINVAL);
    assert_int_equal(rl_kafka_partitioner_partition(p, NULL, 1, 3, &part), RL_EINVAL);
    assert_int_equal(rl_kafka_partitioner_partition(p, "k", 1, 0, &part), RL_ERANGE);
    assert_int_equal(rl_kafka_partitioner_ring(NULL, 3, &ring), RL_EINVAL);
    assert_int_equal(rl_kafka_partitioner_ring(p, 3, NULL), RL_EINVAL);
    assert_int_equal(rl_kafka_partitioner_install(NULL, NULL), RL_EINVAL);
    assert_int_equal(rl_kafka_partitioner_install(p, NULL), RL_EINVAL);
    assert_int_equal(rl_kafka_partitioner_stats_get(NULL, &st), RL_EINVAL);
    assert_int_equal(rl_kafka_partitioner_stats_get(p, NULL), RL_EINVAL);
    assert_int_equal(rl_kafka_partitioner_get_options(NULL, &got), RL_EINVAL);
    rl_kafka_partitioner_options_init(NULL);
    rl_kafka_partitioner_destroy(NULL);
    rl_kafka_partitioner_destroy(p);
}

/* What a profile cannot build with is refused when the pair is complete, in either order, with
 * the property, the value and the reason; what the CLI takes is taken (maglev's primes up to
 * 5000011), and those partitioners route every key by their ring (no fallback). */
static void option_combinations(void **state)
{
    (void)state;
    char err[512];
    const struct {
        const char *profile, *vnodes, *skip; /* applied in this order, then the reverse */
        int rc;
        const char *says;
    } bad[] = {
        {"maglev", "65536", NULL, RL_EVNODES, "profile maglev takes a prime 2..5000011"},
        {"maglev", "1000", NULL, RL_EVNODES, "got 1000"},
        {"ketama", "3", NULL, RL_EVNODES,
         "profile ketama takes 5..65536 vnodes (points per server"},
        {"ketama", "4", NULL, RL_EVNODES, "got 4"},
        {"jump", "1", NULL, RL_EVNODES, "profile jump has no vnodes"},
        {"default", "65537", NULL, RL_EVNODES, "profile default takes 1..65536"},
        {"balanced", "100000", NULL, RL_EVNODES, "profile balanced takes 1..65536"},
        {"envoy", "8388608", "true", 0, NULL},
        {"maglev", NULL, "true", RL_ENOTSUP, "profile maglev has no ring to walk"},
        {"jump", NULL, "true", RL_ENOTSUP, "profile jump has no ring to walk"},
        {"memento", "1", NULL, RL_EVNODES, "profile memento has no vnodes"},
        {"memento", NULL, "true", RL_ENOTSUP, "profile memento has no ring to walk"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        for (int reverse = 0; reverse < 2; reverse++) {
            const char *names[3] = {"profile", "vnodes", "skip.unavailable"};
            const char *values[3] = {bad[i].profile, bad[i].vnodes, bad[i].skip};
            rl_kafka_partitioner_options o;
            memset(&o, 0, sizeof o); /* padding too: compared byte for byte below */
            rl_kafka_partitioner_options_init(&o);
            int rc = 0, set = 0;
            for (int k = 0; k < 3 && rc == 0; k++) {
                int at = reverse ? 2 - k : k;
                if (!values[at])
                    continue;
                rl_kafka_partitioner_options before;
                memcpy(&before, &o, sizeof o);
                err[0] = 0;
                rc = rl_kafka_partitioner_option_set(&o, names[at], values[at], err, sizeof err);
                set++;
                if (rc) {
                    /* Refused by the second property of the pair, naming it and the reason. */
                    assert_int_equal(set, 2);
                    assert_memory_equal(&before, &o, sizeof o);
                    if (!strstr(err, names[at]) || !strstr(err, bad[i].says))
                        fail_msg("%s=%s said \"%s\", wanted \"%s\"", names[at], values[at], err,
                                 bad[i].says);
                }
            }
            assert_int_equal(rc, bad[i].rc);
            rl_kafka_partitioner_t *p = NULL;
            if (rc == 0) { /* a pair that goes together makes a partitioner */
                assert_rl_ok(rl_kafka_partitioner_new(&o, &p));
                rl_kafka_partitioner_destroy(p);
            }
        }
        /* The struct given straight to the constructor: refused the same. */
        rl_kafka_partitioner_options o;
        rl_kafka_partitioner_options_init(&o);
        o.profile = bad[i].profile;
        o.vnodes = bad[i].vnodes ? (uint32_t)atol(bad[i].vnodes) : RL_VNODES_PROFILE;
        o.skip_unavailable = bad[i].skip != NULL;
        rl_kafka_partitioner_t *p = (rl_kafka_partitioner_t *)&o;
        assert_int_equal(rl_kafka_partitioner_new(&o, &p), bad[i].rc);
        if (bad[i].rc) {
            assert_null(p);
            /* The field as written in C, its value, and the reason the property gave. */
            char start[64];
            if (bad[i].rc == RL_EVNODES)
                snprintf(start, sizeof start, "vnodes %s: ", bad[i].vnodes);
            else
                snprintf(start, sizeof start, "skip_unavailable 1: ");
            const char *d = rl_last_error_detail();
            if (strncmp(d, start, strlen(start)) != 0 || !strstr(d, bad[i].says))
                fail_msg("%s/%s: detail \"%s\", want \"%s...%s\"", bad[i].profile,
                         bad[i].vnodes ? bad[i].vnodes : "-", d, start, bad[i].says);
        } else {
            assert_no_detail();
        }
        rl_kafka_partitioner_destroy(p);
    }

    /* vnodes without a profile: taken (a profile may follow), checked by the constructor
     * against the default profile. */
    rl_kafka_partitioner_options o;
    rl_kafka_partitioner_options_init(&o);
    assert_rl_ok(rl_kafka_partitioner_option_set(&o, "vnodes", "1000003", err, sizeof err));
    rl_kafka_partitioner_t *p = NULL;
    assert_int_equal(rl_kafka_partitioner_new(&o, &p), RL_EVNODES);
    assert_rl_ok(rl_kafka_partitioner_option_set(&o, "profile", "maglev", err, sizeof err));

    /* maglev with the CLI's tables, 65537 (its default) to 5000011: every key by the table. */
    const char *primes[] = {"1000003", "65537", "5000011"};
    char key[64];
    for (size_t i = 0; i < 3; i++) {
        assert_rl_ok(rl_kafka_partitioner_option_set(&o, "vnodes", primes[i], err, sizeof err));
        assert_rl_ok(rl_kafka_partitioner_new(&o, &p));
        rl_ring_t *ref = ref_partition_ring("maglev", (uint32_t)atol(primes[i]), 7);
        for (uint64_t k = 0; k < 500; k++) {
            size_t len = test_key(k, key, sizeof key);
            int32_t got;
            assert_rl_ok(rl_kafka_partitioner_partition(p, key, len, 7, &got));
            assert_int_equal(got, ref_partition(ref, key, len));
        }
        rl_ring_free(ref);
        rl_kafka_partitioner_stats st;
        assert_rl_ok(rl_kafka_partitioner_stats_get(p, &st));
        assert_int_equal(st.fallbacks, 0);
        assert_int_equal(st.rings, 1);
        rl_kafka_partitioner_destroy(p);
    }
    /* Every profile with its smallest and largest vnodes routes by its ring. */
    for (size_t i = 0; i < rl_profile_count(); i++) {
        const rl_profile_info *info = rl_profile_at(i);
        if (strcmp(info->kind, "ring") != 0)
            continue;
        rl_kafka_partitioner_options_init(&o);
        o.profile = info->name;
        o.vnodes = info->min_vnodes;
        assert_rl_ok(rl_kafka_partitioner_new(&o, &p));
        for (int32_t n = 1; n <= 4; n++)
            for (uint64_t k = 0; k < 50; k++) {
                size_t len =
                    (size_t)snprintf(key, sizeof key, "%04llx:%llu",
                                     (unsigned long long)(k * 977 % 65536), (unsigned long long)k);
                int32_t got;
                assert_rl_ok(rl_kafka_partitioner_partition(p, key, len, n, &got));
            }
        rl_kafka_partitioner_stats st;
        assert_rl_ok(rl_kafka_partitioner_stats_get(p, &st));
        if (st.fallbacks != 0)
            fail_msg("profile %s, vnodes %u: %llu fallbacks", info->name, o.vnodes,
                     (unsigned long long)st.fallbacks);
        rl_kafka_partitioner_destroy(p);
    }
}

/* More partition counts than RL_KAFKA_RINGS_MAX: the rest are answered by xxh3 % count and
 * counted, and asking again builds nothing (the full cache is remembered). jump keeps the
 * 1024 rings small. */
static void rings_max_falls_back(void **state)
{
    (void)state;
    rl_kafka_partitioner_t *p = make("jump", RL_VNODES_PROFILE);
    const rl_ring_t *ring;
    for (int32_t n = 1; n <= (int32_t)RL_KAFKA_RINGS_MAX; n++)
        assert_rl_ok(rl_kafka_partitioner_ring(p, n, &ring));
    int32_t n = (int32_t)RL_KAFKA_RINGS_MAX + 1;
    assert_int_equal(rl_kafka_partitioner_ring(p, n, &ring), RL_ERANGE);
    for (int i = 0; i < 3; i++) {
        int32_t got;
        assert_rl_ok(rl_kafka_partitioner_partition(p, "k", 1, n, &got));
        assert_int_equal(got, (int32_t)(rl_xxh3("k", 1) % (uint64_t)n));
    }
    rl_kafka_partitioner_stats st;
    assert_rl_ok(rl_kafka_partitioner_stats_get(p, &st));
    assert_int_equal(st.rings, RL_KAFKA_RINGS_MAX);
    assert_int_equal(st.fallbacks, 3);
    rl_kafka_partitioner_destroy(p);
}

/* Many threads, first use of many partition counts at once: every answer is the one a single
 * thread gives, and each count's ring is built exactly once. */
#define THREADS 4
#define COUNTS 24
#define KEYS 400

typedef struct worker {
    rl_kafka_partitioner_t *p;
    int32_t (*expected)[KEYS];
    unsigned seed;
    int mismatches;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    char key[64];
    for (int round = 0; round < 3; round++)
        for (int c = 0; c < COUNTS; c++) {
            int32_t n = (int32_t)((c * 7 + (int)w->seed) % COUNTS) + 1;
            for (uint64_t i = 0; i < KEYS; i++) {
                size_t len = test_key(i, key, sizeof key);
                if (rl_kafka_partitioner_cb(NULL, key, len, n, w->p, NULL) != w->expected[n - 1][i])
                    w->mismatches++;
            }
        }
    return NULL;
}

static void concurrent_first_use(void **state)
{
    (void)state;
    static int32_t expected[COUNTS][KEYS];
    char key[64];
    for (int32_t n = 1; n <= COUNTS; n++) {
        rl_ring_t *ref = ref_partition_ring(RL_KAFKA_DEFAULT_PROFILE, RL_VNODES_PROFILE, n);
        for (uint64_t i = 0; i < KEYS; i++) {
            size_t len = test_key(i, key, sizeof key);
            expected[n - 1][i] = ref_partition(ref, key, len);
        }
        rl_ring_free(ref);
    }
    for (int trial = 0; trial < 3; trial++) {
        rl_kafka_partitioner_t *p = make(NULL, RL_VNODES_PROFILE);
        pthread_t t[THREADS];
        worker w[THREADS];
        for (unsigned i = 0; i < THREADS; i++) {
            w[i] = (worker){.p = p, .expected = expected, .seed = i * 5, .mismatches = 0};
            assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
        }
        for (unsigned i = 0; i < THREADS; i++) {
            assert_int_equal(pthread_join(t[i], NULL), 0);
            assert_int_equal(w[i].mismatches, 0);
        }
        rl_kafka_partitioner_stats st;
        assert_rl_ok(rl_kafka_partitioner_stats_get(p, &st));
        assert_int_equal(st.rings, COUNTS);
        rl_kafka_partitioner_destroy(p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_ring_as_reference),
        cmocka_unit_test(every_profile_agrees),
        cmocka_unit_test(same_as_cli),
        cmocka_unit_test(always_in_range),
        cmocka_unit_test(null_key_policy),
        cmocka_unit_test(growth_moves_keys_to_new_partitions_only),
        cmocka_unit_test(partitions_used_routes_over_the_first),
        cmocka_unit_test(option_errors),
        cmocka_unit_test(option_combinations),
        cmocka_unit_test(one_rule_for_profile_and_vnodes),
        cmocka_unit_test(rings_max_falls_back),
        cmocka_unit_test(concurrent_first_use),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
