import COpenSSL

/// Verifies App Attest receipts (docs/issuer.md "Fraud risk"): a CMS SignedData (BER, indefinite lengths
/// allowed) whose signer chains to the trusted root (Apple Root CA - G3 by default) at a given time, with its
/// embedded content parsed as `AppAttestReceiptPayload`. Pure: time passed in, no I/O, no logging.
///
/// Immutable and safe to share between threads; every verification builds its own `X509_STORE` (receipts
/// are verified once per attestation or refresh, and the time must be set per call).
public struct AppAttestReceiptVerifier: Sendable {
    private let root: X509Certificate

    /// Receipts larger than this are refused as malformed (Apple's are 3 to 6 KB).
    public static let maxReceiptLength = AppAttestVerifier.maxReceiptLength

    /// A verifier trusting only `rootCertificatePEM` (default: Apple Root CA - G3, built in). Throws
    /// `.signature` when the PEM holds no certificate.
    public init(rootCertificatePEM: String = AppAttestReceiptRootCA.applePEM) throws(AppAttestReceiptFailure) {
        guard let root = X509Certificate(pem: rootCertificatePEM) else {
            throw AppAttestReceiptFailure(.signature, "the receipt root CA PEM holds no certificate")
        }
        self.root = root
    }

    /// Verifies `receipt` for the key `publicKey` of `appId` at `time` (seconds since the Unix epoch): the
    /// signature and chain, then field 2 = the App ID, field 3 a certificate for `publicKey`, field 21 not
    /// passed, and for ATTEST receipts, when `clientDataHash` is given, field 4 equal to it. (Refreshed
    /// receipts are not compared on field 4: some of Apple's carry it mangled; research notes §4.)
    public func verify(_ receipt: [UInt8], appId: AppAttestAppID, publicKey: AppAttestPublicKey, clientDataHash: [UInt8]? = nil,
                       at time: Int64) throws(AppAttestReceiptFailure) -> AppAttestReceipt {
        let parsed = try verifySignature(receipt, at: time)
        guard Digest.constantTimeEqual(Array(parsed.appId.utf8), Array(appId.string.utf8)) else {
            throw AppAttestReceiptFailure(.appId, "receipt is for another App ID")
        }
        guard let certificate = X509Certificate(der: parsed.attestedCertificate), let spki = certificate.publicKeySPKI(),
              let key = AppAttestPublicKey(spki: spki) else {
            throw AppAttestReceiptFailure(.attestedKey, "field 3 is not a certificate with a P-256 key")
        }
        guard Digest.constantTimeEqual(key.uncompressedPoint, publicKey.uncompressedPoint) else {
            throw AppAttestReceiptFailure(.attestedKey, "receipt is for another key")
        }
        if let clientDataHash, parsed.kind == .attest, !Digest.constantTimeEqual(parsed.clientHash, clientDataHash) {
            throw AppAttestReceiptFailure(.clientHash, "client hash differs from the attestation's")
        }
        guard Double(time) <= parsed.expirationTime else { throw AppAttestReceiptFailure(.expired, "receipt has expired") }
        return parsed
    }

    /// Only the CMS layer and the payload's shape: the signature and chain to the root at `time`, the parsed fields.
    public func verifySignature(_ receipt: [UInt8], at time: Int64) throws(AppAttestReceiptFailure) -> AppAttestReceipt {
        guard !receipt.isEmpty else { throw AppAttestReceiptFailure(.missing, "no receipt") }
        guard receipt.count <= Self.maxReceiptLength else { throw AppAttestReceiptFailure(.malformed, "receipt too large") }
        var consumed = 0
        let decoded: OpaquePointer? = receipt.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            let cms = d2i_CMS_ContentInfo(nil, &cursor, buffer.count)
            if let cursor, let base = buffer.baseAddress { consumed = cursor - base }
            return cms
        }
        guard let cms = decoded else { ERR_clear_error(); throw AppAttestReceiptFailure(.malformed, "not a CMS ContentInfo") }
        defer { CMS_ContentInfo_free(cms) }
        guard consumed == receipt.count else { throw AppAttestReceiptFailure(.malformed, "bytes after the CMS ContentInfo") }
        guard OBJ_obj2nid(CMS_get0_type(cms)) == NID_pkcs7_signed else {
            throw AppAttestReceiptFailure(.malformed, "CMS content is not SignedData")
        }
        guard let signers = CMS_get0_SignerInfos(cms), OPENSSL_sk_num(signers) >= 1 else {
            ERR_clear_error()
            throw AppAttestReceiptFailure(.signature, "SignedData has no signer")
        }
        guard let store = X509_STORE_new() else { throw AppAttestReceiptFailure(.signature, "X509_STORE_new failed") }
        defer { X509_STORE_free(store) }
        guard X509_STORE_add_cert(store, root.pointer) == 1, let param = X509_STORE_get0_param(store),
              X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_ANY) == 1 else {
            ERR_clear_error()
            throw AppAttestReceiptFailure(.signature, "X509_STORE setup failed")
        }
        X509_VERIFY_PARAM_set_time(param, time_t(time))
        guard let out = BIO_new(BIO_s_mem()) else { throw AppAttestReceiptFailure(.signature, "BIO_new failed") }
        defer { BIO_free(out) }
        guard CMS_verify(cms, nil, store, nil, out, UInt32(CMS_BINARY)) == 1 else {
            let code = ERR_peek_last_error()
            var reason = "CMS_verify failed"
            if code != 0, let text = ERR_reason_error_string(code) { reason += ": " + String(cString: text) }
            ERR_clear_error()
            throw AppAttestReceiptFailure(.signature, reason)
        }
        var start: UnsafeMutablePointer<CChar>? = nil
        let length = BIO_ctrl(out, BIO_CTRL_INFO, 0, &start)
        guard length > 0, length <= Self.maxReceiptLength, let start else {
            throw AppAttestReceiptFailure(.malformed, "receipt has no content")
        }
        let content = UnsafeRawBufferPointer(start: start, count: length).map { $0 }
        return try AppAttestReceiptPayload.parse(content, bytes: receipt)
    }
}
