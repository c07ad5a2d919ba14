#!/usr/bin/env bash
# Instructions per request under valgrind --tool=callgrind (threads 1), the gateway and nginx on the same workload.
#
# usage: Benchmarks/callgrind.sh [--requests 20000] [--warmup 2000] [--fresh-requests 2000] [--top 25]
#                                 [--cases off,enforce,cycled,fresh,h2tls,dpop,grpc] [--no-nginx]
#
# Wall-clock numbers on a shared 2-core machine are noisy; instruction counts for a fixed number of requests
# are repeatable to well under 1%, so compare these figures before/after a change. The measured window is
# exactly the N requests: counters are zeroed (callgrind_control -z) after start-up and the warm-up requests,
# and dumped (callgrind_control -d) right after the last response. HTTP/1.1 cases use one keep-alive
# connection and sequential requests (Benchmarks/kaclient.py); the backend is a static nginx. Cases (issue 10's
# A-E):
#   off      (A) an `enforcement: off` route, no token
#   enforce  (B) an `enforcement: enforce` route, the same valid session token on every request (a token-cache
#            hit after the first), RSA-2048 key set from a local issuer (keygen)
#   cycled   (C) an enforce route, 1,000 RSA-3072 session tokens sent in turn; the warm-up sends each once, so
#            the measured requests are all cache hits
#   fresh    (D) an enforce route with replay_protection (memory store), a fresh limited-use RSA-2048 token per
#            request (--fresh-requests of them: RSA verification is slow under valgrind); the table also gives
#            the RSA verification's own cost (SHA-256 of the signing input and the RSA operation, inclusive Ir per
#            request; see below)
#   h2tls    (E) HTTP/2 over TLS: h2load -c4 -m10 (ALPN h2) with one session token on an enforce route; each
#            h2load run opens 4 connections, so 4 TLS handshakes are inside the window on both sides
#   dpop     (F) an enforce route with `dpop: required` (memory replay store), one session token bound to a P-256
#            device key (`cnf.jkt`, a cache hit after the first request) and a fresh DPoP proof per request
#            (--fresh-requests of them, each its own `jti`; made by `appcheck-gateway-bench dpop` 11 s after the
#            start, so `dpop_max_age` is 1h for the run: the proofs' `iat` ages while valgrind runs). The table also
#            gives the ECDSA P-256 verification's own cost (the SHA-256 of the signing input and EVP_PKEY_verify, inclusive;
#            see below) and F's rest over case B
#   grpc     (G) gRPC unary over h2c end to end: h2load -c4 -m10 POSTs a 7-byte gRPC message
#            (`content-type: application/grpc`, `te: trailers`, one session token) to an enforce route whose upstream
#            is `protocol: h2`; the upstream is nginx (h2c) answering every call with a gRPC message and the trailer
#            `grpc-status: 0`; the peer is nginx `grpc_pass` to the same upstream. Needs a gateway with HTTP/2 upstreams.
# The nginx peer (1 process, `proxy_pass` with upstream keep-alive, `ssl http2` for h2tls; Benchmarks/lib.sh) runs
# under callgrind on the same requests, token header included, so the ratio is measured in the same run. For
# `fresh` it is the same plain proxy (nginx verifies nothing): the target there is "RSA verify + k x off".
# Needs `make release` first (and h2load for h2tls: make deps-bench).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REQUESTS=20000
WARMUP=2000
FRESH_REQUESTS=2000
FRESH_WARMUP=200
TOP=25
CASES="off,enforce"
NGINX=1
while (($#)); do
    case "$1" in
        --requests) REQUESTS="$2"; shift 2 ;;
        --warmup) WARMUP="$2"; shift 2 ;;
        --fresh-requests) FRESH_REQUESTS="$2"; shift 2 ;;
        --top) TOP="$2"; shift 2 ;;
        --cases) CASES="$2"; shift 2 ;;
        --no-nginx) NGINX=0; shift ;;
        -h|--help) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
for n in "$REQUESTS" "$WARMUP" "$FRESH_REQUESTS"; do
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "request counts must be positive numbers" >&2; exit 2; }
done
for c in ${CASES//,/ }; do
    case "$c" in off|enforce|cycled|fresh|h2tls|dpop|grpc) ;;
        *) echo "unknown case: $c (off, enforce, cycled, fresh, h2tls, dpop, grpc)" >&2; exit 2 ;;
    esac
