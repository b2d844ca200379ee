/* SPDX-License-Identifier: BSD-2-Clause */
/* The growth record's codec (partitioner/growth_record.c): keys and values written and read
 * back, every malformed or foreign value refused with its reason, and the ring fingerprints
 * equal to what the Kafka partitioner itself routes. */
#include "test_util.h"

#include "growth_record.h"
#include "ringlane/partitioner.h"

#include <inttypes.h>

static rl__growth_record sample(rl__growth_state state, int64_t *points)
{
    rl__growth_record r = {.from = 6,
                           .to = 8,
                           .profile = "balanced",
                           .vnodes = 64,
                           .ring_from = 0x0123456789abcdefULL,
                           .ring_to = 0xfedcba9876543210ULL,
                           .nonce = 0x5f0c1e9a77b2d403ULL,
                           .state = state,
                           .points = points};
    strcpy(r.topic, "events");
    return r;
}

static const char sealed_text[] =
    "ringlane-growth 1 topic=events from=6 to=8 profile=balanced vnodes=64 "
    "ring=0123456789abcdef,fedcba9876543210 nonce=5f0c1e9a77b2d403 state=sealed "
    "points=0,1200,1187,9223372036854775807,1190,5";

static void values_round_trip(void **state)
{
    (void)state;
    int64_t points[6] = {0, 1200, 1187, INT64_MAX, 1190, 5};
    const rl__growth_state states[] = {RL__GROWTH_ANNOUNCED, RL__GROWTH_SEALED, RL__GROWTH_ABORTED};
    for (size_t i = 0; i < 3; i++) {
        rl__growth_record r = sample(states[i], states[i] == RL__GROWTH_SEALED ? points : NULL);
        const char *why = NULL;
        char *text = rl__growth_value_format(&r, &why);
        assert_non_null(text);
        assert_string_equal(why, "");
        if (states[i] == RL__GROWTH_SEALED)
            assert_string_equal(text, sealed_text);
        rl__growth_record back;
        assert_int_equal(rl__growth_value_parse(text, strlen(text), &back, &why), RL__GROWTH_OK);
        assert_string_equal(back.topic, "events");
        assert_int_equal(back.from, 6);
        assert_int_equal(back.to, 8);
        assert_string_equal(back.profile, "balanced");
        assert_int_equal(back.vnodes, 64);
        assert_true(back.ring_from == r.ring_from && back.ring_to == r.ring_to);
        assert_true(back.nonce == r.nonce);
        assert_int_equal(back.state, states[i]);
        if (states[i] == RL__GROWTH_SEALED)
            assert_memory_equal(back.points, points, sizeof points);
        else
            assert_null(back.points);
        char *again = rl__growth_value_format(&back, NULL);
        assert_string_equal(again, text); /* one text per record */
        free(again);
        free(text);
        rl__growth_record_free(&back);
    }
    /* jump has no vnodes: 0; the largest counts; a topic of every allowed character. */
    int64_t *many = calloc(99999, sizeof *many);
    for (uint32_t i = 0; i < 99999; i++)
        many[i] = (int64_t)i * 1000003;
    rl__growth_record r = sample(RL__GROWTH_SEALED, many);
    r.profile = "jump";
    r.vnodes = 0;
    r.from = 99999;
    r.to = 100000;
    strcpy(r.topic, "A-z_0.9");
    char *text = rl__growth_value_format(&r, NULL);
    assert_non_null(text);
    rl__growth_record back;
    const char *why = NULL;
    assert_int_equal(rl__growth_value_parse(text, strlen(text), &back, &why), RL__GROWTH_OK);
    assert_memory_equal(back.points, many, 99999 * sizeof *many);
    assert_string_equal(back.profile, "jump");
    rl__growth_record_free(&back);
    free(text);
    free(many);
}

