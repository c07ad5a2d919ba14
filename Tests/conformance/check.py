#!/usr/bin/env python3
"""Runs every corpus token through the official Firebase Admin SDK (`firebase_admin.app_check.verify_token`)
and through our `appcheck-gateway verify`, and compares the verdicts.

    check.py WORKDIR BINARY CONFIG PROJECT_NUMBER PROJECT_ID

Run inside the throwaway virtualenv that has firebase-admin. The SDK fetches the key set from a local
http.server on 127.0.0.1 (PyJWT's PyJWKClient accepts only http/https); our verify reads the same
WORKDIR/jwks.json through the config. Nothing here reaches the network beyond 127.0.0.1.

Rules:
  * the SDK rejects  → we must reject, else FAIL (we would be looser than Firebase);
  * we reject, the SDK accepts → PASS only when a rule of STRICTER below matches: our reason equals the
    rule's reason AND the rule's predicate holds for the token (checked independently here, in Python);
    it is then listed as "stricter, documented". Otherwise FAIL;
  * corpus entries marked expect=accept must be accepted by both (otherwise the harness is broken);
  * our verify exiting with anything but 0/1, or without a verdict line, is a FAIL.
Prints a per-group table, the documented stricter verdicts, the failures, and finally `N passed, M failed`.
"""
import base64
import http.server
import json
import os
import subprocess
import sys
import threading
import warnings
from collections import Counter, defaultdict

WORK, BINARY, CONFIG, NUMBER, PROJECT = sys.argv[1:6]
ISS = f"https://firebaseappcheck.googleapis.com/{NUMBER}"
with open(os.path.join(WORK, "ignored-kids.json")) as f:
    IGNORED_KIDS = json.load(f)
FORBIDDEN_HEADERS = ("crit", "jku", "x5u", "jwk", "x5c", "b64")
MAX_LIFETIME = 7 * 86400

# ------------------------------------------------------------------------------------------------------
# Token facts, computed here independently of both verifiers (lenient decoding, Python semantics).


