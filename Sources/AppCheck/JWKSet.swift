/// An immutable set of RS256 verification keys by `kid`, parsed from a JWKS document (RFC 7517 §5).
///
/// Only keys usable for App Check are kept (docs/behaviour.md, key set): `kty` `RSA`; `use` absent or `sig`; `alg` absent or
/// `RS256`; `key_ops`, when present, containing `verify`; a non-empty string `kid`; a modulus of 2048…4096 bits;
/// an odd exponent of at least 3 and at most 64 bits. Every other entry is skipped and listed in `skipped`
/// with its reason, for the logs.
///
/// Duplicate `kid`: when two or more entries carry the same `kid`, **all** of them are skipped
/// (`duplicateKid`). Neither "first wins" nor "last wins" is safe: the set would be ambiguous, and a token with
/// that `kid` must not be verified against a key picked by position. Such a token then gets `unknown_kid`.
public struct JWKSet: Sendable {
    /// Why one JWKS entry was not kept.
    public enum SkipReason: Error, Sendable, Equatable, CustomStringConvertible {
        /// The entry is not a JSON object.
        case notAnObject
        /// `kid` missing, not a string, or empty.
        case missingKid
        /// `kty` is not `RSA` (the value, or `nil` when missing or not a string).
        case unsupportedKeyType(String?)
        /// `use` is present and is not `sig`.
        case wrongUse(String?)
        /// `alg` is present and is not `RS256`.
        case wrongAlgorithm(String?)
        /// `key_ops` is present and does not contain `verify`.
        case wrongKeyOperations
        /// `n` or `e` missing, not strict base64url, or not a usable RSA public key.
        case invalidKeyMaterial(String)
        /// The modulus is outside 2048…4096 bits.
        case unsupportedKeySize(Int)
        /// Another entry carries the same `kid`.
        case duplicateKid

        /// A short explanation for logs.
        public var description: String {
            switch self {
            case .notAnObject: return "entry is not an object"
            case .missingKid: return "kid missing or empty"
            case .unsupportedKeyType(let kty): return "kty \(kty ?? "missing") is not RSA"
            case .wrongUse(let use): return "use \(use ?? "non-string") is not sig"
            case .wrongAlgorithm(let alg): return "alg \(alg ?? "non-string") is not RS256"
            case .wrongKeyOperations: return "key_ops does not allow verify"
            case .invalidKeyMaterial(let why): return "invalid key material: \(why)"
            case .unsupportedKeySize(let bits): return "\(bits)-bit modulus outside 2048...4096"
            case .duplicateKid: return "kid appears more than once in the set"
            }
        }
    }

    /// One skipped entry: its position in `keys`, its `kid` when it had a string one, and why.
    public struct SkippedKey: Sendable, Equatable, CustomStringConvertible {
        /// Index in the document's `keys` array.
        public let index: Int
        /// The entry's `kid`, when it was a string.
        public let kid: String?
        /// Why it was skipped.
        public let reason: SkipReason

        /// `keys[index] (kid …): reason`.
        public var description: String { "keys[\(index)]" + (kid.map { " (kid \($0))" } ?? "") + ": \(reason)" }
    }

    /// Why a document could not be used at all.
    public enum ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        /// Not strict JSON (see `StrictJSON`).
        case invalidJSON(StrictJSON.ParseError)
        /// Not an object with a `keys` array.
        case missingKeysArray
        /// No entry was usable; the skipped ones and why.
        case noUsableKeys([SkippedKey])

