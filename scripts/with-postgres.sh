#!/usr/bin/env bash
# Runs a command with PINGD_TEST_POSTGRES naming a PostgreSQL server, so the
# store's PostgreSQL conformance and the tests of several pingd processes on
# one database run along with the rest:
#
#   scripts/with-postgres.sh go test ./...
#
# When PINGD_TEST_POSTGRES is set already, that server is used and nothing
# is started. Otherwise a private, throw-away cluster is started for the
# command (store/testdata/start-postgres.sh: loopback only, a free port, data
# under /tmp) and stopped after it, whether the command passed, failed or
# was interrupted. The exit status is the command's.
set -euo pipefail
if [ -n "${PINGD_TEST_POSTGRES:-}" ]; then
	exec "$@"
fi
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d /tmp/pingd-test-pg.XXXXXX)
stop() {
	"$root/store/testdata/start-postgres.sh" stop "$dir" 2>/dev/null || true
	rm -rf "$dir"
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
PINGD_TEST_POSTGRES=$("$root/store/testdata/start-postgres.sh" start "$dir")
export PINGD_TEST_POSTGRES
echo "with-postgres.sh: a private PostgreSQL for the tests at $PINGD_TEST_POSTGRES" >&2
"$@"
