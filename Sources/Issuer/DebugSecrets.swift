/// `exchangeDebugToken` (docs/issuer.md): the presented `debug_token` must equal one of the app's `debug_secrets`.
/// Compared in constant time (over every secret, every byte of the longer of the two) so the time taken does
/// not reveal how much of a guess was right. Never logged.
public struct DebugSecrets: Sendable {
    private let secrets: [[UInt8]]

    public init(_ secrets: [String]) { self.secrets = secrets.map { Array($0.utf8) } }

    public var isEmpty: Bool { secrets.isEmpty }

    /// True when `presented` equals one of the secrets.
    public func matches(_ presented: String) -> Bool {
        let candidate = Array(presented.utf8)
        var matched: UInt8 = 0
        for secret in secrets {
            var difference = UInt8(truncatingIfNeeded: secret.count ^ candidate.count) | (secret.count == candidate.count ? 0 : 1)
            let length = max(secret.count, candidate.count)
            for i in 0..<length {
                let a = i < secret.count ? secret[i] : 0
                let b = i < candidate.count ? candidate[i] : 0
                difference |= a ^ b
            }
            matched |= difference == 0 ? 1 : 0
        }
        return matched == 1
    }
}
