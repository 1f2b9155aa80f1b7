#!/bin/sh
# Runs the LAB_REPETITION-th of the scripts it is given (each a scripted agent), with
# LAB_DIR as the scripts' argument: one campaign exercises several agents in turn.
# Usage: sh by-repetition.sh LAB_DIR AGENT1.sh AGENT2.sh ...
lab=$1; shift
script=$(eval echo "\${$LAB_REPETITION}")
echo "repetition $LAB_REPETITION runs $(basename "$script")"
exec sh "$script" "$lab"