static void keys_round_trip(void **state)
{
    (void)state;
    char key[RL__GROWTH_KEY_MAX + 1], topic[RL__GROWTH_TOPIC_MAX + 1];
    uint32_t from, to;
    const char *why;
    assert_int_equal(rl__growth_key_format("events", 6, 8, key, sizeof key), 11);
    assert_string_equal(key, "events/6->8");
    assert_int_equal(rl__growth_key_parse(key, 11, topic, &from, &to, &why), RL__GROWTH_OK);
    assert_string_equal(topic, "events");
    assert_int_equal(from, 6);
    assert_int_equal(to, 8);
    char longest[RL__GROWTH_TOPIC_MAX + 1];
    memset(longest, 'x', RL__GROWTH_TOPIC_MAX);
    longest[RL__GROWTH_TOPIC_MAX] = 0;
    int n = rl__growth_key_format(longest, 99999, 100000, key, sizeof key);
    assert_int_equal(n, (int)RL__GROWTH_KEY_MAX);
    assert_int_equal(rl__growth_key_parse(key, (size_t)n, topic, &from, &to, &why), RL__GROWTH_OK);
    /* Refused on writing: bad topic, counts, a small buffer. */
    assert_int_equal(rl__growth_key_format("a/b", 6, 8, key, sizeof key), -1);
    assert_int_equal(rl__growth_key_format("", 6, 8, key, sizeof key), -1);
    assert_int_equal(rl__growth_key_format("t", 8, 8, key, sizeof key), -1);
    assert_int_equal(rl__growth_key_format("t", 0, 8, key, sizeof key), -1);
    assert_int_equal(rl__growth_key_format("t", 6, 100001, key, sizeof key), -1);
    assert_int_equal(rl__growth_key_format("events", 6, 8, key, 11), -1);
    const char *bad[] = {"events",       "events/6-8",   "events/6->",  "/6->8",
                         "events/06->8", "events/6->8 ", "events/8->6", "events/6->6",
                         "ev ents/6->8", "events/-6->8", "events/0->1", "events/6->100001",
                         "a/b/6->8",     "events/6->+8"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        why = NULL;
        if (rl__growth_key_parse(bad[i], strlen(bad[i]), topic, &from, &to, &why) !=
            RL__GROWTH_CORRUPT)
            fail_msg("key '%s' was accepted", bad[i]);
        assert_true(why && *why);
    }
    rl__growth_record r = sample(RL__GROWTH_ANNOUNCED, NULL);
    assert_true(rl__growth_record_matches_key(&r, "events/6->8", 11));
    assert_false(rl__growth_record_matches_key(&r, "events/6->9", 11));
    assert_false(rl__growth_record_matches_key(&r, "event/6->8", 10));
}

