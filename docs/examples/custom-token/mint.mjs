// Mints a custom token for the gateway's exchangeCustomToken (docs/issuer.md#custom-tokens). Node 18+, no packages.
// usage: node mint.mjs KEY.pem KID ISS ISSUER_URL APP_ID
import { createPrivateKey, randomUUID, sign } from "node:crypto";
import { readFileSync } from "node:fs";

const [keyFile, kid, iss, issuerUrl, appId] = process.argv.slice(2);
const now = Math.floor(Date.now() / 1000);
const b64 = (o) => Buffer.from(JSON.stringify(o)).toString("base64url");
const input = b64({ alg: "RS256", kid, typ: "JWT" }) + "." +
  b64({ iss, aud: issuerUrl, sub: appId, iat: now, exp: now + 60, jti: randomUUID() });
const signature = sign("sha256", Buffer.from(input), createPrivateKey(readFileSync(keyFile)));
console.log(input + "." + signature.toString("base64url"));
