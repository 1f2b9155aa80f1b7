#!/bin/sh
# A scripted agent whose result depends on the repetition (LAB_REPETITION, 1..N): odd
# repetitions make the correct speed-up, even ones the digest-skipping one. So k of N is
# neither 0 nor N.
here=$(dirname "$0")
if [ $((LAB_REPETITION % 2)) -eq 1 ]; then
    echo "repetition $LAB_REPETITION: the careful way"
    exec sh "$here/speedup.sh"
fi
echo "repetition $LAB_REPETITION: the quick way"
exec sh "$here/skip-digest.sh"
