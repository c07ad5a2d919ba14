import AppCheck
import ArgumentParser
import Foundation
import GatewayConfig
import Issuer
import KeySets

struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Verify one token against the configured key sets and rules; print the claims and the verdict.",
        discussion: """
        The key set is picked as `serve` picks it: the issuer's own keys (read from signing_keys) when they hold the \
        token's kid, else the set of the trusted issuer its iss names, else Firebase's (unless app_check.jwks.url is \
        none: then the token is invalid, wrong_issuer). Exit 0 valid, 1 invalid, 2 when the key set could not be \
        fetched or read (the message names which).
        """)
    @OptionGroup var options: ConfigOption
    @Flag(name: .customLong("limited-use"), help: "Also apply the replay routes' limited_use_max_ttl check.")
    var limitedUse = false
    @Option(help: "Seconds to wait for the key set.") var timeout: Double = 10
    @Argument(help: "The App Check token.") var token: String

    func run() throws {
        let settings = try options.load()
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        if parts.count == 3 {
            for (name, part) in [("header", parts[0]), ("claims", parts[1])] {
                if let bytes = Base64URL.decode(String(part)) { print("\(name): \(String(decoding: bytes, as: UTF8.self))") }
            }
        }
        let keys: JWKSet
        let policy: AppCheckPolicy
        switch try keySet(settings) {
        case .use(let set, let p):
            (keys, policy) = (set, p)
        case .refused(let reason, let why):
            print("verdict: invalid reason=\(reason.rawValue) (\(why))")
            throw ExitCode(1)
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

    enum Choice {
        case use(JWKSet, AppCheckPolicy)
        /// Refused before any key set is read (Firebase's set unused).
        case refused(AppCheckReason, String)
    }

    /// The key set and rules this token is judged by (the gateway's choice, docs/issuer.md). Throws `ExitCode(2)`
    /// after naming the key set that could not be fetched or read.
    private func keySet(_ settings: Settings) throws -> Choice {
        let parsed = try? AppCheckToken.parse(token).get()
        // A token that does not even parse is refused by the verifier before any key is looked at.
        guard let parsed else { return .use(JWKSet(keys: []), settings.appCheckPolicy) }
        if let issuer = settings.issuer, let policy = settings.ownIssuerPolicy {
            let own: IssuerKeys
            do { own = try IssuerKeys.load(paths: issuer.signingKeyPaths) } catch {
                printError("appcheck-gateway: verify: cannot read the own issuer's key set (issuer.signing_keys): \(error)")
                throw ExitCode(2)
            }
            if own.keySet.key(for: parsed.kid) != nil { return .use(own.keySet, policy) }
        }
        let iss = parsed.claims.issuer
        if let entry = settings.appCheck.trustedIssuers.first(where: { $0.iss == iss }) {
            var jwks = settings.appCheck.jwks
            jwks.url = entry.jwksURL
            jwks.cacheFile = ""
            return .use(try fetch(jwks, name: "trusted issuer \(entry.iss)"), settings.appCheckPolicy.withIssuer(entry.iss))
        }
        if settings.appCheck.jwks.isNone {
            if let own = settings.ownIssuerPolicy, own.issuer == iss {
                return .refused(.unknownKid, "no key of issuer.signing_keys has this kid")
            }
            return .refused(.wrongIssuer, "app_check.jwks.url is none: no key set in use vouches for iss \(iss ?? "-")")
        }
        return .use(try fetch(settings.appCheck.jwks,
                              name: "Firebase (iss \(AppCheckPolicy.firebaseIssuer(projectNumber: settings.appCheck.projectNumber)))"),
                    settings.appCheckPolicy)
    }

    private func fetch(_ jwks: JWKSSettings, name: String) throws -> JWKSet {
        switch KeySetProvider.fetchOnce(jwks, timeout: timeout) {
        case .success(let set): return set
        case .failure(let error):
            printError("appcheck-gateway: verify: cannot fetch the key set of \(name) from \(jwks.url): \(error)")
            throw ExitCode(2)
        }
    }
}
