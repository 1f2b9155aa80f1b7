#!/bin/sh
# A scripted agent whose workspace wanders (the second article: "some retries regressed a
# case that had passed"): it breaks the build, then makes the correct speed-up, then skips
# the digest (C1 and C6 fail: a regression), then goes back to the correct speed-up. Each
# state stays a second, so the lab's poll snapshots every one of them.
# Usage: sh wander.sh SKIP_DIGEST_SCRIPT. Expected outcome: met; trajectory: s1
# build-failed, s2 all pass, s3 C1 and C6 fail (regression), s4 all pass.
set -eu
skip=$1
echo "#error not C" >> native/client.h
echo "step 1: broke the build"; sleep 1
git checkout -q native/client.h
sed -i 's/#define CHUNK_BYTES (64 \* 1024)/#define CHUNK_BYTES (1024 * 1024)/' native/client.h
echo "step 2: the 1 MiB read chunk"; sleep 1
sh "$skip" >/dev/null
echo "step 3: skipped the digest"; sleep 1
git checkout -q native/hash.c
echo "step 4: back to the 1 MiB read chunk only"; sleep 1
