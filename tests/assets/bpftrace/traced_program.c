/*
 * traced_program: a tiny stand-in client for the tracer tests (tests/integration/test_tracers.py).
 *
 *   traced_program --source PATH --receiver 127.0.0.1:PORT [--hashes N] [--udp PORT]
 *                  [--mmsg PORT] [--threads N] [--exit N]
 *
 * It reads the source N times in hash_file (64 KiB read(2) calls), optionally in N reader
 * threads at once (to make strace print <unfinished ...>/resumed lines), sends one UDP
 * datagram with sendto(2) to 127.0.0.1:PORT (a destination reached without connect), then
 * sends two datagrams with one sendmmsg(2) to 127.0.0.1:PORT if --mmsg is given, then
 * connects to the receiver and sends "HAVE <64 hex> <size>\n" through send_payload,
 * reads one answer line, and exits with the given status.  busy_wait spins for 1 ms.
 * Built with -DOMIT_HASH_FILE the function is named digest_file instead, so the binary
 * lacks the hash_file symbol (a candidate client the uprobes cannot attach to).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifdef OMIT_HASH_FILE
#define hash_file digest_file
#endif

#define PROBED __attribute__((noinline, used))

static const char *source_path;

PROBED uint64_t hash_file(const char *path, uint64_t *size)
{
    static __thread unsigned char buf[64 * 1024];
    uint64_t h = 1469598103934665603ULL; /* FNV-1a 64 */
    uint64_t total = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n; i++)
            h = (h ^ buf[i]) * 1099511628211ULL;
        total += (uint64_t)n;
    }
    close(fd);
    *size = total;
    return h;
}

PROBED int send_payload(int sock, const char *data, size_t len)
{
    return write(sock, data, len) == (ssize_t)len ? 0 : -1;
}

PROBED uint64_t busy_wait(unsigned ms)
{
    struct timespec start, now;
    uint64_t loops = 0;
    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        loops++;
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) <
             (long)ms * 1000000L);
    return loops;
}

static void *reader(void *arg)
{
    uint64_t size = 0;
    (void)arg;
    hash_file(source_path, &size);
    return NULL;
}

static struct sockaddr_in loopback(int port)
{
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return addr;
}

int main(int argc, char **argv)
{
    const char *receiver = NULL;
    int hashes = 1, udp = 0, mmsg = 0, threads = 0, status = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--source") == 0)
            source_path = argv[i + 1];
        else if (strcmp(argv[i], "--receiver") == 0)
            receiver = argv[i + 1];
        else if (strcmp(argv[i], "--hashes") == 0)
            hashes = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--udp") == 0)
            udp = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--mmsg") == 0)
            mmsg = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--threads") == 0)
            threads = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--exit") == 0)
            status = atoi(argv[i + 1]);
    }
    const char *colon = receiver ? strrchr(receiver, ':') : NULL;
    if (source_path == NULL || colon == NULL) {
        fputs("usage: traced_program --source PATH --receiver 127.0.0.1:PORT\n", stderr);
        return 2;
    }
    uint64_t size = 0, digest = 0;
    for (int r = 0; r < hashes; r++)
        digest = hash_file(source_path, &size);
    if (threads > 0) {
        pthread_t tids[16];
        int n = threads > 16 ? 16 : threads;
        for (int t = 0; t < n; t++)
            pthread_create(&tids[t], NULL, reader, NULL);
        for (int t = 0; t < n; t++)
            pthread_join(tids[t], NULL);
    }
    busy_wait(1);
    printf("{\"event\": \"hashed\", \"size\": %llu}\n", (unsigned long long)size);
    fflush(stdout);

    if (udp > 0) {
        struct sockaddr_in addr = loopback(udp);
        int u = socket(AF_INET, SOCK_DGRAM, 0);
        sendto(u, "ping\n", 5, 0, (struct sockaddr *)&addr, sizeof addr);
        close(u);
    }

    if (mmsg > 0) {
        struct sockaddr_in to = loopback(mmsg);
        char one[] = "one\n", two[] = "two!\n";
        struct iovec iov[2] = {{one, 4}, {two, 5}};
        struct mmsghdr msgs[2];
        memset(msgs, 0, sizeof msgs);
        for (int m = 0; m < 2; m++) {
            msgs[m].msg_hdr.msg_name = &to;
            msgs[m].msg_hdr.msg_namelen = sizeof to;
            msgs[m].msg_hdr.msg_iov = &iov[m];
            msgs[m].msg_hdr.msg_iovlen = 1;
        }
        int u = socket(AF_INET, SOCK_DGRAM, 0);
        sendmmsg(u, msgs, 2, 0);
        close(u);
    }

    struct sockaddr_in addr = loopback(atoi(colon + 1));
    int sock = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(sock, (struct sockaddr *)&addr, sizeof addr) != 0) {
        perror("connect");
        return 1;
    }
    char line[256];
    int len = snprintf(line, sizeof line, "HAVE %016llx%016llx%016llx%016llx %llu\n",
                       (unsigned long long)digest, (unsigned long long)digest,
                       (unsigned long long)digest, (unsigned long long)digest,
                       (unsigned long long)size);
    if (send_payload(sock, line, (size_t)len) != 0)
        return 1;
    ssize_t got = read(sock, line, sizeof line - 1);
    close(sock);
    printf("{\"event\": \"complete\", \"status\": \"ok\", \"answer_bytes\": %zd}\n", got);
    return status;
}
