#!/usr/bin/env bash
# OIDC discovery for minted tokens, and App Check with no Google service at all (docs/issuer.md), run as a user
# would: a real `appcheck-gateway serve` with `app_check.jwks: { url: none }` (Firebase's key set never fetched) and
# an issuer whose issuer_url path (/tenant) differs from its base_path (/appcheck). It must be ready at once
# (`healthcheck`), mint a token on a debug exchange, verify it itself (`verify`, no network), and
# docs/examples/oidc-discovery/verify.py (PyJWT's PyJWKClient and requests from PyPI, in a throwaway virtualenv)
# must verify the token from the discovery document alone, and refuse it for another audience. Ends with one
# "oidc-discovery: PASS" or "oidc-discovery: FAIL" line; exits non-zero on failure.
#
# Environment: APPCHECK_GATEWAY_BIN (default .build/debug/appcheck-gateway).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${APPCHECK_GATEWAY_BIN:-$root/.build/debug/appcheck-gateway}"
verify_py="$root/docs/examples/oidc-discovery/verify.py"
number="123456789012"
app="1:$number:ios:0a1b2c3d4e5f6a7b"
secret="oidc-example-debug-secret-0123456789"

[ -x "$bin" ] || { echo "oidc-discovery: $bin not found; run 'swift build' first" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/appcheck-oidc.XXXXXX")"
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "oidc-discovery: $*"; echo "oidc-discovery: FAIL"; exit 1; }
trap 'echo "oidc-discovery: FAIL (line $LINENO)"' ERR

echo "oidc-discovery: virtualenv + PyJWT and requests from PyPI"
python3 -m venv "$work/venv" </dev/null
"$work/venv/bin/pip" install -q --disable-pip-version-check "pyjwt[crypto]" requests </dev/null

"$bin" keygen --key "$work/issuer.pem" --jwks "$work/issuer-jwks.json" >/dev/null </dev/null
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port="$(free_port)"
admin="$(free_port)"
issuer_url="http://127.0.0.1:$port/tenant"
iss="$issuer_url/$number"

cat >"$work/gateway.yaml" <<YAML
server:
  listen: ["127.0.0.1:$port"]
  admin_listen: "127.0.0.1:$admin"
app_check:
  project_number: "$number"
  jwks: { url: none }
upstreams:
  none: { url: "http://127.0.0.1:9" }
routes:
  - { name: all, prefix: /, upstream: none, enforcement: enforce }
issuer:
  base_path: /appcheck
  issuer_url: $issuer_url
  signing_keys: [$work/issuer.pem]
  apps:
    - app_id: "$app"
      debug_secrets: ["$secret"]
YAML
"$bin" check-config --config "$work/gateway.yaml" >"$work/check.txt" </dev/null || fail "check-config refused the config: $(cat "$work/check.txt")"
grep -q "not used (app_check.jwks.url: none)" "$work/check.txt" || fail "check-config does not say Firebase's key set is unused"

"$bin" serve --config "$work/gateway.yaml" >"$work/gateway.log" 2>&1 </dev/null &
pid=$!
ready=""
for _ in $(seq 1 100); do
  if "$bin" healthcheck --config "$work/gateway.yaml" >/dev/null 2>&1 </dev/null; then ready=1; break; fi
  kill -0 "$pid" 2>/dev/null || { cat "$work/gateway.log" >&2; fail "the gateway exited"; }
  sleep 0.1
done
[ -n "$ready" ] || fail "not ready with url: none: $("$bin" healthcheck --config "$work/gateway.yaml" 2>&1 </dev/null || true)"
if grep -q "googleapis" "$work/gateway.log"; then fail "the gateway tried Firebase's key set: $(grep googleapis "$work/gateway.log")"; fi

status="$(curl -s -o "$work/body" -w '%{http_code}' -H 'Content-Type: application/json' \
  --data "{\"debug_token\":\"$secret\"}" \
  "http://127.0.0.1:$port/appcheck/v1/projects/$number/apps/$app:exchangeDebugToken")"
[ "$status" = 200 ] || fail "debug exchange answered $status: $(cat "$work/body")"
token="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "$work/body")"

"$bin" verify --config "$work/gateway.yaml" -- "$token" >"$work/verify.txt" 2>&1 </dev/null \
  || fail "appcheck-gateway verify refused its own token: $(cat "$work/verify.txt")"

claims="$("$work/venv/bin/python" "$verify_py" "$iss" "$number" "$token")" || fail "PyJWT refused the token"
echo "oidc-discovery: PyJWT verified through $iss/.well-known/openid-configuration: $claims"
case "$claims" in *"\"sub\": \"$app\""*) ;; *) fail "unexpected claims: $claims" ;; esac
if "$work/venv/bin/python" "$verify_py" "$iss" "999999999999" "$token" >/dev/null 2>&1; then
  fail "PyJWT accepted the token for another project's audience"
fi
echo "oidc-discovery: PASS"
