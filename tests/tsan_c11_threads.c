/* SPDX-License-Identifier: BSD-2-Clause */
/* C11 threads for ThreadSanitizer builds of programs that run librdkafka.
 *
 * Debian's librdkafka creates its threads with C11 thrd_create() and locks with mtx_* and
 * cnd_*. glibc implements those on its internal pthread functions, so ThreadSanitizer (GCC 12's
 * and clang 14's runtimes intercept the pthread_* names only) never learns of librdkafka's
 * threads: the first allocation on one of them crashes in the sanitizer's allocator, and its
 * locks would be invisible. Linked into a test program (or preloaded with the runtime), these
 * definitions take the place of glibc's for librdkafka and forward each call to the pthread
 * function of the same meaning, which the sanitizer does intercept. The types are glibc's
 * own: thrd_t is a pthread_t, mtx_t/cnd_t/once_flag have the layout of their pthread twins.
 *
 * Built only with -fsanitize=thread. This changes no behaviour: it is what a sanitizer runtime
 * with C11 thread interceptors (newer LLVM) does by itself. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>

#define EXPORT __attribute__((visibility("default")))

_Static_assert(sizeof(thrd_t) == sizeof(pthread_t), "thrd_t is a pthread_t");
_Static_assert(sizeof(mtx_t) == sizeof(pthread_mutex_t), "mtx_t has a pthread_mutex_t");
_Static_assert(sizeof(cnd_t) == sizeof(pthread_cond_t), "cnd_t has a pthread_cond_t");
_Static_assert(sizeof(once_flag) == sizeof(pthread_once_t), "once_flag is a pthread_once_t");

EXPORT int thrd_create(thrd_t *thr, thrd_start_t func, void *arg);
EXPORT int thrd_join(thrd_t thr, int *res);
EXPORT int mtx_init(mtx_t *m, int type);
EXPORT int mtx_lock(mtx_t *m);
EXPORT int mtx_trylock(mtx_t *m);
EXPORT int mtx_unlock(mtx_t *m);
EXPORT void mtx_destroy(mtx_t *m);
EXPORT int cnd_init(cnd_t *c);
EXPORT int cnd_signal(cnd_t *c);
EXPORT int cnd_broadcast(cnd_t *c);
EXPORT int cnd_wait(cnd_t *c, mtx_t *m);
EXPORT int cnd_timedwait(cnd_t *restrict c, mtx_t *restrict m,
                         const struct timespec *restrict abstime);
EXPORT void cnd_destroy(cnd_t *c);
EXPORT void call_once(once_flag *flag, void (*func)(void));

static int result(int err)
{
    switch (err) {
    case 0:
        return thrd_success;
    case ENOMEM:
        return thrd_nomem;
    case ETIMEDOUT:
        return thrd_timedout;
    case EBUSY:
        return thrd_busy;
    default:
        return thrd_error;
    }
}

typedef struct start {
    thrd_start_t func;
    void *arg;
} start;

static void *run(void *p)
{
    start s = *(start *)p;
    free(p);
    return (void *)(intptr_t)s.func(s.arg);
}

int thrd_create(thrd_t *thr, thrd_start_t func, void *arg)
{
    start *s = malloc(sizeof *s);
    if (!s)
        return thrd_nomem;
    s->func = func;
    s->arg = arg;
    int err = pthread_create((pthread_t *)thr, NULL, run, s);
    if (err)
        free(s);
    return result(err);
}

int thrd_join(thrd_t thr, int *res)
{
    void *ret;
    int err = pthread_join((pthread_t)thr, &ret);
    if (!err && res)
        *res = (int)(intptr_t)ret;
    return result(err);
}

int mtx_init(mtx_t *m, int type)
{
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    if (type & mtx_recursive)
        pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    int err = pthread_mutex_init((pthread_mutex_t *)m, &attr);
    pthread_mutexattr_destroy(&attr);
    return result(err);
}

int mtx_lock(mtx_t *m)
{
    return result(pthread_mutex_lock((pthread_mutex_t *)m));
}

int mtx_trylock(mtx_t *m)
{
    return result(pthread_mutex_trylock((pthread_mutex_t *)m));
}

int mtx_unlock(mtx_t *m)
{
    return result(pthread_mutex_unlock((pthread_mutex_t *)m));
}

void mtx_destroy(mtx_t *m)
{
    pthread_mutex_destroy((pthread_mutex_t *)m);
}

int cnd_init(cnd_t *c)
{
    return result(pthread_cond_init((pthread_cond_t *)c, NULL));
}

int cnd_signal(cnd_t *c)
{
    return result(pthread_cond_signal((pthread_cond_t *)c));
}

int cnd_broadcast(cnd_t *c)
{
    return result(pthread_cond_broadcast((pthread_cond_t *)c));
}

int cnd_wait(cnd_t *c, mtx_t *m)
{
    return result(pthread_cond_wait((pthread_cond_t *)c, (pthread_mutex_t *)m));
}

int cnd_timedwait(cnd_t *restrict c, mtx_t *restrict m, const struct timespec *restrict abstime)
{
    return result(pthread_cond_timedwait((pthread_cond_t *)c, (pthread_mutex_t *)m, abstime));
}

void cnd_destroy(cnd_t *c)
{
    pthread_cond_destroy((pthread_cond_t *)c);
}

void call_once(once_flag *flag, void (*func)(void))
{
    pthread_once((pthread_once_t *)flag, func);
}
