#!/usr/bin/env bash
# make test: installs the Debian packages the integration tests start for
# real (Prosody, ejabberd, PostgreSQL, headless Chromium, the Python
# clients, curl, the terminal client Profanity and tmux to drive it, Gajim
# and Dino with Xvfb, ImageMagick and tesseract to see what they show) when
# any is missing, as make run installs Prosody. Nothing happens when
# everything is there. make test starts a private PostgreSQL cluster with
# the server's binaries (scripts/with-postgres.sh) unless
# PINGD_TEST_POSTGRES names a server.
set -euo pipefail
missing=()
have() { command -v "$1" >/dev/null 2>&1; }
have prosody || missing+=(prosody)
have ejabberdctl || [ -x /usr/sbin/ejabberdctl ] || missing+=(ejabberd)
have chromium || missing+=(chromium)
have curl || missing+=(curl)
have profanity || missing+=(profanity)
have tmux || missing+=(tmux)
# The graphical clients' tests: Gajim under Xvfb with a private D-Bus,
# read back by screenshot and OCR.
have gajim || missing+=(gajim)
have xvfb-run || missing+=(xvfb)
have xauth || missing+=(xauth)
have dbus-run-session || missing+=(dbus)
have import || missing+=(imagemagick)
have tesseract || missing+=(tesseract-ocr)
[ -x /usr/lib/notification-daemon/notification-daemon ] || missing+=(notification-daemon)
# Dino, typed into with xdotool, in a private network namespace (ip).
have dino-im || missing+=(dino-im)
have xdotool || missing+=(xdotool)
have ip || [ -x /usr/sbin/ip ] || missing+=(iproute2)
# Debian keeps initdb out of PATH, under /usr/lib/postgresql/VERSION/bin.
have initdb || compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
for m in slixmpp:python3-slixmpp openid:python3-openid feedparser:python3-feedparser; do
  /usr/bin/python3 -c "import ${m%%:*}" >/dev/null 2>&1 || missing+=("${m#*:}")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "The tests need Debian packages that are missing: ${missing[*]}; installing them…"
sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd=sudo
$sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get update
$sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
