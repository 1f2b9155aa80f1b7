/*
 * Events: one JSON object per line on stdout, flushed after each line, so a reader sees
 * every claim even if the client is killed later.  Keys are written in the order given,
 * "event" first, with the separators Python's json.dumps uses by default.
 */
#define _POSIX_C_SOURCE 200809L

#include "client.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

static void put_string(const char *s)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\') {
            putchar('\\');
            putchar(*p);
        } else if (*p < 0x20 || *p >= 0x7f) {
            /* Receiver text is untrusted: keep every line plain ASCII and valid JSON. */
            printf("\\u%04x", (unsigned)*p);
        } else {
            putchar(*p);
        }
    }
    putchar('"');
}

void emit(const char *event, ...)
{
    va_list ap;
    va_start(ap, event);
    fputs("{\"event\": ", stdout);
    put_string(event);
    for (;;) {
        const char *key = va_arg(ap, const char *);
        if (key == NULL)
            break;
        int kind = va_arg(ap, int);
        fputs(", ", stdout);
        put_string(key);
        fputs(": ", stdout);
        if (kind == 's')
            put_string(va_arg(ap, const char *));
        else
            printf("%" PRIu64, va_arg(ap, uint64_t));
    }
    va_end(ap);
    fputs("}\n", stdout);
    fflush(stdout);
}

int complete_ok(void)
{
    emit("complete", "status", 's', "ok", NULL);
    return 0;
}

int complete_failed(const char *reason)
{
    emit("complete", "status", 's', "failed", "reason", 's', reason, NULL);
    return 1;
}
