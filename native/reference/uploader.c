/*
 * The instrument floor's reference uploader: the least a correct client of protocol v1 can
 * do, so that `lab evaluate` can time it exactly as it times the baseline and the candidate
 * and show how much of their time is the lab's (sandbox set-up, receiver, commit).
 *
 *   reference-uploader --source FILE --receiver 127.0.0.1:PORT
 *
 * One pass over the source (mmap, one EVP SHA-256 call), HAVE, then PUT with the mapped
 * bytes sent by one write loop when the receiver answers NO. No retries, no events beyond
 * the final one, no progress: it is a yardstick, not a client to ship. Exit 0 on YES or OK.
 * Built by the lab on demand (lab/evaluate/floor.py), never part of the judged client.
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static int fail(const char *what)
{
    printf("{\"event\":\"complete\",\"status\":\"error\",\"error\":\"%s\"}\n", what);
    return 1;
}

static int dial(const char *host, int port)
{
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)port);
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1)
        return -1;
    int sock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock >= 0 && connect(sock, (struct sockaddr *)&addr, sizeof addr) != 0) {
        close(sock);
        return -1;
    }
    return sock;
}

static int send_all(int sock, const unsigned char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(sock, data, len);
        if (n <= 0)
            return -1;
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Sends `line` (and `len` payload bytes), reads the one answer line into `answer`. */
static int ask(const char *host, int port, const char *line, const unsigned char *payload,
               size_t len, char *answer, size_t answer_size)
{
    int sock = dial(host, port);
    if (sock < 0)
        return -1;
    int rc = send_all(sock, (const unsigned char *)line, strlen(line));
    if (rc == 0 && payload != NULL)
        rc = send_all(sock, payload, len);
    size_t got = 0;
    while (rc == 0 && got + 1 < answer_size) {
        ssize_t n = read(sock, answer + got, 1);
        if (n <= 0 || answer[got] == '\n')
            break;
        got += (size_t)n;
    }
    answer[got] = '\0';
    close(sock);
    return rc;
}

int main(int argc, char **argv)
{
    const char *source = NULL, *receiver = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--source") == 0)
            source = argv[i + 1];
        else if (strcmp(argv[i], "--receiver") == 0)
            receiver = argv[i + 1];
    }
    if (source == NULL || receiver == NULL)
        return fail("usage: reference-uploader --source FILE --receiver HOST:PORT");
    char host[64];
    const char *colon = strrchr(receiver, ':');
    if (colon == NULL || (size_t)(colon - receiver) >= sizeof host)
        return fail("bad receiver");
    memcpy(host, receiver, (size_t)(colon - receiver));
    host[colon - receiver] = '\0';
    int port = atoi(colon + 1);

    int fd = open(source, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
        return fail("cannot open the source");
    size_t size = (size_t)st.st_size;
    const unsigned char *data = (const unsigned char *)"";
    if (size > 0) {
        void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED)
            return fail("cannot map the source");
        data = map;
    }
    unsigned char digest[32];
    unsigned int digest_len = 0;
    if (EVP_Digest(data, size, digest, &digest_len, EVP_sha256(), NULL) != 1)
        return fail("sha256 failed");
    char hex[65];
    for (unsigned int i = 0; i < digest_len; i++)
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);

    char line[160], answer[260];
    snprintf(line, sizeof line, "HAVE %s %zu\n", hex, size);
    if (ask(host, port, line, NULL, 0, answer, sizeof answer) != 0)
        return fail("HAVE failed");
    if (strcmp(answer, "YES") != 0) {
        snprintf(line, sizeof line, "PUT %s %zu\n", hex, size);
        if (ask(host, port, line, data, size, answer, sizeof answer) != 0 ||
            strcmp(answer, "OK") != 0)
            return fail("PUT not committed");
    }
    printf("{\"event\":\"complete\",\"status\":\"ok\",\"sha256\":\"%s\"}\n", hex);
    return 0;
}
