/* lab-filter: the sandbox's system-call filter (lab/sandbox/seccomp.py).
 *
 *   lab-filter PROGRAM [ARG...]   refuse the calls below, then exec PROGRAM
 *   lab-filter --list             print "NAME NUMBER" of each refused call on this machine
 *
 * Each call in REFUSED returns -1 with errno EPERM and never reaches the kernel's handler.
 * The filter is loaded with SECCOMP_FILTER_FLAG_LOG (libseccomp's SCMP_FLTATR_CTL_LOG), so
 * the kernel writes an audit record (type 1326, code 0x50000) for every refusal, which the
 * lab reads from /dev/kmsg, outside the client. bwrap's own --seccomp cannot do that (it
 * loads a filter with no flags, and an EPERM it returns is logged nowhere), and it would
 * refuse the jail's own remount of /proc, which runs after bwrap and before this step.
 *
 * Run after capsh (no capabilities, no_new_privs already set), inside the invocation's
 * cgroup: every process of the client inherits the filter and cannot remove it.
 * Exit status 125 when the filter cannot be built or loaded (the client never ran).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define FAILED 125

/* What a backup client never needs: debugging or reading other processes, the kernel's key
 * rings, BPF programs, performance counters, mounting, new or other namespaces, and
 * userfaultfd (a tool of kernel exploits). A name this libseccomp does not know is skipped. */
static const char *const REFUSED[] = {
    "ptrace",     "process_vm_readv", "process_vm_writev", "keyctl",      "add_key",
    "request_key", "bpf",             "perf_event_open",   "mount",       "umount2",
    "fsopen",     "fsconfig",         "fsmount",           "move_mount",  "open_tree",
    "mount_setattr", "pivot_root",    "unshare",           "setns",       "userfaultfd",
    NULL,
};

static int list(void)
{
    for (const char *const *name = REFUSED; *name; name++) {
        int nr = seccomp_syscall_resolve_name(*name);
        if (nr != __NR_SCMP_ERROR && nr >= 0)
            printf("%s %d\n", *name, nr);
    }
    return fflush(stdout) == 0 ? 0 : FAILED;
}

static int load(void)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (ctx == NULL)
        return -ENOMEM;
    int rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_LOG, 1);
    for (const char *const *name = REFUSED; rc == 0 && *name; name++) {
        int nr = seccomp_syscall_resolve_name(*name);
        if (nr != __NR_SCMP_ERROR && nr >= 0)
            rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
    }
    if (rc == 0)
        rc = seccomp_load(ctx);
    seccomp_release(ctx);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--list") == 0)
        return list();
    if (argc < 2) {
        fprintf(stderr, "usage: lab-filter PROGRAM [ARG...] | lab-filter --list\n");
        return FAILED;
    }
    int rc = load();
    if (rc != 0) {
        fprintf(stderr, "lab-filter: the system-call filter could not be loaded: %s\n",
                strerror(-rc));
        return FAILED;
    }
    execv(argv[1], argv + 1);
    fprintf(stderr, "lab-filter: cannot run %s: %s\n", argv[1], strerror(errno));
    return FAILED;
}
