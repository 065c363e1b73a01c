#!/bin/sh
# install-mcp-client.sh [DIR]: installs the official MCP TypeScript SDK
# (@modelcontextprotocol/sdk, pinned in scripts/mcp-client/package.json)
# into DIR (default: $BUDDY_MCP_CLIENT_DIR, else ~/.cache/buddy/mcp-client),
# outside the repository, and prints DIR. Nothing is installed twice: a DIR
# whose installed version matches the pin is reused. Needs node and npm.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-${BUDDY_MCP_CLIENT_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/buddy/mcp-client}}
want=$(sed -n 's/.*"@modelcontextprotocol\/sdk": "\([^"]*\)".*/\1/p' "$here/mcp-client/package.json")
have=$(sed -n 's/^  "version": "\([^"]*\)".*/\1/p' "$dir/node_modules/@modelcontextprotocol/sdk/package.json" 2>/dev/null || true)
if [ "$have" != "$want" ]; then
	command -v npm >/dev/null || { echo "install-mcp-client.sh: npm not found" >&2; exit 1; }
	mkdir -p "$dir"
	cp "$here/mcp-client/package.json" "$dir/package.json"
	if [ -f "$here/mcp-client/package-lock.json" ]; then
		cp "$here/mcp-client/package-lock.json" "$dir/package-lock.json"
		(cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >&2)
	else
		(cd "$dir" && npm install --no-audit --no-fund --ignore-scripts --loglevel=error >&2)
	fi
fi
echo "$dir"
