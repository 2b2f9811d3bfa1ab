/* cli_tunables: see cli_tunables.h. */
#include "client/cli/cli_tunables.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TUNABLE "glibc.malloc.hugetlb"
/* Set before the re-exec: a second start never execs again, whatever
 * GLIBC_TUNABLES became (a glibc that drops an unknown tunable). */
#define REEXEC_MARK "SLUICE_REEXECED"

void sl_cli_tunables_mallopt(void)
{
    /* Batches and received samples are megabytes each: keep them on the
     * heap instead of a fresh mmap (and page faults) per allocation. */
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 128 << 20);
}

/* Why hugetlb: a receiving client's fetch threads' malloc arenas (gRPC's
 * receive buffers, memory the library does not allocate) grow 8 KB at a
 * time to the bytes in flight, each page first touched by a fault -- ~21 %
 * of a float32 client's CPU over 3 epochs under a 0.25-CPU quota on this
 * kind of virtual machine, where a fault traps to the hypervisor. With the
 * tunable glibc advises its heaps MADV_HUGEPAGE: 2 MB pages where
 * transparent huge pages are "madvise" or "always" (docs/benchmarks.md
 * "glibc.malloc.hugetlb for sluice run"). */
void sl_cli_tunables_reexec(const char *cmd, char **argv)
{
    if (strcmp(cmd, "run") != 0 && strcmp(cmd, "bench") != 0) {
        return;
    }
    if (getenv(REEXEC_MARK) != NULL) {
        (void)unsetenv(REEXEC_MARK); /* the re-executed start: children start clean */
        return;
    }
    const char *opt = getenv("SLUICE_MALLOC_HUGETLB");
    const char *old = getenv("GLIBC_TUNABLES");
    if ((opt != NULL && strcmp(opt, "0") == 0) || (old != NULL && strstr(old, TUNABLE) != NULL)) {
        return;
    }
    char val[1024];
    int n = snprintf(val, sizeof(val), "%s%s" TUNABLE "=1", old != NULL ? old : "",
                     old != NULL && old[0] != '\0' ? ":" : "");
    if (n < 0 || (size_t)n >= sizeof(val)) {
        return; /* a user's tunables longer than this: leave them alone */
    }
    if (setenv("GLIBC_TUNABLES", val, 1) != 0 || setenv(REEXEC_MARK, "1", 1) != 0) {
        return;
    }
    (void)execv("/proc/self/exe", argv);
    /* No /proc, or the binary went away: run on as we are, and do not hand
     * the half-made environment to children. */
    if (old != NULL) {
        (void)setenv("GLIBC_TUNABLES", old, 1);
    } else {
        (void)unsetenv("GLIBC_TUNABLES");
    }
    (void)unsetenv(REEXEC_MARK);
}
