// DPoP (RFC 9449) proofs for the AppCheck Gateway (docs/dpop.md), from a P-256 key pair: the public JWK and its
// RFC 7638 thumbprint (the `cnf.jkt` of tokens bound to the key), and a signed proof per request. Only java.security,
// java.util.Base64 (API 26+) and org.json, which Android has: GatewayDPoP.kt gives it the Android Keystore key.
//
// The exact `htu` rule: `htu` = the request URL's scheme, host (port included unless it is the scheme's default) and
// path exactly as sent, WITHOUT query and fragment (GatewayDPoP.htu makes it from an OkHttp request). `htm` is the
// method; `iat` now in whole seconds; `jti` a random UUID; `ath` = base64url(SHA-256(token)).
package com.example.appcheckgateway

import org.json.JSONObject
import java.math.BigInteger
import java.security.MessageDigest
import java.security.PrivateKey
import java.security.Signature
import java.security.interfaces.ECPublicKey
import java.util.Base64
import java.util.UUID

class DPoPProofs(private val privateKey: () -> PrivateKey, private val publicKey: ECPublicKey) {
    /** The public JWK, members in RFC 7638 order. */
    val jwkJson: String
        get() {
            val w = publicKey.w
            return "{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"${b64url(fixed32(w.affineX))}\",\"y\":\"${b64url(fixed32(w.affineY))}\"}"
        }

    /** RFC 7638 thumbprint: the `cnf.jkt` of tokens bound to this key. */
    val thumbprint: String get() = b64url(sha256(jwkJson.toByteArray()))

    /** A proof for [method] [htu]; with [token], its `ath`. */
    fun proof(method: String, htu: String, token: String? = null): String {
        val header = "{\"typ\":\"dpop+jwt\",\"alg\":\"ES256\",\"jwk\":$jwkJson}"
        val claims = JSONObject()
            .put("jti", UUID.randomUUID().toString())
            .put("htm", method)
            .put("htu", htu)
            .put("iat", System.currentTimeMillis() / 1000)
        if (token != null) claims.put("ath", b64url(sha256(token.toByteArray())))
        val input = b64url(header.toByteArray()) + "." + b64url(claims.toString().toByteArray())
        val der = Signature.getInstance("SHA256withECDSA").run {
            initSign(privateKey())
            update(input.toByteArray())
            sign()
        }
        return input + "." + b64url(joseSignature(der))
    }

    companion object {
        fun b64url(bytes: ByteArray): String = Base64.getUrlEncoder().withoutPadding().encodeToString(bytes)

        fun sha256(bytes: ByteArray): ByteArray = MessageDigest.getInstance("SHA-256").digest(bytes)

        /** A coordinate as exactly 32 big-endian bytes. */
        fun fixed32(n: BigInteger): ByteArray {
            val raw = n.toByteArray()
            return when {
                raw.size == 32 -> raw
                raw.size > 32 -> raw.copyOfRange(raw.size - 32, raw.size)
                else -> ByteArray(32 - raw.size) + raw
            }
        }

        /** DER `ECDSA-Sig-Value` (what Java signs) to JWS ES256's r ‖ s, 32 bytes each. */
        fun joseSignature(der: ByteArray): ByteArray {
            var i = 2
            if (der[1].toInt() and 0x80 != 0) i += der[1].toInt() and 0x7f  // long-form length (never for P-256)
            val rLength = der[i + 1].toInt()
            val r = BigInteger(1, der.copyOfRange(i + 2, i + 2 + rLength))
            i += 2 + rLength
            val sLength = der[i + 1].toInt()
            val s = BigInteger(1, der.copyOfRange(i + 2, i + 2 + sLength))
            return fixed32(r) + fixed32(s)
        }
    }
}