/* Every malformed value, each refused as corrupt with the reason given. */
static void malformed_values_are_refused(void **state)
{
    (void)state;
    const char *head = "ringlane-growth 1 topic=events from=6 to=8 profile=balanced vnodes=64 "
                       "ring=0123456789abcdef,fedcba9876543210 nonce=5f0c1e9a77b2d403 ";
    const struct {
        const char *tail; /* after head; NULL: the whole text is in why_part's place */
        const char *why_part;
    } cases[] = {
        {"state=announced ", "nothing may follow"},
        {"state=announced points=1,2,3,4,5,6", "nothing may follow"},
        {"state=sealed", "ends with ' points='"},
        {"state=sealed points=1,2,3,4,5", "separated by ','"},
        {"state=sealed points=1,2,3,4,5,6,7", "nothing after them"},
        {"state=sealed points=1,2,3,4,5,-6", "decimal offsets"},
        {"state=sealed points=1,2,3,4,5,06", "decimal offsets"},
        {"state=sealed points=1,2,3,4,5,9223372036854775808", "decimal offsets"},
        {"state=sealed points=1,2,3,4,5,", "decimal offsets"},
        {"state=sealed points=1,2,3,4,5,6 ", "nothing after them"},
        {"state=sealed  points=1,2,3,4,5,6", "ends with ' points='"},
        {"state=Sealed", "announced, sealed or aborted"},
        {"state=", "announced, sealed or aborted"},
        {"stat=sealed", "expected ' state='"},
        {"", "expected ' state='"},
    };
    char text[1024];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(text, sizeof text, "%s%s", head, cases[i].tail);
        size_t len = strlen(text);
        if (!*cases[i].tail)
            len--; /* the head without its trailing space */
        rl__growth_record r;
        const char *why = NULL;
        int v = rl__growth_value_parse(text, len, &r, &why);
        if (v != RL__GROWTH_CORRUPT || !why || !strstr(why, cases[i].why_part))
            fail_msg("'%.*s': verdict %d, why '%s', want corrupt, '%s'", (int)len, text, v,
                     why ? why : "(null)", cases[i].why_part);
        assert_null(r.points);
    }
    /* Fields in the head, one at a time. */
    const struct {
        const char *text, *why_part;
    } whole[] = {
        {"ringlane-growth 1", "expected ' topic='"},
        {"ringlane-growth 1 from=6 to=8", "expected ' topic='"},
        {"ringlane-growth 1 topic= from=6", "topic: 1..249"},
        {"ringlane-growth 1 topic=a/b from=6", "topic: 1..249"},
        {"ringlane-growth 1 topic=events  from=6", "expected ' from='"},
        {"ringlane-growth 1 topic=events from=+6 to=8", "from: a decimal"},
        {"ringlane-growth 1 topic=events from=06 to=8", "from: a decimal"},
        {"ringlane-growth 1 topic=events from=0 to=8 profile=balanced", "1 <= from < to"},
        {"ringlane-growth 1 topic=events from=8 to=8 profile=balanced", "1 <= from < to"},
        {"ringlane-growth 1 topic=events from=6 to=100001 profile=balanced", "to: a decimal"},
        {"ringlane-growth 1 topic=events to=8 from=6", "expected ' from='"},
        {"ringlane-growth 1 topic=events from=6 to=8 profile=nope vnodes=64", "profile: not"},
        {"ringlane-growth 1 topic=events from=6 to=8 profile=BALANCED vnodes=64", "profile: not"},
        {"ringlane-growth 1 topic=events from=6 to=8 profile=ketama vnodes=160", "no local_add"},
        {"ringlane-growth 1 topic=events from=6 to=8 profile=maglev vnodes=65537", "no local_add"},
        {"ringlane-growth 1 topic=events from=6 to=8 profile=envoy vnodes=1024", "no local_add"},
        {"ringlane-growth 1 topic=events from=6 to=8 profile=balanced vnodes=0 ring=",
         "outside the profile's range"},
        {"ringlane-growth 1 topic=events from=6 to=8 profile=balanced vnodes=65537 ring=",
         "outside the profile's range"},
        {"ringlane-growth 1 topic=events from=6 to=8 profile=jump vnodes=64 ring=", "has none"},
        {"ringlane-growth 1 topic=events from=6 to=8 profile=balanced vnodes=64 "
         "ring=0123456789ABCDEF,fedcba9876543210",
         "lowercase hex"},
        {"ringlane-growth 1 topic=events from=6 to=8 profile=balanced vnodes=64 "
         "ring=0123456789abcdef",
         "lowercase hex"},
        {"ringlane-growth 1 topic=events from=6 to=8 profile=balanced vnodes=64 "
         "ring=0123456789abcdef,fedcba9876543210 nonce=5f0c1e9a77b2d40 state=sealed",
         "nonce: 16"},
        {"ringlane-growth 1 topic=events from=6 to=8 profile=balanced vnodes=64 "
         "ring=0123456789abcdef,fedcba9876543210 extra=1 nonce=5f0c1e9a77b2d403",
         "expected ' nonce='"},
        {"ringlane-growth x topic=events", "not a number"},
        {"ringlane-growth 01 topic=events", "not a number"},
        {"ringlane-growth  1 topic=events", "not a number"},
        {"ringlane-growth 1x topic=events", "not a number"},
    };
    for (size_t i = 0; i < sizeof whole / sizeof *whole; i++) {
        rl__growth_record r;
        const char *why = NULL;
        int v = rl__growth_value_parse(whole[i].text, strlen(whole[i].text), &r, &why);
        if (v != RL__GROWTH_CORRUPT || !why || !strstr(why, whole[i].why_part))
            fail_msg("'%s': verdict %d, why '%s', want corrupt, '%s'", whole[i].text, v,
                     why ? why : "(null)", whole[i].why_part);
    }
    /* A NUL byte inside, and a text cut anywhere. */
    char with_nul[sizeof sealed_text];
    memcpy(with_nul, sealed_text, sizeof sealed_text);
    with_nul[40] = 0;
    rl__growth_record r;
    const char *why;
    assert_int_equal(rl__growth_value_parse(with_nul, sizeof sealed_text - 1, &r, &why),
                     RL__GROWTH_CORRUPT);
    assert_string_equal(why, "a NUL byte in the value");
    for (size_t cut = 0; cut + 1 < sizeof sealed_text - 1; cut++) /* cut anywhere: refused */
        assert_true(rl__growth_value_parse(sealed_text, cut, &r, &why) != RL__GROWTH_OK);
}

