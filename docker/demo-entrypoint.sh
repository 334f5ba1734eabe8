#!/bin/sh
# Entrypoint of the demo image. The report goes to a bind-mounted host folder (/out), which
# Docker creates root-owned when it does not exist yet. Started as root, this runs the command
# as an unprivileged user who can write the report:
#   GTPO_UID[:GTPO_GID] when set (the host user's ids: the report is theirs);
#   else the owner of an existing, non-root-owned /out (mkdir it on the host first);
#   else uid 10001 (the image's `gtpo` user), to whom a fresh, empty /out is handed.
# Started as any other user, or with GTPO_UID=0, it runs the command as is.
set -eu

OUT=${GTPO_DEMO_OUT_DIR:-/out}
uid=${GTPO_UID:-}
gid=${GTPO_GID:-}

if [ "$(id -u)" = 0 ] && [ "$uid" != 0 ]; then
  mkdir -p "$OUT"
  if [ -z "$uid" ] && [ "$(stat -c %u "$OUT")" != 0 ]; then
    uid=$(stat -c %u "$OUT")
    gid=${gid:-$(stat -c %g "$OUT")}
  fi
  uid=${uid:-10001}
  gid=${gid:-$uid}
  # Only a folder Docker just made (root-owned and empty) changes hands, never user data.
  if [ "$(stat -c %u "$OUT")" = 0 ] && [ -z "$(ls -A "$OUT")" ]; then
    chown "$uid:$gid" "$OUT"
  fi
  export HOME=/tmp
  run="setpriv --reuid=$uid --regid=$gid --clear-groups --"
else
  uid=$(id -u)
  run=
fi

# Fail in one line instead of a traceback at the end of the run. ($run is split on purpose.)
# shellcheck disable=SC2016  # $1 is expanded by the inner sh
if ! $run sh -c 'mkdir -p "$1" && test -w "$1"' sh "$OUT"; then
  echo "gtpo demo: the report folder $OUT (a host volume) is not writable by uid $uid;" \
    "set GTPO_UID/GTPO_GID to its owner's ids or make it writable" >&2
  exit 1
fi
exec $run "$@"
