#!/usr/bin/env bash
# docs/examples/python/dpop_client.py (PyJWT and cryptography from PyPI, in a throwaway virtualenv) against a real
# `appcheck-gateway serve` with an issuer and a plain upstream: the client exchanges with a proof, calls the API with
# fresh proofs, and every SPEC §4.4 rule is refused on its own (Tests/examples/dpop_rules.py). Ends with
# `dpop-python: PASS` or `FAIL`; exits non-zero on any difference.
#
# Environment: APPCHECK_GATEWAY_BIN (default .build/debug/appcheck-gateway).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${APPCHECK_GATEWAY_BIN:-$root/.build/debug/appcheck-gateway}"
number="123456789012"
app="1:$number:web:0a1b2c3d4e5f6a7b"
open_app="1:$number:web:0a1b2c3d4e5f6a7c"
secret="debug-secret-0123456789abcdef"

[ -x "$bin" ] || { echo "dpop-python: $bin not found; run 'swift build' first" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/appcheck-dpop.XXXXXX")"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

echo "dpop-python: virtualenv + PyJWT and cryptography from PyPI"
python3 -m venv "$work/venv" </dev/null
"$work/venv/bin/pip" install -q --disable-pip-version-check "pyjwt[crypto]" </dev/null

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
mkdir -p "$work/www/api" "$work/www/strict"
echo ok >"$work/www/api/items"
echo ok >"$work/www/strict/items"
upstream_port="$(free_port)"
python3 -m http.server "$upstream_port" --bind 127.0.0.1 --directory "$work/www" >"$work/upstream.log" 2>&1 </dev/null &
pids+=($!)

"$bin" keygen --key "$work/issuer.pem" --jwks "$work/issuer-jwks.json" >/dev/null </dev/null
port="$(free_port)"
cat >"$work/gateway.yaml" <<YAML
server:
  listen: ["127.0.0.1:$port"]
app_check:
  project_number: "$number"
  jwks: { url: none }
upstreams:
  www: { url: "http://127.0.0.1:$upstream_port" }
routes:
  - { name: api, prefix: /api/, upstream: www, enforcement: enforce }
  - { name: strict, prefix: /strict/, upstream: www, enforcement: enforce, dpop: required }
issuer:
  issuer_url: http://127.0.0.1:$port/appcheck
  signing_keys: [$work/issuer.pem]
  apps:
    - app_id: "$app"
      debug_secrets: ["$secret"]
      require_dpop: true
    - app_id: "$open_app"
      debug_secrets: ["$secret"]
YAML
"$bin" serve --config "$work/gateway.yaml" >"$work/gateway.log" 2>&1 </dev/null &
pids+=($!)
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$port/appcheck/v1/jwks" >/dev/null 2>&1 && break
  kill -0 "${pids[1]}" 2>/dev/null || { cat "$work/gateway.log" >&2; echo "dpop-python: the gateway exited" >&2; exit 1; }
  sleep 0.1
done
# The replay store's state begins at start: proofs made in its first second would count as made before it.
sleep 1.1

exchange="http://127.0.0.1:$port/appcheck/v1/projects/$number/apps/$app:exchangeDebugToken"
open_exchange="http://127.0.0.1:$port/appcheck/v1/projects/$number/apps/$open_app:exchangeDebugToken"
"$work/venv/bin/python" "$here/dpop_rules.py" "http://127.0.0.1:$port" "$exchange" "$secret" "$open_exchange" \
  "$root/docs/examples/python" || { tail -5 "$work/gateway.log" >&2; exit 1; }
