import AppAttest
import Foundation

/// The public Apple vectors in `Vectors/vectors.json` (see `Vectors/README.md` for their sources).
struct AppleVector: Decodable {
    struct Expected: Decodable {
        let result: String
        let publicKeyX963Hex: String?
        let counter: Int?
        let authDataExtensions: [String: String]?
    }

    let id: String
    let type: String
    let environment: String
    let teamId: String
    let bundleId: String
    let clientDataBase64: String?
    let clientDataHashBase64: String?
    let keyIdBase64: String
    let validateAt: String?
    let publicKeyX963Hex: String?
    let previousCounter: UInt32?
    let expected: Expected
    let attestationObjectBase64: String?
    let assertionBase64: String?

    var appId: AppAttestAppID { AppAttestAppID(teamId: teamId, bundleId: bundleId) }
    var keyId: [UInt8] { [UInt8](Data(base64Encoded: keyIdBase64) ?? Data()) }
    var clientDataHash: [UInt8] { [UInt8](Data(base64Encoded: clientDataHashBase64 ?? "") ?? Data()) }
    var clientData: [UInt8] { [UInt8](Data(base64Encoded: clientDataBase64 ?? "") ?? Data()) }
    var object: [UInt8] { [UInt8](Data(base64Encoded: attestationObjectBase64 ?? assertionBase64 ?? "") ?? Data()) }

    /// `validateAt` in whole seconds since the Unix epoch (the fraction dropped).
    var validationTime: Int64? {
        guard let validateAt else { return nil }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        guard let date = formatter.date(from: validateAt) else { return nil }
        return Int64(date.timeIntervalSince1970.rounded(.down))
    }

    var publicKeyPoint: [UInt8]? { (publicKeyX963Hex ?? expected.publicKeyX963Hex).flatMap(hexBytes) }

    static func all() throws -> [AppleVector] {
        struct File: Decodable { let vectors: [AppleVector] }
        guard let url = Bundle.module.url(forResource: "vectors", withExtension: "json", subdirectory: "Vectors") else {
            throw CocoaError(.fileNoSuchFile)
        }
        return try JSONDecoder().decode(File.self, from: Data(contentsOf: url)).vectors
    }
}

func hexBytes(_ hex: String) -> [UInt8]? {
    let digits = Array(hex.utf8)
    guard digits.count % 2 == 0 else { return nil }
    var out: [UInt8] = []
    var index = 0
    while index < digits.count {
        guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else { return nil }
        out.append(byte)
        index += 2
    }
    return out
}
