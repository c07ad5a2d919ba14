"""Drives docs/examples/python/dpop_client.py against a running gateway (Tests/examples/dpop.sh): an exchange with a
proof mints a token whose cnf.jkt is the key's thumbprint, requests with fresh proofs pass, and each SPEC §4.4 rule
is refused on its own, the proofs made with PyJWT and cryptography. Prints one line per case; exits 1 on any miss.

Usage: dpop_rules.py GATEWAY_BASE_URL EXCHANGE_URL DEBUG_SECRET OPEN_EXCHANGE_URL"""
import base64
import hashlib
import json
import sys
import time
import uuid

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

sys.path.insert(0, sys.argv[5])
from dpop_client import DPoPClient, b64url, send  # noqa: E402

base, exchange_url, secret, open_exchange_url = sys.argv[1:5]
failures = 0


def check(name, ok, detail=""):
    global failures
    print(f"dpop-python: {'ok  ' if ok else 'FAIL'} {name}{'' if ok else ': ' + detail}")
    if not ok:
        failures += 1


def claims_of(token):
    part = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


client = DPoPClient()
token = client.exchange(exchange_url, {"debug_token": secret})
check("minted cnf.jkt is the key's RFC 7638 thumbprint", claims_of(token).get("cnf") == {"jkt": client.thumbprint},
      json.dumps(claims_of(token)))

url = base + "/api/items"
status, body, _ = client.request("GET", url + "?page=2", token)
check("request with a fresh proof passes", status == 200, f"{status} {body}")
status, body, _ = client.request("GET", url, token)
check("a cached token with another fresh proof passes", status == 200, f"{status} {body}")

# The app requires DPoP: an exchange without a proof is refused.
status, body, _ = send("POST", exchange_url, {"Content-Type": "application/json"}, json.dumps({"debug_token": secret}).encode())
check("require_dpop refuses an exchange without a proof", status == 400 and "INVALID_ARGUMENT" in body, f"{status} {body}")
status, body, _ = send("POST", exchange_url, {"Content-Type": "application/json", "DPoP": client.proof("GET", exchange_url)},
                       json.dumps({"debug_token": secret}).encode())
check("an exchange proof with the wrong htm is refused", status == 400, f"{status} {body}")


def refused(name, proof, reason="dpop_invalid", tok=None):
    status, body, headers = send("GET", url, {"X-Firebase-AppCheck": tok or token, **({"DPoP": proof} if proof else {})})
    answer = json.loads(body) if body.startswith("{") else {}
    challenge = headers.get("WWW-Authenticate", "")
    check(name, status == 401 and answer.get("reason") == reason and challenge == 'DPoP error="invalid_dpop_proof"',
          f"{status} {body} {challenge}")


now = time.time()
ath = b64url(hashlib.sha256(token.encode()).digest())
good_claims = lambda: {"jti": str(uuid.uuid4()), "htm": "GET", "htu": url, "iat": int(now), "ath": ath}
header = {"typ": "dpop+jwt", "jwk": client.jwk}

refused("wrong htm", client.proof("POST", url, token))
refused("htu with a query", jwt.encode({**good_claims(), "htu": url + "?page=2"}, client.key, algorithm="ES256", headers=header))
refused("other host", client.proof("GET", url.replace("127.0.0.1", "localhost"), token))
refused("https instead of http", client.proof("GET", url.replace("http://", "https://"), token))
refused("stale iat", client.proof("GET", url, token, iat=now - 600))
refused("future iat", client.proof("GET", url, token, iat=now + 600))
refused("missing ath", client.proof("GET", url))
refused("wrong ath", client.proof("GET", url, "another-token"))
private = client.key.private_numbers().private_value.to_bytes(32, "big")
refused("jwk with d", jwt.encode(good_claims(), client.key, algorithm="ES256",
                                 headers={"typ": "dpop+jwt", "jwk": {**client.jwk, "d": b64url(private)}}))
unsigned = b64url(json.dumps({"typ": "dpop+jwt", "alg": "none", "jwk": client.jwk}).encode()) + "." \
    + b64url(json.dumps(good_claims()).encode()) + "."
refused("alg none", unsigned)
refused("alg HS256", jwt.encode(good_claims(), json.dumps(client.jwk).encode() * 2, algorithm="HS256", headers=header))
rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
refused("alg RS256", jwt.encode(good_claims(), rsa_key, algorithm="RS256", headers=header))
thief = DPoPClient()
refused("thumbprint of another key", thief.proof("GET", url, token))
reused = client.proof("GET", url, token)
status, _, _ = send("GET", url, {"X-Firebase-AppCheck": token, "DPoP": reused})
check("a proof passes once", status == 200)
refused("reused jti", reused, reason="dpop_reused")
refused("bound token without a proof", None, reason="dpop_missing")

# A token minted without a proof (an app without require_dpop) is unbound: refused on the dpop: required route.
bearer = json.loads(send("POST", open_exchange_url, {"Content-Type": "application/json"},
                         json.dumps({"debug_token": secret}).encode())[1])["token"]
status, body, _ = send("GET", base + "/strict/items", {"X-Firebase-AppCheck": bearer})
check("unbound token on a dpop: required route", status == 401 and json.loads(body).get("reason") == "dpop_unbound", f"{status} {body}")

print(f"dpop-python: {'PASS' if failures == 0 else f'FAIL ({failures})'}")
sys.exit(1 if failures else 0)
