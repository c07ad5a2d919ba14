import AppAttest
import COpenSSL

/// A stand-in for Apple's receipt PKI (Apple Root CA - G3 → Application Integration CA → Fraud Receipt
/// Signing): a root, an intermediate and a signing leaf made fresh in memory, valid from `now - 1 day` for 20
/// years, and CMS SignedData receipts signed with OpenSSL's `CMS_sign`, holding chosen fields. A gateway
/// configured with `rootPEM` as `receipt_root_ca_file` accepts them. Development and tests only.
public final class SimulatedReceiptCA: @unchecked Sendable {
    /// The fields of one receipt (docs/issuer.md "Fraud risk"); times in seconds since the Unix epoch.
    public struct Fields: Sendable {
        public var appId: String
        /// Field 3: the attested credential certificate (DER).
        public var attestedCertificate: [UInt8]
        public var clientHash: [UInt8]
        public var token: [UInt8] = Array("simulated-receipt-token".utf8)
        /// `ATTEST` or `RECEIPT`.
        public var kind: String = "ATTEST"
        public var environment: String? = "production"
        public var creationTime: Int64
        public var riskMetric: Int? = nil
        public var notBefore: Int64? = nil
        public var expirationTime: Int64

        /// An ATTEST receipt made at `now`, expiring 90 days later.
        public init(appId: String, attestedCertificate: [UInt8], clientHash: [UInt8], now: Int64) {
            self.appId = appId
            self.attestedCertificate = attestedCertificate
            self.clientHash = clientHash
            creationTime = now
            expirationTime = now + 90 * 86_400
        }

        /// The payload entries, type → value, in Apple's order.
        public var entries: [(Int, [UInt8])] {
            var out: [(Int, [UInt8])] = []
            if let riskMetric { out.append((17, Array(String(riskMetric).utf8))) }
            out.append((6, Array(kind.utf8)))
            out.append((2, Array(appId.utf8)))
            out.append((3, attestedCertificate))
            out.append((4, clientHash))
            out.append((5, token))
            if let environment { out.append((7, Array(environment.utf8))) }
            out.append((12, SimulatedReceiptCA.iso8601(creationTime)))
            if let notBefore { out.append((19, SimulatedReceiptCA.iso8601(notBefore))) }
            out.append((21, SimulatedReceiptCA.iso8601(expirationTime)))
            return out
        }
    }

    private let rootKey: SimulatorKey
    private let intermediateKey: SimulatorKey
    private let signerKey: SimulatorKey
    private let root: OpaquePointer
    private let intermediate: OpaquePointer
    private let signer: OpaquePointer

    /// The root certificate in PEM, for `AppAttestReceiptVerifier(rootCertificatePEM:)` or `receipt_root_ca_file`.
    public let rootPEM: String

    public init(now: Int64) throws(SimulatorError) {
        rootKey = try SimulatorKey(curve: "P-384")
        intermediateKey = try SimulatorKey(curve: "P-384")
        signerKey = try SimulatorKey(curve: "P-256")
        let notBefore = now - 86_400, notAfter = now + 20 * 365 * 86_400
        root = try SimulatedAppAttestCA.certificate(commonName: "Simulated Root CA - G3", serial: 1, subjectKey: rootKey, issuer: nil,
                                                    issuerKey: rootKey, notBefore: notBefore, notAfter: notAfter, isCA: true, extensions: [])
        intermediate = try SimulatedAppAttestCA.certificate(commonName: "Simulated Application Integration CA", serial: 2,
                                                            subjectKey: intermediateKey, issuer: root, issuerKey: rootKey,
                                                            notBefore: notBefore, notAfter: notAfter, isCA: true, extensions: [])
        signer = try SimulatedAppAttestCA.certificate(commonName: "Simulated Fraud Receipt Signing", serial: 3, subjectKey: signerKey,
                                                      issuer: intermediate, issuerKey: intermediateKey, notBefore: notBefore,
                                                      notAfter: notAfter, isCA: false, extensions: [])
        rootPEM = SimulatedAppAttestCA.pem(try SimulatedAppAttestCA.der(root))
    }

    deinit {
        X509_free(root)
        X509_free(intermediate)
        X509_free(signer)
    }

    /// A signed receipt holding `fields`.
    public func receipt(_ fields: Fields) throws(SimulatorError) -> [UInt8] {
        try sign(content: Self.payload(fields.entries))
    }

    /// The DER payload `SET OF SEQUENCE { INTEGER type, INTEGER 1, OCTET STRING value }` of `entries`.
    public static func payload(_ entries: [(Int, [UInt8])]) -> [UInt8] {
        tlv(0x31, entries.flatMap { type, value in tlv(0x30, integer(type) + integer(1) + tlv(0x04, value)) })
    }

    /// A DER CMS SignedData over `content`, signed by the signing leaf with the intermediate included.
    /// `signed: false` gives the same content unsigned (a CMS `data` ContentInfo).
    public func sign(content: [UInt8], signed: Bool = true) throws(SimulatorError) -> [UInt8] {
        guard let data = BIO_new_mem_buf(content, Int32(content.count)) else { throw SimulatorError("BIO_new_mem_buf") }
        defer { BIO_free(data) }
        guard let certs = OPENSSL_sk_new_null() else { throw SimulatorError("OPENSSL_sk_new_null") }
        defer { OPENSSL_sk_free(certs) }
        guard OPENSSL_sk_push(certs, UnsafeRawPointer(intermediate)) > 0 else { throw SimulatorError("OPENSSL_sk_push") }
        let flags = UInt32(CMS_BINARY)
        let made = signed ? CMS_sign(signer, signerKey.pointer, certs, data, flags) : CMS_data_create(data, flags)
        guard let cms = made else {
            ERR_clear_error()
            throw SimulatorError("CMS_sign")
        }
        defer { CMS_ContentInfo_free(cms) }
        var out: UnsafeMutablePointer<UInt8>? = nil
        let length = i2d_CMS_ContentInfo(cms, &out)
        guard length > 0, let out else { ERR_clear_error(); throw SimulatorError("i2d_CMS_ContentInfo") }
        defer { CRYPTO_free(out, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }

    /// `YYYY-MM-DDTHH:MM:SS.000Z` for `seconds` since the Unix epoch (as Apple writes receipt times).
    public static func iso8601(_ seconds: Int64) -> [UInt8] {
        let days = Int(seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400)
        let rest = Int(seconds) - days * 86_400
        // Civil from days (H. Hinnant's algorithm).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        func pad(_ value: Int, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        let text = "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(rest / 3600, 2)):\(pad(rest / 60 % 60, 2)):\(pad(rest % 60, 2)).000Z"
        return Array(text.utf8)
    }

    private static func tlv(_ tag: UInt8, _ value: [UInt8]) -> [UInt8] {
        let count = value.count
        let length: [UInt8] = count < 0x80 ? [UInt8(count)]
            : count <= 0xFF ? [0x81, UInt8(count)] : [0x82, UInt8(count >> 8), UInt8(count & 0xFF)]
        return [tag] + length + value
    }

    private static func integer(_ value: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        var rest = value
        repeat { bytes.insert(UInt8(rest & 0xFF), at: 0); rest >>= 8 } while rest > 0
        if bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
        return tlv(0x02, bytes)
    }
}
