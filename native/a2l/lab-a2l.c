/*
 * lab-a2l: the "addr2line" perf report starts, installed under that name in a directory the
 * lab puts first on perf report's PATH (lab/collectors/addr2line.py).
 *
 *   addr2line -e DSO -i -f          (perf 6.1's exact form; any other form is handed on)
 *
 * perf report starts one addr2line per shared object of every report, and binutils'
 * addr2line spends about 55 ms reading libc's debug information before its first answer,
 * every time. The lab keeps one addr2line per shared object running for the whole run and
 * answers over the Unix socket named by LAB_A2L_SOCKET. This program connects to it, sends
 * the shared object's path (NUL-terminated), then copies perf's requests to the socket and
 * the answers back, byte for byte, until the lab closes the connection. The answers are
 * binutils' own: the lab only frames them.
 *
 * When LAB_A2L_SOCKET is unset, the socket cannot be reached or the arguments are not
 * perf's form, it executes LAB_A2L_REAL (binutils' addr2line) with the same arguments, so
 * perf gets what it would have got without the lab.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int hand_on(char **argv)
{
    const char *real = getenv("LAB_A2L_REAL");
    if (real == NULL || real[0] != '/')
        real = "/usr/bin/addr2line";
    execv(real, argv);
    fprintf(stderr, "lab-a2l: cannot execute %s: %s\n", real, strerror(errno));
    return 127;
}

static int write_all(int fd, const char *data, size_t size)
{
    while (size > 0) {
        ssize_t done = write(fd, data, size);
        if (done < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        data += done;
        size -= (size_t)done;
    }
    return 0;
}

static int connect_to(const char *path)
{
    struct sockaddr_un address;
    memset(&address, 0, sizeof address);
    address.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof address.sun_path)
        return -1;
    strcpy(address.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* copy perf's requests (stdin) to the lab and its answers to perf (stdout) until the lab
 * closes the connection; 0 on a clean end */
static int relay(int sock)
{
    char buffer[65536];
    struct pollfd fds[2] = {{.fd = STDIN_FILENO, .events = POLLIN}, {.fd = sock, .events = POLLIN}};
    int input_open = 1;
    for (;;) {
        fds[0].fd = input_open ? STDIN_FILENO : -1;
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return 1;
        }
        if (input_open && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t got = read(STDIN_FILENO, buffer, sizeof buffer);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0) {
                input_open = 0; /* perf is done: the lab ends the connection */
                shutdown(sock, SHUT_WR);
            } else if (write_all(sock, buffer, (size_t)got) != 0) {
                return 1;
            }
        }
        if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t got = read(sock, buffer, sizeof buffer);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0)
                return got == 0 ? 0 : 1;
            if (write_all(STDOUT_FILENO, buffer, (size_t)got) != 0)
                return 1;
        }
    }
}

int main(int argc, char **argv)
{
    const char *socket_path = getenv("LAB_A2L_SOCKET");
    if (socket_path == NULL || argc != 5 || strcmp(argv[1], "-e") != 0 ||
        strcmp(argv[3], "-i") != 0 || strcmp(argv[4], "-f") != 0)
        return hand_on(argv);
    int sock = connect_to(socket_path);
    if (sock < 0)
        return hand_on(argv);
    signal(SIGPIPE, SIG_IGN); /* a closed end is an error return, not a silent death */
    if (write_all(sock, argv[2], strlen(argv[2]) + 1) != 0) {
        close(sock);
        return hand_on(argv);
    }
    int status = relay(sock);
    close(sock);
    return status;
}
