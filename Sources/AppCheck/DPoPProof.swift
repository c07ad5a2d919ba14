/// A DPoP proof (RFC 9449 §4.2) taken apart: its header judged (`typ`, `alg`, `jwk`), its payload and signature not yet.
/// `DPoPVerifier` goes on from here. Pure: no time, no I/O.
public struct DPoPProof: Sendable {
    /// The longest proof accepted, in bytes. A proof with a P-384 `jwk` is about 700 bytes; 4 KiB leaves room for
    /// extra header members without letting a request carry an unbounded one.
    public static let maxLength = 4096
    /// The largest decoded header or payload JSON accepted.
    static let maxJSONBytes = 3072

    /// The key of the `jwk` header, its algorithm the header's `alg`.
    public let key: DPoPPublicKey
    /// The payload's decoded JSON bytes (`0..<payloadCount`, which `claims` point into) and after them the decoded
    /// signature: one allocation for both.
    let decoded: [UInt8]
    let payloadCount: Int
    /// The claims the checks read (not yet judged), `DPoPClaims.scan` of the payload.
    let claims: DPoPClaims
    /// The decoded signature.
    public var signature: [UInt8] { Array(decoded[payloadCount...]) }
    /// The proof's own bytes, `header.payload.signature` (the caller's slice when it gave one: no copy).
    let bytes: ArraySlice<UInt8>
    /// `header.payload`: the bytes the signature covers, as offsets from the start of `bytes`.
    let signingInputRange: Range<Int>

    /// The proof in `bytes`, its header checked in the order of SPEC §4.4: structure (`malformed`: not exactly three
    /// strict base64url parts of JSON objects, over `maxLength` bytes, or a `crit` header, whose extensions nothing
    /// here understands), then `typ` (exactly `dpop+jwt`), `alg` (`ES256`, `ES384` or `EdDSA`), `jwk` (a public key
    /// of that algorithm, `DPoPPublicKey.init(jwk:algorithm:)`).
    public static func parse<Bytes: Collection>(_ bytes: Bytes) throws(DPoPRule) -> DPoPProof where Bytes.Element == UInt8 {
        guard bytes.count <= maxLength else { throw .malformed }
        let bytes: ArraySlice<UInt8> = (bytes as? ArraySlice<UInt8>) ?? Array(bytes)[...]
        let start = bytes.startIndex
        // Structure first (every `malformed` comes before the header's rules): payload and signature, then the header.
        guard let (firstOffset, secondOffset) = bytes.withUnsafeBytes({ CompactJWS.dots($0) }),
              case let (first, second) = (start + firstOffset, start + secondOffset),
              let (decoded, payloadCount) = decodeParts(bytes[(first + 1)..<second], bytes[(second + 1)...]),
              let claims = decoded.withUnsafeBufferPointer({
                  DPoPClaims.scan(UnsafeBufferPointer(rebasing: $0[0..<payloadCount]), maxBytes: maxJSONBytes)
              }) else {
            throw .malformed
        }
        let key: DPoPPublicKey
        let headerPart = bytes[start..<first]
        if let known = DPoPHeaderMemo.lookup(headerPart) {
            key = known
        } else {
            guard let headerBytes = Base64URL.decode(headerPart),
                  let header = try? StrictJSON.parse(headerBytes, maxBytes: maxJSONBytes), case .object = header else {
                throw .malformed
            }
            key = try judge(header: header)
            DPoPHeaderMemo.remember(headerPart, key)
        }
        return DPoPProof(key: key, decoded: decoded, payloadCount: payloadCount, claims: claims, bytes: bytes,
                         signingInputRange: 0..<secondOffset)
    }

    /// The strict base64url `payload` and `signature` parts decoded into one array, the payload first, and the
    /// payload's length; nil when either is not strict base64url (`Base64URL.decode`'s rules).
    static func decodeParts(_ payload: ArraySlice<UInt8>, _ signature: ArraySlice<UInt8>) -> ([UInt8], Int)? {
        guard let payloadCount = Base64URL.decodedCount(payload.count),
              let signatureCount = Base64URL.decodedCount(signature.count) else { return nil }
        var valid = false
        let decoded = [UInt8](unsafeUninitializedCapacity: max(1, payloadCount + signatureCount)) { out, initialized in
            initialized = 0
            guard let base = out.baseAddress else { return }
            valid = payload.withUnsafeBytes { p in
                signature.withUnsafeBytes { s in
                    Base64URL.decode(p, into: base) == payloadCount
                        && Base64URL.decode(s, into: base + payloadCount) == signatureCount
                }
            }
            if valid { initialized = payloadCount + signatureCount }
        }
        return valid ? (decoded, payloadCount) : nil
    }

    /// The header's rules after its structure: no `crit`, `typ`, `alg`, `jwk`.
    static func judge(header: JSONValue) throws(DPoPRule) -> DPoPPublicKey {
        guard header.member("crit") == nil else { throw .malformed }
        guard header.member("typ")?.stringEquals("dpop+jwt") == true else { throw .typ }
        guard let algText = header.member("alg")?.stringValue,
              let algorithm = DPoPPublicKey.Algorithm.allCases.first(where: { utf8Equal($0.rawValue, algText) }) else {
            throw .alg
        }
        guard let jwk = header.member("jwk") else { throw .jwk }
        return try DPoPPublicKey(jwk: jwk, algorithm: algorithm)
    }

    /// True when the signature verifies over `header.payload` with the `jwk` key.
    public var signatureVerifies: Bool {
        bytes.withUnsafeBytes { raw in
            decoded.withUnsafeBytes { decoded in
                key.verify(signingInput: UnsafeRawBufferPointer(rebasing: raw[signingInputRange]),
                           signature: UnsafeRawBufferPointer(rebasing: decoded[payloadCount...]))
            }
        }
    }
}
