#!/bin/sh
# Install exactly the Debian packages pinned in a lock file (lines "name=version").
#
#   sh docker/apt-install.sh docker/apt-packages.lock
#
# Every pinned version is checked against the archive before anything is installed, so a
# version the archive no longer serves stops the build with one sentence saying how to relock
# instead of a page of apt resolver output.
set -eu

lock=${1:?usage: apt-install.sh LOCKFILE}
here=$(dirname "$0")

# The same suites whatever the base image carried (see docker/debian.sources).
rm -f /etc/apt/sources.list
cp "$here/debian.sources" /etc/apt/sources.list.d/debian.sources
apt-get -q update >/dev/null

pins=$(grep -v '^[[:space:]]*#' "$lock" | grep -v '^[[:space:]]*$' || true)
[ -n "$pins" ] || { echo "$lock pins no package; run 'invoke image.lock' to create it." >&2; exit 1; }

# Packages already at their pinned version (from the base image) need nothing.
installed=$(dpkg-query -W -f='${db:Status-Abbrev}|${Package}=${Version}\n' | sed -n 's/^ii *|//p')
todo=$(printf '%s\n' "$pins" | grep -vxF "$installed" || true)

if [ -n "$todo" ]; then
    names=$(printf '%s\n' "$todo" | cut -d= -f1)
    # "name=version" for every version any configured suite serves.
    # shellcheck disable=SC2086
    served=$(apt-cache madison $names | awk -F'|' '{gsub(/ /, "", $1); gsub(/ /, "", $2); print $1 "=" $2}')
    missing=$(printf '%s\n' "$todo" | grep -vxF "$served" || true)
    if [ -n "$missing" ]; then
        list=$(printf '%s\n' "$missing" | head -n 5 | tr '\n' ' ' | sed 's/ $//')
        count=$(printf '%s\n' "$missing" | wc -l)
        echo "$lock pins $count version(s) the Debian archive no longer serves ($list); run 'invoke image.lock' to relock, then rebuild." >&2
        exit 1
    fi
    # shellcheck disable=SC2086
    apt-get -q install -y --no-install-recommends --allow-downgrades $todo >/dev/null
fi

# What the base carried beyond the lock stays, but is named so a reviewer can see it.
after=$(dpkg-query -W -f='${db:Status-Abbrev}|${Package}=${Version}\n' | sed -n 's/^ii *|//p')
wrong=$(printf '%s\n' "$pins" | grep -vxF "$after" || true)
if [ -n "$wrong" ]; then
    echo "apt did not install the pinned versions: $(printf '%s\n' "$wrong" | tr '\n' ' ')" >&2
    exit 1
fi
extra=$(printf '%s\n' "$after" | cut -d= -f1 | grep -vxF "$(printf '%s\n' "$pins" | cut -d= -f1)" || true)
if [ -n "$extra" ]; then
    echo "note: installed but not in $lock (from the base image): $(printf '%s\n' "$extra" | tr '\n' ' ')" >&2
fi

apt-get clean
rm -rf /var/lib/apt/lists/*
