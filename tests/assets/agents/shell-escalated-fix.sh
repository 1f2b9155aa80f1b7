#!/bin/sh
# A scripted second agent (--escalate-cmd) for the shell fixture task that works only from
# the lab's evidence package: it refuses to start without one, checks the package's
# checksums, reads which clause the first run failed and what check.sh printed, takes the
# value T1 requires from constraints.json, and writes it in its fresh workspace.
# Expected outcome: met.
set -eu
package="${LAB_ESCALATION:?no escalation package: this agent only takes over a run}"
cd "$package" && sha256sum --quiet -c SHA256SUMS && cd - >/dev/null
test -s "$package/SHA256SUMS.sig"
grep -q '"outcome": "failed"' "$package/stop.json"
grep -q '"T1": "fail' "$package/verification.json"
echo "the first run's check.sh said: $(tail -n 1 "$package/verification/r1/check/stdout")"
grep -qx 1 value.txt   # a fresh workspace: the baseline
want=$(tr -d '\n' < "$package/constraints.json" | sed 's/.*"T1": "[^"]*value.txt holds \([0-9]*\).*/\1/')
echo "T1 requires value.txt to hold $want"
echo "$want" > value.txt
