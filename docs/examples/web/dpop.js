// DPoP (RFC 9449) for the web, for the AppCheck Gateway (docs/dpop.md): a non-extractable WebCrypto P-256 key kept
// in IndexedDB, a proof for the issuer's exchange (the minted token is then bound to the key) and a `fetch` wrapper
// that sends the token and a fresh proof with every request. No dependencies; an ES module.
//
// The exact `htu` rule: `htu` = the request URL's scheme, host (port included unless it is the scheme's default) and
// path exactly as the browser sends it (`new URL(url).origin + pathname`), WITHOUT the query and fragment. It must be
// the URL the browser itself requests: behind a TLS-terminating load balancer that is the public `https://` URL.
// `htm` is the method in upper case; `iat` now in whole seconds; `jti` random; `ath` base64url(SHA-256(token)).
//
// The key: `generateKey(..., extractable: false, ["sign"])`. Script on the page can use it to sign (so an XSS can
// still make proofs while it runs) but cannot read it out, so a stolen token is useless elsewhere. The CryptoKey
// objects are stored as they are in IndexedDB (structured clone keeps them non-extractable) and survive reloads.

const DB_NAME = "appcheck-dpop";
const STORE = "keys";
const KEY_NAME = "dpop-p256";

function idb(mode, action) {
  return new Promise((resolve, reject) => {
    const open = indexedDB.open(DB_NAME, 1);
    open.onupgradeneeded = () => open.result.createObjectStore(STORE);
    open.onerror = () => reject(open.error);
    open.onsuccess = () => {
      const tx = open.result.transaction(STORE, mode);
      const request = action(tx.objectStore(STORE));
      tx.oncomplete = () => { open.result.close(); resolve(request.result); };
      tx.onerror = () => { open.result.close(); reject(tx.error); };
    };
  });
}

let cached = null;

/** The device's key pair: the one kept in IndexedDB, or a new non-extractable P-256 pair stored there. */
export async function getKeyPair() {
  if (cached) return cached;
  let pair = await idb("readonly", (store) => store.get(KEY_NAME));
  if (!pair) {
    pair = await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, false, ["sign", "verify"]);
    await idb("readwrite", (store) => store.put(pair, KEY_NAME));
  }
  cached = pair;
  return pair;
}

function b64url(bytes) {
  let text = "";
  for (const b of new Uint8Array(bytes)) text += String.fromCharCode(b);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

const utf8 = (text) => new TextEncoder().encode(text);

/** The public key as a JWK with only the members a thumbprint uses (the public half is always exportable). */
export async function publicJwk() {
  const { crv, kty, x, y } = await crypto.subtle.exportKey("jwk", (await getKeyPair()).publicKey);
  return { crv, kty, x, y };
}

/** RFC 7638 thumbprint: what the minted token's `cnf.jkt` holds. */
export async function thumbprint() {
  const { crv, kty, x, y } = await publicJwk();
  const canonical = JSON.stringify({ crv, kty, x, y });
  return b64url(await crypto.subtle.digest("SHA-256", utf8(canonical)));
}

/** `htu` for a request to `url` (relative URLs resolve against the page): origin + path, no query, no fragment. */
export function htu(url) {
  const u = new URL(url, location.href);
  return u.origin + u.pathname;
}

/** A DPoP proof for `method` `url`; with `token`, its `ath`. */
export async function proof(method, url, token) {
  const header = { typ: "dpop+jwt", alg: "ES256", jwk: await publicJwk() };
  const claims = { jti: crypto.randomUUID(), htm: method.toUpperCase(), htu: htu(url), iat: Math.floor(Date.now() / 1000) };
  if (token !== undefined) claims.ath = b64url(await crypto.subtle.digest("SHA-256", utf8(token)));
  const input = b64url(utf8(JSON.stringify(header))) + "." + b64url(utf8(JSON.stringify(claims)));
  // WebCrypto's ECDSA signature is r ‖ s (IEEE P1363), exactly JWS ES256's form.
  const signature = await crypto.subtle.sign({ name: "ECDSA", hash: "SHA-256" }, (await getKeyPair()).privateKey, utf8(input));
  return input + "." + b64url(signature);
}

/**
 * An issuer exchange (`…/apps/<app_id>:exchange…`) with a proof (htm POST, htu the exchange URL): returns the
 * response's JSON ({token, ttl}); the token is bound to this browser's key.
 */
export async function exchange(url, body) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", DPoP: await proof("POST", url) },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`exchange answered ${response.status}: ${await response.text()}`);
  return response.json();
}

/**
 * A `fetch` that adds `X-Firebase-AppCheck` (from `getToken()`, e.g. your cached exchange result) and a fresh
 * `DPoP` proof to every request: `const api = dpopFetch(() => token); await api("/v1/items?page=2")`.
 */
export function dpopFetch(getToken) {
  return async (input, init = {}) => {
    const request = new Request(input, init);
    const token = await getToken();
    const headers = new Headers(request.headers);
    headers.set("X-Firebase-AppCheck", token);
    headers.set("DPoP", await proof(request.method, request.url, token));
    return fetch(new Request(request, { headers }));
  };
}
