import Glibc

/// The structure of a compact JWS (RFC 7515 §7.1): `header.payload.signature`, each part strict base64url, header
/// and payload strict JSON objects. Only the structure: what the header must say, and which key verifies the
/// signature, is the caller's (App Check tokens, custom tokens, DeviceCheck bearer tokens in tests).
public struct CompactJWS: Sendable {
    public let header: JSONValue
    public let payload: JSONValue
    public let signature: [UInt8]
    /// `header.payload` of the token: the bytes the signature covers.
    public let signingInputRange: Range<Int>

    /// The parts of `token`, or nil when it is not exactly three dot-separated parts, a part is not strict
    /// base64url, or the header or payload is not a strict JSON object of at most `maxJSONBytes`. An empty
    /// signature part is structurally fine.
    public static func decode(_ token: [UInt8], maxJSONBytes: Int) -> CompactJWS? {
        guard let parts = split(token),
              let header = try? StrictJSON.parse(parts.header, maxBytes: maxJSONBytes), case .object = header,
              let payload = try? StrictJSON.parse(parts.payload, maxBytes: maxJSONBytes), case .object = payload else {
            return nil
        }
        return CompactJWS(header: header, payload: payload, signature: parts.signature,
                          signingInputRange: parts.signingInputRange)
    }

    /// The three parts of `token` decoded from strict base64url (the header and payload bytes not yet judged as
    /// JSON), or nil when it is not exactly three dot-separated parts or a part is not strict base64url.
    static func split(_ token: [UInt8])
        -> (header: [UInt8], payload: [UInt8], signature: [UInt8], signingInputRange: Range<Int>)? {
        guard let (first, second) = dots(token),
              let header = Base64URL.decode(token[0..<first]),
              let payload = Base64URL.decode(token[(first + 1)..<second]),
              let signature = Base64URL.decode(token[(second + 1)...]) else {
            return nil
        }
        return (header, payload, signature, 0..<second)
    }

    /// The offsets of the two dots of `token`, or nil when it does not have exactly two.
    static func dots(_ token: [UInt8]) -> (first: Int, second: Int)? {
        token.withUnsafeBytes { dots($0) }
    }

    /// The offsets of the two dots of `token`, or nil when it does not have exactly two.
    static func dots(_ raw: UnsafeRawBufferPointer) -> (first: Int, second: Int)? {
        // By memchr (a token is about a kilobyte: a byte-by-byte loop cost three instructions a byte).
        guard let base = raw.baseAddress else { return nil }
        var first = -1, second = -1, dots = 0
        var from = 0
        while from < raw.count, dots < 3,
              let hit = memchr(base + from, Int32(UInt8(ascii: ".")), raw.count - from) {
            let offset = base.distance(to: UnsafeRawPointer(hit))
            if dots == 0 { first = offset } else if dots == 1 { second = offset }
            dots += 1
            from = offset + 1
        }
        guard dots == 2, second > 0 else { return nil }
        return (first, second)
    }
}
