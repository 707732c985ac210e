#!/bin/sh
# Renders a `manychat-agent report --format html` page to PNG in headless Chromium: the check
# that the self-contained page (inline SVG, no script, no external asset) draws in a real
# browser, and how docs/report.png is made.
#
#   scripts/render-report.sh report.html report.png [width] [height]
#
# Needs chromium (`apt-get install -y chromium`). Chromium refuses to run as root inside its
# sandbox, hence --no-sandbox; nothing is fetched (--disable-background-networking).
set -eu
html=${1:?usage: scripts/render-report.sh REPORT.html OUT.png [WIDTH] [HEIGHT]}
png=${2:?usage: scripts/render-report.sh REPORT.html OUT.png [WIDTH] [HEIGHT]}
width=${3:-1100}
height=${4:-1500}
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$browser" ]; then
    echo "error: no chromium found (apt-get install -y chromium)" >&2
    exit 1
fi
case $html in /*) ;; *) html=$(pwd)/$html ;; esac
case $png in /*) ;; *) png=$(pwd)/$png ;; esac
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --user-data-dir="$profile" --hide-scrollbars --window-size="$width,$height" \
    --screenshot="$png" "file://$html" >/dev/null 2>&1
if [ ! -s "$png" ]; then
    echo "error: chromium wrote no screenshot to $png" >&2
    exit 1
fi
echo "rendered $html to $png"
