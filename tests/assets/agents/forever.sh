#!/bin/sh
# A scripted agent that never finishes: it leaves a background process and loops. The
# budget must stop it, and nothing of it may outlive the repetition. Outcome: timed-out.
sleep 3600 &
echo "started a helper (pid $!)"
i=0
while :; do
    i=$((i + 1))
    echo "still thinking ($i)"
    sleep 1
done
