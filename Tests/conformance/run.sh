#!/usr/bin/env bash
# Conformance with the official verifier: every corpus token goes through firebase-admin's
# app_check.verify_token (installed from PyPI into a throwaway virtualenv) and through our
# `appcheck-gateway verify`. See Tests/conformance/README.md.
#
# Environment: APPCHECK_GATEWAY_BIN (default .build/debug/appcheck-gateway),
#              CONFORMANCE_KEEP=1 keeps the work directory (corpus.jsonl, results.jsonl) for inspection.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${APPCHECK_GATEWAY_BIN:-$root/.build/debug/appcheck-gateway}"
number="123456789012"
project="conformance-project"

if [ ! -x "$bin" ]; then
  echo "conformance: $bin not found; run 'swift build' first" >&2
  exit 1
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/appcheck-conformance.XXXXXX")"
cleanup() {
  if [ "${CONFORMANCE_KEEP:-0}" = 1 ]; then echo "conformance: work directory kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

# Pinned: the verdicts compared (and the stricter-than-the-SDK rules in check.py) are those of these versions.
echo "conformance: virtualenv + firebase-admin from PyPI (Tests/conformance/requirements.txt)"
python3 -m venv "$work/venv" </dev/null
"$work/venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt" </dev/null
py="$work/venv/bin/python"

echo "conformance: keys (our keygen) and tokens (our mint)"
"$bin" keygen --key "$work/key-a.pem" --jwks "$work/jwks-a.json" --bits 3072 --kid conf-a-3072 >/dev/null </dev/null
"$bin" keygen --key "$work/key-b.pem" --jwks "$work/jwks-b.json" --kid conf-b-2048 >/dev/null </dev/null
"$bin" keygen --key "$work/key-s.pem" --jwks "$work/jwks-s.json" --kid conf-stranger >/dev/null </dev/null

mint() { # name, then mint options
  local name="$1"; shift
  echo "# $name"
  "$bin" mint --project-number "$number" --project-id "$project" "$@" </dev/null
}
{
  mint a3072-android-1h --key "$work/key-a.pem" --kid conf-a-3072 --app-id "1:$number:android:00aa11bb22cc33dd"
  mint a3072-ios-30m --key "$work/key-a.pem" --kid conf-a-3072 --app-id "1:$number:ios:44ee55ff66aa77bb" --ttl 30m
  mint a3072-web-7d --key "$work/key-a.pem" --kid conf-a-3072 --app-id "1:$number:web:8899aabbccddeeff" --ttl 7d
  mint a3072-limited-use --key "$work/key-a.pem" --kid conf-a-3072 --app-id "1:$number:android:00aa11bb22cc33dd" --limited-use
  mint b2048-android-1h --key "$work/key-b.pem" --kid conf-b-2048 --app-id "1:$number:android:00aa11bb22cc33dd"
  mint b2048-limited-use-x3 --key "$work/key-b.pem" --kid conf-b-2048 --app-id "1:$number:ios:44ee55ff66aa77bb" --limited-use --count 3
} >"$work/minted.txt"

cat >"$work/config.yaml" <<EOF
# clock_skew 0s: the official SDK has no leeway, so the time rules are compared exactly.
app_check:
  project_number: "$number"
  project_id: "$project"
  jwks:
    url: "file://$work/jwks.json"
  clock_skew: 0s
upstreams:
  none:
    url: http://127.0.0.1:9
routes:
  - name: all
    prefix: /
    upstream: none
    enforcement: enforce
EOF

echo "conformance: corpus"
"$py" "$here/corpus.py" "$work" "$number" "$project" </dev/null

echo "conformance: verifying every token with both verifiers"
"$py" "$here/check.py" "$work" "$bin" "$work/config.yaml" "$number" "$project" </dev/null
