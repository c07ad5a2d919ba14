import COpenSSL

/// An OpenSSL `X509_STORE` holding the pinned attestation roots and nothing else (no default paths, no purpose).
///
/// Verification is lenient in exactly two ways, both on certificates that issue others below the root:
/// `X509_V_ERR_INVALID_CA` (CA:FALSE or no basicConstraints) and `X509_V_ERR_KEYUSAGE_NO_CERTSIGN`, because
/// factory-provisioned devices (e.g. Sony Xperia 10 III) ship intermediates marked that way and Google's own
/// verifier checks neither. What that leniency would let through (an attested key used to sign a further
/// "attestation") is refused by the caller's rule that only one certificate of the chain carries a KeyDescription.
final class AndroidTrustStore: @unchecked Sendable {
    private let store: OpaquePointer
    private let roots: [AndroidCertificate]

    /// A store trusting every certificate of `rootsPEM`; `nil` when it holds none.
    init?(rootsPEM: String) {
        let roots = AndroidCertificate.all(pem: rootsPEM)
        guard !roots.isEmpty, let store = X509_STORE_new() else { return nil }
        for root in roots where X509_STORE_add_cert(store, root.pointer) != 1 {
            ERR_clear_error()
            X509_STORE_free(store)
            return nil
        }
        X509_STORE_set_verify_cb(store, androidLenientVerify)
        self.store = store
        self.roots = roots
    }

    deinit { X509_STORE_free(store) }

    /// Verifies `chain` (leaf first, no root: the caller drops a presented self-signed top) at `time` (seconds
    /// since the Unix epoch). Returns `nil` on success, else OpenSSL's reason. The built path must be exactly the
    /// presented certificates plus one trusted root, so no certificate is skipped or borrowed.
    func verify(_ chain: [AndroidCertificate], at time: Int64) -> String? {
        guard let leaf = chain.first else { return "empty chain" }
        guard let context = X509_STORE_CTX_new() else { return "X509_STORE_CTX_new failed" }
        defer { X509_STORE_CTX_free(context) }
        guard let untrusted = OPENSSL_sk_new_null() else { return "OPENSSL_sk_new_null failed" }
        defer { OPENSSL_sk_free(untrusted) }
        for certificate in chain.dropFirst() where OPENSSL_sk_push(untrusted, UnsafeRawPointer(certificate.pointer)) <= 0 {
            return "OPENSSL_sk_push failed"
        }
        guard X509_STORE_CTX_init(context, store, leaf.pointer, untrusted) == 1,
              let param = X509_STORE_CTX_get0_param(context) else {
            ERR_clear_error()
            return "X509_STORE_CTX_init failed"
        }
        X509_VERIFY_PARAM_set_time(param, time_t(time))
        guard X509_verify_cert(context) == 1 else {
            let code = X509_STORE_CTX_get_error(context)
            ERR_clear_error()
            return String(cString: X509_verify_cert_error_string(Int(code)))
        }
        guard let built = X509_STORE_CTX_get0_chain(context), Int(OPENSSL_sk_num(built)) == chain.count + 1 else {
            return "the verified path is not the presented chain and one root"
        }
        for (index, certificate) in chain.enumerated() {
            guard let raw = OPENSSL_sk_value(built, Int32(index)),
                  X509_cmp(OpaquePointer(raw), certificate.pointer) == 0 else {
                return "the verified path is not the presented chain"
            }
        }
        return nil
    }
}

/// OpenSSL's verify callback: passes the two legacy-intermediate errors below the leaf, everything else as is.
private func androidLenientVerify(_ ok: Int32, _ context: OpaquePointer?) -> Int32 {
    guard ok == 0, let context else { return ok }
    let error = X509_STORE_CTX_get_error(context)
    let depth = X509_STORE_CTX_get_error_depth(context)
    if depth >= 1, error == X509_V_ERR_INVALID_CA || error == X509_V_ERR_KEYUSAGE_NO_CERTSIGN { return 1 }
    return ok
}
