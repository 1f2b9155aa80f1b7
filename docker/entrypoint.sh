#!/bin/sh
# The lab image's entry point: record the capabilities this container really holds, then run
# the command. The lab's provenance reads LAB_CONTAINER_CAP_EFF (the CapEff mask, hex, as in
# /proc/self/status) instead of trusting what `docker run` was asked for.
#
# In a Kubernetes Indexed Job (deploy/kubernetes/shards-job.yaml) Kubernetes sets
# JOB_COMPLETION_INDEX (0 … N-1) and the Job sets LAB_SHARD_COUNT (N): the command gets
# `--shard INDEX+1/N`, and `--run-id LAB_RUN_ID` when that is set, so every pod runs its own
# share of the run and every shard records the same run id.
set -eu
LAB_CONTAINER_CAP_EFF=$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status)
LAB_CONTAINER_CAP_BND=$(sed -n 's/^CapBnd:[[:space:]]*//p' /proc/self/status)
export LAB_CONTAINER_CAP_EFF LAB_CONTAINER_CAP_BND
if [ -n "${LAB_SHARD_COUNT:-}" ]; then
    case "${JOB_COMPLETION_INDEX:-}" in
    '' | *[!0-9]*)
        echo "entrypoint: LAB_SHARD_COUNT is set but JOB_COMPLETION_INDEX is '${JOB_COMPLETION_INDEX:-}', not a number; run the shards as an Indexed Job (completionMode: Indexed)." >&2
        exit 2
        ;;
    esac
    case "$LAB_SHARD_COUNT" in
    '' | *[!0-9]*)
        echo "entrypoint: LAB_SHARD_COUNT is '$LAB_SHARD_COUNT', not a number; set it to the Job's completions." >&2
        exit 2
        ;;
    esac
    set -- "$@" --shard "$((JOB_COMPLETION_INDEX + 1))/$LAB_SHARD_COUNT"
    if [ -n "${LAB_RUN_ID:-}" ]; then
        set -- "$@" --run-id "$LAB_RUN_ID"
    fi
fi
exec "$@"
