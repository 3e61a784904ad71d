#!/usr/bin/env bash
# Install AWS's DynamoDB Local 2.x (com.amazonaws:DynamoDBLocal, from Maven
# Central) so the DynamoDB suites can run against it as well as dynalite
# (test/helpers/dynamo-backends.js). Only when the cache lacks it: a later run
# on the same machine does nothing.
#
# Why Maven and not AWS's zip: the CI machines reach Maven Central but not
# AWS's download site. `mvn dependency:copy-dependencies` over
# .ci/dynamodb-local/pom.xml fetches the jar, its dependencies and
# sqlite4java's native libraries, which DynamoDB Local loads through
# -Djava.library.path (test/helpers/dynamodb-local.js passes it).
#
# Layout of the cache dir (outside the clone; DYNAMODB_LOCAL_DIR moves it):
#   lib/      DynamoDBLocal-<version>.jar and every runtime dependency
#   native/   libsqlite4java-*.so (and the other platforms' libraries)
#   version   written last: its presence means the install is complete
# Maven's own repository (plugins, a second copy of the jars: 80 MB) lives in
# the staging dir and goes with it; a cold fetch takes about 10 s.
#
# Needs java (17+) and mvn on PATH; .ci/run installs Debian's
# default-jre-headless and maven when they are missing.
#
# Usage: .ci/install-dynamodb-local.sh    install if needed; prints the dir
set -euo pipefail

DYNAMODB_LOCAL_VERSION="${DYNAMODB_LOCAL_VERSION:-2.6.1}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${DYNAMODB_LOCAL_DIR:-$HOME/.cache/chopper-dynamodb-local}"

# sqlite4java's name for this machine's native library (it ships amd64 and
# i386 ones for Linux; elsewhere the check below says so).
case "$(uname -m)" in
  x86_64 | amd64) NATIVE="libsqlite4java-linux-amd64-*.so" ;;
  i?86) NATIVE="libsqlite4java-linux-i386-*.so" ;;
  *) NATIVE="libsqlite4java-linux-$(uname -m)-*.so" ;;
esac

complete () {
  [ "$(cat "$1/version" 2>/dev/null)" = "$DYNAMODB_LOCAL_VERSION" ] &&
    compgen -G "$1/lib/DynamoDBLocal-*.jar" >/dev/null &&
    compgen -G "$1/native/$NATIVE" >/dev/null
}

if complete "$DIR"; then
  echo "$DIR"
  exit 0
fi

for tool in java mvn; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "install-dynamodb-local: $tool is not installed (Debian: apt-get install default-jre-headless maven)" >&2
    exit 1
  fi
done

echo "install-dynamodb-local: fetching DynamoDB Local $DYNAMODB_LOCAL_VERSION into $DIR" >&2
start=$(date +%s)
mkdir -p "$DIR"
# Fetch into a staging dir and swap it in, so an interrupted run never leaves
# a cache that looks complete.
STAGE="$(mktemp -d "$DIR/.staging.XXXXXX")"
trap 'rm -rf "$STAGE"' EXIT
# Maven's log is shown only when it fails (even -q prints colour codes).
if ! mvn -B -Dstyle.color=never -f "$ROOT/.ci/dynamodb-local/pom.xml" \
  -Dmaven.repo.local="$STAGE/m2" \
  -Ddynamodb.local.version="$DYNAMODB_LOCAL_VERSION" \
  dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$STAGE/all" >"$STAGE/mvn.log" 2>&1; then
  cat "$STAGE/mvn.log" >&2
  echo "install-dynamodb-local: mvn failed (log above)" >&2
  exit 1
fi
mkdir -p "$STAGE/lib" "$STAGE/native"
mv "$STAGE"/all/*.jar "$STAGE/lib/"
# Whatever is not a jar is a native library (.so, .dylib, .dll).
find "$STAGE/all" -maxdepth 1 -type f -exec mv {} "$STAGE/native/" \;
echo "$DYNAMODB_LOCAL_VERSION" >"$STAGE/version"
if ! complete "$STAGE"; then
  echo "install-dynamodb-local: the fetch lacks DynamoDBLocal-*.jar or $NATIVE; got:" >&2
  ls "$STAGE/lib" "$STAGE/native" >&2
  exit 1
fi

rm -f "$DIR/version"
rm -rf "${DIR:?}/lib" "${DIR:?}/native"
mv "$STAGE/lib" "$STAGE/native" "$DIR/"
mv "$STAGE/version" "$DIR/version"
echo "install-dynamodb-local: done in $(($(date +%s) - start))s" >&2
echo "$DIR"
