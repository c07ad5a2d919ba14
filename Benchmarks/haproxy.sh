#!/usr/bin/env bash
# The verifying peer on its own: starts the static nginx backend and HAProxy 2.6 with jwt_verify (one thread,
# `http-reuse always`; the configuration is start_haproxy in Benchmarks/lib.sh), makes an RSA-3072 key with
# the gateway's keygen, and checks that HAProxy accepts a good token and refuses (401) none, a changed payload,
# another key's signature, alg "none", an expired token and another project's issuer. With --serve it then
# stays up (Ctrl-C stops everything) and prints the port, the key and a good token, for trying it by hand.
# Benchmarks/run.sh --cases haproxy measures it against the gateway and nginx.
#
# usage: Benchmarks/haproxy.sh [--serve]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SERVE=0
[[ "${1:-}" == --serve ]] && SERVE=1
for tool in haproxy nginx openssl python3; do
    command -v "$tool" >/dev/null || die "$tool not found (make deps-bench installs haproxy and nginx)"
done
[[ -x "$GATEWAY_BIN" ]] || die "no gateway binary at $GATEWAY_BIN (make release; or GATEWAY_BIN=...)"
bench_init
read -r BACKEND_PORT HAPROXY_PORT <<<"$(free_ports 2)"
PROJECT_NUMBER=123456789012
start_backend "$BACKEND_PORT"
"$GATEWAY_BIN" keygen --bits 3072 --key "$BENCH_TMP/key.pem" --jwks "$BENCH_TMP/jwks.json" >/dev/null || die "keygen failed"
openssl pkey -in "$BENCH_TMP/key.pem" -pubout -out "$BENCH_TMP/pub.pem" || die "openssl could not write the public key"
TOKEN="$("$GATEWAY_BIN" mint --key "$BENCH_TMP/key.pem" --project-number "$PROJECT_NUMBER" \
    --app-id "1:$PROJECT_NUMBER:ios:0123456789abcdef")"
start_haproxy "$HAPROXY_PORT" "$BACKEND_PORT" "$BENCH_TMP/pub.pem" "$PROJECT_NUMBER"
log "$(haproxy -v | head -n 1)"
verifier_sanity HAProxy "http://127.0.0.1:$HAPROXY_PORT/" "$TOKEN" "$BENCH_TMP/key.pem"
if ((SERVE)); then
    log "HAProxy on 127.0.0.1:$HAPROXY_PORT (config $BENCH_TMP/haproxy/haproxy.cfg, key $BENCH_TMP/pub.pem)"
    log "try: curl -i -H 'X-Firebase-AppCheck: $TOKEN' http://127.0.0.1:$HAPROXY_PORT/"
    wait "$HAPROXY_PID"
fi
