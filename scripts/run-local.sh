#!/usr/bin/env bash
# make run: a private Prosody on loopback with pingd's component configured
# and two test accounts, a demo feed, and pingd on the embedded SQLite store.
# Everything lives in .run/ and stops with Ctrl-C. pingd's log goes to
# .run/pingd.log (RUN_FOLLOW_LOG=1 shows it here too); the instructions are
# printed once pingd is ready, after its start-up lines, so they stay on
# screen. `run-local.sh --instructions` prints the instructions alone.
set -euo pipefail
cd "$(dirname "$0")/.."
instructions_only=""
if [ "${1:-}" = "--instructions" ]; then instructions_only=1; shift; fi
bin=${1:-bin/pingd}
run=$PWD/.run
c2s_port=${PROSODY_C2S_PORT:-15222}
comp_port=${PROSODY_COMPONENT_PORT:-15347}
http_addr=${PINGD_HTTP_ADDR:-127.0.0.1:8080}
feed_port=${DEMO_FEED_PORT:-8081}
secret=${PINGD_XMPP_SECRET:-local-dev-secret}
admin_token=${PINGD_ADMIN_TOKEN:-dev-admin-token}
log=$run/pingd.log

instructions() {
  cat <<MSG

pingd is ready: HTTP on http://$http_addr (status page: http://$http_addr/),
XMPP component pubsub.localhost on Prosody 127.0.0.1:$comp_port.
Accounts: alice@localhost (password alice, owner of every node), bob@localhost (password bob).

XMPP clients connect to 127.0.0.1:$c2s_port without TLS (local only). In Profanity:
  /connect bob@localhost server 127.0.0.1 port $c2s_port tls disable      (password bob)
  /connect alice@localhost server 127.0.0.1 port $c2s_port tls disable    (password alice)
Without "tls disable" Profanity insists on TLS, which this local Prosody does not
offer, and says only "Login failed". Other clients: server 127.0.0.1, port $c2s_port,
encryption off, plain password authentication allowed.

The admin CLI, in another terminal:
  export PINGD_ADMIN_TOKEN=$admin_token PINGD_SERVER=http://$http_addr
  ./bin/pingd node list

Try it:
  # 1. a node following the demo feed
  ./bin/pingd node create demo --source http://127.0.0.1:$feed_port/feed.xml --title Demo
  # 2. subscribe: as bob, send pubsub.localhost the chat message "subscribe demo"
  #    (Profanity: /msg pubsub.localhost subscribe demo), or subscribe to node
  #    "demo" on pubsub.localhost from the client's service browser
  # 3. change the feed and ping pingd
  ./scripts/demo-feed.sh add "Hello from pingd"
  ./bin/pingd ping http://127.0.0.1:$feed_port/feed.xml
  # bob's client shows the new entry; http://$http_addr/atom/demo is the node's feed

pingd's log: $log (tail -f it). Ctrl-C stops pingd, Prosody and the demo feed.
MSG
}

if [ -n "$instructions_only" ]; then instructions; exit 0; fi

if ! command -v prosody >/dev/null 2>&1; then
  echo "Prosody is not installed; installing Debian's prosody package…"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd=sudo
  $sudo_cmd apt-get update
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y prosody
fi

mkdir -p "$run/prosody/data" "$run/www"
cat > "$run/prosody/prosody.cfg.lua" <<CFG
daemonize = false
$( [ "$(id -u)" -eq 0 ] && echo 'run_as_root = true' )
pidfile = "$run/prosody/prosody.pid"
data_path = "$run/prosody/data"
log = { info = "$run/prosody/prosody.log" }
certificates = "$run/prosody/certs"
c2s_ports = { $c2s_port }
c2s_interfaces = { "127.0.0.1" }
component_ports = { $comp_port }
component_interfaces = { "127.0.0.1" }
s2s_ports = { }
http_ports = { }
https_ports = { }
modules_enabled = { "roster"; "saslauth"; "disco"; "ping"; "posix" }
modules_disabled = { "s2s"; "tls" }
c2s_require_encryption = false
allow_unencrypted_plain_auth = true
authentication = "internal_plain"
admins = { "alice@localhost" }
VirtualHost "localhost"
Component "pubsub.localhost"
  component_secret = "$secret"
CFG
prosodyctl --config "$run/prosody/prosody.cfg.lua" register alice localhost alice >/dev/null
prosodyctl --config "$run/prosody/prosody.cfg.lua" register bob localhost bob >/dev/null

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

prosody --config "$run/prosody/prosody.cfg.lua" >"$run/prosody/stdout.log" 2>&1 &
pids+=($!)

# The demo feed's links name its port: written again when the port changed.
if ! grep -qs "http://127.0.0.1:$feed_port/" "$run/www/feed.xml"; then
  DEMO_FEED_PORT=$feed_port ./scripts/demo-feed.sh init >/dev/null
fi
if command -v python3 >/dev/null 2>&1; then
  python3 -m http.server --bind 127.0.0.1 --directory "$run/www" "$feed_port" >"$run/www.log" 2>&1 &
  pids+=($!)
fi

# pingd connects once Prosody listens, not before: otherwise its first
# attempt fails, and it warns and waits for its retry.
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$comp_port") 2>/dev/null && break
  sleep 0.1
done

PINGD_XMPP_ADDR=127.0.0.1:$comp_port \
PINGD_XMPP_DOMAIN=pubsub.localhost \
PINGD_XMPP_SECRET=$secret \
PINGD_HTTP_ADDR=$http_addr \
PINGD_PUBLIC_URL=${PINGD_PUBLIC_URL:-http://$http_addr} \
PINGD_DB=${PINGD_DB:-$run/pingd.db} \
PINGD_ADMIN_TOKEN=$admin_token \
PINGD_ADMINS=alice@localhost \
PINGD_ALLOW_PRIVATE=1 \
"$bin" serve >"$log" 2>&1 &
pingd_pid=$!
pids+=("$pingd_pid")

# Ready: the store answers and the component is connected (/readyz).
ready=""
for _ in $(seq 150); do
  kill -0 "$pingd_pid" 2>/dev/null || break
  if command -v curl >/dev/null 2>&1; then
    curl -fsS -o /dev/null "http://$http_addr/readyz" 2>/dev/null && { ready=1; break; }
  elif grep -q "connected to XMPP server" "$log"; then
    ready=1; break
  fi
  sleep 0.2
done
if [ -z "$ready" ]; then
  echo "pingd did not become ready; the end of its log ($log):" >&2
  tail -n 20 "$log" >&2
  exit 1
fi
# The start-up lines first, then the instructions, which stay on screen.
cat "$log"
instructions
if [ -n "${RUN_FOLLOW_LOG:-}" ]; then
  tail -n 0 -f "$log" &
  pids+=($!)
fi
wait "$pingd_pid"
