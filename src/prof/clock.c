/* Clock, thread ids and names, and the intern table: the small process-wide facts every
 * recorded event refers to. */
#define _GNU_SOURCE
#include "prof_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int64_t lp_prof_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static pthread_once_t base_once = PTHREAD_ONCE_INIT;
static int64_t base_mono, base_unix;

static void base_init(void)
{
    /* Bracket the realtime read between two monotonic reads to halve the skew. */
    struct timespec r;
    int64_t a = lp_prof_now_ns();
    clock_gettime(CLOCK_REALTIME, &r);
    int64_t b = lp_prof_now_ns();
    base_mono = a + (b - a) / 2;
    base_unix = (int64_t)r.tv_sec * 1000000000 + r.tv_nsec;
}

int64_t lp_prof_mono_to_unix_ns(int64_t mono_ns)
{
    pthread_once(&base_once, base_init);
    return base_unix + (mono_ns - base_mono);
}

static pthread_once_t tcal_once = PTHREAD_ONCE_INIT;
static int64_t tcal_t0, tcal_n0;

static void tcal_anchor(void)
{
    int64_t a = lp_prof_now_ns();
    tcal_t0 = lp_prof__ticks();
    int64_t b = lp_prof_now_ns();
    tcal_n0 = a + (b - a) / 2;
}

void lp_prof__tcal_init(void) { pthread_once(&tcal_once, tcal_anchor); }

void lp_prof__tcal_get(lp_prof_tcal *c)
{
    lp_prof__tcal_init();
    c->t0 = tcal_t0;
    c->n0 = tcal_n0;
    if (LP_PROF_TICKS_ARE_NS) {
        c->ns_per_tick = 1.0;
        return;
    }
    int64_t n1, t1;
    for (;;) { /* a short span would make the ratio noisy: wait for 5 ms of it */
        int64_t a = lp_prof_now_ns();
        t1 = lp_prof__ticks();
        int64_t b = lp_prof_now_ns();
        n1 = a + (b - a) / 2;
        if (n1 - c->n0 >= 5000000 && t1 > c->t0)
            break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    c->ns_per_tick = (double)(n1 - c->n0) / (double)(t1 - c->t0);
}

static __thread int64_t tls_tid;

int64_t lp_prof_thread_id(void)
{
    if (!tls_tid)
        tls_tid = (int64_t)syscall(SYS_gettid);
    return tls_tid;
}

/* Intern table: open hashing under one mutex; entries live for the process. */
typedef struct intern_ent {
    struct intern_ent *next;
    uint64_t h;
    char s[];
} intern_ent;

#define INTERN_BUCKETS 1024
static intern_ent *intern_tab[INTERN_BUCKETS];
static pthread_mutex_t intern_mu = PTHREAD_MUTEX_INITIALIZER;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

const char *lp_prof_intern(const char *s)
{
    if (!s)
        return NULL;
    uint64_t h = hash_str(s);
    pthread_mutex_lock(&intern_mu);
    intern_ent **b = &intern_tab[h % INTERN_BUCKETS];
    for (intern_ent *e = *b; e; e = e->next)
        if (e->h == h && strcmp(e->s, s) == 0) {
            pthread_mutex_unlock(&intern_mu);
            return e->s;
        }
    size_t n = strlen(s);
    intern_ent *e = malloc(sizeof *e + n + 1);
    if (!e) {
        pthread_mutex_unlock(&intern_mu);
        return NULL;
    }
    e->h = h;
    memcpy(e->s, s, n + 1);
    e->next = *b;
    *b = e;
    pthread_mutex_unlock(&intern_mu);
    return e->s;
}

#ifndef LP_PROF_DISABLE
void lp_prof_range_push_copy(const char *name)
{
    if (!LP_PROF__ON())
        return;
    const char *p = lp_prof_intern(name);
    if (p)
        lp_prof__push(p, LP_PROF_CAT_USER_ANNOTATION);
}
#endif