class Facts:
    def __init__(self, token):
        self.token = token
        self.length = len(token.encode())
        segs = token.split(".")
        self.padded = "=" in token
        self.duplicates = False
        self.nonstandard_json = False
        self.header, self.payload = None, None
        if len(segs) == 3:
            self.header = self._json(segs[0])
            self.payload = self._json(segs[1])

    def _json(self, s):
        try:
            raw = base64.urlsafe_b64decode(s.rstrip("=") + "=" * (-len(s.rstrip("=")) % 4))
        except Exception:
            return None

        def pairs(items):
            keys = [k for k, _ in items]
            if len(keys) != len(set(keys)):
                self.duplicates = True
            return dict(items)

        def constant(name):
            self.nonstandard_json = True          # NaN, Infinity, -Infinity: Python-only JSON
            return float(name.replace("Infinity", "inf"))

        # RFC 8259 §8.1 / RFC 7519 §7.2 step 10: UTF-8 JSON text, no byte order mark (Python's json.loads
        # on bytes also takes UTF-16/32 and skips a BOM).
        try:
            raw.decode("utf-8")
            if raw.startswith(b"\xef\xbb\xbf"):
                self.nonstandard_json = True
        except UnicodeDecodeError:
            self.nonstandard_json = True
        try:
            value = json.loads(raw, object_pairs_hook=pairs, parse_constant=constant)
        except Exception:
            return None
        self._walk(value)
        return value if isinstance(value, dict) else None

    def _walk(self, value):
        """Flags unpaired surrogate escapes (\\ud800) and numbers that overflow to infinity (1e400)."""
        if isinstance(value, str):
            if any(0xD800 <= ord(ch) <= 0xDFFF for ch in value):
                self.nonstandard_json = True
        elif isinstance(value, float):
            if value != value or value in (float("inf"), float("-inf")):
                self.nonstandard_json = True
        elif isinstance(value, list):
            for v in value:
                self._walk(v)
        elif isinstance(value, dict):
            for k, v in value.items():
                self._walk(k)
                self._walk(v)

    def claim(self, name, default=None):
        return self.payload.get(name, default) if isinstance(self.payload, dict) else default


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# ------------------------------------------------------------------------------------------------------
# Where we are deliberately stricter than the official SDK (firebase_admin 7.x + PyJWT 2.x), each with the
# rule of docs/behaviour.md that requires it: (id, our reason, rule, what the SDK does instead, predicate).
STRICTER = [
    ("size", "too_large", "check 1: the token header is at most 4 KiB",
     "no size limit", lambda f: f.length > 4096),
    ("padding", "malformed", "check 2: three base64url parts, no padding",
     "PyJWT strips trailing '=' padding", lambda f: f.padded),
    ("duplicate-keys", "malformed", "check 2: duplicate JSON keys are malformed",
     "Python json keeps the last value", lambda f: f.duplicates),
    ("strict-json", "malformed",
     "check 2: header and payload are JSON objects — strict RFC 8259 JSON text in UTF-8 (RFC 7519 §7.2 "
     "step 10): no NaN/Infinity, no non-finite numbers, no byte order mark, no UTF-16/32, no unpaired "
     "surrogate escapes (the gateway's StrictJSON parser)",
     "Python json accepts NaN/Infinity, a BOM, UTF-16/32 bytes and lone \\uD800 escapes",
     lambda f: f.nonstandard_json),
    ("forbidden-header", "malformed", "check 3: no crit, jku, x5u, jwk or x5c header; their presence is malformed",
     "PyJWT ignores jku/x5u/jwk/x5c and accepts crit [\"b64\"]",
     lambda f: isinstance(f.header, dict) and any(h in f.header for h in FORBIDDEN_HEADERS)),
    ("unusable-key", "unknown_kid",
     "key set: only kty RSA keys with use sig (or none) and alg RS256 (or none), at least 2048 bits, are used; "
     "check 5: RSA keys from 2048 to 4096 bits",
     "PyJWKClient uses any key with the kid (it warns about short keys, ignores the JWK alg)",
     lambda f: isinstance(f.header, dict) and f.header.get("kid") in IGNORED_KIDS),
    ("issuer-exact", "wrong_issuer",
     "check 6: iss equals https://firebaseappcheck.googleapis.com/<project_number> exactly",
     "SDK only checks iss.startswith('https://firebaseappcheck.googleapis.com/')",
     lambda f: f.claim("iss") != ISS),
    ("audience-number", "wrong_audience", "check 6: aud is an array containing projects/<project_number>",
     "SDK only requires projects/<project_id>",
     lambda f: isinstance(f.claim("aud"), list) and f"projects/{NUMBER}" not in f.claim("aud")),
    ("sub-header-safe", "malformed",
     "check 6: sub is copied into the X-AppCheck-App-Id request header, so it must be 1-1,024 printable ASCII "
     "characters without spaces (0x21-0x7E)",
     "SDK accepts any string, including \"\", spaces, control characters and non-ASCII",
     lambda f: isinstance(f.claim("sub"), str)
     and not (1 <= len(f.claim("sub")) <= 1024 and all(0x21 <= ord(ch) <= 0x7E for ch in f.claim("sub")))),
    ("exp-iat-numbers", "malformed",
     "check 6: exp and iat are present numbers (missing or wrong JSON type is malformed)",
     "PyJWT requires neither and int()s numeric strings and booleans",
     lambda f: not is_number(f.claim("exp")) or not is_number(f.claim("iat"))),
    ("lifetime", "lifetime_too_long", "check 6: exp - iat at most 7 days",
     "no lifetime limit",
     lambda f: is_number(f.claim("exp")) and is_number(f.claim("iat"))
     and f.claim("exp") - f.claim("iat") > MAX_LIFETIME),
    ("nbf-number", "malformed", "check 6: nbf, when present, a number",
     "PyJWT int()s a numeric string", lambda f: "nbf" in (f.payload or {}) and not is_number(f.claim("nbf"))),
    ("jti-non-empty", "malformed", "check 6: jti, when present, a non-empty string",
     "PyJWT accepts jti == \"\"", lambda f: f.claim("jti") == ""),
]


def documented(reason, facts):
    return [r for r in STRICTER if r[1] == reason and r[4](facts)]


# ------------------------------------------------------------------------------------------------------
# The official verifier, pointed at the local key set.

with open(os.path.join(WORK, "jwks.json"), "rb") as f:
    JWKS_BYTES = f.read()


class JWKSHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "public, max-age=21600")
        self.send_header("Content-Length", str(len(JWKS_BYTES)))
        self.end_headers()
        self.wfile.write(JWKS_BYTES)

    def log_message(self, *args):
        pass


# PyJWT warns (and still verifies) when the served 1024-bit key is used; the verdict is what we compare.
warnings.filterwarnings("ignore", message="The RSA key is")

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), JWKSHandler)
threading.Thread(target=server.serve_forever, daemon=True).start()

import firebase_admin  # noqa: E402
from firebase_admin import app_check  # noqa: E402
from google.auth.credentials import AnonymousCredentials  # noqa: E402

app_check._AppCheckService._JWKS_URL = f"http://127.0.0.1:{server.server_port}/v1/jwks"
firebase_admin.initialize_app(AnonymousCredentials(), options={"projectId": PROJECT})
SDK_VERSION = firebase_admin.__version__


