/* The CPUs a cgroup lets this process use: a container started with --cpus=2 on a 64-core
 * host still shows 64 CPUs in its affinity mask, and a pool of 64 threads there spends its
 * time waiting for the quota to refill. The quota is "quota period" in microseconds
 * (cgroup v2 cpu.max, v1 cpu.cfs_quota_us + cpu.cfs_period_us); it allows
 * ceil(quota / period) CPUs' worth of time. Every ancestor's limit applies too, so the
 * walk goes from the process's own cgroup up to the root and keeps the smallest. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"

/* ceil(quota / period), at least 1; 0 when there is no limit. */
static int quota_cpus(long long quota, long long period)
{
    if (quota <= 0 || period <= 0)
        return 0; /* v1 writes -1 for "no limit" */
    long long n = (quota + period - 1) / period;
    return n < 1 ? 1 : n > 1 << 20 ? 1 << 20 : (int)n;
}

static bool parse_ll(const char **s, long long *out)
{
    while (isspace((unsigned char)**s))
        (*s)++;
    char *end;
    errno = 0;
    long long v = strtoll(*s, &end, 10);
    if (end == *s || errno)
        return false;
    *s = end;
    *out = v;
    return true;
}

int lp_core__cgroup_v2_cpus(const char *cpu_max)
{
    if (!cpu_max)
        return 0;
    const char *s = cpu_max;
    while (isspace((unsigned char)*s))
        s++;
    if (!strncmp(s, "max", 3))
        return 0;
    long long quota, period = 100000; /* the kernel's default period when only a quota is written */
    if (!parse_ll(&s, &quota))
        return 0;
    const char *p = s;
    if (!parse_ll(&p, &period))
        period = 100000;
    return quota_cpus(quota, period);
}

int lp_core__cgroup_v1_cpus(const char *quota_us, const char *period_us)
{
    long long quota, period;
    const char *q = quota_us, *p = period_us;
    if (!q || !p || !parse_ll(&q, &quota) || !parse_ll(&p, &period))
        return 0;
    return quota_cpus(quota, period);
}

static bool read_small(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = 0;
    return n > 0;
}

static int min_limit(int a, int b) { return !a ? b : !b ? a : a < b ? a : b; }

/* The smallest limit from dir/<rel> up to dir itself; v2 reads cpu.max, v1 the pair. */
static int walk_up(const char *root, const char *rel, bool v2)
{
    char path[1024], p2[1100], a[128], b[128];
    snprintf(path, sizeof path, "%s%s", root, rel);
    int best = 0;
    for (;;) {
        size_t len = strlen(path);
        while (len > strlen(root) && path[len - 1] == '/')
            path[--len] = 0;
        if (v2) {
            snprintf(p2, sizeof p2, "%s/cpu.max", path);
            if (read_small(p2, a, sizeof a))
                best = min_limit(best, lp_core__cgroup_v2_cpus(a));
        } else {
            snprintf(p2, sizeof p2, "%s/cpu.cfs_quota_us", path);
            bool ok = read_small(p2, a, sizeof a);
            snprintf(p2, sizeof p2, "%s/cpu.cfs_period_us", path);
            if (ok && read_small(p2, b, sizeof b))
                best = min_limit(best, lp_core__cgroup_v1_cpus(a, b));
        }
        char *slash = strrchr(path, '/');
        if (len <= strlen(root) || !slash || slash < path + strlen(root))
            break;
        *slash = 0;
    }
    return best;
}

int lp_core__cgroup_cpus(void)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return 0;
    char line[1024];
    int best = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = 0;
        const char *ctrl = c1 + 1, *rel = c2 + 1;
        if (!strcmp(line, "0") && !*ctrl) /* v2: "0::/path" */
            best = min_limit(best, walk_up("/sys/fs/cgroup", rel, true));
        else if (strstr(ctrl, "cpu") && !strstr(ctrl, "cpuset")) { /* v1 "cpu,cpuacct" or "cpu" */
            char root[256];
            snprintf(root, sizeof root, "/sys/fs/cgroup/%s", ctrl);
            int n = walk_up(root, rel, false);
            if (!n) /* some systems mount it as /sys/fs/cgroup/cpu only */
                n = walk_up("/sys/fs/cgroup/cpu", rel, false);
            best = min_limit(best, n);
        }
    }
    fclose(f);
    return best;
}