done
has_case() { [[ ",$CASES," == *",$1,"* ]]; }
tools=(objcopy valgrind callgrind_control callgrind_annotate nginx python3)
has_case h2tls && tools+=(h2load openssl)
has_case grpc && tools+=(h2load)
for tool in "${tools[@]}"; do
    command -v "$tool" >/dev/null || die "$tool not found (make deps-bench installs valgrind, nginx and h2load)"
done

bench_init
STAMP="$(date +%Y%m%d-%H%M%S)"
OUT_DIR="$BENCH_DIR/out"
mkdir -p "$OUT_DIR"
read -r BACKEND_PORT GATEWAY_PORT ADMIN_PORT NGINX_PORT GATEWAY_TLS_PORT NGINX_TLS_PORT <<<"$(free_ports 6)"
PROJECT_NUMBER=123456789012
APP_ID="1:$PROJECT_NUMBER:ios:0123456789abcdef"
start_backend "$BACKEND_PORT"

# Valgrind 3.19 (bookworm) cannot read the DWARF 5 debug info Swift emits ("unhandled dwarf2 abbrev form
# code 0x25 ... I can't recover"), so profile a copy with the debug sections stripped; the symbol table stays,
# so function names still resolve.
objcopy --strip-debug "$GATEWAY_BIN" "$BENCH_TMP/appcheck-gateway"
REAL_BIN="$GATEWAY_BIN"

# Keys and tokens. RSA-2048 for enforce, fresh and h2tls; RSA-3072 for cycled. One key set holds both.
TOKEN=""
if has_case enforce || has_case fresh || has_case h2tls || has_case cycled || has_case dpop || has_case grpc; then
    "$REAL_BIN" keygen --key "$BENCH_TMP/key.pem" --jwks "$BENCH_TMP/jwks2048.json" >/dev/null || die "keygen failed"
    TOKEN="$("$REAL_BIN" mint --key "$BENCH_TMP/key.pem" --project-number "$PROJECT_NUMBER" --app-id "$APP_ID" | head -n 1)"
    [[ -n "$TOKEN" ]] || die "mint printed no token"
    cp "$BENCH_TMP/jwks2048.json" "$BENCH_TMP/jwks.json"
fi
if has_case cycled; then
    "$REAL_BIN" keygen --bits 3072 --key "$BENCH_TMP/key3072.pem" --jwks "$BENCH_TMP/jwks3072.json" >/dev/null \
        || die "keygen --bits 3072 failed"
    python3 - "$BENCH_TMP/jwks2048.json" "$BENCH_TMP/jwks3072.json" >"$BENCH_TMP/jwks.json" <<'PY'
import json, sys
keys = [k for f in sys.argv[1:] for k in json.load(open(f))["keys"]]
print(json.dumps({"keys": keys}))
PY
    "$REAL_BIN" mint --key "$BENCH_TMP/key3072.pem" --project-number "$PROJECT_NUMBER" --app-id "$APP_ID" \
        --count 1000 >"$BENCH_TMP/cycled.tokens" || die "mint --count 1000 failed"
    [[ "$(sort -u "$BENCH_TMP/cycled.tokens" | wc -l)" -eq 1000 ]] || die "the 1,000 cycled tokens are not distinct"
fi
if has_case h2tls; then
    mkdir -p "$BENCH_TMP/tls"
    openssl req -x509 -newkey rsa:2048 -sha256 -nodes -days 2 -subj "/CN=localhost" \
        -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -addext "extendedKeyUsage=serverAuth" \
        -keyout "$BENCH_TMP/tls/key.pem" -out "$BENCH_TMP/tls/cert.pem" >/dev/null 2>&1 \
        || die "openssl could not make the benchmark certificate"
fi

if has_case grpc; then
    read -r GRPC_PORT GRPC_CHECK_PORT NGINX_GRPC_PORT NGINX_GRPC_CHECK_PORT <<<"$(free_ports 4)"
    start_grpc_backend "$GRPC_PORT" "$GRPC_CHECK_PORT"
fi