def official(token):
    try:
        claims = app_check.verify_token(token)
        return True, f"app_id={claims.get('app_id')}"
    except Exception as e:  # every exception is a rejection (ValueError, PyJWKClientError, AttributeError…)
        return False, f"{type(e).__name__}: {e}".replace("\n", " ")[:160]


def ours(token):
    p = subprocess.run([BINARY, "verify", "--config", CONFIG, "--", token], capture_output=True, text=True,
                       timeout=60)
    lines = [line for line in p.stdout.splitlines() if line.startswith("verdict: ")]
    if p.returncode not in (0, 1) or not lines:
        return None, f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[:200]}"
    verdict = lines[-1][len("verdict: "):]
    if p.returncode == 0 and verdict.startswith("valid"):
        return True, verdict
    if p.returncode == 1 and verdict.startswith("invalid reason="):
        return False, verdict.split("reason=", 1)[1].split()[0]
    return None, f"exit {p.returncode} with '{lines[-1]}'"


# ------------------------------------------------------------------------------------------------------

with open(os.path.join(WORK, "corpus.jsonl")) as f:
    corpus = [json.loads(line) for line in f]

results, failures, stricter = [], [], []
table = defaultdict(Counter)
for entry in corpus:
    tok = entry["token"]
    o_ok, o_msg = official(tok)
    u_ok, u_msg = ours(tok)
    rec = {"name": entry["name"], "group": entry["group"], "length": len(tok),
           "official": "accept" if o_ok else "reject", "official_message": o_msg,
           "ours": {True: "valid", False: "invalid", None: "error"}[u_ok], "ours_reason": u_msg}
    if u_ok is None:
        rec["outcome"], rec["why"] = "FAIL", f"our verify did not give a verdict: {u_msg}"
    elif entry.get("expect") == "accept" and not (o_ok and u_ok):
        rec["outcome"] = "FAIL"
        rec["why"] = "baseline token not accepted by " + ("the official SDK (harness broken?)" if not o_ok else "us")
    elif o_ok and u_ok:
        rec["outcome"] = "both-accept"
    elif not o_ok and not u_ok:
        rec["outcome"] = "both-reject"
    elif not o_ok and u_ok:
        rec["outcome"], rec["why"] = "FAIL", "official SDK rejects, we ACCEPT (looser than Firebase)"
    else:
        rules = documented(u_msg, Facts(tok))
        if rules:
            rec["outcome"], rec["rule"] = "stricter", rules[0][0]
            rec["spec"] = rules[0][2]
            stricter.append(rec)
        else:
            rec["outcome"], rec["why"] = "FAIL", f"we reject ({u_msg}) what the SDK accepts, no documented rule"
    if rec["outcome"] == "FAIL":
        failures.append(rec)
    table[entry["group"]][rec["outcome"]] += 1
    results.append(rec)

with open(os.path.join(WORK, "results.jsonl"), "w") as f:
    for rec in results:
        f.write(json.dumps(rec) + "\n")

cols = ["both-accept", "both-reject", "stricter", "FAIL"]
print(f"official verifier: firebase_admin {SDK_VERSION} app_check.verify_token; ours: {os.path.basename(BINARY)} verify")
print(f"{'group':<16}{'tokens':>8}" + "".join(f"{c:>13}" for c in cols))
for group in sorted(table, key=lambda g: [e['group'] for e in corpus].index(g)):
    counts = table[group]
    print(f"{group:<16}{sum(counts.values()):>8}" + "".join(f"{counts[c]:>13}" for c in cols))
total = Counter()
for counts in table.values():
    total.update(counts)
print(f"{'total':<16}{len(results):>8}" + "".join(f"{total[c]:>13}" for c in cols))

print(f"\nstricter than the official SDK, documented ({len(stricter)}):")
by_rule = defaultdict(list)
for rec in stricter:
    by_rule[rec["rule"]].append(rec)
for rule in STRICTER:
    recs = by_rule.get(rule[0])
    if recs:
        print(f"  [{rule[0]}] reason={rule[1]} — docs/behaviour.md {rule[2]}; SDK: {rule[3]}")
        for rec in recs:
            print(f"      {rec['name']}  (SDK: {rec['official_message'][:60]})")

if failures:
    print(f"\nFAILURES ({len(failures)}):")
    for rec in failures:
        print(f"  {rec['name']}: {rec['why']}\n      official: {rec['official']} ({rec['official_message']})"
              f"\n      ours:     {rec['ours']} ({rec['ours_reason']})")

# A corpus that shrank (a generator that stopped producing a group) would still "pass": it must not.
MIN_CORPUS = 376
if len(results) < MIN_CORPUS:
    print(f"\nFAILURE: the corpus has {len(results)} tokens, fewer than the {MIN_CORPUS} it was written with")
    sys.exit(1)

passed = len(results) - len(failures)
print(f"\n{passed} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
