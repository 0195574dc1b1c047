/* Status names and the per-thread error message that every failing path fills. */
#include "loupe/base.h"

#include <stdarg.h>
#include <string.h>

static _Thread_local char err_buf[2048];

const char *lp_status_str(lp_status st)
{
    switch (st) {
    case LP_OK: return "ok";
    case LP_STATUS_IO: return "io error";
    case LP_STATUS_FORMAT: return "format error";
    case LP_STATUS_INVALID_ARG: return "invalid argument";
    case LP_STATUS_NO_MEMORY: return "out of memory";
    case LP_STATUS_UNSUPPORTED: return "unsupported";
    case LP_STATUS_NOT_FOUND: return "not found";
    case LP_STATUS_RANGE: return "out of range";
    case LP_STATUS_NUMERIC: return "numeric error";
    case LP_STATUS_INTERRUPTED: return "interrupted";
    case LP_STATUS__COUNT: break;
    }
    return "unknown status";
}

lp_status lp_err(lp_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_buf, sizeof err_buf, fmt, ap);
    va_end(ap);
    return st;
}

lp_status lp_err_wrap(lp_status st, const char *fmt, ...)
{
    char prefix[512];
    char old[sizeof err_buf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err_buf, sizeof old);
    /* Truncation is acceptable: the message is for people, and ends are least useful. */
    size_t n = strlen(prefix);
    if (n > sizeof err_buf - 3)
        n = sizeof err_buf - 3;
    memcpy(err_buf, prefix, n);
    memcpy(err_buf + n, ": ", 2);
    size_t room = sizeof err_buf - n - 3;
    size_t m = strnlen(old, room);
    memcpy(err_buf + n + 2, old, m);
    err_buf[n + 2 + m] = '\0';
    return st;
}

const char *lp_err_msg(void) { return err_buf; }

void lp_err_clear(void) { err_buf[0] = '\0'; }
