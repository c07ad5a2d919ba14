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
    /// The payload's decoded JSON bytes, which `claims` point into.
    let payload: [UInt8]
    /// The claims the checks read (not yet judged), `DPoPClaims.scan` of `payload`.
    let claims: DPoPClaims
    public let signature: [UInt8]
    /// The proof's own bytes, `header.payload.signature`.
    let bytes: [UInt8]
    /// `header.payload`: the bytes the signature covers.
    let signingInputRange: Range<Int>

    /// The proof in `bytes`, its header checked in the order of SPEC §4.4: structure (`malformed`: not exactly three
    /// strict base64url parts of JSON objects, over `maxLength` bytes, or a `crit` header, whose extensions nothing
    /// here understands), then `typ` (exactly `dpop+jwt`), `alg` (`ES256`, `ES384` or `EdDSA`), `jwk` (a public key
    /// of that algorithm, `DPoPPublicKey.init(jwk:algorithm:)`).
    public static func parse<Bytes: Collection>(_ bytes: Bytes) throws(DPoPRule) -> DPoPProof where Bytes.Element == UInt8 {
        guard bytes.count <= maxLength else { throw .malformed }
        let bytes = Array(bytes)
        // Structure first (every `malformed` comes before the header's rules): payload and signature, then the header.
        guard let (first, second) = CompactJWS.dots(bytes),
              let payload = Base64URL.decode(bytes[(first + 1)..<second]),
              let claims = payload.withUnsafeBufferPointer({ DPoPClaims.scan($0, maxBytes: maxJSONBytes) }),
              let signature = Base64URL.decode(bytes[(second + 1)...]) else {
            throw .malformed
        }
        let key: DPoPPublicKey
        let headerPart = bytes[0..<first]
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
        return DPoPProof(key: key, payload: payload, claims: claims, signature: signature, bytes: bytes,
                         signingInputRange: 0..<second)
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
            key.verify(signingInput: UnsafeRawBufferPointer(rebasing: raw[signingInputRange]), signature: signature)
        }
    }
}
