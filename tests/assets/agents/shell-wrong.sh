#!/bin/sh
# A scripted first agent for the shell fixture task (tests/assets/tasks/shell) that writes
# the wrong value and exits 0, as if it had fixed it. Expected outcome: failed (T1).
echo 3 > value.txt
echo "value.txt now holds 3; done"
