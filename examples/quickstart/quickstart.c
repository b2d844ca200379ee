/* SPDX-License-Identifier: BSD-2-Clause */
/* ringlane's quick start: a ring of three cache servers, where five keys go, and where they go
 * once a fourth server joins (only the keys the new one takes move). */
#include <ringlane/ring.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    rl_member servers[] = {{"cache-a", 1, NULL}, {"cache-b", 1, NULL}, {"cache-c", 1, NULL}};
    rl_member joiner = {"cache-d", 1, NULL};
    rl_ring_t *ring = NULL, *grown = NULL;
    int rc = rl_ring_build(servers, 3, NULL, &ring); /* NULL: profile "default" */
    if (rc == 0)
        rc = rl_ring_add(ring, &joiner, &grown); /* a new snapshot; `ring` stays as it was */
    if (rc != 0) {
        fprintf(stderr, "ring: %s: %s\n", rl_strerror(rc), rl_last_error_detail());
        return 1;
    }
    const char *keys[] = {"user:1", "user:2", "user:3", "user:4", "user:5"};
    for (int i = 0; i < 5; i++) {
        uint32_t before, after; /* node indexes: lookups allocate nothing and never block */
        rl_ring_lookup(ring, keys[i], strlen(keys[i]), &before);
        rl_ring_lookup(grown, keys[i], strlen(keys[i]), &after);
        printf("%s\t%s -> %s\n", keys[i], rl_ring_node_name(ring, before),
               rl_ring_node_name(grown, after));
    }
    rl_ring_free(grown);
    rl_ring_free(ring);
    return 0;
}
