// DPoP (RFC 9449) for the AppCheck Gateway (docs/dpop.md) on Android: an EC P-256 key in the Android Keystore
// (StrongBox when the device has it), a proof for the issuer's exchange (the minted token is then bound to the key)
// and an OkHttp interceptor that adds `X-Firebase-AppCheck` and a fresh `DPoP` proof to every request. The proofs
// themselves: DPoPProofs.kt.
//
// The exact `htu` rule: `htu` = the request URL's scheme, host (port included unless it is the scheme's default) and
// path exactly as sent (OkHttp's encodedPath), WITHOUT query and fragment. It must be the URL the app requests:
// behind a TLS-terminating load balancer, the public `https://` URL.
//
// Not compiled by this project (no Android SDK or OkHttp 4 on its Linux machines; see README.md); every API name is
// from the public Android (KeyGenParameterSpec, KeyStore "AndroidKeyStore", StrongBoxUnavailableException, API 28+)
// and OkHttp 4 APIs.
package com.example.appcheckgateway

import android.security.keystore.KeyGenParameterSpec
import android.security.keystore.KeyProperties
import android.security.keystore.StrongBoxUnavailableException
import okhttp3.HttpUrl
import okhttp3.Interceptor
import okhttp3.Request
import java.security.KeyPairGenerator
import java.security.KeyStore
import java.security.PrivateKey
import java.security.interfaces.ECPublicKey
import java.security.spec.ECGenParameterSpec

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

    /** The proofs, signed by the Keystore key (the private key is a handle; its bytes never leave the Keystore). */
    private val proofs = DPoPProofs(
        { keyStore.getKey(alias, null) as PrivateKey },
        keyStore.getCertificate(alias).publicKey as ECPublicKey,
    )

    /** RFC 7638 thumbprint: the `cnf.jkt` of tokens bound to this key. */
    val thumbprint: String get() = proofs.thumbprint

    /** `htu` for a request: scheme://host[:port]/path, no query, no fragment. */
    fun htu(request: Request): String {
        val url = request.url
        val port = if (url.port == HttpUrl.defaultPort(url.scheme)) "" else ":${url.port}"
        return "${url.scheme}://${url.host}$port${url.encodedPath}"
    }

    /** A proof for [request]; with [token], its `ath`. */
    fun proof(request: Request, token: String? = null): String = proofs.proof(request.method, htu(request), token)

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
