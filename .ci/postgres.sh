#!/usr/bin/env bash
# Start a throw-away PostgreSQL server on loopback for the ledger's PostgreSQL tests.
#   eval "$(.ci/postgres.sh start)"   -> exports DPRELEASE_TEST_POSTGRES_URL and PG_TEST_DIR
#   .ci/postgres.sh stop "$PG_TEST_DIR"
# Installs Debian's postgresql package when no server binaries are present.
set -euo pipefail
case "${1:-}" in
start)
    bindir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)"
    if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
        echo "installing postgresql from the distribution's packages" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2 && apt-get install -y -qq postgresql >&2
        bindir="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
    fi
    dir="$(mktemp -d /tmp/dprelease-pg.XXXXXX)"
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    run=()
    if [ "$(id -u)" = 0 ]; then  # the server refuses to run as root
        chown postgres "$dir"
        run=(runuser -u postgres --)
    fi
    "${run[@]}" "$bindir/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >/dev/null
    "${run[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
        -o "-h 127.0.0.1 -p $port -k $dir" start >&2
    echo "export PG_TEST_DIR='$dir'"
    echo "export DPRELEASE_TEST_POSTGRES_URL='postgresql+psycopg://postgres@127.0.0.1:$port/postgres'"
    ;;
stop)
    dir="${2:?usage: postgres.sh stop DIR}"
    bindir="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
    run=()
    [ "$(id -u)" = 0 ] && run=(runuser -u postgres --)
    "${run[@]}" "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
    rm -rf "$dir"
    ;;
*)
    echo "usage: $0 start | stop DIR" >&2
    exit 2
    ;;
esac
