/*
 * backup-client: command line, the backup flow and the seeded behaviours.
 *
 *   backup-client --source PATH --receiver HOST:PORT [--behavior NAME]
 *                 [--spin-ms N] [--decoy HOST:PORT]
 *
 * Flow (docs/client-contract.md): hash the source, ask HAVE on one connection; on YES the
 * backup is already there; on NO upload with PUT on a new connection, retrying a dropped
 * transfer from byte 0 on a new connection, at most MAX_UPLOAD_ATTEMPTS times in all.
 * Exit status: 0 exactly when the last event claims success, 1 when it reports failure,
 * 2 for bad usage.
 */
#define _POSIX_C_SOURCE 200809L

#include "client.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXIT_USAGE 2
/* hash-storm hashes the whole source this many times per invocation. */
#define HASH_STORM_ROUNDS 256
#define DEFAULT_SPIN_MS 300u
#define REASON_BYTES 512

enum behavior {
    BASELINE,
    FALSE_SUCCESS,
    HASH_STORM,
    BUSY_SPIN,
    UNEXPECTED_EGRESS,
    CORRUPT_PAYLOAD,
    REDUNDANT_UPLOAD,
};

static const char *const BEHAVIOR_NAMES[] = {
    [BASELINE] = "baseline",
    [FALSE_SUCCESS] = "false-success",
    [HASH_STORM] = "hash-storm",
    [BUSY_SPIN] = "busy-spin",
    [UNEXPECTED_EGRESS] = "unexpected-egress",
    [CORRUPT_PAYLOAD] = "corrupt-payload",
    [REDUNDANT_UPLOAD] = "redundant-upload",
};
#define BEHAVIOR_COUNT (sizeof BEHAVIOR_NAMES / sizeof BEHAVIOR_NAMES[0])

struct options {
    const char *source;
    const char *receiver;
    const char *behavior_name;
    enum behavior behavior;
    const char *spin_ms_text;
    unsigned spin_ms;
    const char *decoy;
};

static const char USAGE[] =
    "usage: backup-client --source PATH --receiver HOST:PORT\n"
    "       [--behavior baseline|false-success|hash-storm|busy-spin|unexpected-egress|\n"
    "                   corrupt-payload|redundant-upload]\n"
    "       [--spin-ms N (busy-spin, default 300)] [--decoy HOST:PORT (unexpected-egress)]\n";

static int usage_error(const char *reason)
{
    char text[REASON_BYTES];
    snprintf(text, sizeof text, "usage: %s", reason);
    fputs(USAGE, stderr);
    complete_failed(text);
    return EXIT_USAGE;
}

/* Accepts "--name value" and "--name=value".  Returns 0, or -1 with a reason in why. */
static int parse_options(int argc, char **argv, struct options *opt, char *why, size_t why_len)
{
    memset(opt, 0, sizeof *opt);
    opt->behavior = BASELINE;
    opt->spin_ms = DEFAULT_SPIN_MS;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *value = NULL;
        char name[32];
        const char *eq = strchr(arg, '=');
        size_t name_len = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
        if (strncmp(arg, "--", 2) != 0 || name_len >= sizeof name) {
            snprintf(why, why_len, "unexpected argument '%.64s'", arg);
            return -1;
        }
        memcpy(name, arg, name_len);
        name[name_len] = '\0';
        const char **slot = NULL;
        if (strcmp(name, "--source") == 0)
            slot = &opt->source;
        else if (strcmp(name, "--receiver") == 0)
            slot = &opt->receiver;
        else if (strcmp(name, "--behavior") == 0)
            slot = &opt->behavior_name;
        else if (strcmp(name, "--spin-ms") == 0)
            slot = &opt->spin_ms_text;
        else if (strcmp(name, "--decoy") == 0)
            slot = &opt->decoy;
        if (slot == NULL) {
            snprintf(why, why_len, "unknown option '%s'", name);
            return -1;
        }
        if (eq != NULL) {
            value = eq + 1;
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            snprintf(why, why_len, "option '%s' needs a value", name);
            return -1;
        }
        if (*slot != NULL) {
            snprintf(why, why_len, "option '%s' given twice", name);
            return -1;
        }
        if (*value == '\0') {
            snprintf(why, why_len, "option '%s' has an empty value", name);
            return -1;
        }
        *slot = value;
    }

    if (opt->source == NULL || opt->receiver == NULL) {
        snprintf(why, why_len, "--source PATH and --receiver HOST:PORT are required");
        return -1;
    }
    if (opt->behavior_name != NULL) {
        size_t b = 0;
        while (b < BEHAVIOR_COUNT && strcmp(BEHAVIOR_NAMES[b], opt->behavior_name) != 0)
            b++;
        if (b == BEHAVIOR_COUNT) {
            snprintf(why, why_len, "unknown behavior '%.64s'", opt->behavior_name);
            return -1;
        }
        opt->behavior = (enum behavior)b;
    }
    if (opt->spin_ms_text != NULL) {
        size_t len = strlen(opt->spin_ms_text);
        if (len > 7 || strspn(opt->spin_ms_text, "0123456789") != len) {
            snprintf(why, why_len, "--spin-ms must be a whole number of milliseconds");
            return -1;
        }
        opt->spin_ms = (unsigned)strtoul(opt->spin_ms_text, NULL, 10);
    }
    if (opt->behavior == UNEXPECTED_EGRESS && opt->decoy == NULL) {
        snprintf(why, why_len, "behavior unexpected-egress needs --decoy HOST:PORT");
        return -1;
    }
    return 0;
}

