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
    /// The payload's JSON object (claims not yet judged).
    public let payload: JSONValue
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
        guard let jws = CompactJWS.decode(bytes, maxJSONBytes: maxJSONBytes) else { throw .malformed }
        let header = jws.header
        guard header.member("crit") == nil else { throw .malformed }
        guard header.member("typ")?.stringEquals("dpop+jwt") == true else { throw .typ }
        guard let algText = header.member("alg")?.stringValue,
              let algorithm = DPoPPublicKey.Algorithm.allCases.first(where: { utf8Equal($0.rawValue, algText) }) else {
            throw .alg
        }
        guard let jwk = header.member("jwk") else { throw .jwk }
        let key = try DPoPPublicKey(jwk: jwk, algorithm: algorithm)
        return DPoPProof(key: key, payload: jws.payload, signature: jws.signature, bytes: bytes,
                         signingInputRange: jws.signingInputRange)
    }

    /// True when the signature verifies over `header.payload` with the `jwk` key.
    public var signatureVerifies: Bool {
        bytes.withUnsafeBytes { raw in
            key.verify(signingInput: UnsafeRawBufferPointer(rebasing: raw[signingInputRange]), signature: signature)
        }
    }
}
