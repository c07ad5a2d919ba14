#!/usr/bin/env python3
"""Builds the conformance corpus: valid App Check tokens and systematic mutations of them.

Run inside the throwaway virtualenv (it uses `cryptography`, which firebase-admin pulls in).

    corpus.py WORKDIR PROJECT_NUMBER PROJECT_ID

WORKDIR must hold the keys made by `appcheck-gateway keygen` (key-a.pem/jwks-a.json: RSA-3072,
key-b.pem/jwks-b.json: RSA-2048, key-s.pem/jwks-s.json: the stranger key, never served) and minted.txt
(tokens printed by `appcheck-gateway mint`, one per line, each preceded by `# name`).
Writes WORKDIR/jwks.json (the key set both verifiers use) and WORKDIR/corpus.jsonl: one JSON object per
line, {"name", "group", "token", "expect"?}; expect "accept" marks the baseline tokens both verifiers must
accept (a harness sanity check).
"""
import base64
import hashlib
import hmac
import json
import os
import sys
import time

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

WORK, NUMBER, PROJECT = sys.argv[1], sys.argv[2], sys.argv[3]
ISS = f"https://firebaseappcheck.googleapis.com/{NUMBER}"
AUD = [f"projects/{NUMBER}", f"projects/{PROJECT}"]
NOW = int(time.time())
DAY = 86400
APPS = [f"1:{NUMBER}:android:1a2b3c4d5e6f7a8b", f"1:{NUMBER}:ios:0f1e2d3c4b5a6978", f"1:{NUMBER}:web:5e6f7a8b9c0d1e2f"]


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def uint_b64u(n: int) -> str:
    return b64u(n.to_bytes((n.bit_length() + 7) // 8, "big"))


def load_key(name):
    with open(os.path.join(WORK, f"key-{name}.pem"), "rb") as f:
        key = serialization.load_pem_private_key(f.read(), password=None)
    with open(os.path.join(WORK, f"jwks-{name}.json")) as f:
        jwk = json.load(f)["keys"][0]
    return key, jwk["kid"], jwk


def jwk_of(key, kid, **extra):
    pub = key.public_key().public_numbers()
    return {"kty": "RSA", "kid": kid, "n": uint_b64u(pub.n), "e": uint_b64u(pub.e), **extra}


KEY_A, KID_A, JWK_A = load_key("a")          # RSA-3072 from our keygen
KEY_B, KID_B, JWK_B = load_key("b")          # RSA-2048 from our keygen
KEY_S, KID_S, _ = load_key("s")              # stranger: not in the served key set
# Extra keys made here, served in the key set, to probe key-set rules (docs/behaviour.md: check 5, key set).
KEY_C = rsa.generate_private_key(public_exponent=65537, key_size=4096)      # upper bound: usable
KEY_W = rsa.generate_private_key(public_exponent=65537, key_size=1024)      # below 2048: ignored by us
KEY_BIG = rsa.generate_private_key(public_exponent=65537, key_size=4104)    # above 4096
KEY_R512 = rsa.generate_private_key(public_exponent=65537, key_size=2048)   # JWK says alg RS512
KEY_ENC = rsa.generate_private_key(public_exponent=65537, key_size=2048)    # JWK says use enc
KEY_NOALG = rsa.generate_private_key(public_exponent=65537, key_size=2048)  # JWK without use/alg
KEY_EC = ec.generate_private_key(ec.SECP256R1())
KID_C, KID_W, KID_BIG, KID_R512, KID_ENC, KID_NOALG, KID_EC = (
    "conf-c-4096", "conf-weak-1024", "conf-big-4104", "conf-alg-rs512", "conf-use-enc", "conf-noalg-2048",
    "conf-ec-p256")
ec_pub = KEY_EC.public_key().public_numbers()
JWKS = {"keys": [
    JWK_A, JWK_B,
    jwk_of(KEY_C, KID_C, use="sig", alg="RS256"),
    jwk_of(KEY_W, KID_W, use="sig", alg="RS256"),
    jwk_of(KEY_BIG, KID_BIG, use="sig", alg="RS256"),
    jwk_of(KEY_R512, KID_R512, use="sig", alg="RS512"),
    jwk_of(KEY_ENC, KID_ENC, use="enc", alg="RS256"),
    jwk_of(KEY_NOALG, KID_NOALG),
    {"kty": "EC", "crv": "P-256", "kid": KID_EC, "use": "sig", "alg": "ES256",
     "x": b64u(ec_pub.x.to_bytes(32, "big")), "y": b64u(ec_pub.y.to_bytes(32, "big"))},
]}
with open(os.path.join(WORK, "jwks.json"), "w") as f:
    json.dump(JWKS, f)
# kids of served keys that docs/behaviour.md (check 5, key set) tells us not to use (the check script documents them).
with open(os.path.join(WORK, "ignored-kids.json"), "w") as f:
    json.dump({KID_W: "RSA-1024 (below 2048 bits, key set rules)", KID_BIG: "RSA-4104 (above 4096 bits, check 5)",
               KID_R512: "JWK alg RS512 (only RS256 or none, key set rules)"}, f)

PUB_A_PEM = KEY_A.public_key().public_bytes(serialization.Encoding.PEM,
                                            serialization.PublicFormat.SubjectPublicKeyInfo)

corpus = []


def add(group, name, token, expect=None):
    entry = {"name": name, "group": group, "token": token}
    if expect:
        entry["expect"] = expect
    corpus.append(entry)


def enc_json(obj) -> str:
    return obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def sign(signing_input: bytes, key, alg="RS256") -> bytes:
    if alg == "RS256":
        return key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
    if alg == "RS512":
        return key.sign(signing_input, padding.PKCS1v15(), hashes.SHA512())
    if alg == "PS256":
        return key.sign(signing_input, padding.PSS(padding.MGF1(hashes.SHA256()), 32), hashes.SHA256())
    if alg == "ES256":
        r, s = decode_dss_signature(key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
        return r.to_bytes(32, "big") + s.to_bytes(32, "big")
    if alg == "HS256":
        return hmac.new(key, signing_input, hashlib.sha256).digest()
    raise ValueError(alg)


def seg(obj) -> str:
    """A header or payload segment: dict → compact JSON; str → raw JSON text; bytes → raw bytes."""
    if isinstance(obj, bytes):
        return b64u(obj)
    return b64u(enc_json(obj).encode())


def token(header=None, payload=None, key=None, alg="RS256", h_seg=None, p_seg=None):
    """Signs header/payload (or ready-made segments) and returns the compact JWS."""
    h = h_seg if h_seg is not None else seg(header)
    p = p_seg if p_seg is not None else seg(payload)
    sig = sign(f"{h}.{p}".encode(), key if key is not None else KEY_A, alg)
    return f"{h}.{p}.{b64u(sig)}"


def hdr(kid=None, **over):
    h = {"alg": "RS256", "kid": kid or KID_A, "typ": "JWT"}
    h.update(over)
    return h


def claims(app=APPS[0], ttl=3600, jti=None, iat=None, **over):
    iat = NOW if iat is None else iat
    c = {"iss": ISS, "sub": app, "aud": list(AUD), "exp": iat + ttl, "iat": iat}
    if jti is not None:
        c["jti"] = jti
    c.update(over)
    return c


def drop(d, key):
    d = dict(d)
    d.pop(key, None)
    return d


# ---------------------------------------------------------------- valid tokens (baseline)
KEYS = [("a3072", KEY_A, KID_A), ("b2048", KEY_B, KID_B), ("c4096", KEY_C, KID_C)]
for kname, key, kid in KEYS:
    for ai, app in enumerate(APPS):
        for ttl in (300, 3600, 7 * DAY):
            for with_jti in (False, True):
                jti = hashlib.sha256(f"{kname}{ai}{ttl}".encode()).hexdigest()[:32] if with_jti else None
                add("valid", f"valid/{kname}/app{ai}/ttl{ttl}{'/jti' if with_jti else ''}",
                    token(hdr(kid), claims(app, ttl, jti), key), "accept")
add("valid", "valid/noalg-2048-jwk", token(hdr(KID_NOALG), claims(), KEY_NOALG), "accept")
with open(os.path.join(WORK, "minted.txt")) as f:
    name = None
    for line in f:
        line = line.strip()
        if line.startswith("#"):
            name = line[1:].strip()
        elif line:
            add("valid", f"valid/our-mint/{name}", line, "accept")

# ---------------------------------------------------------------- equivalent encodings that stay valid JSON
base = claims()
add("edge", "edge/extra-claim", token(hdr(), claims(extra="x", n=1, obj={"a": [1, 2]})))
add("edge", "edge/aud-extra-members", token(hdr(), claims(aud=AUD + ["projects/other", "https://example.com"])))
add("edge", "edge/aud-reversed", token(hdr(), claims(aud=list(reversed(AUD)))))
add("edge", "edge/aud-duplicate-member", token(hdr(), claims(aud=AUD + AUD)))
add("edge", "edge/header-extra-field", token(hdr(foo="bar"), base))
add("edge", "edge/header-key-order", token({"typ": "JWT", "kid": KID_A, "alg": "RS256"}, base))
add("edge", "edge/json-whitespace", token(h_seg=seg(json.dumps(hdr(), indent=2)), p_seg=seg(json.dumps(base, indent=1) + "\n")))
add("edge", "edge/json-escaped-slash", token(hdr(), json.dumps(base, separators=(",", ":")).replace("/", "\\/")))
add("edge", "edge/json-unicode-escapes", token(hdr(), json.dumps(base, separators=(",", ":")).replace('"sub"', '"\\u0073ub"')))
add("edge", "edge/sub-unicode", token(hdr(), claims(sub="1:123:ios:äöü✓")))
add("edge", "edge/exp-float", token(hdr(), claims(exp=NOW + 3600.5)))
add("edge", "edge/iat-float", token(hdr(), claims(iat=NOW - 0.5)))
add("edge", "edge/exp-exponent-form", token(hdr(), json.dumps(base, separators=(",", ":")).replace(str(NOW + 3600), f"{(NOW + 3600) / 1000:.6f}e3")))
add("edge", "edge/nbf-past", token(hdr(), claims(nbf=NOW - 60)))
add("edge", "edge/nbf-float-past", token(hdr(), claims(nbf=NOW - 60.25)))
add("edge", "edge/iat-past-ttl-1h", token(hdr(), claims(iat=NOW - 1800, ttl=3600)))
add("edge", "edge/lifetime-exactly-7d", token(hdr(), claims(ttl=7 * DAY)))
add("edge", "edge/just-under-4KiB", None)  # filled below
add("edge", "edge/lone-surrogate-in-extra-claim", token(hdr(), json.dumps(base, separators=(",", ":"))[:-1] + ',"x":"\\ud800"}'))
add("edge", "edge/utf8-bom-payload", token(hdr(), p_seg=b64u(b"\xef\xbb\xbf" + enc_json(base).encode())))
add("edge", "edge/alg-jwk-rs512-key", token(hdr(KID_R512), base, KEY_R512))
add("edge", "edge/weak-1024-key", token(hdr(KID_W), base, KEY_W))
add("edge", "edge/big-4104-key", token(hdr(KID_BIG), base, KEY_BIG))

# ---------------------------------------------------------------- claim removal and wrong types
for kname, key, kid in KEYS[:2]:
    full = claims(jti="abc123", nbf=NOW - 10)
    for c in ("iss", "sub", "aud", "exp", "iat", "jti", "nbf"):
        add("claims-missing", f"missing/{c}/{kname}", token(hdr(kid), drop(full, c), key))
add("claims-missing", "missing/all-claims", token(hdr(), {}))
add("claims-missing", "missing/exp-and-iat", token(hdr(), drop(drop(base, "exp"), "iat")))

TYPES = {
    "null": None, "number": 12345, "zero": 0, "true": True, "false": False, "object": {"a": 1},
    "empty-array": [], "empty-string": "",
}
for c in ("iss", "sub", "aud", "exp", "iat", "jti", "nbf"):
    orig = claims(jti="j1", nbf=NOW - 10)[c]
    variants = dict(TYPES)
    variants["as-string"] = str(orig) if not isinstance(orig, list) else json.dumps(orig)
    variants["as-array"] = [orig] if not isinstance(orig, list) else [orig]
    if isinstance(orig, list):
        variants["as-array"] = [orig]                 # nested list
        variants["first-member-only-string"] = orig[0]
    if isinstance(orig, int):
        variants["non-numeric-string"] = "soon"
        variants["float-string"] = f"{orig}.0"
    for vname, value in variants.items():
        mutated = claims(jti="j1", nbf=NOW - 10)
        mutated[c] = value
        add("claims-type", f"type/{c}/{vname}", token(hdr(), mutated))

# ---------------------------------------------------------------- issuer
ISS_VARIANTS = {
    "other-project": "https://firebaseappcheck.googleapis.com/999999999999",
    "prefix-only": "https://firebaseappcheck.googleapis.com/",
    "no-slash": "https://firebaseappcheck.googleapis.com",
    "trailing-slash": ISS + "/",
    "extra-path": ISS + "/x",
    "http": ISS.replace("https://", "http://"),
    "uppercase-host": ISS.replace("firebaseappcheck", "FirebaseAppCheck"),
    "evil-suffix-host": f"https://firebaseappcheck.googleapis.com.evil.example/{NUMBER}",
    "leading-space": " " + ISS,
    "trailing-space": ISS + " ",
    "project-id-instead": f"https://firebaseappcheck.googleapis.com/{PROJECT}",
    "securetoken": f"https://securetoken.google.com/{PROJECT}",
    "number-with-query": ISS + "?x=1",
    "v1-path": f"https://firebaseappcheck.googleapis.com/v1/{NUMBER}",
}
for vname, value in ISS_VARIANTS.items():
    add("iss", f"iss/{vname}", token(hdr(), claims(iss=value)))

# ---------------------------------------------------------------- audience
AUD_VARIANTS = {
    "string-number": f"projects/{NUMBER}",
    "string-id": f"projects/{PROJECT}",
    "missing-id": [f"projects/{NUMBER}"],
    "missing-number": [f"projects/{PROJECT}"],
    "missing-number-with-extra": [f"projects/{PROJECT}", "projects/999999999999"],
    "neither": ["projects/999999999999", "projects/other-project"],
    "bare-values": [NUMBER, PROJECT],
    "case-changed": [f"Projects/{NUMBER}", f"Projects/{PROJECT}"],
    "non-string-member-number": AUD + [5],
    "non-string-member-null": AUD + [None],
    "non-string-member-object": AUD + [{"a": 1}],
    "nested-list": [AUD],
    "trailing-slash": [a + "/" for a in AUD],
    "number-member-as-int": [int(NUMBER), f"projects/{PROJECT}"],
}
for vname, value in AUD_VARIANTS.items():
    add("aud", f"aud/{vname}", token(hdr(), claims(aud=value)))

# ---------------------------------------------------------------- subject and jti
for vname, value in {"long-1000": "1:x:android:" + "a" * 1000, "whitespace": " ", "newline": "\n"}.items():
    add("sub", f"sub/{vname}", token(hdr(), claims(sub=value)))
add("jti", "jti/long", token(hdr(), claims(jti="j" * 500)))

# ---------------------------------------------------------------- times (clock_skew is 0s in both)
TIME_CASES = {
    "exp-past-1h": dict(iat=NOW - 7200, ttl=3600),
    "exp-past-1s": dict(iat=NOW - 3601, ttl=3600),
    "exp-now-boundary": dict(iat=NOW - 3600, ttl=3600),
    "exp-before-iat": dict(iat=NOW - 100, ttl=-50),
    "exp-zero": dict(exp=0),
    "exp-negative": dict(exp=-1),
    "exp-far-future": dict(exp=32503680000),
    "exp-huge-int": dict(exp=10 ** 20),
    "lifetime-7d-plus-1s": dict(ttl=7 * DAY + 1),
    "lifetime-30d": dict(ttl=30 * DAY),
    "iat-future-1h": dict(iat=NOW + 3600, ttl=3600),
    "iat-future-5m": dict(iat=NOW + 300, ttl=3600),
    "iat-future-beyond-skew-window": dict(iat=NOW + 120, ttl=3600),
    "iat-zero": dict(iat=0, exp=NOW + 3600),
    "iat-negative": dict(iat=-1, exp=NOW + 3600),
    "nbf-future-1h": dict(nbf=NOW + 3600),
    "nbf-future-2m": dict(nbf=NOW + 120),
    "nbf-past-and-iat-future": dict(nbf=NOW - 10, iat=NOW + 600),
    "nbf-numeric-string-past": dict(nbf=str(NOW - 60)),
    "nbf-numeric-string-future": dict(nbf=str(NOW + 3600)),
    "exp-numeric-string-future": dict(exp=str(NOW + 3600)),
    "iat-numeric-string-past": dict(iat=str(NOW - 10), exp=NOW + 3600),
    "iat-true": dict(iat=True, exp=NOW + 3600),
    "exp-true": dict(exp=True),
}
for vname, kw in TIME_CASES.items():
    iat = kw.pop("iat", None)
    ttl = kw.pop("ttl", 3600)
    c = claims(iat=iat, ttl=ttl, **kw) if not isinstance(iat, (str, bool)) else claims(**kw)
    if isinstance(iat, (str, bool)):
        c["iat"] = iat
    add("time", f"time/{vname}", token(hdr(), c))
raw = enc_json(base)
add("time", "time/exp-1e400-infinite", token(hdr(), raw.replace(f'"exp":{NOW + 3600}', '"exp":1e400')))
add("time", "time/exp-NaN", token(hdr(), raw.replace(f'"exp":{NOW + 3600}', '"exp":NaN')))
add("time", "time/exp-Infinity", token(hdr(), raw.replace(f'"exp":{NOW + 3600}', '"exp":Infinity')))
add("time", "time/iat-NaN", token(hdr(), raw.replace(f'"iat":{NOW}', '"iat":NaN')))
add("time", "time/iat-minus-Infinity", token(hdr(), raw.replace(f'"iat":{NOW}', '"iat":-Infinity')))
add("time", "time/extra-claim-NaN", token(hdr(), raw[:-1] + ',"x":NaN}'))
add("time", "time/nbf-NaN", token(hdr(), raw[:-1] + ',"nbf":NaN}'))

# ---------------------------------------------------------------- header: alg / typ / kid
h_raw = lambda h: seg(h)  # noqa: E731
p_a = seg(base)
add("alg", "alg/none-empty-signature", f"{seg(hdr(alg='none'))}.{p_a}.")
add("alg", "alg/none-with-rs256-signature", token(hdr(alg="none"), base))
add("alg", "alg/none-no-kid", f"{seg({'alg': 'none', 'typ': 'JWT'})}.{p_a}.")
add("alg", "alg/HS256-public-pem-secret", token(hdr(alg="HS256"), base, PUB_A_PEM, "HS256"))
add("alg", "alg/HS256-jwks-json-secret", token(hdr(alg="HS256"), base, json.dumps(JWK_A).encode(), "HS256"))
add("alg", "alg/RS512", token(hdr(alg="RS512"), base, KEY_A, "RS512"))
add("alg", "alg/RS512-jwk-declares-RS512", token(hdr(KID_R512, alg="RS512"), base, KEY_R512, "RS512"))
add("alg", "alg/PS256", token(hdr(alg="PS256"), base, KEY_A, "PS256"))
add("alg", "alg/ES256-ec-key-in-set", token(hdr(KID_EC, alg="ES256"), base, KEY_EC, "ES256"))
add("alg", "alg/ES256-rsa-kid", token(hdr(alg="ES256"), base, KEY_EC, "ES256"))
add("alg", "alg/RS256-ec-kid", token(hdr(KID_EC), base, KEY_A))
add("alg", "alg/enc-use-key", token(hdr(KID_ENC), base, KEY_ENC))
for vname, value in {"missing": None, "lowercase": "rs256", "null": "__null__", "array": ["RS256"],
                     "trailing-space": "RS256 ", "empty": ""}.items():
    h = hdr()
    if value is None:
        del h["alg"]
    else:
        h["alg"] = None if value == "__null__" else value
    add("alg", f"alg/{vname}", token(h, base))
for vname, value in {"missing": None, "lowercase-jwt": "jwt", "JOSE": "JOSE", "at+jwt": "at+jwt",
                     "null": "__null__", "number": 1, "JWT-space": "JWT ", "JOSE+JSON": "JOSE+JSON"}.items():
    h = hdr()
    if value is None:
        del h["typ"]
    else:
        h["typ"] = None if value == "__null__" else value
    add("typ", f"typ/{vname}", token(h, base))
for vname, value in {"missing": None, "empty": "", "unknown": "no-such-kid", "null": "__null__", "number": 7,
                     "array": [KID_A], "trailing-space": KID_A + " ", "uppercase": KID_A.upper()}.items():
    h = hdr()
    if value is None:
        del h["kid"]
    else:
        h["kid"] = None if value == "__null__" else value
    add("kid", f"kid/{vname}", token(h, base))
add("kid", "kid/of-2048-key-signed-by-3072", token(hdr(KID_B), base, KEY_A))
add("kid", "kid/stranger-own-kid", token(hdr(KID_S), base, KEY_S))

# ---------------------------------------------------------------- header: crit / jku / x5u / jwk / x5c
STRANGER_JWK = jwk_of(KEY_S, KID_S)
for vname, extra in {
    "crit-b64-with-b64-true": {"crit": ["b64"], "b64": True},
    "crit-exp": {"crit": ["exp"]},
    "crit-empty": {"crit": []},
    "b64-false": {"b64": False},
    "b64-true": {"b64": True},
    "b64-false-with-crit": {"b64": False, "crit": ["b64"]},
    "jku-local": {"jku": "http://127.0.0.1:1/jwks"},
    "x5u": {"x5u": "https://example.invalid/cert.pem"},
    "jwk-own-key": {"jwk": jwk_of(KEY_A, KID_A)},
    "x5c-junk": {"x5c": [b64u(b"not a certificate")]},
    "x5t": {"x5t": b64u(b"x" * 20)},
    "cty-JWT": {"cty": "JWT"},
    "zip-DEF": {"zip": "DEF"},
}.items():
    add("header", f"header/{vname}", token(hdr(**extra), base))
add("header", "header/jwk-stranger-signed-by-stranger", token(hdr(KID_S, jwk=STRANGER_JWK), base, KEY_S))
add("header", "header/jwk-stranger-kid-a-signed-by-stranger", token(hdr(jwk=STRANGER_JWK), base, KEY_S))
add("header", "header/jku-stranger-signed-by-stranger", token(hdr(KID_S, jku="http://127.0.0.1:1/jwks"), base, KEY_S))

# ---------------------------------------------------------------- duplicate JSON keys (re-signed)
H = f'"kid":"{KID_A}","typ":"JWT"'
P = raw[1:-1]
DUPS = {
    "header/alg-none-then-RS256": ('{"alg":"none","alg":"RS256",' + H + "}", raw),
    "header/alg-RS256-then-none": ('{"alg":"RS256","alg":"none",' + H + "}", raw),
    "header/kid-unknown-then-good": ('{"alg":"RS256","kid":"nope","kid":"' + KID_A + '","typ":"JWT"}', raw),
    "header/typ-twice": ('{"alg":"RS256",' + H + ',"typ":"JWT"}', raw),
    "payload/iss-evil-then-good": (enc_json(hdr()), '{"iss":"https://evil.example/1",' + P + "}"),
    "payload/sub-twice": (enc_json(hdr()), '{"sub":"1:9:web:evil",' + P + "}"),
    "payload/aud-bad-then-good": (enc_json(hdr()), '{"aud":["projects/evil"],' + P + "}"),
    "payload/exp-past-then-future": (enc_json(hdr()), '{"exp":1,' + P + "}"),
    "payload/exp-future-then-past": (enc_json(hdr()), "{" + P + ',"exp":1}'),
    "payload/identical-twice": (enc_json(hdr()), "{" + P + "," + P + "}"),
    "payload/nested-dup": (enc_json(hdr()), "{" + P + ',"x":{"a":1,"a":2}}'),
}
for vname, (h, p) in DUPS.items():
    add("dup-keys", f"dup/{vname}", token(h_seg=seg(h), p_seg=seg(p)))

# ---------------------------------------------------------------- JSON syntax
for vname, (h, p) in {
    "payload-array": (hdr(), "[1,2]"),
    "payload-string": (hdr(), '"x"'),
    "payload-json-in-string": (hdr(), json.dumps(raw)),
    "payload-trailing-comma": (hdr(), raw[:-1] + ",}"),
    "payload-single-quotes": (hdr(), raw.replace('"', "'")),
    "payload-trailing-garbage": (hdr(), raw + "x"),
    "payload-two-objects": (hdr(), raw + raw),
    "payload-comment": (hdr(), "/*c*/" + raw),
    "payload-empty": (hdr(), ""),
    "header-array": ('["RS256"]', base),
    "header-empty-object": ("{}", base),
    "header-null": ("null", base),
}.items():
    add("json", f"json/{vname}", token(h_seg=seg(h), p_seg=seg(p)))
add("json", "json/payload-invalid-utf8", token(hdr(), p_seg=b64u(raw[:-1].encode() + b',"x":"\xff\xfe"}')))
add("json", "json/payload-utf16", token(hdr(), p_seg=b64u(raw.encode("utf-16"))))

# ---------------------------------------------------------------- base64url encoding
good_a = token(hdr(), base)                  # RSA-3072: 512-char signature, needs no padding
good_b = token(hdr(KID_B), base, KEY_B)      # RSA-2048: 342-char signature, "==" would pad it
ha, pa, sa = good_a.split(".")
hb, pb, sb = good_b.split(".")


def padded(s):
    return s + "=" * (-len(s) % 4)


def noncanonical(s):
    """Same bytes, non-zero unused trailing bits (only possible when len % 4 is 2 or 3)."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    assert len(s) % 4 in (2, 3)
    i = alphabet.index(s[-1])
    return s[:-1] + alphabet[i | (0x0F if len(s) % 4 == 2 else 0x03)]


def resign(h, p, key=KEY_A):
    return f"{h}.{p}.{b64u(sign(f'{h}.{p}'.encode(), key))}"


def find_payload_with(chars):
    for i in range(2000):
        c = claims(extra="?" * (i % 7 + 3) + "~" * (i % 3) + ">" * (i % 5))
        s = seg(c)
        if any(ch in s for ch in chars):
            return c, s
    raise RuntimeError("no payload")


hdr_pad = hdr(pad="xy")  # tune the header so its segment needs padding
for n in range(8):
    s = seg(hdr(pad="x" * n))
    if len(s) % 4 in (2, 3):
        hdr_pad = hdr(pad="x" * n)
        break
payload_pad = None
for n in range(8):
    if len(seg(claims(pad="x" * n))) % 4 in (2, 3):
        payload_pad = claims(pad="x" * n)
        break
hs, ps = seg(hdr_pad), seg(payload_pad)
add("base64", "b64/control-tuned-unpadded", resign(hs, ps), "accept")
add("base64", "b64/header-padded-resigned", resign(padded(hs), ps))
add("base64", "b64/payload-padded-resigned", resign(hs, padded(ps)))
add("base64", "b64/signature-padded-2048", f"{hb}.{pb}.{padded(sb)}" if len(sb) % 4 else good_b + "==")
add("base64", "b64/signature-padded-3072-needless", f"{ha}.{pa}.{sa}=")
add("base64", "b64/signature-padded-3072-needless-4", f"{ha}.{pa}.{sa}====")
add("base64", "b64/header-noncanonical-resigned", resign(noncanonical(hs), ps))
add("base64", "b64/payload-noncanonical-resigned", resign(hs, noncanonical(ps)))
add("base64", "b64/signature-noncanonical-2048", f"{hb}.{pb}.{noncanonical(sb)}")
_, p_dash = find_payload_with("-_")
add("base64", "b64/payload-standard-alphabet-resigned",
    resign(ha, p_dash.replace("-", "+").replace("_", "/")))
sig_std = sa.replace("-", "+").replace("_", "/")
add("base64", "b64/signature-standard-alphabet", f"{ha}.{pa}.{sig_std}" if sig_std != sa else f"{ha}.{pa}.+{sa[1:]}")
add("base64", "b64/header-standard-b64-padded", resign(base64.b64encode(enc_json(hdr_pad).encode()).decode(), ps))
add("base64", "b64/signature-one-char-removed", f"{ha}.{pa}.{sa[:-1]}")
add("base64", "b64/header-one-char-removed", f"{ha[:-1]}.{pa}.{sa}")
add("base64", "b64/percent-encoded-dash", good_a.replace("-", "%2D", 1) if "-" in good_a else good_a.replace("_", "%5F", 1))
add("base64", "b64/asterisk-in-signature", f"{ha}.{pa}.{sa[:10]}*{sa[11:]}")

# ---------------------------------------------------------------- structure
add("structure", "struct/empty-token", "")
add("structure", "struct/dots-only", "..")
add("structure", "struct/two-segments", f"{ha}.{pa}")
add("structure", "struct/one-segment", ha)
add("structure", "struct/four-segments-trailing-dot", good_a + ".")
add("structure", "struct/four-segments-extra", good_a + ".eA")
add("structure", "struct/five-segments-jwe-like", f"{ha}.{pa}.{pa}.{sa}.{pa}")
add("structure", "struct/double-dot-in-middle", f"{ha}..{pa}.{sa}")
add("structure", "struct/leading-dot", "." + good_a)
add("structure", "struct/empty-signature", f"{ha}.{pa}.")
add("structure", "struct/empty-header", f".{pa}.{sa}")
add("structure", "struct/empty-payload-resigned", resign(ha, ""))
add("structure", "struct/bearer-prefix", "Bearer " + good_a)
add("structure", "struct/token-twice-comma", good_a + "," + good_a)

# ---------------------------------------------------------------- signature
sig_a = base64.urlsafe_b64decode(padded(sa))
flip = bytearray(sig_a)
flip[-1] ^= 1
add("signature", "sig/stranger-key-kid-a", token(hdr(), base, KEY_S))
add("signature", "sig/stranger-key-kid-b", token(hdr(KID_B), base, KEY_S))
add("signature", "sig/2048-key-kid-a", token(hdr(), base, KEY_B))
add("signature", "sig/bit-flipped", f"{ha}.{pa}.{b64u(bytes(flip))}")
add("signature", "sig/truncated-half", f"{ha}.{pa}.{sa[:len(sa) // 2]}")
add("signature", "sig/truncated-4-chars", f"{ha}.{pa}.{sa[:-4]}")
add("signature", "sig/truncated-one-byte", f"{ha}.{pa}.{b64u(sig_a[:-1])}")
ZERO, ONES = b"\x00", b"\xff" * len(sig_a)
add("signature", "sig/leading-zero-byte", f"{ha}.{pa}.{b64u(ZERO + sig_a)}")
add("signature", "sig/trailing-zero-byte", f"{ha}.{pa}.{b64u(sig_a + ZERO)}")
add("signature", "sig/all-zero", f"{ha}.{pa}.{b64u(bytes(len(sig_a)))}")
add("signature", "sig/all-ones", f"{ha}.{pa}.{b64u(ONES)}")
add("signature", "sig/signature-of-other-token", f"{ha}.{pa}.{token(hdr(), claims(sub=APPS[1])).split('.')[2]}")
add("signature", "sig/payload-swapped-after-signing", f"{ha}.{seg(claims(sub=APPS[2]))}.{sa}")
add("signature", "sig/header-swapped-after-signing", f"{seg(hdr(KID_B))}.{pa}.{sa}")
add("signature", "sig/modulus-as-signature", f"{ha}.{pa}.{JWK_A['n']}")

# ---------------------------------------------------------------- whitespace
add("whitespace", "ws/leading-space", " " + good_a)
add("whitespace", "ws/trailing-space", good_a + " ")
add("whitespace", "ws/trailing-newline", good_a + "\n")
add("whitespace", "ws/trailing-crlf", good_a + "\r\n")
add("whitespace", "ws/space-after-dot", f"{ha}. {pa}.{sa}")
add("whitespace", "ws/tab-in-signature", f"{ha}.{pa}.{sa[:20]}\t{sa[20:]}")
add("whitespace", "ws/newline-in-payload", f"{ha}.{pa[:10]}\n{pa[10:]}.{sa}")
add("whitespace", "ws/nbsp-suffix", good_a + "\u00a0")

# ---------------------------------------------------------------- size
def sized(target):
    c = claims(extra="")
    t = token(hdr(), c)
    c["extra"] = "z" * max(0, int((target - len(t)) * 3 / 4))
    t = token(hdr(), c)
    while len(t) > target:
        c["extra"] = c["extra"][:-1]
        t = token(hdr(), c)
    return t


for i, e in enumerate(corpus):
    if e["name"] == "edge/just-under-4KiB":
        e["token"] = sized(4096)
for target in (4100, 5000, 8192, 65536):
    t = sized(target)
    assert len(t) > 4096, len(t)
    add("size", f"size/{len(t)}-bytes", t)

with open(os.path.join(WORK, "corpus.jsonl"), "w") as f:
    for e in corpus:
        f.write(json.dumps(e) + "\n")
print(f"corpus: {len(corpus)} tokens", file=sys.stderr)
