/*
 * lab-listen: the listening sockets of a pass's receiver and decoy, made inside the pass's
 * network namespace and handed back to the lab (lab/sandbox/netns.py).
 *
 *   nsenter --net=/run/netns/NS -- lab-listen FD HOST:PORT [HOST:PORT ...]
 *
 * For each HOST:PORT (an IPv4 address; port 0 asks the kernel for an ephemeral one) it
 * binds a TCP socket with SO_REUSEADDR and listens with a backlog of 128, then sends every
 * descriptor in one message over the Unix socket FD (SCM_RIGHTS, payload "ok") and exits 0.
 * On any failure it names the step and the address on stderr and exits 1; nothing is sent.
 *
 * util-linux nsenter enters the namespace; this program only binds, listens and sends.
 * It replaces a Python helper whose interpreter start cost about 20 ms of CPU per pass.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

/* the most sockets one call makes (the lab asks for two, or one per allowed endpoint) */
#define MAX_SOCKETS 16

static int parse_fd(const char *text)
{
    char *end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || value < 0 || value > INT_MAX)
        return -1;
    return (int)value;
}

static int parse_address(const char *text, struct sockaddr_in *out)
{
    char host[64];
    const char *colon = strrchr(text, ':');
    if (colon == NULL || (size_t)(colon - text) >= sizeof host)
        return -1;
    memcpy(host, text, (size_t)(colon - text));
    host[colon - text] = '\0';
    char *end = NULL;
    errno = 0;
    long port = strtol(colon + 1, &end, 10);
    if (errno != 0 || end == colon + 1 || *end != '\0' || port < 0 || port > 65535)
        return -1;
    memset(out, 0, sizeof *out);
    out->sin_family = AF_INET;
    out->sin_port = htons((unsigned short)port);
    return inet_pton(AF_INET, host, &out->sin_addr) == 1 ? 0 : -1;
}

static int listening_socket(const char *text)
{
    struct sockaddr_in address;
    if (parse_address(text, &address) != 0) {
        fprintf(stderr, "lab-listen: %s is not an IPv4 HOST:PORT\n", text);
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        fprintf(stderr, "lab-listen: socket for %s: %s\n", text, strerror(errno));
        return -1;
    }
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *)&address, sizeof address) != 0 || listen(fd, 128) != 0) {
        fprintf(stderr, "lab-listen: bind or listen at %s: %s\n", text, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

int main(int argc, char **argv)
{
    int count = argc - 2;
    int ctl = argc >= 3 ? parse_fd(argv[1]) : -1;
    if (ctl < 0 || count < 1 || count > MAX_SOCKETS) {
        fprintf(stderr, "usage: lab-listen FD HOST:PORT [HOST:PORT ...] (at most %d)\n",
                MAX_SOCKETS);
        return 2;
    }
    int fds[MAX_SOCKETS];
    for (int i = 0; i < count; i++) {
        fds[i] = listening_socket(argv[i + 2]);
        if (fds[i] < 0)
            return 1;
    }
    union {
        char buf[CMSG_SPACE(sizeof(int) * MAX_SOCKETS)];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    char payload[] = "ok";
    struct iovec iov = {.iov_base = payload, .iov_len = 2};
    struct msghdr msg = {0};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.buf;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)count);
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)count);
    memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * (size_t)count);
    if (sendmsg(ctl, &msg, 0) != 2) {
        fprintf(stderr, "lab-listen: sending the descriptors: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}
