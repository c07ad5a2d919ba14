// Compiles docs/examples/android/DPoPProofs.kt as written (Debian's kotlinc, with org.json from Debian's Android
// rewrite of it) and runs it on the JVM against a real gateway, with a software P-256 key from the JVM's own provider
// standing in for the Android Keystore (the same java.security calls; the Keystore is not here): the exchange with
// its proof mints a token bound to the key, proofs for each request then pass a `dpop: required` route, and the
// token without a proof or with another key's does not. Arguments: gateway base URL, exchange URL, debug secret.
// Ends with `android-dpop: PASS` or exits 1.
package com.example.appcheckgateway.check

import com.example.appcheckgateway.DPoPProofs
import org.json.JSONObject
import java.net.HttpURLConnection
import java.net.URL
import java.security.KeyPairGenerator
import java.security.interfaces.ECPublicKey
import java.security.spec.ECGenParameterSpec
import java.util.Base64
import kotlin.system.exitProcess

var failures = 0

fun check(ok: Boolean, what: String) {
    println((if (ok) "ok   " else "FAIL ") + what)
    if (!ok) failures += 1
}

fun softwareKey(): DPoPProofs {
    val pair = KeyPairGenerator.getInstance("EC").apply { initialize(ECGenParameterSpec("secp256r1")) }.generateKeyPair()
    return DPoPProofs({ pair.private }, pair.public as ECPublicKey)
}

/** Status and body of one request. */
fun call(method: String, url: String, headers: Map<String, String>, body: String? = null): Pair<Int, String> {
    val c = URL(url).openConnection() as HttpURLConnection
    c.requestMethod = method
    for ((k, v) in headers) c.setRequestProperty(k, v)
    if (body != null) {
        c.doOutput = true
        c.outputStream.use { it.write(body.toByteArray()) }
    }
    val status = c.responseCode
    val text = (if (status < 400) c.inputStream else c.errorStream)?.bufferedReader()?.readText() ?: ""
    return Pair(status, text)
}

fun main(args: Array<String>) {
    if (args.size != 3) { println("usage: Check BASE EXCHANGE_URL SECRET"); exitProcess(2) }
    val (base, exchangeUrl, secret) = args
    val dpop = softwareKey()

    val (minted, body) = call("POST", exchangeUrl, mapOf("Content-Type" to "application/json",
        "DPoP" to dpop.proof("POST", exchangeUrl)), "{\"debug_token\":\"$secret\"}")
    check(minted == 200, "exchange with a proof: $minted" + (if (minted == 200) "" else " $body"))
    val token = if (minted == 200) JSONObject(body).optString("token") else ""
    val parts = token.split(".")
    val payload = if (parts.size == 3) JSONObject(String(Base64.getUrlDecoder().decode(parts[1]))) else JSONObject()
    check(payload.optJSONObject("cnf")?.optString("jkt") == dpop.thumbprint,
        "the minted token's cnf.jkt is the key's thumbprint ${dpop.thumbprint}")

    // htu: the URL without its query.
    val url = "$base/strict/items?page=2"
    val htu = "$base/strict/items"
    for (i in 1..2) {
        val (status, _) = call("GET", url, mapOf("X-Firebase-AppCheck" to token, "DPoP" to dpop.proof("GET", htu, token)))
        check(status == 200, "request with a fresh proof #$i: $status")
    }
    val (bare, _) = call("GET", url, mapOf("X-Firebase-AppCheck" to token))
    check(bare == 401, "the token without a proof: $bare")
    val thief = softwareKey()
    val (stolen, _) = call("GET", url, mapOf("X-Firebase-AppCheck" to token, "DPoP" to thief.proof("GET", htu, token)))
    check(stolen == 401, "the token with another key's proof: $stolen")

    println(if (failures == 0) "android-dpop: PASS" else "android-dpop: FAIL ($failures)")
    exitProcess(if (failures == 0) 0 else 1)
}
