#!/usr/bin/env bash
# Builds the built-in skills (builtins-src/*/) with TinyGo into builtins-wasm/:
# <name>.wasm plus a copy of its skill.toml as <name>.skill.toml.
#   scripts/build-builtins.sh            rebuild builtins-wasm/ in place
#   scripts/build-builtins.sh --check    rebuild into a temp dir; fail listing what differs
# TinyGo comes from scripts/install-tinygo.sh (pinned; -no-debug output is
# byte-identical across machines).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
check=0
[ "${1:-}" = "--check" ] && check=1

tinygo="$(scripts/install-tinygo.sh --print-path)"
out="$root/builtins-wasm"
if [ "$check" = 1 ]; then
	out="$(mktemp -d)"
	trap 'rm -rf "$out"' EXIT
fi
# wasm-unknown: no WASI at all, so a built-in imports nothing but the Extism
# kernel and the buddy host functions it uses. The leaking GC (the target's
# default) never collects: every call runs in a fresh instance whose memory is
# dropped afterwards, so collecting is wasted work (the conservative GC cost
# a 4 KiB read_file 6x the instructions); the built-ins keep their
# allocations proportional to the data and their memory caps allow for it.
# builtins-src/tinygo-target.json is wasm-unknown with bulk memory on: a copy
# is one memory.copy (one fuel unit per 8 bytes) instead of a loop of loads and
# stores, which cost a 4 KiB read_file ~19,000 of its ~68,000 instructions;
# and with simd128 and the build tag skillkit_simd128, under which skillkit
# scans strings 32 bytes at a time in SIMD instructions (read_file of 4 KiB:
# ~15,500 fuel instead of ~23,400); and with a 16 KiB stack instead of
# wasm-ld's 64 KiB, so that stack, data and a small call's heap fit in one
# 64 KiB page: a built-in starts with one page, not two, and every call's
# close zeroes half as much (the stack comes first: an overflow traps, it
# cannot run into the data).
flags=(-target="$root/builtins-src/tinygo-target.json" -no-debug -gc=leaking -opt=2)

names=()
for dir in builtins-src/*/; do
	name="$(basename "$dir")"
	[ -f "$dir/main.go" ] || continue
	names+=("$name")
	(cd "$dir" && GOWORK=off GOFLAGS=-mod=mod "$tinygo" build -o "$out/$name.wasm" "${flags[@]}" .) &
done
fail=0
for job in $(jobs -p); do wait "$job" || fail=1; done
[ "$fail" = 0 ] || { echo "build-builtins: a TinyGo build failed" >&2; exit 1; }
for name in "${names[@]}"; do
	cp "builtins-src/$name/skill.toml" "$out/$name.skill.toml"
done

if [ "$check" = 1 ]; then
	differ=()
	for f in "$out"/*; do
		b="$(basename "$f")"
		cmp -s "$f" "builtins-wasm/$b" || differ+=("builtins-wasm/$b")
	done
	for f in builtins-wasm/*.wasm builtins-wasm/*.skill.toml; do
		[ -e "$f" ] || continue
		[ -e "$out/$(basename "$f")" ] || differ+=("$f (no source)")
	done
	if [ "${#differ[@]}" -gt 0 ]; then
		echo "build-builtins: committed built-ins differ from builtins-src/ (run 'make builtins' and commit):" >&2
		printf '  %s\n' "${differ[@]}" >&2
		exit 1
	fi
	echo "build-builtins: ${#names[@]} built-ins match builtins-src/" >&2
fi