# client CASE PORT WHICH: sends a case's warm-up (WHICH=warmup) or measured (WHICH=measure) requests.
client() {
    local c="$1" port="$2" which="$3" n
    case "$c" in
        off)
            n=$([[ "$which" == warmup ]] && echo "$WARMUP" || echo "$REQUESTS")
            python3 "$BENCH_DIR/kaclient.py" --port "$port" --requests "$n" >/dev/null ;;
        enforce)
            n=$([[ "$which" == warmup ]] && echo "$WARMUP" || echo "$REQUESTS")
            python3 "$BENCH_DIR/kaclient.py" --port "$port" --requests "$n" \
                --header "X-Firebase-AppCheck: $TOKEN" >/dev/null ;;
        cycled)
            n=$([[ "$which" == warmup ]] && echo $((WARMUP > 1000 ? WARMUP : 1000)) || echo "$REQUESTS")
            python3 "$BENCH_DIR/kaclient.py" --port "$port" --requests "$n" --tokens "$BENCH_TMP/cycled.tokens" \
                --cycle >/dev/null ;;
        fresh)
            if [[ "$which" == warmup ]]; then
                python3 "$BENCH_DIR/kaclient.py" --port "$port" --requests "$FRESH_WARMUP" \
                    --tokens "$BENCH_TMP/fresh.tokens" >/dev/null
            else
                python3 "$BENCH_DIR/kaclient.py" --port "$port" --requests "$FRESH_REQUESTS" \
                    --tokens "$BENCH_TMP/fresh.tokens" --token-offset "$FRESH_WARMUP" >/dev/null
            fi ;;
        dpop)
            local token
            token="$(head -n 1 "$BENCH_TMP/dpop.txt")"
            if [[ "$which" == warmup ]]; then
                python3 "$BENCH_DIR/kaclient.py" --port "$port" --requests "$FRESH_WARMUP" \
                    --header "X-Firebase-AppCheck: $token" --proofs "$BENCH_TMP/dpop.proofs" >/dev/null
            else
                python3 "$BENCH_DIR/kaclient.py" --port "$port" --requests "$FRESH_REQUESTS" \
                    --header "X-Firebase-AppCheck: $token" --proofs "$BENCH_TMP/dpop.proofs" \
                    --proof-offset "$FRESH_WARMUP" >/dev/null
            fi ;;
        grpc)
            n=$([[ "$which" == warmup ]] && echo "$WARMUP" || echo "$REQUESTS")
            local out="$BENCH_TMP/h2load-grpc-$which.txt"
            timeout -k 5 1800 h2load -n "$n" -c4 -m10 -t1 -d "$BENCH_TMP/grpc-request.bin" \
                -H "content-type: application/grpc" -H "te: trailers" -H "x-firebase-appcheck: $TOKEN" \
                "http://127.0.0.1:$port/bench.Echo/Say" >"$out" 2>&1 || { cat "$out" >&2; return 1; }
            grep -q "requests: $n total, $n started, $n done, $n succeeded, 0 failed, 0 errored" "$out" \
                && grep -q "status codes: $n 2xx" "$out" || { cat "$out" >&2; return 1; } ;;
        h2tls)
            n=$([[ "$which" == warmup ]] && echo "$WARMUP" || echo "$REQUESTS")
            local out="$BENCH_TMP/h2load-$which.txt"
            timeout -k 5 1800 h2load -n "$n" -c4 -m10 -t1 -H "x-firebase-appcheck: $TOKEN" \
                "https://127.0.0.1:$port/" >"$out" 2>&1 || { cat "$out" >&2; return 1; }
            grep -q "requests: $n total, $n started, $n done, $n succeeded, 0 failed, 0 errored" "$out" \
                && grep -q "status codes: $n 2xx" "$out" || { cat "$out" >&2; return 1; } ;;
    esac
}

case_requests() { [[ "$1" == fresh || "$1" == dpop ]] && echo "$FRESH_REQUESTS" || echo "$REQUESTS"; }

