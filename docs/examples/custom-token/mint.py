# Mints a custom token for the gateway's exchangeCustomToken (docs/issuer.md#custom-tokens).
# pip install "pyjwt[crypto]"; usage: python3 mint.py KEY.pem KID ISS ISSUER_URL APP_ID
import sys, time, uuid
import jwt  # PyJWT

key_file, kid, iss, issuer_url, app_id = sys.argv[1:6]
now = int(time.time())
claims = {"iss": iss, "aud": issuer_url, "sub": app_id, "iat": now, "exp": now + 60, "jti": str(uuid.uuid4())}
with open(key_file) as f:
    print(jwt.encode(claims, f.read(), algorithm="RS256", headers={"kid": kid}))