static void foreign_and_other_versions(void **state)
{
    (void)state;
    rl__growth_record r;
    const char *why;
    const char *foreign[] = {"",
                             "ringlane-growth",
                             "ringlane-growth1 topic=x",
                             "RINGLANE-GROWTH 1",
                             "ringlane1:AegHCuwDLa64mQ",
                             "{\"state\":\"sealed\"}",
                             " ringlane-growth 1"};
    for (size_t i = 0; i < sizeof foreign / sizeof *foreign; i++) {
        assert_int_equal(rl__growth_value_parse(foreign[i], strlen(foreign[i]), &r, &why),
                         RL__GROWTH_FOREIGN);
        assert_string_equal(why, "not a ringlane growth record");
    }
    assert_int_equal(rl__growth_value_parse(NULL, 0, &r, &why), RL__GROWTH_FOREIGN);
    assert_string_equal(why, "no value (a tombstone)");
    const char *other[] = {"ringlane-growth 2 topic=events from=6", "ringlane-growth 0",
                           "ringlane-growth 17 anything at all"};
    for (size_t i = 0; i < sizeof other / sizeof *other; i++) {
        assert_int_equal(rl__growth_value_parse(other[i], strlen(other[i]), &r, &why),
                         RL__GROWTH_OTHER_VERSION);
        assert_string_equal(why, "a growth record of a version other than 1");
    }
}

/* The writer refuses what the reader would refuse: never a record no one can read. */
static void format_refuses_invalid_records(void **state)
{
    (void)state;
    int64_t points[6] = {1, 2, 3, 4, 5, 6}, negative[6] = {1, 2, 3, -4, 5, 6};
    struct {
        rl__growth_record r;
        const char *why_part;
    } cases[6];
    for (size_t i = 0; i < 6; i++)
        cases[i].r = sample(RL__GROWTH_SEALED, points);
    cases[0].r.profile = "ketama", cases[0].why_part = "no local_add";
    cases[1].r.state = RL__GROWTH_ANNOUNCED, cases[1].why_part = "present exactly when sealed";
    cases[2].r.points = NULL, cases[2].why_part = "present exactly when sealed";
    cases[3].r.points = negative, cases[3].why_part = "0 or more";
    cases[4].r.to = 6, cases[4].why_part = "1 <= from < to";
    strcpy(cases[5].r.topic, "a b"), cases[5].why_part = "topic:";
    for (size_t i = 0; i < 6; i++) {
        const char *why = NULL;
        assert_null(rl__growth_value_format(&cases[i].r, &why));
        if (!why || !strstr(why, cases[i].why_part))
            fail_msg("case %zu: why '%s', want '%s'", i, why ? why : "(null)", cases[i].why_part);
    }
    assert_null(rl__growth_value_format(NULL, NULL));
}

