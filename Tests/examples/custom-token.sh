#!/usr/bin/env bash
# The custom-token examples of docs/issuer.md, run as a user would: docs/examples/custom-token/mint.py (PyJWT from
# PyPI, in a throwaway virtualenv) and mint.mjs (Node, no packages) sign tokens with a backend key made by our
# keygen; a real `appcheck-gateway serve` with that backend in issuer.custom_token_issuers exchanges each once
# (200, provider "custom") and refuses it the second time (403). Exits non-zero on any difference.
#
# Environment: APPCHECK_GATEWAY_BIN (default .build/debug/appcheck-gateway).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${APPCHECK_GATEWAY_BIN:-$root/.build/debug/appcheck-gateway}"
examples="$root/docs/examples/custom-token"
number="123456789012"
app="1:$number:web:0a1b2c3d4e5f6a7b"
iss="backend@example.com"
issuer_url="http://127.0.0.1/appcheck"

[ -x "$bin" ] || { echo "examples: $bin not found; run 'swift build' first" >&2; exit 1; }
command -v node >/dev/null || { echo "examples: node not found (apt-get install nodejs)" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/appcheck-examples.XXXXXX")"
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "examples: virtualenv + PyJWT from PyPI"
python3 -m venv "$work/venv" </dev/null
"$work/venv/bin/pip" install -q --disable-pip-version-check "pyjwt[crypto]" </dev/null

"$bin" keygen --key "$work/backend.pem" --jwks "$work/backend-jwks.json" --kid backend-1 >/dev/null </dev/null
"$bin" keygen --key "$work/issuer.pem" --jwks "$work/issuer-jwks.json" >/dev/null </dev/null
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"

cat >"$work/gateway.yaml" <<YAML
server:
  listen: ["127.0.0.1:$port"]
app_check:
  project_number: "$number"
  jwks: { url: "file://$work/issuer-jwks.json" }
upstreams:
  none: { url: "http://127.0.0.1:9" }
routes:
  - { name: all, prefix: /, upstream: none, enforcement: enforce }
issuer:
  issuer_url: $issuer_url
  signing_keys: [$work/issuer.pem]
  apps:
    - app_id: "$app"
  custom_token_issuers:
    - iss: $iss
      jwks_url: file://$work/backend-jwks.json
YAML
"$bin" serve --config "$work/gateway.yaml" >"$work/gateway.log" 2>&1 </dev/null &
pid=$!
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$port/appcheck/v1/jwks" >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/gateway.log" >&2; echo "examples: the gateway exited" >&2; exit 1; }
  sleep 0.1
done

url="http://127.0.0.1:$port/appcheck/v1/projects/$number/apps/$app:exchangeCustomToken"
exchange() { # token → HTTP status, body in $work/body
  curl -s -o "$work/body" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data "{\"custom_token\":\"$1\",\"limited_use\":false}" "$url"
}
failed=0
for example in python node; do
  if [ "$example" = python ]; then
    token="$("$work/venv/bin/python" "$examples/mint.py" "$work/backend.pem" backend-1 "$iss" "$issuer_url" "$app")"
  else
    token="$(node "$examples/mint.mjs" "$work/backend.pem" backend-1 "$iss" "$issuer_url" "$app")"
  fi
  first="$(exchange "$token")"
  if [ "$first" != 200 ] || ! grep -q '"token"' "$work/body"; then
    echo "examples: $example: first exchange answered $first: $(cat "$work/body")"; failed=1; continue
  fi
  provider="$(python3 -c 'import base64,json,sys; t=json.load(open(sys.argv[1]))["token"].split(".")[1]; print(json.loads(base64.urlsafe_b64decode(t+"="*(-len(t)%4)))["provider"])' "$work/body")"
  second="$(exchange "$token")"
  if [ "$provider" != custom ] || [ "$second" != 403 ]; then
    echo "examples: $example: provider '$provider', second exchange $second (want custom, 403)"; failed=1; continue
  fi
  echo "examples: $example: minted once (provider custom), refused the second time"
done
exit "$failed"
