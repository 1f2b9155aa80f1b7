/*
 * hash_file: SHA-256 of a whole file with OpenSSL EVP.
 *
 * The source is read with plain open/read/close so that strace and bpftrace can count the
 * logical bytes the client reads from it; every call reads the whole file once.
 */
#define _POSIX_C_SOURCE 200809L

#include "client.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

PROBED int hash_file(const char *path, unsigned char out_digest[SHA256_LEN], uint64_t *size)
{
    static unsigned char buf[CHUNK_BYTES];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;

    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx == NULL || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(ctx);
        close(fd);
        errno = EIO;
        return -1;
    }

    uint64_t total = 0;
    int failed_errno = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            failed_errno = errno;
            break;
        }
        if (n == 0)
            break;
        if (EVP_DigestUpdate(ctx, buf, (size_t)n) != 1) {
            failed_errno = EIO;
            break;
        }
        total += (uint64_t)n;
    }

    unsigned int len = 0;
    if (failed_errno == 0 && (EVP_DigestFinal_ex(ctx, out_digest, &len) != 1 || len != SHA256_LEN))
        failed_errno = EIO;
    EVP_MD_CTX_free(ctx);
    close(fd);
    if (failed_errno != 0) {
        errno = failed_errno;
        return -1;
    }
    *size = total;
    return 0;
}

void digest_to_hex(const unsigned char digest[SHA256_LEN], char hex[SHA256_HEX_LEN + 1])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < SHA256_LEN; i++) {
        hex[2 * i] = digits[digest[i] >> 4];
        hex[2 * i + 1] = digits[digest[i] & 0x0f];
    }
    hex[SHA256_HEX_LEN] = '\0';
}