/* The fingerprint is of the ring the Kafka partitioner routes by: recomputed here from
 * rl_kafka_partitioner_partition for each probe key, under several profiles and counts. */
static void fingerprints_are_the_partitioners_ring(void **state)
{
    (void)state;
    const struct {
        const char *profile;
        uint32_t vnodes; /* as in a record: 0 for none */
    } rings[] = {{"balanced", 64}, {"balanced", 16}, {"default", 160}, {"ds09", 50},
                 {"turnstone", 8}, {"jump", 0},      {"memento", 0},   {"xmur3", 40}};
    const uint32_t counts[] = {1, 6, 8, 13};
    unsigned char routes[RL__GROWTH_PROBES * 4];
    for (size_t i = 0; i < sizeof rings / sizeof *rings; i++) {
        rl_kafka_partitioner_options o;
        rl_kafka_partitioner_options_init(&o);
        o.profile = rings[i].profile;
        o.vnodes = rings[i].vnodes ? rings[i].vnodes : RL_VNODES_PROFILE;
        rl_kafka_partitioner_t *part = NULL;
        assert_rl_ok(rl_kafka_partitioner_new(&o, &part));
        uint64_t previous = 0;
        for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
            for (uint32_t k = 0; k < RL__GROWTH_PROBES; k++) {
                char key[48];
                int n = snprintf(key, sizeof key, "%04" PRIx32 "/ringlane-growth-probe", k * 16);
                int32_t p = -1;
                assert_rl_ok(
                    rl_kafka_partitioner_partition(part, key, (size_t)n, (int32_t)counts[c], &p));
                for (int b = 0; b < 4; b++)
                    routes[k * 4 + (uint32_t)b] = (unsigned char)((uint32_t)p >> (8 * b));
            }
            uint64_t fp = 0;
            assert_rl_ok(
                rl__growth_ring_fingerprint(rings[i].profile, rings[i].vnodes, counts[c], &fp));
            if (fp != rl_xxh3(routes, sizeof routes))
                fail_msg("%s vnodes %u over %u: the fingerprint is not the partitioner's ring",
                         rings[i].profile, rings[i].vnodes, counts[c]);
            if (fp == previous)
                fail_msg("%s over %u: the fingerprint of the count before", rings[i].profile,
                         counts[c]);
            previous = fp;
        }
        rl_kafka_partitioner_destroy(part);
    }
    /* Another vnodes or profile is another fingerprint where the placement differs (balanced
     * places 8 partitions alike at any vnodes from 8 up: its vnodes bounds its cuts). */
    uint64_t a, b, d;
    assert_rl_ok(rl__growth_ring_fingerprint("ds09", 50, 8, &a));
    assert_rl_ok(rl__growth_ring_fingerprint("ds09", 51, 8, &b));
    assert_rl_ok(rl__growth_ring_fingerprint("default", 50, 8, &d));
    assert_true(a != b && a != d);
    assert_int_equal(rl__growth_record_vnodes("balanced", RL_VNODES_PROFILE), 64);
    assert_int_equal(rl__growth_record_vnodes("jump", RL_VNODES_PROFILE), 0);
    assert_int_equal(rl__growth_record_vnodes("ds09", 50), 50);
    assert_int_equal(rl__growth_ring_fingerprint("balanced", 64, 0, &a), RL_EINVAL);
    assert_int_equal(rl__growth_ring_fingerprint("nope", 64, 8, &a), RL_EPROFILE);
    assert_int_equal(rl__growth_ring_fingerprint(NULL, 64, 8, &a), RL_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(values_round_trip),
        cmocka_unit_test(keys_round_trip),
        cmocka_unit_test(malformed_values_are_refused),
        cmocka_unit_test(foreign_and_other_versions),
        cmocka_unit_test(format_refuses_invalid_records),
        cmocka_unit_test(fingerprints_are_the_partitioners_ring),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
