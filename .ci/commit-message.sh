#!/usr/bin/env bash
# Checks one commit message (a file, or stdin with "-") against the convention in
# docs/development.md: a subject `area: imperative summary` of at most 72 characters,
# a blank line, then a body that says why. Git's own merge, revert, fixup! and
# squash! subjects pass. Exit 1 with the reasons on stderr.
set -euo pipefail

msg=$(grep -v '^#' "${1:--}" || true)
subject=$(printf '%s\n' "$msg" | sed -n 1p)
second=$(printf '%s\n' "$msg" | sed -n 2p)
body=$(printf '%s\n' "$msg" | sed -n '3,$p' | grep -c '[^[:space:]]' || true)

case "$subject" in
  'Merge '* | 'Revert "'* | 'fixup! '* | 'squash! '* | 'amend! '*) exit 0 ;;
esac

problems=()
[ ${#subject} -le 72 ] || problems+=("the subject has ${#subject} characters; at most 72")
[[ "$subject" =~ ^[A-Za-z0-9][A-Za-z0-9_./-]*(,\ ?[A-Za-z0-9][A-Za-z0-9_./-]*)*:\ [^[:space:]] ]] ||
  problems+=("the subject is not 'area: imperative summary' (area: a folder or concept, such as frontend, kv-cache, docs)")
[ -z "$second" ] || problems+=("the second line must be blank")
[ "$body" -gt 0 ] || problems+=("no body: say why, and the figures when it is about speed")

if [ ${#problems[@]} -gt 0 ]; then
  echo "commit message: $subject" >&2
  printf '  - %s\n' "${problems[@]}" >&2
  exit 1
fi
