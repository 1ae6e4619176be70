#!/usr/bin/env bash
# Build the Dockerfile's two base images from Debian packages, for machines that cannot
# pull from an image registry (CI): the deploy/Dockerfile takes them as build arguments.
#
#   deploy/scripts/local-base-images.sh [--force]
#
# Prints the build arguments to use, one per line:
#   PYTHON_IMAGE=memledger-base/python:3.11-bookworm   stands in for python:3.11-slim-bookworm
#   GO_IMAGE=memledger-base/go:bookworm                stands in for golang:1.23-bookworm
#
# An image that already exists is kept (so repeat runs take a second); --force rebuilds
# all three. The Debian root comes from `debootstrap --variant=minbase bookworm` against the
# mirror in the apt sources (override with DEBIAN_MIRROR), about 40 s, and needs root.
# The python base is Debian's python3 (3.11) in a venv on PATH, so `pip install` works as in
# the python image; the go base is this machine's Go toolchain (`go env GOROOT`). Both get
# this machine's CA bundle, without which containers cannot reach PyPI or the Go proxy
# through a TLS-inspecting proxy.
#
# Exit status 3: this machine cannot build them (not root, no debootstrap, no Go).
set -euo pipefail

DEBIAN_IMAGE=${DEBIAN_IMAGE:-memledger-base/debian:bookworm}
PYTHON_IMAGE=${PYTHON_IMAGE:-memledger-base/python:3.11-bookworm}
GO_IMAGE=${GO_IMAGE:-memledger-base/go:bookworm}
CA_BUNDLE=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
SUITE=bookworm
force=0
[[ "${1:-}" == "--force" ]] && force=1

log() { echo "local-base-images: $*" >&2; }
have() { [[ $force == 0 ]] && docker image inspect "$1" >/dev/null 2>&1; }

# The Debian mirror apt already uses (deb822 .sources or one-line .list), first one wins.
debian_mirror() {
    if [[ -n "${DEBIAN_MIRROR:-}" ]]; then echo "$DEBIAN_MIRROR"; return; fi
    local uri
    uri=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
          awk '/^URIs:/ {print $2}' | grep -v -- '-security' | head -n1 || true)
    if [[ -z "$uri" ]]; then
        uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
              awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}' |
              grep -v -- '-security' | head -n1 || true)
    fi
    echo "${uri:-http://deb.debian.org/debian}"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if ! have "$DEBIAN_IMAGE"; then
    [[ $(id -u) == 0 ]] || { log "debootstrap needs root"; exit 3; }
    command -v debootstrap >/dev/null || { log "debootstrap is not installed"; exit 3; }
    mirror=$(debian_mirror)
    log "debootstrap $SUITE from $mirror"
    debootstrap --variant=minbase --include=python3,python3-venv "$SUITE" "$tmp/root" \
        "$mirror" >"$tmp/debootstrap.log" 2>&1 || { tail -n 30 "$tmp/debootstrap.log" >&2; exit 1; }
    rm -rf "$tmp/root/var/cache/apt/archives/"*.deb "$tmp/root/var/lib/apt/lists/"*
    mkdir -p "$tmp/root/etc/ssl/certs"
    cp "$CA_BUNDLE" "$tmp/root/etc/ssl/certs/ca-certificates.crt"
    tar -C "$tmp/root" -c . | docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
        --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
        --change 'CMD ["bash"]' - "$DEBIAN_IMAGE" >/dev/null
    rm -rf "$tmp/root"
    force=1  # what is built on it must be rebuilt
fi

if ! have "$PYTHON_IMAGE"; then
    log "building $PYTHON_IMAGE"
    mkdir -p "$tmp/py"
    cat >"$tmp/py/Dockerfile" <<EOF
FROM $DEBIAN_IMAGE
RUN python3 -m venv /opt/python && /opt/python/bin/python -c 'import ssl, sqlite3'
ENV PATH=/opt/python/bin:\$PATH
EOF
    docker build -q -t "$PYTHON_IMAGE" "$tmp/py" >/dev/null
fi

if ! have "$GO_IMAGE"; then
    goroot=$(go env GOROOT 2>/dev/null || true)
    [[ -x "$goroot/bin/go" ]] || { log "no Go toolchain on this machine (go env GOROOT)"; exit 3; }
    log "building $GO_IMAGE from $goroot ($("$goroot/bin/go" version))"
    cat >"$tmp/Dockerfile.go" <<EOF
FROM $DEBIAN_IMAGE
COPY . /usr/local/go
ENV PATH=/usr/local/go/bin:/go/bin:\$PATH GOPATH=/go GOTOOLCHAIN=local
RUN go version
EOF
    docker build -q -t "$GO_IMAGE" -f "$tmp/Dockerfile.go" "$goroot" >/dev/null
fi

echo "PYTHON_IMAGE=$PYTHON_IMAGE"
echo "GO_IMAGE=$GO_IMAGE"
