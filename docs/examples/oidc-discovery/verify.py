# Verifies a token minted by the gateway's issuer with nothing but OIDC discovery (docs/issuer.md#oidc-discovery):
# the discovery document at <iss>/.well-known/openid-configuration gives the jwks_uri, PyJWT's PyJWKClient fetches
# the key the token's kid names, and jwt.decode checks the signature, iss, aud and exp.
# pip install "pyjwt[crypto]" requests; usage: python3 verify.py ISS PROJECT_NUMBER TOKEN
import json, sys
import jwt  # PyJWT
import requests

iss, project_number, token = sys.argv[1:4]
config = requests.get(iss + "/.well-known/openid-configuration", timeout=10)
config.raise_for_status()
config = config.json()
if config["issuer"] != iss:
    sys.exit(f"discovery names issuer {config['issuer']!r}, not {iss!r}")
key = jwt.PyJWKClient(config["jwks_uri"]).get_signing_key_from_jwt(token)
claims = jwt.decode(token, key, algorithms=config["id_token_signing_alg_values_supported"],
                    audience=f"projects/{project_number}", issuer=config["issuer"],
                    options={"require": ["iss", "aud", "sub", "iat", "exp"]})
print(json.dumps(claims, sort_keys=True))
