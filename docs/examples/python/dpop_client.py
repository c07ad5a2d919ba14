"""A DPoP client for the gateway (docs/dpop.md), in Python with PyJWT and cryptography (pip install "pyjwt[crypto]").

The key is a P-256 key made here; on a device it would live in the platform's keystore. Every request gets a fresh
proof: `htm` the method, `htu` the URL **without query and fragment** (scheme and host as the client reaches the
gateway, the path exactly as sent), `iat` now, a random `jti`, and, with a token, `ath` = base64url(SHA-256(token)).

    client = DPoPClient()
    token = client.exchange(exchange_url, {"debug_token": "..."})   # the minted token carries cnf.jkt
    status, body = client.request("GET", "https://api.example.com/v1/items?page=2", token)
"""
import base64
import hashlib
import json
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import jwt
from cryptography.hazmat.primitives.asymmetric import ec


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class DPoPClient:
    def __init__(self, key=None):
        self.key = key or ec.generate_private_key(ec.SECP256R1())
        numbers = self.key.public_key().public_numbers()
        # RFC 7518 §6.2.1: x and y, 32 bytes each, big-endian.
        self.jwk = {"crv": "P-256", "kty": "EC", "x": b64url(numbers.x.to_bytes(32, "big")),
                    "y": b64url(numbers.y.to_bytes(32, "big"))}

    @property
    def thumbprint(self) -> str:
        """RFC 7638: SHA-256 of the required members in lexicographic order, no whitespace."""
        canonical = json.dumps(self.jwk, sort_keys=True, separators=(",", ":")).encode()
        return b64url(hashlib.sha256(canonical).digest())

    @staticmethod
    def htu(url: str) -> str:
        """The `htu` of a request to `url`: scheme, host (and port) and path, no query, no fragment."""
        parts = urllib.parse.urlsplit(url)
        return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path or "/", "", ""))

    def proof(self, method: str, url: str, token: str = None, iat: float = None, jti: str = None) -> str:
        claims = {"jti": jti or str(uuid.uuid4()), "htm": method, "htu": self.htu(url), "iat": int(iat or time.time())}
        if token is not None:
            claims["ath"] = b64url(hashlib.sha256(token.encode()).digest())
        return jwt.encode(claims, self.key, algorithm="ES256", headers={"typ": "dpop+jwt", "jwk": self.jwk})

    def exchange(self, url: str, body: dict) -> str:
        """An issuer exchange with a proof (htm POST, htu the exchange URL): the token it mints is bound to this key."""
        status, answer, _ = send("POST", url, {"DPoP": self.proof("POST", url), "Content-Type": "application/json"},
                              json.dumps(body).encode())
        if status != 200:
            raise RuntimeError(f"exchange answered {status}: {answer}")
        return json.loads(answer)["token"]

    def request(self, method: str, url: str, token: str, body: bytes = None, headers: dict = None):
        """A request with the token and a fresh proof for it. Returns (status, body text, response headers)."""
        h = {"X-Firebase-AppCheck": token, "DPoP": self.proof(method, url, token)}
        h.update(headers or {})
        return send(method, url, h, body)


def send(method: str, url: str, headers: dict, body: bytes = None):
    """(status, body text, headers) of one HTTP request, errors included."""
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), dict(error.headers)
