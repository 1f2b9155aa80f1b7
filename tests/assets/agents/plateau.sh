#!/bin/sh
# A scripted agent that plateaus: the correct speed-up first, then three edits that change
# the workspace but nothing the contract judges (a comment each time), a second apart.
# Expected outcome: met; trajectory: s1 all pass (new passes), s2-s4 no new pass: a plateau
# at s4 (three judged snapshots in a row without a new passing clause).
set -eu
sed -i 's/#define CHUNK_BYTES (64 \* 1024)/#define CHUNK_BYTES (1024 * 1024)/' native/client.h
echo "attempt 1: the 1 MiB read chunk"; sleep 1
for n in 2 3 4; do
    echo "/* attempt $n: still thinking */" >> native/client.c
    echo "attempt $n: a comment"; sleep 1
done
