/*
 * send_payload: the upload body of a PUT, read from the source from byte 0 on every call
 * (each upload attempt restarts from the beginning on a new connection).
 */
#define _POSIX_C_SOURCE 200809L

#include "client.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

PROBED int send_payload(int sock, const char *path, uint64_t size, int64_t corrupt_at,
                        uint64_t *sent)
{
    static unsigned char buf[CHUNK_BYTES];
    *sent = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return PAYLOAD_SOURCE;

    int result = PAYLOAD_SENT;
    uint64_t offset = 0;
    while (offset < size) {
        uint64_t want = size - offset;
        if (want > sizeof buf)
            want = sizeof buf;
        ssize_t n = read(fd, buf, (size_t)want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            /* unreadable, or shorter than when it was hashed: the source changed */
            result = PAYLOAD_SOURCE;
            break;
        }
        if (corrupt_at >= 0 && (uint64_t)corrupt_at >= offset &&
            (uint64_t)corrupt_at < offset + (uint64_t)n)
            buf[(uint64_t)corrupt_at - offset] ^= 0xff;
        if (send_all(sock, buf, (size_t)n) != 0) {
            result = PAYLOAD_DROPPED;
            break;
        }
        offset += (uint64_t)n;
        *sent = offset;
    }
    int saved = errno;
    close(fd);
    errno = saved;
    return result;
}
