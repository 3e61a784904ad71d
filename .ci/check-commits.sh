#!/usr/bin/env bash
# Checks the message of every commit after the convention's baseline (.ci/commit-baseline:
# the last commit before it, and that commit's author time) with .ci/commit-message.sh.
# Older commits have paragraph subjects and no body, and are not checked. When the
# baseline commit is not in this history (rewritten), commits authored after its
# author time are checked instead. An explicit range: bash .ci/check-commits.sh A..B
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ $# -gt 0 ]; then
  commits=$(git rev-list --no-merges "$1")
else
  read -r base base_time < .ci/commit-baseline
  if git cat-file -e "$base^{commit}" 2>/dev/null && git merge-base --is-ancestor "$base" HEAD; then
    commits=$(git rev-list --no-merges "$base..HEAD")
  else
    echo "ci: baseline $base is not in this history; checking commits authored after $base_time"
    commits=$(git log --no-merges --format='%H %at' HEAD | awk -v t="$base_time" '$2 > t { print $1 }')
  fi
fi

failed=0
checked=0
for c in $commits; do
  checked=$((checked + 1))
  if ! git log -1 --format=%B "$c" | bash .ci/commit-message.sh - 2>/tmp/chopper-commit-msg.$$; then
    echo "ci: commit $(git rev-parse --short "$c") breaks the commit convention (docs/development.md):"
    cat /tmp/chopper-commit-msg.$$
    failed=1
  fi
done
rm -f /tmp/chopper-commit-msg.$$
echo "ci: $checked commit messages checked"
exit $failed
