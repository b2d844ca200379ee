/* SPDX-License-Identifier: BSD-2-Clause */
/* delay_server: a small TCP server on 127.0.0.1 that answers every request after a fixed delay,
 * the stand-in for a remote service in examples/async_dispatch.c and bench/bench_async.c.
 *
 * It runs on a libuv loop of its own, in a thread of its own, as a remote service would: its
 * reads, its timers and its writes do not share the client's loop thread. The client and the
 * server share no memory while both run, only the sockets: the port is chosen before the thread
 * starts, and the counts below are read after delay_server_stop has joined the thread.
 *
 * Requests and replies are delay_frames, sent back unchanged. Any error the server meets ends
 * the process (exit 1), with a message that starts with the name given to delay_server_start. */
#ifndef RINGLANE_EXAMPLES_DELAY_SERVER_H
#define RINGLANE_EXAMPLES_DELAY_SERVER_H

#include <stdint.h>
#include <uv.h>

/* One request and its reply, the same 16 bytes (both ends are this process: native order). */
typedef struct delay_frame {
    uint64_t ticket; /* the job's attempt, echoed back for rl_dispatch_complete */
    uint32_t key;
    uint32_t seq; /* 0, 1, 2, ... per key */
} delay_frame;

/* Called on the server's thread for each request as it arrives, before its reply is scheduled:
 * a reply never leaves before the hook has seen its request. */
typedef void delay_server_hook(void *data, const delay_frame *f);

typedef struct delay_server {
    /* Read these after delay_server_stop. */
    uint64_t requests;        /* frames received */
    uint64_t replies_pending; /* frames received and not answered (their connection closed) */

    /* The server's own. */
    uv_loop_t loop;
    uv_tcp_t listener;
    uv_async_t stop;
    uv_thread_t thread;
    struct delay_conn *conns;
    int port;
    uint64_t delay_ms;
    delay_server_hook *on_request;
    void *data;
    const char *name;
} delay_server;

/* Binds 127.0.0.1 on a port the system picks, then runs the server's loop in a new thread. It
 * answers each request delay_ms after it arrived. on_request (may be NULL) is called with data
 * for each request; name starts the server's error messages. */
void delay_server_start(delay_server *s, const char *name, uint64_t delay_ms,
                        delay_server_hook *on_request, void *data);

/* The port the server listens on (set by delay_server_start). */
int delay_server_port(const delay_server *s);

/* From any thread, once: closes the server's connections and its listener, then waits for its
 * thread to end and closes its loop. */
void delay_server_stop(delay_server *s);

#endif
