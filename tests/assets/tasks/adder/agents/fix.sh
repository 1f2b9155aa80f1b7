#!/bin/sh
# A scripted agent for the test-only adder task: fixes Add. Expected outcome: met.
set -eu
echo "reading TASK.md ($(wc -l < TASK.md) lines)"
sed -i 's/return a - b/return a + b/' adder.go
grep -q 'return a + b' adder.go
echo "fixed Add"
