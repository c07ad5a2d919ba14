#!/usr/bin/env python3
"""Re-signs a valid App Check token with changed claims, to prove a verifier refuses what it must.

usage: jwt_forge.py TOKEN KEY.pem KIND
  KIND  expired     exp (and iat) moved one hour into the past, correctly signed with KEY
        wrong-iss   iss of another project, correctly signed with KEY
        bad-sig     the payload changed (sub) and the ORIGINAL signature kept
        other-key   correctly formed and signed, but with KEY (pass a key the verifier does not trust)
        alg-none    header alg "none", empty signature
Prints the forged token. Signing uses the openssl command line (no Python packages needed)."""
import base64, json, subprocess, sys, time


def b64d(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def b64e(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def sign(key, signing_input):
    return subprocess.run(["openssl", "dgst", "-sha256", "-sign", key], input=signing_input.encode(),
                          capture_output=True, check=True).stdout


def main():
    token, key, kind = sys.argv[1:4]
    h64, p64, s64 = token.split(".")
    header, payload = json.loads(b64d(h64)), json.loads(b64d(p64))
    enc = lambda o: b64e(json.dumps(o, separators=(",", ":")).encode())
    if kind == "expired":
        now = int(time.time())
        payload["iat"], payload["exp"] = now - 7200, now - 3600
    elif kind == "wrong-iss":
        payload["iss"] = "https://firebaseappcheck.googleapis.com/999999999999"
    elif kind == "bad-sig":
        payload["sub"] = payload["sub"] + "x"
        print(f"{h64}.{enc(payload)}.{s64}")
        return
    elif kind == "alg-none":
        header["alg"] = "none"
        print(f"{enc(header)}.{p64}.")
        return
    elif kind != "other-key":
        sys.exit(f"unknown kind {kind}")
    si = f"{enc(header)}.{enc(payload)}"
    print(f"{si}.{b64e(sign(key, si))}")


main()
