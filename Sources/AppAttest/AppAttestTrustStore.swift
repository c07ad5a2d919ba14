import COpenSSL

/// An OpenSSL `X509_STORE` holding exactly one trusted root, for App Attest chains.
///
/// No default paths, no purpose, no other anchors: a chain is trusted only if it ends at this root.
/// `X509_STORE` is reference-counted and safe for concurrent verifications, each with its own context.
final class AppAttestTrustStore: @unchecked Sendable {
    private let store: OpaquePointer
    private let root: X509Certificate

    init?(rootPEM: String) {
        guard let root = X509Certificate(pem: rootPEM), let store = X509_STORE_new() else { return nil }
        guard X509_STORE_add_cert(store, root.pointer) == 1 else {
            ERR_clear_error()
            X509_STORE_free(store)
            return nil
        }
        self.store = store
        self.root = root
    }

    deinit { X509_STORE_free(store) }

    /// Verifies `leaf` ← `intermediate` ← the root at `time` (seconds since the Unix epoch). Returns `nil`
    /// on success, else OpenSSL's reason. The built chain must be exactly leaf, intermediate, root, so a
    /// root or a self-signed certificate presented as the leaf is refused.
    func verify(leaf: X509Certificate, intermediate: X509Certificate, at time: Int64) -> String? {
        guard let context = X509_STORE_CTX_new() else { return "X509_STORE_CTX_new failed" }
        defer { X509_STORE_CTX_free(context) }
        guard let untrusted = OPENSSL_sk_new_null() else { return "OPENSSL_sk_new_null failed" }
        defer { OPENSSL_sk_free(untrusted) }
        guard OPENSSL_sk_push(untrusted, UnsafeRawPointer(intermediate.pointer)) > 0,
              X509_STORE_CTX_init(context, store, leaf.pointer, untrusted) == 1,
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
        guard let chain = X509_STORE_CTX_get0_chain(context), OPENSSL_sk_num(chain) == 3 else {
            return "chain is not leaf, intermediate, root"
        }
        return nil
    }
}
