#!/usr/bin/env bash
# Alternating A/B of two checkouts' front ends on one no-op backend:
#   bash bench/frontend-ab.sh DIR_A DIR_B [ROUNDS]
# e.g. DIR_A = a `git worktree add /tmp/before <commit>` (with node_modules linked), DIR_B = this checkout.
# Prints req/s and p99 per round (wrk -t1 -c32 -d4s after a 1 s warm-up).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tmp="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
child='const root = process.argv[1]; const { createFrontend } = require(root + "/frontend");
(async () => { const fe = createFrontend({}); const { url } = await fe.start();
  fe.table.set({ generation: 1, slices: [{ start: 0, end: 2 ** 32, servers: ["noop"] }], servers: { noop: { url: process.argv[2] } } });
  process.stdout.write(url + "\n"); process.on("SIGTERM", async () => { await fe.close(); process.exit(0) }) })()'
node "$here/noop-backend.js" > "$tmp/backend" &
until [ -s "$tmp/backend" ]; do sleep 0.1; done
backend="http://127.0.0.1:$(head -1 "$tmp/backend")"
for r in $(seq 1 "${3:-3}"); do
  for root in "$1" "$2"; do
    : > "$tmp/fe"
    node -e "$child" "$(cd "$root" && pwd)" "$backend" > "$tmp/fe" & pid=$!
    until [ -s "$tmp/fe" ]; do sleep 0.1; done
    url="$(head -1 "$tmp/fe")/x?key=ab"
    wrk -t1 -c32 -d1s "$url" > /dev/null
    out="$(wrk -t1 -c32 -d4s --latency "$url")"
    printf 'round %s  %-40s %10s req/s  p99 %s\n' "$r" "$root" "$(grep Requests/sec <<< "$out" | awk '{print $2}')" "$(grep -E '^ +99%' <<< "$out" | awk '{print $2}')"
    kill "$pid"; wait "$pid" 2>/dev/null || true
  done
done
