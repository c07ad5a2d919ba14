import Foundation

extension ConfigDecoder {
    /// `issuer.apps[].android` (docs/issuer.md "Android").
    func decodeAndroid(_ node: Node, _ context: String) -> AndroidAppSettings? {
        guard let f = fields(node, context, known: [
            "package_name", "signing_cert_sha256", "require_strongbox", "min_patch_level", "root_ca_file", "revocation_url",
        ]) else { return nil }
        var packageName: String?
        if let v = f.value("package_name"), let text = nonEmptyString(v, "\(context).package_name") {
            if Self.isPackageName(text) {
                packageName = text
            } else {
                error(v, "invalid \(context).package_name '\(text)': expected an Android package name such as com.example.app (two or more dot-separated parts, each a letter then letters, digits or _)")
            }
        } else if f.value("package_name") == nil {
            error(f.position, "missing required key 'package_name' in \(context)")
        }
        var digests: [[UInt8]] = []
        if let v = f.value("signing_cert_sha256"), let items = list(v, "\(context).signing_cert_sha256") {
            if items.isEmpty { error(v, "\(context).signing_cert_sha256 must list at least one SHA-256 digest") }
            for (i, item) in items.enumerated() {
                guard let text = string(item, "\(context).signing_cert_sha256[\(i)]") else { continue }
                if let digest = Self.sha256Digest(text) {
                    if digests.contains(digest) { error(item, "\(context).signing_cert_sha256 lists '\(text)' twice") } else { digests.append(digest) }
                } else {
                    error(item, "invalid \(context).signing_cert_sha256[\(i)] '\(text)': expected the SHA-256 of a signing certificate, 64 hex digits (colons allowed, as keytool and the Play Console print it)")
                }
            }
        } else if f.value("signing_cert_sha256") == nil {
            error(f.position, "missing required key 'signing_cert_sha256' in \(context) (the SHA-256 of the app's signing certificate: Play Console, App integrity, App signing)")
        }
        var settings = AndroidAppSettings(packageName: packageName ?? "", signingCertSHA256: digests)
        if let v = f.value("require_strongbox"), let flag = bool(v, "\(context).require_strongbox") { settings.requireStrongBox = flag }
        if let v = f.value("min_patch_level"), let text = string(v, "\(context).min_patch_level"), !text.isEmpty {
            if let level = Self.patchLevel(text) {
                settings.minPatchLevel = level
            } else {
                error(v, "invalid \(context).min_patch_level '\(text)': expected a year and month such as 2026-01 (or 202601)")
            }
        }
        if let v = f.value("root_ca_file"), let text = string(v, "\(context).root_ca_file"), !text.isEmpty {
            if let path = readableFile(v, "\(context).root_ca_file") {
                if let problem = Self.certificateProblem(path) {
                    error(v, "\(context).root_ca_file '\(path)': \(problem)")
                } else {
                    settings.rootCAFile = path
                }
            }
        }
        if let v = f.value("revocation_url"), let text = string(v, "\(context).revocation_url"), !text.isEmpty {
            let lower = text.lowercased()
            if lower.hasPrefix("file:///") || ((lower.hasPrefix("https://") || lower.hasPrefix("http://"))
                                                 && URLComponents(string: text)?.host?.isEmpty == false) {
                settings.revocationURL = text
            } else {
                error(v, "invalid \(context).revocation_url '\(text)': expected an https://, http:// or file:/// URL of the attestation status list")
            }
        }
        guard packageName != nil, !digests.isEmpty else { return nil }
        return settings
    }

    /// `com.example.app`: two or more parts, each a letter then letters, digits or `_` (Android's applicationId rule).
    static func isPackageName(_ text: String) -> Bool {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count >= 2 && parts.allSatisfy { part in
            guard let first = part.first, first.isASCII, first.isLetter else { return false }
            return part.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
        }
    }

    /// 32 bytes from 64 hex digits, optionally separated by colons (`AB:CD:…`).
    static func sha256Digest(_ text: String) -> [UInt8]? {
        let hex = Array(text.replacingOccurrences(of: ":", with: "").utf8)
        guard hex.count == 64 else { return nil }
        var bytes: [UInt8] = []
        var index = 0
        while index < 64 {
            guard let high = hexValue(hex[index]), let low = hexValue(hex[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// `2026-01` or `202601` as 202601; the year 2000–2099, the month 01–12.
    static func patchLevel(_ text: String) -> Int64? {
        let digits = text.count == 7 && Array(text)[4] == "-" ? text.replacingOccurrences(of: "-", with: "") : text
        guard digits.count == 6, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let value = Int64(digits) else { return nil }
        let year = value / 100, month = value % 100
        guard (2000...2099).contains(year), (1...12).contains(month) else { return nil }
        return value
    }
}