# measure NAME CASE PID PORT OUT: warm-up, zero, the measured requests, dump; prints the instructions per
# request and keeps the profile as $OUT_DIR/callgrind-$STAMP-NAME.out.
measure() {
    local name="$1" c="$2" pid="$3" port="$4" out="$5" dump ir
    client "$c" "$port" warmup || die "$name: warm-up failed"
    callgrind_control -z "$pid" >/dev/null
    client "$c" "$port" measure || die "$name: requests failed"
    callgrind_control -d "$pid" >/dev/null
    dump="$(ls -t "$out.$pid".* 2>/dev/null | head -n 1 || true)"
    [[ -n "$dump" && -s "$dump" ]] || die "$name: no callgrind dump next to $out.$pid"
    ir="$(awk '/^(summary|totals):/ { print $2; exit }' "$dump")"
    [[ -n "$ir" ]] || die "$name: no instruction total in $dump"
    cp "$dump" "$OUT_DIR/callgrind-$STAMP-$name.out"
    awk -v ir="$ir" -v n="$(case_requests "$c")" 'BEGIN { printf "%.0f", ir / n }'
}

declare -A GW NG PROFILE
for c in ${CASES//,/ }; do
    GATEWAY_APP_CHECK_YAML="" GATEWAY_SERVER_YAML="" GATEWAY_EXTRA_YAML=""
    route='  - { name: bench, prefix: /, upstream: api, enforcement: enforce }'
    port="$GATEWAY_PORT"
    case "$c" in
        off) route='  - { name: bench, prefix: /, upstream: api, enforcement: off }' ;;
        fresh) route='  - { name: bench, prefix: /, upstream: api, enforcement: enforce, replay_protection: true }'
               GATEWAY_EXTRA_YAML=$'replay:\n  store: memory' ;;
        dpop) route='  - { name: bench, prefix: /, upstream: api, enforcement: enforce, dpop: required, dpop_max_age: 1h }'
              GATEWAY_EXTRA_YAML=$'replay:\n  store: memory' ;;
        h2tls) port="$GATEWAY_TLS_PORT"
               GATEWAY_SERVER_YAML="  tls:
    listen: [\"127.0.0.1:$GATEWAY_TLS_PORT\"]
    certificate: \"$BENCH_TMP/tls/cert.pem\"
    private_key: \"$BENCH_TMP/tls/key.pem\"" ;;
    esac
    [[ "$c" == off ]] || GATEWAY_APP_CHECK_YAML="  jwks: { url: \"file://$BENCH_TMP/jwks.json\" }"
    GATEWAY_APP_CHECK_YAML="$GATEWAY_APP_CHECK_YAML" GATEWAY_SERVER_YAML="$GATEWAY_SERVER_YAML" \
        GATEWAY_EXTRA_YAML="$GATEWAY_EXTRA_YAML" \
        write_gateway_config "$BENCH_TMP/gateway-$c.yaml" "$GATEWAY_PORT" "$ADMIN_PORT" "$BACKEND_PORT" 1 "$route"
    if [[ "$c" == grpc ]]; then
        sed -i "s|^  api: { url: \"http://127.0.0.1:$BACKEND_PORT\", max_idle_connections: 1024 }|  api: { url: \"http://127.0.0.1:$GRPC_PORT\", protocol: h2 }|" \
            "$BENCH_TMP/gateway-$c.yaml"
        grep -q "protocol: h2" "$BENCH_TMP/gateway-$c.yaml" || die "grpc: could not point the upstream at the h2c backend"
    fi
    CG_OUT="$BENCH_TMP/callgrind-gw-$c.out"
    log "gateway, $c: starting under callgrind (slow start-up is normal)"
    GATEWAY_BIN="$BENCH_TMP/appcheck-gateway" GATEWAY_START_TIMEOUT=180 start_gateway "$BENCH_TMP/gateway-$c.yaml" "$ADMIN_PORT" \
        valgrind --tool=callgrind --callgrind-out-file="$CG_OUT.%p" --dump-instr=no --vgdb=yes
    # Ready = the key set is loaded (a request before that is answered 503).
    # (The off case configures no key set, so it is never "ready": healthz is enough there.)
    [[ "$c" == off ]] || wait_http "http://127.0.0.1:$ADMIN_PORT/readyz" 120 "$GATEWAY_PID" \
        || die "gateway, $c: never ready (see $BENCH_TMP/gateway.stderr.log)"
    if [[ "$c" == dpop ]]; then
        # As for fresh: the replay store refuses proofs made before its start + clock_skew.
        sleep 11
        BENCH_EXE="${BENCH_BIN:-$(dirname "$REAL_BIN")/appcheck-gateway-bench}"
        [[ -x "$BENCH_EXE" ]] || die "dpop needs $BENCH_EXE (make release builds it)"
        "$BENCH_EXE" dpop --key "$BENCH_TMP/key.pem" --project-number "$PROJECT_NUMBER" --app-id "$APP_ID" \
            --htu "http://bench/" --count $((FRESH_WARMUP + FRESH_REQUESTS)) >"$BENCH_TMP/dpop.txt" \
            || die "appcheck-gateway-bench dpop failed"
        tail -n +2 "$BENCH_TMP/dpop.txt" >"$BENCH_TMP/dpop.proofs"
    fi
    if [[ "$c" == fresh ]]; then
        # The memory store refuses limited-use tokens issued before its start + clock_skew (SPEC §5, state
        # loss; 10 s by default) and `iat` has whole seconds: mint them 11 s after the start.
        sleep 11
        "$REAL_BIN" mint --key "$BENCH_TMP/key.pem" --project-number "$PROJECT_NUMBER" --app-id "$APP_ID" --limited-use \
            --count $((FRESH_WARMUP + FRESH_REQUESTS)) >"$BENCH_TMP/fresh.tokens" || die "mint --limited-use failed"
    fi
    GW[$c]="$(measure "gateway-$c" "$c" "$GATEWAY_PID" "$port" "$CG_OUT")"
    PROFILE[$c]="$OUT_DIR/callgrind-$STAMP-gateway-$c.out"
    stop_pid "$GATEWAY_PID"
    if ((NGINX)); then
        CG_OUT="$BENCH_TMP/callgrind-nginx-$c.out"
        log "nginx, $c: starting under callgrind"
        nport="$NGINX_PORT"; tls_args=()
        if [[ "$c" == h2tls ]]; then
            nport="$NGINX_TLS_PORT"; tls_args=("$NGINX_TLS_PORT" "$BENCH_TMP/tls/cert.pem" "$BENCH_TMP/tls/key.pem")
        fi
        if [[ "$c" == grpc ]]; then
            nport="$NGINX_GRPC_PORT"
            NGINX_MASTER_PROCESS=off NGINX_START_TIMEOUT=120 \
                NGINX_WRAPPER="valgrind --tool=callgrind --callgrind-out-file=$CG_OUT.%p --dump-instr=no --vgdb=yes" \
                start_nginx_grpc "$NGINX_GRPC_PORT" "$NGINX_GRPC_CHECK_PORT" "$GRPC_PORT"
        else
            NGINX_MASTER_PROCESS=off NGINX_START_TIMEOUT=120 \
                NGINX_WRAPPER="valgrind --tool=callgrind --callgrind-out-file=$CG_OUT.%p --dump-instr=no --vgdb=yes" \
                start_nginx_proxy "$NGINX_PORT" "$BACKEND_PORT" 1 "${tls_args[@]}"
        fi
        NG[$c]="$(measure "nginx-$c" "$c" "$NGINX_PROXY_PID" "$nport" "$CG_OUT")"
        stop_pid "$NGINX_PROXY_PID"
    fi
done

echo
echo "gateway $(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$REPO_ROOT" diff --quiet 2>/dev/null || echo '+dirty'), threads 1, $REQUESTS requests ($FRESH_REQUESTS for fresh) after $WARMUP warm-up ($FRESH_WARMUP for fresh)"
echo
echo "| case | gateway Ir/request | nginx Ir/request | ratio |"
echo "|---|---:|---:|---:|"
for c in ${CASES//,/ }; do
    if ((NGINX)); then
        awk -v c="$c" -v g="${GW[$c]}" -v n="${NG[$c]}" 'BEGIN { printf "| %s | %d | %d | %.2f |\n", c, g, n, g / n }'
    else
        echo "| $c | ${GW[$c]} | - | - |"
    fi
done
if has_case fresh; then
    # The RSA verification inside the fresh case's profile, per request: the floor for case D. It is the SHA-256 of
    # the signing input and the RSA public operation, inclusive: RSAPublicKey.rs256Digest plus OpenSSL's
    # EVP_PKEY_verify (a reused context, so nothing else); in builds before those, OpenSSL's EVP_DigestVerify (which
    # did both, on a context copied per call outside it).
    rsa="$(callgrind_annotate --inclusive=yes --threshold=100 "${PROFILE[fresh]}" 2>/dev/null \
        | awk '/:EVP_DigestVerify / && !dv { gsub(",", "", $1); dv = $1 }
               /:EVP_PKEY_verify / && !pv { gsub(",", "", $1); pv = $1 }
               /rs256Digest/ && !hd { gsub(",", "", $1); hd = $1 }
               END { if (dv) print dv; else if (pv && hd) print pv + hd }' || true)"
    if [[ -n "$rsa" ]]; then
        awk -v r="$rsa" -v n="$FRESH_REQUESTS" -v g="${GW[fresh]}" -v off="${GW[off]:-}" 'BEGIN {
            printf "\nfresh: RSA verification %.0f Ir/request; the rest %.0f", r / n, g - r / n
            if (off != "") printf " = %.2f x the off route", (g - r / n) / off
            printf "\n" }'
    else
        echo; echo "fresh: neither EVP_DigestVerify nor EVP_PKEY_verify with rs256Digest found in the profile"
    fi
