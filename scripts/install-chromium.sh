#!/usr/bin/env bash
# install-chromium.sh - the browser the page tests drive (internal/front/server/web_test.go):
# Debian's chromium, from apt. Idempotent: a no-op once /usr/bin/chromium exists.
#
# Usage:
#   install-chromium.sh          install if missing
#   install-chromium.sh --check  exit 1 unless chromium is installed
#
# Without root (or without apt) it says so and exits 0: the browser tests then
# skip with a message naming this script. Set BUDDY_CHROMIUM to use another
# chromium binary.
set -Eeuo pipefail

bin=${BUDDY_CHROMIUM:-/usr/bin/chromium}
if [[ -x $bin ]]; then
	exit 0
fi
if [[ ${1:-} == --check ]]; then
	echo "install-chromium.sh: $bin is missing" >&2
	exit 1
fi
if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
	echo "install-chromium.sh: $bin is missing and this is not root on Debian: the browser tests will skip (install the chromium package to run them)" >&2
	exit 0
fi
echo "install-chromium.sh: installing Debian's chromium (about 500 MB, once)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq chromium >&2
"$bin" --version >&2
