#!/usr/bin/env sh
# Run the docker-compose test net: one service per validator (app + cometbft).
#
#   deploy/scripts/compose-testnet.sh up     [testnet init options]   generate once, start
#   deploy/scripts/compose-testnet.sh fresh  [testnet init options]   new homes, start
#   deploy/scripts/compose-testnet.sh down                            stop, keep homes
#   deploy/scripts/compose-testnet.sh check                           cross-node check
#
# Homes go to deploy/testnet (git-ignored: they hold validator keys); the compose file,
# Dockerfile and ports come from `memledger testnet init --compose`, the same generator
# as local nets. VALIDATORS=N changes the size (default 4); e.g. `up --postgres`.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
MEMLEDGER=${MEMLEDGER:-memledger}
HOMES="$ROOT/deploy/testnet"
COMPOSE_FILE="$ROOT/deploy/docker-compose.yml"
cmd=${1:-up}
[ $# -gt 0 ] && shift

generate() {
    "$MEMLEDGER" testnet init --validators "${VALIDATORS:-4}" --out "$HOMES" --compose \
        --compose-dir "$ROOT/deploy" "$@"
}

case "$cmd" in
    fresh)
        docker compose -f "$COMPOSE_FILE" down 2>/dev/null || true
        rm -rf "$HOMES"
        generate "$@"
        docker compose -f "$COMPOSE_FILE" up --build -d ;;
    up)
        [ -f "$HOMES/testnet.json" ] || generate "$@"
        docker compose -f "$COMPOSE_FILE" up --build -d ;;
    down)
        docker compose -f "$COMPOSE_FILE" down ;;
    check)
        "$MEMLEDGER" testnet status "$HOMES"
        "$MEMLEDGER" testnet check "$HOMES" ;;
    *)
        echo "usage: $0 up|fresh|down|check [testnet init options]" >&2
        exit 2 ;;
esac
