/* cli_tunables: glibc settings the `sluice` program chooses for its whole
 * process -- which the client library, a guest in someone else's process
 * (the Python binding's), must not. Called first thing in main(). */
#ifndef SLUICE_CLI_TUNABLES_H
#define SLUICE_CLI_TUNABLES_H

/* For a receiving command (run, bench): when glibc.malloc.hugetlb is not in
 * GLIBC_TUNABLES yet, sets it to 1 there and re-executes the program
 * (/proc/self/exe, same argv, same pid) -- glibc reads tunables only at
 * exec. SLUICE_MALLOC_HUGETLB=0 in the environment opts out. Returns only
 * when it did not re-execute (nothing to do, opted out, or the exec failed:
 * the process runs on with 4 KB pages, as before). */
void sl_cli_tunables_reexec(const char *cmd, char **argv);

/* The mallopt thresholds for megabyte batches (no exec needed). */
void sl_cli_tunables_mallopt(void);

#endif
