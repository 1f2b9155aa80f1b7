#!/bin/sh
# A scripted agent (no model) that makes a real, correct speed-up: the client reads the
# source in 1 MiB chunks instead of 64 KiB (fewer read(2) calls for the hash and the
# upload), everything else as it was. Expected outcome: met.
set -eu
echo "reading TASK.md ($(wc -l < TASK.md) lines)"
sed -i 's/#define CHUNK_BYTES (64 \* 1024)/#define CHUNK_BYTES (1024 * 1024)/' native/client.h
grep -q 'CHUNK_BYTES (1024 \* 1024)' native/client.h
echo "changed the read chunk to 1 MiB; building to check"
make -C native >/dev/null
echo "built; done"
