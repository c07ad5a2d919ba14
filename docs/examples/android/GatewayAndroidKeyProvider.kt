// A FirebaseAppCheck provider that gets App Check tokens from the gateway's issuer with Android Key Attestation
// (docs/issuer.md "Android: Key Attestation, no Play services"). Not compiled by this project: see README.md.
package com.example.appcheck

import android.content.Context
import android.security.keystore.KeyGenParameterSpec
import android.security.keystore.KeyProperties
import android.security.keystore.StrongBoxUnavailableException
import android.util.Base64
import com.google.android.gms.tasks.Task
import com.google.android.gms.tasks.Tasks
import com.google.firebase.FirebaseApp
import com.google.firebase.appcheck.AppCheckProvider
import com.google.firebase.appcheck.AppCheckProviderFactory
import com.google.firebase.appcheck.AppCheckToken
import org.json.JSONArray
import org.json.JSONObject
import java.net.HttpURLConnection
import java.net.URL
import java.security.KeyPairGenerator
import java.security.KeyStore
import java.security.PrivateKey
import java.security.Signature
import java.security.spec.ECGenParameterSpec
import java.util.concurrent.Executor
import java.util.concurrent.Executors

/**
 * Install before using App Check:
 * `FirebaseAppCheck.getInstance().installAppCheckProviderFactory(GatewayAndroidKeyProviderFactory(context))`.
 *
 * [baseUrl] is `<issuer_url origin><base_path>/v1`, e.g. `https://api.example.com/appcheck/v1` (**change it**).
 */
class GatewayAndroidKeyProviderFactory(
    private val context: Context,
    private val baseUrl: String = "https://api.example.com/appcheck/v1",
) : AppCheckProviderFactory {
    override fun create(firebaseApp: FirebaseApp): AppCheckProvider {
        val options = firebaseApp.options
        // {project} may be the project number (the gcmSenderId) or the project ID; the App ID names the app.
        val resource = "$baseUrl/projects/${options.gcmSenderId}/apps/${options.applicationId}"
        return GatewayAndroidKeyProvider(context.applicationContext, resource)
    }
}

/** One Keystore key per installation: attested once, then it signs a fresh challenge for each token. */
class GatewayAndroidKeyProvider(
    private val context: Context,
    private val resource: String,
    private val executor: Executor = Executors.newSingleThreadExecutor(),
) : AppCheckProvider {
    private companion object {
        const val KEY_ALIAS = "appcheck-gateway-android-key"
        const val PREFS = "appcheck-gateway"
        const val ARTIFACT = "artifact"
    }

    private class Token(private val token: String, private val expireTimeMillis: Long) : AppCheckToken() {
        override fun getToken(): String = token
        override fun getExpireTimeMillis(): Long = expireTimeMillis
    }

    /** FirebaseAppCheck calls this for session tokens; it caches and refreshes them itself. */
    override fun getToken(): Task<AppCheckToken> = Tasks.call(executor) { exchange(limitedUse = false) }

    /** For routes with `replay_protection: true`: a single-use token (`FirebaseAppCheck.getLimitedUseAppCheckToken`). */
    override fun getLimitedUseToken(): Task<AppCheckToken> = Tasks.call(executor) { exchange(limitedUse = true) }

    private fun exchange(limitedUse: Boolean): AppCheckToken {
        val prefs = context.getSharedPreferences(PREFS, Context.MODE_PRIVATE)
        val artifact = prefs.getString(ARTIFACT, null)
        val keyStore = KeyStore.getInstance("AndroidKeyStore").apply { load(null) }
        if (artifact != null && keyStore.containsAlias(KEY_ALIAS)) {
            val challenge = challenge()
            val signature = Signature.getInstance("SHA256withECDSA").run {
                initSign(keyStore.getKey(KEY_ALIAS, null) as PrivateKey)
                update(challenge)
                sign()
            }
            val (status, body) = post(":exchangeAndroidKeyAssertion", JSONObject()
                .put("artifact", artifact)
                .put("challenge", b64(challenge))
                .put("signature", b64(signature))
                .put("limitedUse", limitedUse))
            if (status == 200) return token(body)
            // 403: the issuer no longer knows the key (another state store, a wiped database): attest a new one.
            if (status != 403) throw IllegalStateException("exchangeAndroidKeyAssertion answered $status")
            prefs.edit().remove(ARTIFACT).apply()
        }

        // First use (or a forgotten key): a new key attested with a fresh challenge, its chain sent once.
        val challenge = challenge()
        generateKey(challenge)
        val chain = JSONArray()
        keyStore.getCertificateChain(KEY_ALIAS).forEach { chain.put(b64(it.encoded)) } // leaf first, root last
        val (status, body) = post(":exchangeAndroidKeyAttestation", JSONObject()
            .put("certificateChain", chain)
            .put("challenge", b64(challenge))
            .put("limitedUse", limitedUse))
        if (status != 200) throw IllegalStateException("exchangeAndroidKeyAttestation answered $status")
        prefs.edit().putString(ARTIFACT, body.getString("artifact")).apply()
        return token(body.getJSONObject("appCheckToken"))
    }

    /** An EC P-256 signing key in StrongBox when the device has one, else the TEE; the challenge goes into its attestation. */
    private fun generateKey(challenge: ByteArray) {
        fun spec(strongBox: Boolean) = KeyGenParameterSpec.Builder(KEY_ALIAS, KeyProperties.PURPOSE_SIGN)
            .setAlgorithmParameterSpec(ECGenParameterSpec("secp256r1"))
            .setDigests(KeyProperties.DIGEST_SHA256)
            .setAttestationChallenge(challenge)
            .setIsStrongBoxBacked(strongBox)
            .build()
        val generator = KeyPairGenerator.getInstance(KeyProperties.KEY_ALGORITHM_EC, "AndroidKeyStore")
        try {
            generator.initialize(spec(strongBox = true))
            generator.generateKeyPair()
        } catch (e: StrongBoxUnavailableException) {
            generator.initialize(spec(strongBox = false))
            generator.generateKeyPair()
        }
    }

    private fun challenge(): ByteArray {
        val (status, body) = post(":generateAndroidKeyChallenge", JSONObject())
        if (status != 200) throw IllegalStateException("generateAndroidKeyChallenge answered $status")
        return Base64.decode(body.getString("challenge"), Base64.DEFAULT)
    }

    /** `{"token": "...", "ttl": "3600s"}` as an AppCheckToken. */
    private fun token(json: JSONObject): AppCheckToken {
        val seconds = json.getString("ttl").removeSuffix("s").toDouble()
        return Token(json.getString("token"), System.currentTimeMillis() + (seconds * 1000).toLong())
    }

    private fun post(method: String, body: JSONObject): Pair<Int, JSONObject> {
        val connection = URL(resource + method).openConnection() as HttpURLConnection
        try {
            connection.requestMethod = "POST"
            connection.doOutput = true
            connection.connectTimeout = 10_000
            connection.readTimeout = 10_000
            connection.setRequestProperty("Content-Type", "application/json")
            connection.outputStream.use { it.write(body.toString().toByteArray()) }
            val status = connection.responseCode
            val stream = if (status in 200..299) connection.inputStream else connection.errorStream
            val text = stream?.bufferedReader()?.use { it.readText() } ?: "{}"
            return status to JSONObject(text)
        } finally {
            connection.disconnect()
        }
    }

    private fun b64(bytes: ByteArray): String = Base64.encodeToString(bytes, Base64.NO_WRAP)
}
