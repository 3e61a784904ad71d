#!/usr/bin/env bash
# Install a pinned tflint (only when the cached binary is missing or is a
# different version), then lint terraform/ with tflint's bundled terraform
# ruleset. Exits non-zero on any finding.
#
# Why `go install` and not a release download: the CI machines reach the Go
# module proxy but not GitHub release assets. The binary is cached under
# .tflint-cache/ (git-ignored) so only the first run pays for the build;
# point TFLINT_CACHE_DIR at a persistent CI cache directory to keep it
# between runs.
#
# Usage: .ci/install-tflint.sh            install if needed, then lint
#        .ci/install-tflint.sh --install  install if needed, do not lint
set -euo pipefail

TFLINT_VERSION="${TFLINT_VERSION:-v0.64.0}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE_DIR="${TFLINT_CACHE_DIR:-$ROOT/.tflint-cache}"
GOBIN_DIR="$CACHE_DIR/bin"

# go may not be on PATH in non-login shells.
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  PATH="$PATH:/usr/local/go/bin"
fi
if command -v go >/dev/null 2>&1; then
  PATH="$GOBIN_DIR:$PATH:$(go env GOPATH)/bin"
else
  PATH="$GOBIN_DIR:$PATH"
fi
export PATH

installed_version () {
  # `tflint --version` prints "TFLint version 0.64.0" on its first line.
  "$1" --version 2>/dev/null | sed -n 's/^TFLint version \([0-9.]*\).*/v\1/p' | head -n1
}

TFLINT="$GOBIN_DIR/tflint"
if [ ! -x "$TFLINT" ] || [ "$(installed_version "$TFLINT")" != "$TFLINT_VERSION" ]; then
  if ! command -v go >/dev/null 2>&1; then
    echo "install-tflint: go is not installed; cannot build tflint $TFLINT_VERSION" >&2
    exit 1
  fi
  mkdir -p "$GOBIN_DIR"
  echo "install-tflint: building tflint $TFLINT_VERSION into $GOBIN_DIR" >&2
  start=$(date +%s)
  GOBIN="$GOBIN_DIR" GOFLAGS="${GOFLAGS:-} -buildvcs=false" \
    go install "github.com/terraform-linters/tflint@$TFLINT_VERSION"
  echo "install-tflint: go install took $(( $(date +%s) - start ))s" >&2
fi

got="$(installed_version "$TFLINT")"
if [ "$got" != "$TFLINT_VERSION" ]; then
  echo "install-tflint: expected tflint $TFLINT_VERSION, found '${got:-nothing}'" >&2
  exit 1
fi

if [ "${1:-}" = "--install" ]; then
  echo "$TFLINT"
  exit 0
fi

# The plugin cache dir stays project-local so tflint never reaches for
# ~/.tflint.d; the bundled terraform ruleset needs no download (see
# terraform/.tflint.hcl).
export TFLINT_PLUGIN_DIR="$CACHE_DIR/plugins"
mkdir -p "$TFLINT_PLUGIN_DIR"
"$TFLINT" --chdir "$ROOT/terraform" --format compact --no-color --minimum-failure-severity=notice
echo "install-tflint: tflint $TFLINT_VERSION reported no issues in terraform/" >&2
