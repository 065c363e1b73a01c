#!/usr/bin/env bash
# setup-llama-server.sh - fetch llama.cpp's llama-server from Debian sid into a
# private directory, for `make e2e-llm` (cmd/buddy/e2e_llm_test.go).
#
# Debian sid ships llama-server (package llama.cpp-tools), but it needs a newer
# glibc than bookworm's, so apt cannot install it here. This script downloads
# the .debs with a throwaway apt state (the host's apt configuration, lists and
# packages are not touched), unpacks them with dpkg -x into DIR, and writes
# DIR/llama-server: a wrapper that runs sid's binary with sid's own loader and
# libraries (no chroot, no root needed beyond what apt-get download needs).
#
# sid moves: the version cannot be pinned. DIR/.debs.txt lists what was fetched.
# Nothing lands in the repository: DIR defaults to a cache directory.
#
# Usage:
#   setup-llama-server.sh [DIR]          install if DIR/llama-server does not run yet;
#                                        prints DIR/llama-server's path on stdout
#   setup-llama-server.sh --force [DIR]  reinstall
#
# DIR defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/buddy/llama-sid.
# Logs go to stderr; stdout carries only the wrapper's path. Exit 1 when the
# packages cannot be fetched or the binary does not run (the caller skips).
set -Eeuo pipefail

force=0
if [[ "${1:-}" == "--force" ]]; then
	force=1
	shift
fi
ROOT=$(realpath -m "${1:-${XDG_CACHE_HOME:-$HOME/.cache}/buddy/llama-sid}")
log() { echo "setup-llama-server: $*" >&2; }

if [[ $force == 0 && -x "$ROOT/llama-server" ]] && "$ROOT/llama-server" --version >/dev/null 2>&1; then
	echo "$ROOT/llama-server"
	exit 0
fi
case "$(uname -m)" in
x86_64) ;;
*)
	log "only x86_64 is supported (the wrapper uses sid's x86_64 loader), not $(uname -m)"
	exit 1
	;;
esac
for cmd in apt-get dpkg; do
	command -v "$cmd" >/dev/null || {
		log "$cmd not found: this script needs a Debian-based system"
		exit 1
	}
done
SOURCES=/etc/apt/sources.list.d/debian.sources
MIRROR=""
if [[ -r $SOURCES ]]; then
	MIRROR=$(awk '/^URIs:/{print $2; exit}' "$SOURCES")
fi
MIRROR=${MIRROR:-http://deb.debian.org/debian}

W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
chmod 755 "$W" # apt's download sandbox user must be able to read here
mkdir -p "$W/lists/partial" "$W/cache/archives/partial" "$W/debs"
chown _apt "$W/debs" 2>/dev/null || true # and write the .debs here (else apt warns and downloads as root)
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR sid main" >"$W/sources.list"
O=(-o "Dir::State::Lists=$W/lists" -o "Dir::Etc::SourceList=$W/sources.list"
	-o "Dir::Etc::SourceParts=/dev/null" -o "Dir::Cache=$W/cache")
log "fetching llama.cpp-tools and its libraries from Debian sid ($MIRROR)"
if ! apt-get "${O[@]}" update -qq >&2; then
	log "apt-get update of Debian sid failed (no network, or the mirror is unreachable)"
	exit 1
fi
cd "$W/debs"
if ! apt-get "${O[@]}" download -qq llama.cpp-tools libllama0 libggml0 libc6 libgcc-s1 \
	libstdc++6 libgomp1 libssl3t64 zlib1g libzstd1 >&2; then
	log "apt-get download failed: sid may have renamed a package"
	exit 1
fi
rm -rf "$ROOT"
mkdir -p "$ROOT"
for d in *.deb; do dpkg -x "$d" "$ROOT"; done
ls "$W/debs" >"$ROOT/.debs.txt"
cd /
L=$ROOT/usr/lib/x86_64-linux-gnu
cat >"$ROOT/llama-server" <<EOS
#!/bin/sh
# Runs Debian sid's llama-server with sid's own loader and libraries
# (written by buddy's scripts/llm/setup-llama-server.sh).
L='$L'
export GGML_BACKEND_PATH=\${GGML_BACKEND_PATH:-\$L/ggml/backends0/libggml-cpu-x64.so}
exec "\$L/ld-linux-x86-64.so.2" --library-path "\$L:\$L/llama" '$ROOT/usr/bin/llama-server' "\$@"
EOS
chmod +x "$ROOT/llama-server"
if ! "$ROOT/llama-server" --version >&2; then
	log "the unpacked llama-server does not run"
	exit 1
fi
echo "$ROOT/llama-server"
