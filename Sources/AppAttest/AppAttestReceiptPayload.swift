/// The signed content of a receipt: `SET OF SEQUENCE { type INTEGER, version INTEGER, value OCTET STRING }`
/// (definite lengths; the CMS around it may use indefinite ones, OpenSSL reads those). Unknown types are
/// ignored; a known type twice, or a missing required field, is malformed.
enum AppAttestReceiptPayload {
    static let maxEntries = 64

    /// Field numbers (docs/issuer.md "Fraud risk").
    enum Field {
        static let appId = 2, attestedCertificate = 3, clientHash = 4, token = 5, kind = 6, environment = 7
        static let creationTime = 12, riskMetric = 17, notBefore = 19, expirationTime = 21
    }

    static func parse(_ content: [UInt8], bytes: [UInt8]) throws(AppAttestReceiptFailure) -> AppAttestReceipt {
        var reader = DERReader(content)
        guard let set = reader.read(tag: 0x31), reader.atEnd else { throw bad("payload is not one SET") }
        var members = DERReader(set)
        var fields: [Int: [UInt8]] = [:]
        var count = 0
        while !members.atEnd {
            count += 1
            guard count <= maxEntries else { throw bad("payload has more than \(maxEntries) entries") }
            guard let sequence = members.read(tag: 0x30) else { throw bad("payload entry is not a SEQUENCE") }
            var entry = DERReader(sequence)
            guard let typeBytes = entry.read(tag: 0x02), let type = smallInteger(typeBytes),
                  let version = entry.read(tag: 0x02), smallInteger(version) != nil,
                  let value = entry.read(tag: 0x04), entry.atEnd else {
                throw bad("payload entry is not SEQUENCE { INTEGER, INTEGER, OCTET STRING }")
            }
            guard fields.updateValue(value, forKey: type) == nil else { throw bad("field \(type) appears twice") }
        }
        func required(_ field: Int) throws(AppAttestReceiptFailure) -> [UInt8] {
            guard let value = fields[field] else { throw bad("field \(field) is missing") }
            return value
        }
        func time(_ field: Int) throws(AppAttestReceiptFailure) -> Double? {
            guard let value = fields[field] else { return nil }
            guard let seconds = ISO8601Time.parse(value) else { throw bad("field \(field) is not an ISO 8601 UTC time") }
            return seconds
        }
        guard let appId = String(validating: try required(Field.appId), as: UTF8.self) else { throw bad("App ID is not UTF-8") }
        guard let kind = AppAttestReceipt.Kind(rawValue: String(decoding: try required(Field.kind), as: UTF8.self)) else {
            throw bad("type is neither ATTEST nor RECEIPT")
        }
        var riskMetric: Int? = nil
        if let value = fields[Field.riskMetric] {
            guard let metric = decimal(value) else { throw bad("risk metric is not a decimal number") }
            riskMetric = metric
        }
        guard let creation = try time(Field.creationTime) else { throw bad("field 12 is missing") }
        guard let expiration = try time(Field.expirationTime) else { throw bad("field 21 is missing") }
        return AppAttestReceipt(bytes: bytes, appId: appId, attestedCertificate: try required(Field.attestedCertificate),
                                clientHash: fields[Field.clientHash] ?? [], token: fields[Field.token] ?? [], kind: kind,
                                environment: fields[Field.environment].flatMap { String(validating: $0, as: UTF8.self) },
                                creationTime: creation, riskMetric: riskMetric, notBefore: try time(Field.notBefore),
                                expirationTime: expiration)
    }

    private static func bad(_ detail: String) -> AppAttestReceiptFailure { AppAttestReceiptFailure(.malformed, detail) }

    /// A non-negative DER INTEGER of at most 4 value bytes.
    static func smallInteger(_ bytes: [UInt8]) -> Int? {
        guard !bytes.isEmpty, bytes.count <= 4, bytes[0] & 0x80 == 0 else { return nil }
        if bytes.count > 1, bytes[0] == 0, bytes[1] & 0x80 == 0 { return nil }
        return bytes.reduce(0) { $0 << 8 | Int($1) }
    }

    /// ASCII decimal digits, 1 to 9 of them.
    static func decimal(_ bytes: [UInt8]) -> Int? {
        guard !bytes.isEmpty, bytes.count <= 9, bytes.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return bytes.reduce(0) { $0 * 10 + Int($1 - 0x30) }
    }
}

/// A reader of definite-length DER TLVs with single-byte tags (all the receipt payload uses).
struct DERReader {
    private let bytes: [UInt8]
    private var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool { offset == bytes.count }

    /// The value of the next TLV if its tag is `tag`; `nil` (and nothing consumed) otherwise or when truncated.
    mutating func read(tag: UInt8) -> [UInt8]? {
        var cursor = offset
        guard cursor < bytes.count, bytes[cursor] == tag else { return nil }
        cursor += 1
        guard cursor < bytes.count else { return nil }
        let first = bytes[cursor]
        cursor += 1
        var length = 0
        if first < 0x80 {
            length = Int(first)
        } else {
            let count = Int(first & 0x7F)
            guard count >= 1, count <= 3, cursor + count <= bytes.count, bytes[cursor] != 0 else { return nil }
            for _ in 0..<count { length = length << 8 | Int(bytes[cursor]); cursor += 1 }
            guard length >= 0x80 else { return nil }
        }
        guard length <= bytes.count - cursor else { return nil }
        offset = cursor + length
        return Array(bytes[cursor..<cursor + length])
    }
}

/// `YYYY-MM-DDTHH:MM:SS[.fff]Z` (what Apple's receipts hold) to seconds since the Unix epoch.
enum ISO8601Time {
    static func parse(_ bytes: [UInt8]) -> Double? {
        guard bytes.count >= 20, bytes.count <= 30, bytes.last == UInt8(ascii: "Z") else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            let digits = bytes[range]
            guard digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            return digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
        }
        guard bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: "T"),
              bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
              let year = number(0..<4), let month = number(5..<7), let day = number(8..<10), let hour = number(11..<13),
              let minute = number(14..<16), let second = number(17..<19),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61 else { return nil }
        var fraction = 0.0
        if bytes.count > 20 {
            guard bytes[19] == UInt8(ascii: "."), bytes.count > 21, let digits = number(20..<bytes.count - 1) else { return nil }
            fraction = Double(digits) / pow10(bytes.count - 21)
        } else {
            guard bytes[19] == UInt8(ascii: "Z") else { return nil }
        }
        // Days from civil (H. Hinnant's algorithm).
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        return Double(days * 86_400 + hour * 3600 + minute * 60 + second) + fraction
    }

    private static func pow10(_ n: Int) -> Double { (0..<n).reduce(1.0) { value, _ in value * 10 } }
}
