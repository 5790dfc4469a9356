#!/bin/sh
# Starts a private, throw-away PostgreSQL cluster for the store tests and
# prints the URL to put in PINGD_TEST_POSTGRES:
#
#   export PINGD_TEST_POSTGRES="$(store/testdata/start-postgres.sh)"
#   go test ./store/...
#   store/testdata/start-postgres.sh stop "$PINGD_TEST_POSTGRES_DIR"   # the directory is printed on stderr
#
# The cluster listens on 127.0.0.1 only, on a free port, with its socket and
# data in a new directory under /tmp (or DIR when given: start-postgres.sh
# start DIR). It trusts local connections: it is for tests, nothing else.
# Run as root it runs PostgreSQL as the user "postgres".
set -eu

find_bin() {
	if [ -n "${PGBIN:-}" ]; then
		echo "$PGBIN"
	elif command -v initdb >/dev/null 2>&1; then
		dirname "$(command -v initdb)"
	else
		ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
	fi
}

PGBIN=$(find_bin)
if [ -z "$PGBIN" ] || [ ! -x "$PGBIN/initdb" ]; then
	echo "start-postgres.sh: initdb not found; set PGBIN to PostgreSQL's bin directory" >&2
	exit 1
fi

as_owner() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

free_port() {
	if command -v python3 >/dev/null 2>&1; then
		python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
	else
		echo $((20000 + $(od -An -N2 -tu2 /dev/urandom) % 40000))
	fi
}

cmd=${1:-start}
case "$cmd" in
stop)
	dir=${2:?usage: start-postgres.sh stop DIR}
	as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m fast -w stop >&2
	rm -rf "$dir"
	exit 0
	;;
start) ;;
*)
	echo "usage: start-postgres.sh [start [DIR]] | stop DIR" >&2
	exit 2
	;;
esac

dir=${2:-$(mktemp -d /tmp/pingd-pg.XXXXXX)}
mkdir -p "$dir"
chmod 0755 "$dir"
if [ "$(id -u)" = 0 ]; then
	chown postgres "$dir"
fi
as_owner "$PGBIN/initdb" -D "$dir/data" -U postgres -A trust --no-sync >"$dir/initdb.log" 2>&1 || {
	cat "$dir/initdb.log" >&2
	exit 1
}

tries=0
while :; do
	port=$(free_port)
	if as_owner "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 30 \
		-o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=200" start >/dev/null 2>&1; then
		break
	fi
	tries=$((tries + 1))
	if [ "$tries" -ge 5 ]; then
		cat "$dir/postgres.log" >&2
		exit 1
	fi
done

echo "PostgreSQL runs in $dir; stop it with: $0 stop $dir" >&2
echo "postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
