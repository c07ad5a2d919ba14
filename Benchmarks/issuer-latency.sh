#!/usr/bin/env bash
# The issuer's App Attest exchange latency (docs/issuer.md): median, p99 and max of exchangeAppAttestAttestation
# (a new simulated device each call) and exchangeAppAttestAssertion (one device, counter rising) over N calls, one
# client thread, one loop thread, HTTP/1.1 on 127.0.0.1 with a new connection per call, for each state store.
# Runs `appcheck-gateway-bench issuer` (the development executable, which links AppAttestSimulator; the
# appcheck-gateway binary has no benchmark commands). Needs `make release` first.
#
# usage: Benchmarks/issuer-latency.sh [--calls 1000] [--states memory,sqlite]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${APPCHECK_GATEWAY_BENCH_BIN:-$root/.build/release/appcheck-gateway-bench}"
CALLS=1000
STATES="memory,sqlite"
while (($#)); do
    case "$1" in
        --calls) CALLS="$2"; shift 2 ;;
        --states) STATES="$2"; shift 2 ;;
        *) echo "usage: $0 [--calls N] [--states memory,sqlite]" >&2; exit 2 ;;
    esac
done
[ -x "$bin" ] || { echo "issuer-latency: $bin not found; run 'make release' first" >&2; exit 1; }
echo "openssl speed on this machine (what one exchange must at least pay):"
openssl speed -seconds 1 rsa2048 ecdsap256 2>/dev/null | grep -E "^rsa 2048|nistp256" || true
IFS=, read -ra states <<<"$STATES"
for state in "${states[@]}"; do
    "$bin" issuer --calls "$CALLS" --state "$state" </dev/null
done
