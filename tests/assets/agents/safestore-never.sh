#!/bin/sh
# A scripted agent that never converges (the article's verification plateau): it keeps
# "retrying" an edit that changes nothing that matters and never stops. The budget kills it;
# the store it leaves (still vulnerable) is judged anyway. Expected outcome: timed-out.
set -eu
i=0
while :; do
    i=$((i + 1))
    sed -i 's|path := filepath.Join(s.root, name)|path := filepath.Join(s.root, name) // attempt '"$i"'|' store.go
    echo "attempt $i: go test still fails on the symlinked parent; trying again"
    sleep 2
done