        /// A one-line explanation.
        public var description: String {
            switch self {
            case .invalidJSON(let error): return "JWKS is not valid JSON: \(error)"
            case .missingKeysArray: return "JWKS has no \"keys\" array"
            case .noUsableKeys(let skipped):
                return "JWKS has no usable RS256 key" + (skipped.isEmpty ? "" : ": " + skipped.map(\.description).joined(separator: "; "))
            }
        }
    }

    /// Smallest accepted modulus, in bits.
    public static let minimumBits = 2048
    /// Largest accepted modulus, in bits.
    public static let maximumBits = 4096
    /// Largest accepted JWKS document: 1 MiB (Firebase's is about 2 KB).
    public static let maxDocumentBytes = 1 << 20

    /// What a set holds, in one immutable object: handing a set on (a look-up per token) costs one reference count,
    /// not one per table.
    private final class Storage: Sendable {
        let keysByKid: [String: RSAPublicKey]
        /// The same keys as a list, for a look-up by bytes without hashing the `kid` when there are few
        /// (`linearLookupLimit`; Firebase's set has about five).
        let keyList: [(kid: String, key: RSAPublicKey)]
        /// P-256 keys (`kty` `EC`, `crv` `P-256`, `alg` absent or `ES256`), kept only when parsed with
        /// `acceptES256` (custom-token backends, docs/issuer.md); never in a Firebase or trusted-issuer set.
        let es256ByKid: [String: ES256PublicKey]
        let kids: [String]
        let skipped: [SkippedKey]

        init(keysByKid: [String: RSAPublicKey], es256ByKid: [String: ES256PublicKey], kids: [String],
             skipped: [SkippedKey]) {
            self.keysByKid = keysByKid
            self.keyList = keysByKid.map { (kid: $0.key, key: $0.value) }
            self.es256ByKid = es256ByKid
            self.kids = kids
            self.skipped = skipped
        }
    }

    private let storage: Storage
    private static let linearLookupLimit = 8

    /// The kept keys' `kid`s, in document order.
    public var kids: [String] { storage.kids }

    /// Entries that were not kept, with their reasons, in document order.
    public var skipped: [SkippedKey] { storage.skipped }

    /// Number of usable keys.
    public var count: Int { storage.kids.count }

    /// The key for `kid` (exact UTF-8 match), or `nil`. Never a fallback key.
    public func key(for kid: String) -> RSAPublicKey? {
        // The stored kids are distinct under String equality (the dictionary's), so at most one has the same bytes,
        // and it is the one the dictionary finds.
        let storage = self.storage
        if storage.keyList.count <= Self.linearLookupLimit {
            // Read in place: no copy of each entry.
            return storage.keyList.withUnsafeBufferPointer { list in
                for i in list.indices where utf8Equal(list[i].kid, kid) { return list[i].key }
                return nil
            }
        }
        // The dictionary matches canonically equivalent strings too; the stored key must be the same bytes.
        guard let index = storage.keysByKid.index(forKey: kid) else { return nil }
        let (stored, key) = storage.keysByKid[index]
        return utf8Equal(stored, kid) ? key : nil
    }

    /// The ES256 key for `kid` (exact UTF-8 match), or `nil`: only sets parsed with `acceptES256` hold any.
    public func es256Key(for kid: String) -> ES256PublicKey? {
        guard let index = storage.es256ByKid.index(forKey: kid) else { return nil }
        let (stored, key) = storage.es256ByKid[index]
        return utf8Equal(stored, kid) ? key : nil
    }

    /// A set from already-checked keys (for tests and local issuers). Later duplicates are ignored.
    public init(keys: [(kid: String, key: RSAPublicKey)]) {
        var byKid: [String: RSAPublicKey] = [:]
        var kids: [String] = []
        for (kid, key) in keys where byKid[kid] == nil {
            byKid[kid] = key
            kids.append(kid)
        }
        storage = Storage(keysByKid: byKid, es256ByKid: [:], kids: kids, skipped: [])
    }

    private init(keysByKid: [String: RSAPublicKey], es256ByKid: [String: ES256PublicKey], kids: [String],
                 skipped: [SkippedKey]) {
        storage = Storage(keysByKid: keysByKid, es256ByKid: es256ByKid, kids: kids, skipped: skipped)
    }

    /// Parses a JWKS document `{"keys":[…]}` with `StrictJSON` (duplicate JSON keys are an error).
    ///
    /// Throws when the document is not usable at all, including when no entry is usable: an empty set must
    /// never replace a good one. `acceptES256` also keeps P-256 keys (`kty` `EC`, `crv` `P-256`, `x`/`y` of 32
    /// bytes, `alg` absent or `ES256`): for custom-token backends only.
    public static func parse(_ json: [UInt8], acceptES256: Bool = false) throws(ParseError) -> JWKSet {
        let document: JSONValue
        do throws(StrictJSON.ParseError) {
            document = try StrictJSON.parse(json, maxBytes: maxDocumentBytes)
        } catch {
            throw .invalidJSON(error)
        }
        guard let entries = document.member("keys")?.arrayValue else { throw .missingKeysArray }

        var candidates: [(index: Int, kid: String, key: Key)] = []
        var skipped: [SkippedKey] = []
        var kidCounts: [String: Int] = [:]
        for (index, entry) in entries.enumerated() {
            let kid = entry.member("kid")?.stringValue
            if let kid, !kid.isEmpty { kidCounts[kid, default: 0] += 1 }
            switch check(entry, acceptES256: acceptES256) {
            case .success(let key):
                // check() fails with .missingKid unless kid is a non-empty string.
                candidates.append((index, kid ?? "", key))
            case .failure(let reason):
                skipped.append(SkippedKey(index: index, kid: kid, reason: reason))
            }
        }

        var byKid: [String: RSAPublicKey] = [:]
        var es256ByKid: [String: ES256PublicKey] = [:]
        var kids: [String] = []
        for candidate in candidates {
            if kidCounts[candidate.kid, default: 0] > 1 {
                skipped.append(SkippedKey(index: candidate.index, kid: candidate.kid, reason: .duplicateKid))
            } else {
                switch candidate.key {
                case .rsa(let key): byKid[candidate.kid] = key
                case .es256(let key): es256ByKid[candidate.kid] = key
                }
                kids.append(candidate.kid)
            }
        }
        skipped.sort { $0.index < $1.index }
        if kids.isEmpty { throw .noUsableKeys(skipped) }
        return JWKSet(keysByKid: byKid, es256ByKid: es256ByKid, kids: kids, skipped: skipped)
    }

    private enum Key {
        case rsa(RSAPublicKey)
        case es256(ES256PublicKey)
    }

    private static func check(_ entry: JSONValue, acceptES256: Bool) -> Result<Key, SkipReason> {
        guard case .object = entry else { return .failure(.notAnObject) }
        guard let kid = entry.member("kid")?.stringValue, !kid.isEmpty else { return .failure(.missingKid) }
        if acceptES256, let kty = entry.member("kty"), kty.stringEquals("EC") {
            return checkES256(entry).map { .es256($0) }
        }
        guard let kty = entry.member("kty"), kty.stringEquals("RSA") else {
            return .failure(.unsupportedKeyType(entry.member("kty")?.stringValue))
        }
        if let use = entry.member("use"), !use.stringEquals("sig") { return .failure(.wrongUse(use.stringValue)) }
        if let alg = entry.member("alg"), !alg.stringEquals("RS256") { return .failure(.wrongAlgorithm(alg.stringValue)) }
        if let ops = entry.member("key_ops") {
            guard let list = ops.arrayValue, list.contains(where: { $0.stringEquals("verify") }) else {
                return .failure(.wrongKeyOperations)
            }
        }
        guard let nText = entry.member("n")?.stringValue, let n = Base64URL.decode(nText) else {
            return .failure(.invalidKeyMaterial("n missing or not strict base64url"))
        }
        guard let eText = entry.member("e")?.stringValue, let e = Base64URL.decode(eText) else {
            return .failure(.invalidKeyMaterial("e missing or not strict base64url"))
        }
        // Size first, from the bytes, so a huge modulus costs OpenSSL nothing.
        let significant = n.drop(while: { $0 == 0 })
        let bits = significant.first.map { significant.count * 8 - $0.leadingZeroBitCount } ?? 0
        guard bits >= minimumBits, bits <= maximumBits else { return .failure(.unsupportedKeySize(bits)) }
        do throws(RSAKeyError) {
            return .success(.rsa(try RSAPublicKey(modulus: n, exponent: e)))
        } catch {
            return .failure(.invalidKeyMaterial(error.description))
        }
    }

    /// An `EC` entry of a custom-token backend: `crv` `P-256`, `alg` absent or `ES256`, `use`/`key_ops` as for RSA.
    private static func checkES256(_ entry: JSONValue) -> Result<ES256PublicKey, SkipReason> {
        guard let crv = entry.member("crv"), crv.stringEquals("P-256") else {
            return .failure(.invalidKeyMaterial("crv \(entry.member("crv")?.stringValue ?? "missing") is not P-256"))
        }
        if let use = entry.member("use"), !use.stringEquals("sig") { return .failure(.wrongUse(use.stringValue)) }
        if let alg = entry.member("alg"), !alg.stringEquals("ES256") { return .failure(.wrongAlgorithm(alg.stringValue)) }
        if let ops = entry.member("key_ops") {
            guard let list = ops.arrayValue, list.contains(where: { $0.stringEquals("verify") }) else {
                return .failure(.wrongKeyOperations)
            }
        }
        guard let xText = entry.member("x")?.stringValue, let x = Base64URL.decode(xText),
              let yText = entry.member("y")?.stringValue, let y = Base64URL.decode(yText) else {
            return .failure(.invalidKeyMaterial("x or y missing or not strict base64url"))
        }
        do throws(ES256KeyError) {
            return .success(try ES256PublicKey(x: x, y: y))
        } catch {
            return .failure(.invalidKeyMaterial("\(error)"))
        }
    }

    /// A JWKS document `{"keys":[…]}` publishing `keys` as RS256 signing keys (for `keygen` and local issuers).
    public static func document(for keys: [(kid: String, key: RSAPublicKey)]) -> String {
        let entries = keys.map { kid, key in
            let jwk = key.jwk(kid: kid)
            let fields = ["kty", "use", "alg", "kid", "n", "e"].compactMap { name in
                jwk[name].map { JSONText.quote(name) + ":" + JSONText.quote($0) }
            }
            return "{" + fields.joined(separator: ",") + "}"
        }
        return "{\"keys\":[" + entries.joined(separator: ",") + "]}"
    }
}
