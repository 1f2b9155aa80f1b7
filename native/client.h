/*
 * backup-client: shared declarations.
 *
 * The client hashes a source file, asks the receiver whether it already holds that digest
 * (HAVE), and uploads it (PUT) only if not.  See docs/client-contract.md (command line,
 * events, exit status) and docs/protocol.md (wire protocol v1).
 *
 * hash_file, send_payload and busy_wait are the functions the lab's probes attach uprobes
 * to, so they keep external linkage, stable unstripped names and are never inlined or
 * cloned (a clone such as hash_file.constprop.0 would take the calls and the probe would
 * count nothing).
 */
#ifndef BACKUP_CLIENT_H
#define BACKUP_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#if defined(__clang__)
#define PROBED __attribute__((noinline, used))
#else
/* noipa: no inlining, cloning, identical-code folding or IPA-driven signature changes. */
#define PROBED __attribute__((noinline, noipa, used))
#endif

#define SHA256_LEN 32
#define SHA256_HEX_LEN 64
/* Every protocol line, newline included, is at most this long (docs/protocol.md). */
#define LINE_MAX_BYTES 256
/* Source reads and payload sends move data in chunks of this size. */
#define CHUNK_BYTES (64 * 1024)
/* Upload attempts when a transfer is dropped (public contract v1). */
#define MAX_UPLOAD_ATTEMPTS 3
/* Socket send/receive (and connect) timeout, so the client never hangs forever. */
#define SOCKET_TIMEOUT_S 30

/* ---- hash.c ---------------------------------------------------------------------- */

/* SHA-256 of the whole file at path, read with read(2) in CHUNK_BYTES chunks.
 * Returns 0 and fills out_digest and *size, or -1 with errno set (EIO for OpenSSL). */
PROBED int hash_file(const char *path, unsigned char out_digest[SHA256_LEN], uint64_t *size);

void digest_to_hex(const unsigned char digest[SHA256_LEN], char hex[SHA256_HEX_LEN + 1]);

/* ---- payload.c ------------------------------------------------------------------- */

enum payload_result {
    PAYLOAD_SENT = 0,     /* all size bytes were handed to the socket */
    PAYLOAD_DROPPED = 1,  /* the connection failed while sending (EPIPE, ECONNRESET, ...) */
    PAYLOAD_SOURCE = 2,   /* the source could not be read, or is shorter than size */
};

/* Send the first size bytes of the file at path on sock, reading it from byte 0.
 * corrupt_at >= 0 flips every bit of the byte at that offset (seeded corrupt-payload).
 * *sent receives the number of payload bytes the socket accepted. */
PROBED int send_payload(int sock, const char *path, uint64_t size, int64_t corrupt_at,
                        uint64_t *sent);

/* ---- spin.c ---------------------------------------------------------------------- */

/* Spin on the CPU for ms milliseconds of CLOCK_MONOTONIC time, never sleeping.
 * Returns the number of loop iterations (so the loop cannot be optimised away). */
PROBED uint64_t busy_wait(unsigned ms);

/* ---- net.c ----------------------------------------------------------------------- */

struct endpoint {
    char host[LINE_MAX_BYTES];
    char port[8];
    struct sockaddr_storage addr;
    socklen_t addr_len;
};

/* Split "HOST:PORT" (port 1-65535).  Returns 0, or -1 with a reason in why. */
int endpoint_parse(const char *text, struct endpoint *ep, const char **why);
/* Resolve ep->host to an IPv4 address with getaddrinfo.  Returns 0, or -1 with why. */
int endpoint_resolve(struct endpoint *ep, const char **why);
/* socket() + connect() with timeouts set.  Returns the descriptor, or -1 with errno set. */
int endpoint_connect(const struct endpoint *ep);

/* Write all len bytes (MSG_NOSIGNAL).  Returns 0, or -1 with errno set. */
int send_all(int sock, const void *buf, size_t len);

enum line_result {
    LINE_OK = 0,        /* a complete line, without its newline, is in buf */
    LINE_EOF = 1,       /* the peer closed (or reset) before a complete line */
    LINE_TIMEOUT = 2,   /* no complete line within SOCKET_TIMEOUT_S */
    LINE_TOO_LONG = 3,  /* LINE_MAX_BYTES without a newline */
    LINE_ERROR = 4,     /* any other receive error; errno is set */
};

/* Read one "\n"-terminated answer line into buf (at least LINE_MAX_BYTES bytes). */
int recv_line(int sock, char *buf);

/* ---- events.c -------------------------------------------------------------------- */

/* One JSON object per line on stdout, flushed at once.  Arguments are (key, kind, value)
 * triples ended by NULL, kind 's' for a string (const char *) or 'u' for uint64_t. */
void emit(const char *event, ...);
/* The final event; returns the exit status that goes with it (0 ok, 1 failed). */
int complete_ok(void);
int complete_failed(const char *reason);

#endif
