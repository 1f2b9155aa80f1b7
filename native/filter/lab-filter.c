/* lab-filter: the sandbox's system-call filter (lab/sandbox/seccomp.py).
 *
 *   lab-filter PROGRAM [ARG...]   refuse the calls below, then exec PROGRAM
 *   lab-filter --gate=FD PROGRAM [ARG...]
 *                                 first wait at the gate FD (a socket the lab holds the
 *                                 other end of): say "R" (ready), wait for "G" (go), close
 *                                 FD; then as above. Anything but "G" (the lab closed its
 *                                 end) ends here with 125: the client never runs. The lab
 *                                 attaches its tracer (strace -p) meanwhile, so that the
 *                                 trace starts here, not with the jail's earlier steps
 *                                 (lab/sandbox/supervise.py, Gate)
 *   lab-filter --list             print "NAME NUMBER ARCH" of each refused call (ARCH: the
 *                                 audit architecture, hex, as in the kernel's records)
 *
 * Each call in REFUSED returns -1 with errno EPERM and never reaches the kernel's handler, and
 * so does a clone that asks for a new namespace (NAMESPACES). clone3 returns ENOSYS, from a
 * second filter loaded without the log flag: its flags live in a structure a filter cannot
 * read, so it is refused whole, as Docker's default profile does, and the C library falls
 * back to clone, where the namespace flags are checked (and a refusal logged); an ENOSYS
 * every thread start meets is no finding, so it is not logged.
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
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

/* clone's namespace flags: a clone asking for any of them is refused like unshare (one rule
 * a flag, matching when its bit is set whatever the others are). */
static const uint64_t NAMESPACES[] = {
    CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET,
    CLONE_NEWUTS,  CLONE_NEWIPC, CLONE_NEWCGROUP, 0,
};

/* The architectures the filter covers: the native one and the others this CPU can run
 * system calls of (x86_64: the 32-bit int 0x80 table and x32), so that a call refused by
 * name is refused through every table, never bypassed through another one. */
static int arches(uint32_t out[3])
{
    int n = 0;
    out[n++] = seccomp_arch_native();
    if (out[0] == SCMP_ARCH_X86_64) {
        out[n++] = SCMP_ARCH_X86;
        out[n++] = SCMP_ARCH_X32;
    } else if (out[0] == SCMP_ARCH_AARCH64) {
        out[n++] = SCMP_ARCH_ARM;
    }
    return n;
}

static int list(void)
{
    uint32_t arch[3];
    int count = arches(arch);
    for (int a = 0; a < count; a++)
        for (const char *const *name = REFUSED; *name; name++) {
            int nr = seccomp_syscall_resolve_name_arch(arch[a], *name);
            if (nr != __NR_SCMP_ERROR && nr >= 0)
                printf("%s %d %x\n", *name, nr, arch[a]);
        }
    for (int a = 0; a < count; a++) {
        int nr = seccomp_syscall_resolve_name_arch(arch[a], "clone");
        if (nr != __NR_SCMP_ERROR && nr >= 0)
            printf("clone %d %x\n", nr, arch[a]);
    }
    return fflush(stdout) == 0 ? 0 : FAILED;
}

/* A filter allowing all but what the caller adds, on every architecture of arches(). */
static scmp_filter_ctx filter(int logged, int *rc)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (ctx == NULL) {
        *rc = -ENOMEM;
        return NULL;
    }
    *rc = logged ? seccomp_attr_set(ctx, SCMP_FLTATR_CTL_LOG, 1) : 0;
    uint32_t arch[3];
    int count = arches(arch);
    for (int a = 1; *rc == 0 && a < count; a++) {
        *rc = seccomp_arch_add(ctx, arch[a]);
        if (*rc == -EEXIST)
            *rc = 0;
    }
    return ctx;
}

static int load(void)
{
    int rc = 0;
    scmp_filter_ctx ctx = filter(1, &rc);
    if (ctx == NULL)
        return rc;
    for (const char *const *name = REFUSED; rc == 0 && *name; name++) {
        int nr = seccomp_syscall_resolve_name(*name);
        if (nr != __NR_SCMP_ERROR && nr >= 0)
            rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
    }
    for (const uint64_t *flag = NAMESPACES; rc == 0 && *flag; flag++)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                              SCMP_A0(SCMP_CMP_MASKED_EQ, *flag, *flag));
    if (rc == 0)
        rc = seccomp_load(ctx);
    seccomp_release(ctx);
    if (rc != 0)
        return rc;
    ctx = filter(0, &rc);
    if (ctx == NULL)
        return rc;
    int clone3 = seccomp_syscall_resolve_name("clone3");
    if (rc == 0 && clone3 != __NR_SCMP_ERROR && clone3 >= 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), clone3, 0);
    if (rc == 0)
        rc = seccomp_load(ctx);
    seccomp_release(ctx);
    return rc;
}

/* The gate: "R" out, then one byte in, which must be "G". Returns 0 to go on. */
static int gate(const char *spec)
{
    char *end = NULL;
    errno = 0;
    long fd = strtol(spec, &end, 10);
    if (errno != 0 || end == spec || *end != '\0' || fd < 0 || fd > 65535) {
        fprintf(stderr, "lab-filter: --gate takes a file descriptor, not %s\n", spec);
        return -1;
    }
    ssize_t n;
    do
        n = write((int)fd, "R", 1);
    while (n < 0 && errno == EINTR);
    char go = 0;
    if (n == 1)
        do
            n = read((int)fd, &go, 1);
        while (n < 0 && errno == EINTR);
    close((int)fd);
    if (n == 1 && go == 'G')
        return 0;
    fprintf(stderr, "lab-filter: the lab did not open the gate; the client was not run\n");
    return -1;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--list") == 0)
        return list();
    static const char GATE[] = "--gate=";
    if (argc >= 2 && strncmp(argv[1], GATE, sizeof GATE - 1) == 0) {
        if (gate(argv[1] + sizeof GATE - 1) != 0)
            return FAILED;
        argv++;
        argc--;
    }
    if (argc < 2) {
        fprintf(stderr,
                "usage: lab-filter [--gate=FD] PROGRAM [ARG...] | lab-filter --list\n");
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
