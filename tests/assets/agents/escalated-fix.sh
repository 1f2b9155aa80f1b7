#!/bin/sh
# A scripted second agent (--escalate-cmd) that works from the lab's evidence package: it
# refuses to start without one, checks the package's checksums, reads why the first run
# stopped and which clauses its attempts failed, and then makes the correct speed-up (the
# 1 MiB read chunk) in its fresh workspace. Expected outcome: met.
set -eu
package="${LAB_ESCALATION:?no escalation package: this agent only takes over a run}"
cd "$package" && sha256sum --quiet -c SHA256SUMS && cd - >/dev/null
test -s "$package/SHA256SUMS.sig"
echo "first run: $(tr -d '\n' < "$package/stop.json" | sed 's/.*"outcome": "\([a-z-]*\)".*/\1/')"
echo "attempted patches: $(ls "$package/patches" | tr '\n' ' ')"
grep -o '"C[1-6]"' "$package/verification.json" | sort | uniq -c | sed 's/^/failed in snapshots: /'
grep -q 'CHUNK_BYTES (64 \* 1024)' native/client.h   # a fresh workspace: the baseline
sed -i 's/#define CHUNK_BYTES (64 \* 1024)/#define CHUNK_BYTES (1024 * 1024)/' native/client.h
echo "the digest must be computed every time (C1 failed when it was cached); the read chunk is now 1 MiB"
