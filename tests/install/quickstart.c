/* SPDX-License-Identifier: BSD-2-Clause */
/* Which server owns a key: a ring of three cache servers, cache-c weighted double. */
#include <ringlane/ring.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    rl_member servers[] = {{"cache-a", 1, NULL}, {"cache-b", 1, NULL}, {"cache-c", 2, NULL}};
    rl_ring_t *ring = NULL;
    int rc = rl_ring_build(servers, 3, NULL, &ring); /* profile "default", 160 vnodes */
    if (rc != 0) {
        fprintf(stderr, "rl_ring_build: %s: %s\n", rl_strerror(rc), rl_last_error_detail());
        return 1;
    }
    const char *keys[] = {"user:1", "user:2", "user:42"};
    for (int i = 0; i < 3; i++) {
        uint32_t node;
        if (rl_ring_lookup(ring, keys[i], strlen(keys[i]), &node) == 0)
            printf("%s -> %s\n", keys[i], rl_ring_node_name(ring, node));
    }
    rl_ring_free(ring);
    return 0;
}
