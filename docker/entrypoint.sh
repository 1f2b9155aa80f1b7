#!/bin/sh
# The lab image's entry point: record the capabilities this container really holds, then run
# the command. The lab's provenance reads LAB_CONTAINER_CAP_EFF (the CapEff mask, hex, as in
# /proc/self/status) instead of trusting what `docker run` was asked for.
set -eu
LAB_CONTAINER_CAP_EFF=$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status)
LAB_CONTAINER_CAP_BND=$(sed -n 's/^CapBnd:[[:space:]]*//p' /proc/self/status)
export LAB_CONTAINER_CAP_EFF LAB_CONTAINER_CAP_BND
exec "$@"
