import AppCheck
import ArgumentParser
import Foundation
import Gateway
import KeySets

struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Verify one token against the configured key set and rules; print the claims and the verdict.")
    @OptionGroup var options: ConfigOption
    @Flag(name: .customLong("limited-use"), help: "Also apply the replay routes' limited_use_max_ttl check.")
    var limitedUse = false
    @Option(help: "Seconds to wait for the key set.") var timeout: Double = 10
    @Argument(help: "The App Check token.") var token: String

    func run() throws {
        let settings = try options.load()
        let keys: JWKSet
        switch KeySetProvider.fetchOnce(settings.appCheck.jwks, timeout: timeout) {
        case .success(let set): keys = set
        case .failure(let error):
            printError("appcheck-gateway: verify: key set \(settings.appCheck.jwks.url): \(error)")
            throw ExitCode(2)
        }
        let policy = settings.appCheckPolicy
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        if parts.count == 3 {
            for (name, part) in [("header", parts[0]), ("claims", parts[1])] {
                if let bytes = Base64URL.decode(String(part)) { print("\(name): \(String(decoding: bytes, as: UTF8.self))") }
            }
        }
        switch AppCheckVerifier.verify(token: token, keys: keys, policy: policy, now: Date().timeIntervalSince1970,
                                       limitedUse: limitedUse) {
        case .success(let claims):
            print("verdict: valid app_id=\(claims.appId) expires_in=\(Int(claims.expiresAt - Date().timeIntervalSince1970))s")
        case .failure(let reason):
            print("verdict: invalid reason=\(reason.rawValue)")
            throw ExitCode(1)
        }
    }
}
