// DPoP (RFC 9449) for the AppCheck Gateway (docs/dpop.md) on Android: an EC P-256 key in the Android Keystore
// (StrongBox when the device has it), a proof for the issuer's exchange (the minted token is then bound to the key)
// and an OkHttp interceptor that adds `X-Firebase-AppCheck` and a fresh `DPoP` proof to every request.
//
// The exact `htu` rule: `htu` = the request URL's scheme, host (port included unless it is the scheme's default) and
// path exactly as sent (OkHttp's encodedPath), WITHOUT query and fragment. It must be the URL the app requests:
// behind a TLS-terminating load balancer, the public `https://` URL. `htm` is the method; `iat` now in whole seconds;
// `jti` a random UUID; `ath` = base64url(SHA-256(token)).
//
// Not compiled by this project (no Android SDK on its Linux machines); every API name is from the public Android
// (KeyGenParameterSpec, KeyStore "AndroidKeyStore", StrongBoxUnavailableException, API 28+) and OkHttp 4 APIs.
package com.example.appcheckgateway

import android.security.keystore.KeyGenParameterSpec
import android.security.keystore.KeyProperties
import android.security.keystore.StrongBoxUnavailableException
import android.util.Base64
import okhttp3.Interceptor
import okhttp3.Request
import okhttp3.Response
import org.json.JSONObject
import java.math.BigInteger
import java.security.KeyPairGenerator
import java.security.KeyStore
import java.security.MessageDigest
import java.security.PrivateKey
import java.security.Signature
import java.security.interfaces.ECPublicKey
import java.security.spec.ECGenParameterSpec
import java.util.UUID

class GatewayDPoP(private val alias: String = "appcheck-gateway-dpop") {
    private val keyStore = KeyStore.getInstance("AndroidKeyStore").apply { load(null) }

    init {
        if (!keyStore.containsAlias(alias)) {
            try {
                generate(strongBox = true)
            } catch (e: StrongBoxUnavailableException) {
                generate(strongBox = false)  // no StrongBox: the TEE-backed Keystore
            }
        }
    }

    private fun generate(strongBox: Boolean) {
        val spec = KeyGenParameterSpec.Builder(alias, KeyProperties.PURPOSE_SIGN)
            .setAlgorithmParameterSpec(ECGenParameterSpec("secp256r1"))
            .setDigests(KeyProperties.DIGEST_SHA256)
            .setIsStrongBoxBacked(strongBox)
            .build()
        KeyPairGenerator.getInstance(KeyProperties.KEY_ALGORITHM_EC, "AndroidKeyStore").apply { initialize(spec) }
            .generateKeyPair()
    }

    private val privateKey: PrivateKey get() = keyStore.getKey(alias, null) as PrivateKey
    private val publicKey: ECPublicKey get() = keyStore.getCertificate(alias).publicKey as ECPublicKey

    private fun b64url(bytes: ByteArray): String =
        Base64.encodeToString(bytes, Base64.URL_SAFE or Base64.NO_PADDING or Base64.NO_WRAP)

    /** A coordinate as exactly 32 big-endian bytes. */
    private fun fixed32(n: BigInteger): ByteArray {
        val raw = n.toByteArray()
        return when {
            raw.size == 32 -> raw
            raw.size > 32 -> raw.copyOfRange(raw.size - 32, raw.size)
            else -> ByteArray(32 - raw.size) + raw
        }
    }

    /** The public JWK, members in RFC 7638 order. */
    private val jwkJson: String
        get() {
            val w = publicKey.w
            return "{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"${b64url(fixed32(w.affineX))}\",\"y\":\"${b64url(fixed32(w.affineY))}\"}"
        }

    /** RFC 7638 thumbprint: the `cnf.jkt` of tokens bound to this key. */
    val thumbprint: String get() = b64url(MessageDigest.getInstance("SHA-256").digest(jwkJson.toByteArray()))

    /** `htu` for a request: scheme://host[:port]/path, no query, no fragment. */
    fun htu(request: Request): String {
        val url = request.url
        val port = if (url.port == okhttp3.HttpUrl.defaultPort(url.scheme)) "" else ":${url.port}"
        return "${url.scheme}://${url.host}$port${url.encodedPath}"
    }

    /** A proof for [request]; with [token], its `ath`. */
    fun proof(request: Request, token: String? = null): String {
        val header = "{\"typ\":\"dpop+jwt\",\"alg\":\"ES256\",\"jwk\":$jwkJson}"
        val claims = JSONObject()
            .put("jti", UUID.randomUUID().toString())
            .put("htm", request.method)
            .put("htu", htu(request))
            .put("iat", System.currentTimeMillis() / 1000)
        if (token != null) claims.put("ath", b64url(MessageDigest.getInstance("SHA-256").digest(token.toByteArray())))
        val input = b64url(header.toByteArray()) + "." + b64url(claims.toString().toByteArray())
        val der = Signature.getInstance("SHA256withECDSA").run {
            initSign(privateKey)
            update(input.toByteArray())
            sign()
        }
        return input + "." + b64url(joseSignature(der))
    }

    /** DER `ECDSA-Sig-Value` (what Java signs) to JWS ES256's r ‖ s, 32 bytes each. */
    private fun joseSignature(der: ByteArray): ByteArray {
        var i = 2
        if (der[1].toInt() and 0x80 != 0) i += der[1].toInt() and 0x7f  // long-form length (never for P-256)
        val rLength = der[i + 1].toInt()
        val r = BigInteger(1, der.copyOfRange(i + 2, i + 2 + rLength))
        i += 2 + rLength
        val sLength = der[i + 1].toInt()
        val s = BigInteger(1, der.copyOfRange(i + 2, i + 2 + sLength))
        return fixed32(r) + fixed32(s)
    }

    /** Adds the exchange proof (htm POST, htu the exchange URL) to an issuer exchange request. */
    fun signExchange(request: Request): Request = request.newBuilder().header("DPoP", proof(request)).build()

    /**
     * An OkHttp interceptor for calls to the gateway: `X-Firebase-AppCheck` from [token] (your App Check token
     * source) and a fresh `DPoP` proof on every request, retries included.
     */
    fun interceptor(token: () -> String): Interceptor = Interceptor { chain ->
        val t = token()
        val withToken = chain.request().newBuilder().header("X-Firebase-AppCheck", t).build()
        chain.proceed(withToken.newBuilder().header("DPoP", proof(withToken, t)).build())
    }
}
