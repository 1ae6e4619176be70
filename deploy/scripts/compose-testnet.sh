#!/usr/bin/env sh
# Run the docker-compose test net: one service per validator (app + cometbft).
#
#   deploy/scripts/compose-testnet.sh up     [testnet init options]   generate once, start
#   deploy/scripts/compose-testnet.sh fresh  [testnet init options]   new homes, start
#   deploy/scripts/compose-testnet.sh build                           build the image only
#   deploy/scripts/compose-testnet.sh down                            stop, keep homes
#   deploy/scripts/compose-testnet.sh check                           cross-node check
#
# Homes go to deploy/testnet (git-ignored: they hold validator keys); the compose file,
# Dockerfile and ports come from `memledger testnet init --compose`, the same generator
# as local nets. VALIDATORS=N changes the size (default 4); e.g. `up --postgres`.
#
# Works with compose v2 (`docker compose`) and Debian's v1.29 (`docker-compose`); the
# project name goes on the command line (PROJECT, default memledger-testnet) because v1
# rejects a top-level `name:`. The Dockerfile's base images are build arguments: set
# PYTHON_IMAGE / GO_IMAGE to build on other bases, e.g. without registry access
#   eval "$(deploy/scripts/local-base-images.sh)"; export PYTHON_IMAGE GO_IMAGE
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
MEMLEDGER=${MEMLEDGER:-memledger}
HOMES="$ROOT/deploy/testnet"
COMPOSE_FILE="$ROOT/deploy/docker-compose.yml"
PROJECT=${PROJECT:-memledger-testnet}
cmd=${1:-up}
[ $# -gt 0 ] && shift

compose() {
    if docker compose version >/dev/null 2>&1; then
        docker compose -p "$PROJECT" -f "$COMPOSE_FILE" "$@"
    else
        docker-compose -p "$PROJECT" -f "$COMPOSE_FILE" "$@"
    fi
}

build() {
    set --
    for arg in PYTHON_IMAGE GO_IMAGE PIP_INDEX_URL GOPROXY; do
        eval "value=\${$arg:-}"
        [ -n "$value" ] && set -- "$@" --build-arg "$arg=$value"
    done
    compose build "$@"
}

generate() {
    "$MEMLEDGER" testnet init --validators "${VALIDATORS:-4}" --out "$HOMES" --compose \
        --compose-dir "$ROOT/deploy" --base-port 26656 "$@"
}

case "$cmd" in
    fresh)
        compose down 2>/dev/null || true
        rm -rf "$HOMES"
        generate "$@"
        build
        compose up -d ;;
    up)
        [ -f "$HOMES/testnet.json" ] || generate "$@"
        build
        compose up -d ;;
    build)
        build ;;
    down)
        compose down ;;
    check)
        "$MEMLEDGER" testnet status "$HOMES"
        "$MEMLEDGER" testnet check "$HOMES" ;;
    *)
        echo "usage: $0 up|fresh|build|down|check [testnet init options]" >&2
        exit 2 ;;
esac
