/// Google's attestation status list as the verifier needs it: the serials (lowercase hexadecimal, no leading
/// zeros, as https://android.googleapis.com/attestation/status keys them) that are REVOKED or SUSPENDED.
///
/// Parsing the JSON and keeping it fresh are the issuer's (`AndroidStatusListCache`); this type only answers.
public struct AndroidStatusList: Sendable, Equatable {
    /// A refused serial's status.
    public enum Status: String, Sendable, Equatable {
        /// Permanently revoked (a leaked key).
        case revoked = "REVOKED"
        /// Temporarily suspended.
        case suspended = "SUSPENDED"
    }

    /// The refused serials and their status.
    public let entries: [String: Status]

    /// A list of `entries` (keys normalised to lowercase without leading zeros).
    public init(entries: [String: Status]) {
        var normalised: [String: Status] = [:]
        for (serial, status) in entries { normalised[Self.normalise(serial)] = status }
        self.entries = normalised
    }

    /// The empty list.
    public static let empty = AndroidStatusList(entries: [:])

    /// The status of `serial` (any case, any leading zeros), `nil` when it is not listed.
    public func status(ofSerial serial: String) -> Status? { entries[Self.normalise(serial)] }

    static func normalise(_ serial: String) -> String {
        var text = serial.lowercased()
        while text.count > 1, text.hasPrefix("0") { text.removeFirst() }
        return text
    }
}
