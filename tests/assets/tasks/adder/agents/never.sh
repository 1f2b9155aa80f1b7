#!/bin/sh
# A scripted agent that leaves a half fix and never converges: the budget stops it, and its
# patch is judged anyway. Expected outcome: timed-out.
sed -i 's/return a - b/return a * b/' adder.go
while :; do
    echo "still trying"
    sleep 1
done