/* unexpected-egress: contact an endpoint nobody configured as the receiver.  Its outcome is
 * deliberately not reported: the lab must find this from independent evidence. */
static void contact_decoy(struct endpoint *decoy)
{
    const char *why = NULL;
    if (endpoint_resolve(decoy, &why) != 0)
        return;
    int sock = endpoint_connect(decoy);
    if (sock < 0)
        return;
    static const char hello[] = "HELLO\n";
    (void)send_all(sock, hello, sizeof hello - 1);
    close(sock);
}

enum have_answer { HAVE_YES, HAVE_NO, HAVE_FAILED };

static enum have_answer ask_have(const struct endpoint *receiver, const char *hex,
                                 uint64_t size, char *reason, size_t reason_len)
{
    int sock = endpoint_connect(receiver);
    if (sock < 0) {
        snprintf(reason, reason_len, "HAVE: cannot connect to receiver %s:%s: %s",
                 receiver->host, receiver->port, strerror(errno));
        return HAVE_FAILED;
    }
    char line[LINE_MAX_BYTES];
    snprintf(line, sizeof line, "HAVE %s %" PRIu64 "\n", hex, size);
    enum have_answer answer = HAVE_FAILED;
    if (send_all(sock, line, strlen(line)) != 0) {
        snprintf(reason, reason_len, "HAVE: connection failed while sending: %s",
                 strerror(errno));
    } else {
        int got = recv_line(sock, line);
        if (got != LINE_OK)
            snprintf(reason, reason_len, "HAVE: no answer from receiver (%s)",
                     got == LINE_TIMEOUT ? "timed out" : got == LINE_TOO_LONG ? "line too long"
                                                                            : "connection closed");
        else if (strcmp(line, "YES") == 0)
            answer = HAVE_YES;
        else if (strcmp(line, "NO") == 0)
            answer = HAVE_NO;
        else if (strncmp(line, "ERR ", 4) == 0)
            snprintf(reason, reason_len, "HAVE: receiver answered %.200s", line);
        else
            snprintf(reason, reason_len, "HAVE: unexpected answer '%.64s'", line);
    }
    close(sock);
    return answer;
}

enum upload_outcome { UPLOAD_COMMITTED, UPLOAD_RETRY, UPLOAD_FATAL };

/* An ERR code that means the transfer did not arrive whole; a new attempt may succeed.
 * Everything else (digest-mismatch, too-large, bad-request, unknown codes) is final. */
static int retryable_error(const char *line)
{
    const char *code = line + 4; /* after "ERR " */
    size_t len = strcspn(code, " ");
    return (len == 7 && strncmp(code, "timeout", len) == 0) ||
           (len == 13 && strncmp(code, "short-payload", len) == 0);
}

