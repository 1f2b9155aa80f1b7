#!/bin/sh
# A scripted agent that never stops on its own: the correct speed-up (or, given a script,
# what that script does: skip-digest.sh's wrong answer, say), then a comment every two
# seconds, forever (the second article: "one editor cycle consumed twenty tool calls
# without producing a diff"). Only --stop-on-plateau K (or the budget) ends it.
# Expected outcome with --stop-on-plateau 2: plateaued (its result met the task; with
# skip-digest.sh it failed C1 and C6, and --escalate-cmd hands it to a second agent).
set -eu
if [ $# -gt 0 ]; then
    sh "$1"
    echo "attempt 1: $(basename "$1")"
else
    sed -i 's/#define CHUNK_BYTES (64 \* 1024)/#define CHUNK_BYTES (1024 * 1024)/' native/client.h
    echo "attempt 1: the 1 MiB read chunk"
fi
n=1
while :; do
    sleep 2
    n=$((n + 1))
    echo "/* attempt $n: still thinking */" >> native/client.c
    echo "attempt $n: a comment"
done
