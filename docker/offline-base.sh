#!/bin/sh
# Build a minimal Debian base image (python3, venv, pip, CA certificates) from Debian packages
# alone and load it with `docker import`, for hosts that cannot pull from an image registry
# (air-gapped clusters, CI runners behind a proxy). Every Dockerfile in docker/ takes
# `--build-arg BASE_IMAGE=<the tag printed at the end>`.
#
#   sudo docker/offline-base.sh [--tag gtpo-base:bookworm] [--suite bookworm]
#                               [--mirror http://deb.debian.org/debian] [--ca-bundle FILE]
#
# --ca-bundle FILE adds FILE (PEM, one or more certificates) to the image's trust store, for
# networks whose TLS goes through an intercepting proxy; the image's pip then verifies against
# the system store (PIP_CERT), which then holds that CA.
# Needs root (debootstrap, chroot) and debootstrap (apt-get install debootstrap).
set -eu

TAG=${GTPO_BASE_TAG:-gtpo-base:bookworm}
SUITE=${GTPO_BASE_SUITE:-bookworm}            # bookworm: python3 is 3.11 (the project's CI)
MIRROR=${GTPO_BASE_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${GTPO_BASE_SECURITY_MIRROR:-}
CA_BUNDLE=${GTPO_BASE_CA_BUNDLE:-}
PACKAGES=python3,python3-venv,python3-pip,ca-certificates

usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }

while [ $# -gt 0 ]; do
  case "$1" in
    --tag) TAG=$2; shift 2 ;;
    --suite) SUITE=$2; shift 2 ;;
    --mirror) MIRROR=$2; shift 2 ;;
    --security-mirror) SECURITY_MIRROR=$2; shift 2 ;;
    --ca-bundle) CA_BUNDLE=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "offline-base.sh: unknown argument $1" >&2; usage 2 >&2 ;;
  esac
done
# Security updates come from the sibling archive of the main mirror unless told otherwise.
[ -n "$SECURITY_MIRROR" ] || SECURITY_MIRROR="${MIRROR%/debian}/debian-security"

if [ "$(id -u)" != 0 ]; then
  echo "offline-base.sh: run as root (debootstrap and chroot need it)" >&2; exit 1
fi
for tool in debootstrap docker tar; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "offline-base.sh: $tool not found (apt-get install -y debootstrap docker.io)" >&2
    exit 1
  }
done
if [ -n "$CA_BUNDLE" ] && ! grep -q 'BEGIN CERTIFICATE' "$CA_BUNDLE"; then
  echo "offline-base.sh: --ca-bundle $CA_BUNDLE holds no PEM certificate" >&2; exit 1
fi

ROOTFS=$(mktemp -d "${TMPDIR:-/tmp}/gtpo-base.XXXXXX")
cleanup() {
  # A failed chroot step can leave /proc mounted inside; never delete through a mount.
  umount "$ROOTFS/proc" 2>/dev/null || true
  rm -rf "$ROOTFS"
}
trap cleanup EXIT INT TERM

echo "== debootstrap $SUITE from $MIRROR into $ROOTFS"
# minbase: essential packages + apt only; --include pulls python3 and friends with their
# Depends (not Recommends), which keeps the image small (no compilers, no docs tooling).
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOTFS" "$MIRROR"

cat >"$ROOTFS/etc/apt/sources.list" <<SOURCES
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb $SECURITY_MIRROR $SUITE-security main
SOURCES

if [ -n "$CA_BUNDLE" ]; then
  echo "== adding $CA_BUNDLE to the image's trust store"
  cp "$CA_BUNDLE" "$ROOTFS/usr/local/share/ca-certificates/gtpo-extra-ca.crt"
  chroot "$ROOTFS" update-ca-certificates >/dev/null
fi

echo "== security and point-release updates"
mount -t proc proc "$ROOTFS/proc"
chroot "$ROOTFS" sh -c 'export DEBIAN_FRONTEND=noninteractive &&
  apt-get update -qq && apt-get upgrade -y -qq --no-install-recommends && apt-get clean'
umount "$ROOTFS/proc"

# What a container never needs: package lists (refetched by apt-get update), caches, docs.
rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/*.bin \
  "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/* \
  "$ROOTFS"/usr/share/info/* "$ROOTFS"/var/log/*.log "$ROOTFS"/tmp/* "$ROOTFS"/root/.cache
# The image starts empty of these; docker provides them at run time.
: >"$ROOTFS/etc/resolv.conf"
: >"$ROOTFS/etc/hostname"

echo "== docker import $TAG"
# pip inside a venv verifies TLS with its own copy of certifi, not the system store: point it
# (and requests, used by huggingface_hub) at the system bundle so an added CA counts.
tar --numeric-owner -C "$ROOTFS" -c . | docker import \
  --change 'ENV LANG=C.UTF-8' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
  --change 'ENV REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt' \
  --change 'CMD ["python3"]' \
  --change 'LABEL io.gtpo.image=base' \
  --message "gtpo offline base: debootstrap $SUITE ($PACKAGES)" \
  - "$TAG" >/dev/null

docker image inspect --format "built $TAG: {{.Id}} {{.Size}} bytes" "$TAG"