fi

if has_case dpop; then
    # Case F over case B: the proof's ECDSA P-256 verification counted apart, inclusive: the SHA-256 of the signing
    # input and the verification of the DER signature over it (OpenSSL's ECDSA_verify: DER decode, ECDSA_do_verify).
    # That is DPoPPublicKey.ecdsaDigest plus EVP_PKEY_verify (a context kept with the key); in builds before those,
    # OpenSSL's EVP_DigestVerify (which did both, on a context set up per proof outside it). Issue 36's bar is
    # F <= B + one P-256 verify + 1.0 x A.
    ecdsa="$(callgrind_annotate --inclusive=yes --threshold=100 "${PROFILE[dpop]}" 2>/dev/null \
        | awk '/:EVP_DigestVerify / && !dv { gsub(",", "", $1); dv = $1 }
               /:EVP_PKEY_verify / && !pv { gsub(",", "", $1); pv = $1 }
               /ecdsaDigest/ && !hd { gsub(",", "", $1); hd = $1 }
               END { if (dv) print dv; else if (pv && hd) print pv + hd }' || true)"
    if [[ -n "$ecdsa" && -n "${GW[enforce]:-}" ]]; then
        awk -v e="$ecdsa" -v n="$FRESH_REQUESTS" -v f="${GW[dpop]}" -v b="${GW[enforce]}" -v off="${GW[off]:-}" 'BEGIN {
            printf "\ndpop: ECDSA P-256 verification %.0f Ir/request; F - B - verify = %.0f", e / n, f - b - e / n
            if (off != "") printf " = %.2f x the off route (bar: 1.0)", (f - b - e / n) / off
            printf "\n" }'
    else
        echo; echo "dpop: neither EVP_DigestVerify nor EVP_PKEY_verify with ecdsaDigest in the profile, or case enforce (B) not in this run"
    fi
fi

DEMANGLE=cat
if command -v swift-demangle >/dev/null; then DEMANGLE="swift-demangle --simplified"
elif [[ -x "$(dirname "$(readlink -f "$(command -v swift 2>/dev/null || echo /nonexistent)")")/swift-demangle" ]]; then
    DEMANGLE="$(dirname "$(readlink -f "$(command -v swift)")")/swift-demangle --simplified"
fi
for c in ${CASES//,/ }; do
    echo
    echo "gateway, $c: top $TOP functions by self Ir in the measured window (thread entry frames that show 100% are left out):"
    callgrind_annotate --inclusive=no --threshold=100 "${PROFILE[$c]}" 2>/dev/null \
        | awk '/^-+$/ { sep++; next } sep >= 4 && NF && !/\(100\.0%\)/' | head -n "$TOP" | $DEMANGLE | cut -c1-200 \
        || true  # head closes the pipe early: with pipefail that would end the script after the first case
done
echo
log "profiles kept in $OUT_DIR/callgrind-$STAMP-*.out (open with callgrind_annotate or kcachegrind)"