static enum upload_outcome upload_once(const struct endpoint *receiver, const char *path,
                                       const char *hex, uint64_t size, int64_t corrupt_at,
                                       unsigned attempt, char *reason, size_t reason_len)
{
    uint64_t sent = 0;
    const char *result = "dropped";
    enum upload_outcome outcome = UPLOAD_RETRY;
    int sock = endpoint_connect(receiver);
    if (sock < 0) {
        snprintf(reason, reason_len, "PUT: cannot connect to receiver %s:%s: %s",
                 receiver->host, receiver->port, strerror(errno));
        emit("upload", "attempt", 'u', (uint64_t)attempt, "result", 's', "connect-failed",
             "payload_bytes_sent", 'u', sent, NULL);
        return UPLOAD_RETRY;
    }
    char line[LINE_MAX_BYTES];
    snprintf(line, sizeof line, "PUT %s %" PRIu64 "\n", hex, size);
    int payload = PAYLOAD_DROPPED;
    if (send_all(sock, line, strlen(line)) == 0)
        payload = send_payload(sock, path, size, corrupt_at, &sent);
    if (payload == PAYLOAD_SOURCE) {
        snprintf(reason, reason_len, "PUT: source unreadable or changed since it was hashed");
        result = "source-error";
        outcome = UPLOAD_FATAL;
    } else {
        /* Even after a failed send the receiver may have answered (e.g. ERR too-large). */
        int got = recv_line(sock, line);
        if (got == LINE_OK && strcmp(line, "OK") == 0 && payload == PAYLOAD_SENT) {
            result = "ok";
            outcome = UPLOAD_COMMITTED;
        } else if (got == LINE_OK && strncmp(line, "ERR ", 4) == 0) {
            snprintf(reason, reason_len, "PUT: receiver answered %.200s", line);
            result = "rejected";
            outcome = retryable_error(line) ? UPLOAD_RETRY : UPLOAD_FATAL;
        } else if (got == LINE_OK || got == LINE_TOO_LONG) {
            snprintf(reason, reason_len, "PUT: unexpected answer '%.64s'",
                     got == LINE_OK ? line : "(line too long)");
            result = "protocol-error";
            outcome = UPLOAD_FATAL;
        } else {
            snprintf(reason, reason_len, "PUT: connection dropped before OK (%s)",
                     got == LINE_TIMEOUT ? "timed out" : "closed or reset");
        }
    }
    close(sock);
    emit("upload", "attempt", 'u', (uint64_t)attempt, "result", 's', result,
         "payload_bytes_sent", 'u', sent, NULL);
    return outcome;
}

int main(int argc, char **argv)
{
    /* A receiver that closes early must not kill the client: it must report and retry. */
    signal(SIGPIPE, SIG_IGN);

    struct options opt;
    char reason[REASON_BYTES];
    if (parse_options(argc, argv, &opt, reason, sizeof reason) != 0)
        return usage_error(reason);
    struct endpoint receiver, decoy;
    const char *why = NULL;
    if (endpoint_parse(opt.receiver, &receiver, &why) != 0) {
        snprintf(reason, sizeof reason, "--receiver '%.64s': %s", opt.receiver, why);
        return usage_error(reason);
    }
    if (opt.decoy != NULL && endpoint_parse(opt.decoy, &decoy, &why) != 0) {
        snprintf(reason, sizeof reason, "--decoy '%.64s': %s", opt.decoy, why);
        return usage_error(reason);
    }
    emit("start", "client", 's', "backup-client", "contract_version", 'u', (uint64_t)1,
         "behavior", 's', BEHAVIOR_NAMES[opt.behavior], NULL);

    if (opt.behavior == UNEXPECTED_EGRESS)
        contact_decoy(&decoy);

    unsigned char digest[SHA256_LEN];
    char hex[SHA256_HEX_LEN + 1];
    uint64_t size = 0;
    int rounds = opt.behavior == HASH_STORM ? HASH_STORM_ROUNDS : 1;
    for (int r = 0; r < rounds; r++) {
        if (hash_file(opt.source, digest, &size) != 0) {
            snprintf(reason, sizeof reason, "cannot read source '%.200s': %s", opt.source,
                     strerror(errno));
            return complete_failed(reason);
        }
        digest_to_hex(digest, hex);
        emit("hashed", "sha256", 's', hex, "size", 'u', size, NULL);
    }

    if (opt.behavior == FALSE_SUCCESS)
        return complete_ok(); /* the seeded lie: no connection, no upload */

    if (opt.behavior == BUSY_SPIN)
        busy_wait(opt.spin_ms);

    if (endpoint_resolve(&receiver, &why) != 0) {
        snprintf(reason, sizeof reason, "cannot resolve receiver host '%s': %s", receiver.host,
                 why);
        return complete_failed(reason);
    }

    enum have_answer answer = ask_have(&receiver, hex, size, reason, sizeof reason);
    if (answer == HAVE_FAILED)
        return complete_failed(reason);
    emit("have", "answer", 's', answer == HAVE_YES ? "YES" : "NO", NULL);
    if (answer == HAVE_YES && opt.behavior != REDUNDANT_UPLOAD)
        return complete_ok();

    /* corrupt-payload flips the middle byte; an empty source has no byte to flip. */
    int64_t corrupt_at = opt.behavior == CORRUPT_PAYLOAD && size > 0 ? (int64_t)(size / 2) : -1;
    for (unsigned attempt = 1; attempt <= MAX_UPLOAD_ATTEMPTS; attempt++) {
        enum upload_outcome outcome =
            upload_once(&receiver, opt.source, hex, size, corrupt_at, attempt, reason,
                        sizeof reason);
        if (outcome == UPLOAD_COMMITTED)
            return complete_ok();
        if (outcome == UPLOAD_FATAL)
            return complete_failed(reason);
    }
    char final[REASON_BYTES + 64];
    snprintf(final, sizeof final, "gave up after %d upload attempts; last: %s",
             MAX_UPLOAD_ATTEMPTS, reason);
    return complete_failed(final);
}
