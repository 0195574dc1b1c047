/* Hardware counters through perf_event_open: one group (cycles leader, instructions,
 * cache misses) per thread, read at range begin and end. Where the kernel or hypervisor
 * refuses (perf_event_paranoid, no PMU in the VM) the counters are "unavailable", never 0. */
#define _GNU_SOURCE
#include "prof_internal.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static int open_counter(uint64_t config, int group)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_HARDWARE;
    a.config = config;
    a.disabled = group < 0;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    a.read_format = PERF_FORMAT_GROUP;
    return (int)syscall(SYS_perf_event_open, &a, 0, -1, group, 0);
}

int lp_prof__hw_open_thread(int *fd_leader, int fds[3])
{
    static const uint64_t cfg[3] = {PERF_COUNT_HW_CPU_CYCLES, PERF_COUNT_HW_INSTRUCTIONS,
                                    PERF_COUNT_HW_CACHE_MISSES};
    *fd_leader = -1;
    for (int i = 0; i < 3; i++) {
        fds[i] = open_counter(cfg[i], i == 0 ? -1 : fds[0]);
        if (fds[i] < 0) {
            for (int j = 0; j < i; j++)
                close(fds[j]);
            return 0;
        }
    }
    *fd_leader = fds[0];
    ioctl(fds[0], PERF_EVENT_IOC_RESET, PERF_IOC_FLAG_GROUP);
    ioctl(fds[0], PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP);
    return 1;
}

int lp_prof__hw_read(int fd_leader, int64_t v[3])
{
    uint64_t buf[4];
    if (fd_leader < 0 || read(fd_leader, buf, sizeof buf) != (ssize_t)sizeof buf || buf[0] != 3)
        return -1;
    for (int i = 0; i < 3; i++)
        v[i] = (int64_t)buf[1 + i];
    return 0;
}

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int probe_ok;
static const char *probe_why = "not probed";

static void probe(void)
{
    int lead, fds[3];
    if (lp_prof__hw_open_thread(&lead, fds)) {
        int64_t v[3];
        probe_ok = lp_prof__hw_read(lead, v) == 0;
        probe_why = probe_ok ? "available" : "perf counters open but unreadable";
        for (int i = 0; i < 3; i++)
            close(fds[i]);
        return;
    }
    int e = errno;
    probe_ok = 0;
    if (e == EACCES || e == EPERM)
        probe_why = "perf_event_open not permitted (kernel.perf_event_paranoid)";
    else if (e == ENOENT || e == EOPNOTSUPP || e == ENODEV)
        probe_why = "no hardware PMU exposed (virtual machine?)";
    else if (e == ENOSYS)
        probe_why = "perf_event_open not supported by this kernel";
    else
        probe_why = "perf_event_open failed";
}

int lp_prof_hw_available(const char **why)
{
    pthread_once(&probe_once, probe);
    if (why)
        *why = probe_why;
    return probe_ok;
}
