/*
 * Network helpers: endpoint parsing and resolution, connect with timeouts, whole-buffer
 * sends and answer lines.  Plain socket/connect/sendto/recvfrom system calls, so strace and
 * bpftrace see every destination and byte.
 */
#define _POSIX_C_SOURCE 200809L

#include "client.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

int endpoint_parse(const char *text, struct endpoint *ep, const char **why)
{
    memset(ep, 0, sizeof *ep);
    const char *colon = strrchr(text, ':');
    if (colon == NULL || colon == text) {
        *why = "expected HOST:PORT";
        return -1;
    }
    size_t host_len = (size_t)(colon - text);
    if (host_len >= sizeof ep->host) {
        *why = "host name too long";
        return -1;
    }
    const char *port = colon + 1;
    size_t port_len = strlen(port);
    if (port_len == 0 || port_len > 5 || strspn(port, "0123456789") != port_len) {
        *why = "port must be a number from 1 to 65535";
        return -1;
    }
    long value = strtol(port, NULL, 10);
    if (value < 1 || value > 65535) {
        *why = "port must be a number from 1 to 65535";
        return -1;
    }
    memcpy(ep->host, text, host_len);
    ep->host[host_len] = '\0';
    memcpy(ep->port, port, port_len + 1);
    return 0;
}

int endpoint_resolve(struct endpoint *ep, const char **why)
{
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    /* A dotted address is taken as it is, without consulting NSS (whose nscd look-up would
     * show up as an extra AF_UNIX connect in the traces); a name falls back to NSS. */
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    struct addrinfo *found = NULL;
    int rc = getaddrinfo(ep->host, ep->port, &hints, &found);
    if (rc == EAI_NONAME) {
        hints.ai_flags = AI_NUMERICSERV;
        rc = getaddrinfo(ep->host, ep->port, &hints, &found);
    }
    if (rc != 0 || found == NULL) {
        *why = rc != 0 ? gai_strerror(rc) : "no IPv4 address";
        return -1;
    }
    memcpy(&ep->addr, found->ai_addr, found->ai_addrlen);
    ep->addr_len = found->ai_addrlen;
    freeaddrinfo(found);
    return 0;
}

int endpoint_connect(const struct endpoint *ep)
{
    int sock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock < 0)
        return -1;
    /* On Linux SO_SNDTIMEO also bounds a blocking connect(). */
    struct timeval tv = {.tv_sec = SOCKET_TIMEOUT_S, .tv_usec = 0};
    if (setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
        setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0 ||
        connect(sock, (const struct sockaddr *)&ep->addr, ep->addr_len) != 0) {
        int saved = errno;
        close(sock);
        errno = saved;
        return -1;
    }
    return sock;
}

int send_all(int sock, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    while (len > 0) {
        ssize_t n = send(sock, p, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int recv_line(int sock, char *buf)
{
    size_t used = 0;
    for (;;) {
        ssize_t n = recv(sock, buf + used, LINE_MAX_BYTES - used, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return LINE_TIMEOUT;
            if (errno == ECONNRESET || errno == EPIPE)
                return LINE_EOF;
            return LINE_ERROR;
        }
        if (n == 0)
            return LINE_EOF;
        char *newline = memchr(buf + used, '\n', (size_t)n);
        used += (size_t)n;
        if (newline != NULL) {
            /* The receiver closes after its one answer, so nothing follows the line. */
            *newline = '\0';
            return LINE_OK;
        }
        if (used >= LINE_MAX_BYTES)
            return LINE_TOO_LONG;
    }
}
