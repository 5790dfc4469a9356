#!/usr/bin/env bash
# make test: installs the Debian packages the integration tests start for
# real (Prosody, ejabberd, headless Chromium, the Python clients, curl, the
# terminal client Profanity and tmux to drive it) when any is missing, as
# make run installs Prosody. Nothing happens when
# everything is there. PostgreSQL is optional: the store tests run on it
# when PINGD_TEST_POSTGRES is set (store/testdata/start-postgres.sh).
set -euo pipefail
missing=()
have() { command -v "$1" >/dev/null 2>&1; }
have prosody || missing+=(prosody)
have ejabberdctl || [ -x /usr/sbin/ejabberdctl ] || missing+=(ejabberd)
have chromium || missing+=(chromium)
have curl || missing+=(curl)
have profanity || missing+=(profanity)
have tmux || missing+=(tmux)
for m in slixmpp:python3-slixmpp openid:python3-openid feedparser:python3-feedparser; do
  /usr/bin/python3 -c "import ${m%%:*}" >/dev/null 2>&1 || missing+=("${m#*:}")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "The tests need Debian packages that are missing: ${missing[*]}; installing them…"
sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd=sudo
$sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get update
$sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
