/* SPDX-License-Identifier: BSD-2-Clause */
/* A program outside the project that uses every installed library, built against the install
 * tree by check_install.sh (pkg-config, then CMake's find_package, shared and static). It
 * checks that the layers agree: the partitioner's partition for a key is the ring's answer
 * for members "0".."5", and the dispatcher runs a job. It includes only the concept headers:
 * the RL_E* codes come with them. */
#define _POSIX_C_SOURCE 200809L
#include <ringlane/consumer.h>
#include <ringlane/dispatcher.h>
#include <ringlane/partitioner.h>
#include <ringlane/ring.h>

#include <stdio.h>
#include <string.h>
#include <uv.h>

static int ran, done_outcome = -1;

static int handler(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    (void)d;
    (void)job;
    ran++;
    return 0;
}

static void on_done(rl_dispatcher_t *d, rl_dispatch_job *job, int outcome)
{
    (void)job;
    done_outcome = outcome;
    rl_dispatch_close(d, RL_DISPATCH_DRAIN, NULL);
}

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "install check: %s failed\n", #cond);                                  \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(void)
{
    const char *key = "user:42";

    /* The core: a ring over partitions "0".."5". */
    rl_member m[6];
    char names[6][2];
    for (int i = 0; i < 6; i++) {
        snprintf(names[i], sizeof names[i], "%d", i);
        m[i] = (rl_member){.name = names[i], .weight = 1};
    }
    rl_ring_t *ring = NULL;
    rl_ring_options ro;
    rl_ring_options_init(&ro);
    ro.profile = RL_KAFKA_DEFAULT_PROFILE; /* the partitioner's */
    CHECK(rl_ring_build(m, 6, &ro, &ring) == 0);
    uint32_t node = 0;
    CHECK(rl_ring_lookup(ring, key, strlen(key), &node) == 0);

    /* The partitioner agrees with it. */
    rl_kafka_partitioner_options po;
    rl_kafka_partitioner_options_init(&po);
    rl_kafka_partitioner_t *p = NULL;
    CHECK(rl_kafka_partitioner_new(&po, &p) == 0);
    int32_t partition = -1;
    CHECK(rl_kafka_partitioner_partition(p, key, strlen(key), 6, &partition) == 0);
    CHECK(strcmp(rl_ring_node_name(ring, node), names[partition]) == 0);
    rl_kafka_partitioner_destroy(p);
    rl_ring_free(ring);

    /* The dispatcher runs a job on a lane. */
    uv_loop_t loop;
    CHECK(uv_loop_init(&loop) == 0);
    const char *lanes[] = {"lane-a", "lane-b"};
    rl_dispatch_options o;
    rl_dispatch_options_init(&o);
    o.lanes = lanes;
    o.lane_count = 2;
    o.handler = handler;
    o.on_done = on_done;
    rl_dispatcher_t *d = NULL;
    CHECK(rl_dispatch_init(&loop, &o, &d) == 0);
    CHECK(rl_dispatch_try_submit(d, key, strlen(key), NULL, 0) == 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(ran == 1 && done_outcome == RL_DISPATCH_DONE);
    CHECK(uv_loop_close(&loop) == 0);

    /* The consumer is there and checks its arguments. */
    rl_consumer_t *c = NULL;
    CHECK(rl_consumer_new(NULL, NULL, &c) == RL_EINVAL && c == NULL);
    printf("install check: %s -> partition %d; a job ran; %s\n", key, (int)partition,
           rl_err_name(RL_EINVAL));
    return 0;
}
