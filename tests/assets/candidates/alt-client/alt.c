/* An alternative backup client (client contract v1), structured differently from the lab's:
 * the whole file is loaded once into memory, hashed there and sent from there. */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netdb.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static int fail(const char *why, int code)
{
    printf("{\"event\": \"complete\", \"status\": \"failed\", \"reason\": \"%s\"}\n", why);
    return code;
}

static int dial(const char *host, const char *port)
{
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
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

static int put_all(int s, const unsigned char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = send(s, p, n, MSG_NOSIGNAL);
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* one request per connection; the answer line is copied into ans */
static int request(const char *host, const char *port, const char *line,
                   const unsigned char *body, size_t len, char *ans, size_t anslen)
{
    int s = dial(host, port);
    if (s < 0)
        return -1;
    int rc = put_all(s, (const unsigned char *)line, strlen(line));
    if (rc == 0 && body != NULL)
        rc = put_all(s, body, len);
    size_t got = 0;
    while (got + 1 < anslen) {
        ssize_t k = recv(s, ans + got, 1, 0);
        if (k <= 0)
            break;
        if (ans[got] == '\n')
            break;
        got++;
    }
    ans[got] = '\0';
    close(s);
    return got > 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    const char *source = NULL, *receiver = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--source") == 0)
            source = argv[i + 1];
        else if (strcmp(argv[i], "--receiver") == 0)
            receiver = argv[i + 1];
    }
    if (source == NULL || receiver == NULL)
        return fail("usage: --source PATH --receiver HOST:PORT", 2);
    char host[128];
    const char *colon = strrchr(receiver, ':');
    if (colon == NULL || (size_t)(colon - receiver) >= sizeof host)
        return fail("bad --receiver", 2);
    memcpy(host, receiver, (size_t)(colon - receiver));
    host[colon - receiver] = '\0';
    const char *port = colon + 1;

    FILE *f = fopen(source, "rb");
    if (f == NULL)
        return fail("cannot open source", 1);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *data = malloc(size > 0 ? (size_t)size : 1);
    if (data == NULL || fread(data, 1, (size_t)size, f) != (size_t)size) {
        fclose(f);
        return fail("cannot read source", 1);
    }
    fclose(f);

    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    EVP_Digest(data, (size_t)size, md, &mdlen, EVP_sha256(), NULL);
    char hex[65];
    for (unsigned i = 0; i < mdlen; i++)
        sprintf(hex + 2 * i, "%02x", md[i]);

    char line[256], ans[256];
    snprintf(line, sizeof line, "HAVE %s %ld\n", hex, size);
    if (request(host, port, line, NULL, 0, ans, sizeof ans) != 0)
        return fail("HAVE failed", 1);
    printf("{\"event\": \"have\", \"answer\": \"%s\"}\n", ans);
    if (strcmp(ans, "YES") == 0) {
        printf("{\"event\": \"complete\", \"status\": \"ok\"}\n");
        return 0;
    }
    snprintf(line, sizeof line, "PUT %s %ld\n", hex, size);
    for (int attempt = 1; attempt <= 3; attempt++) {
        int rc = request(host, port, line, data, (size_t)size, ans, sizeof ans);
        printf("{\"event\": \"upload\", \"attempt\": %d, \"answer\": \"%s\"}\n", attempt,
               rc == 0 ? ans : "dropped");
        if (rc == 0 && strcmp(ans, "OK") == 0) {
            printf("{\"event\": \"complete\", \"status\": \"ok\"}\n");
            return 0;
        }
        if (rc == 0 && strncmp(ans, "ERR digest", 10) == 0)
            return fail("receiver rejected the payload", 1);
    }
    return fail("gave up after 3 upload attempts", 1);
}
