import HTTPWire

/// Which trailer fields are passed on, either way (RFC 9110 §6.5.1: a trailer must not carry what framing, routing,
/// authentication, request modifiers or response control need). Dropped: hop-by-hop fields (and `te`),
/// `content-length`, `transfer-encoding`, `content-type`, `content-encoding`, `content-range`, `host`, `trailer`,
/// `authorization`, `proxy-authorization`, `cookie`, `set-cookie`, `expect`, `cache-control`, `x-request-id`, the
/// App Check token and anything `X-AppCheck-*`, names with `_`, and pseudo fields.
public enum TrailerFilter {
    /// Whether a trailer field of this name is passed on.
    public static func allows(_ name: UnsafeRawBufferPointer) -> Bool {
        guard !name.isEmpty, name.first != UInt8(ascii: ":"), !name.contains(UInt8(ascii: "_")) else { return false }
        if name.count >= 11, HTTPSyntax.equalsLowercased(UnsafeRawBufferPointer(rebasing: name[0..<11]), "x-appcheck-") {
            return false
        }
        return !isForbidden(name)
    }

    /// The names listed above (the hop-by-hop ones of RFC 9110 §7.6.1 among them), by length first and compared with
    /// literals in place: a loop over two lists of `String`s cost ~2,800 instructions per gRPC response (30
    /// comparisons through each string's UTF-8 view for its one `grpc-status` trailer).
    @inline(__always)
    static func isForbidden(_ name: UnsafeRawBufferPointer) -> Bool {
        switch name.count {
        case 2: return HTTPSyntax.equalsLowercased(name, "te")
        case 4: return HTTPSyntax.equalsLowercased(name, "host") || HTTPSyntax.equalsLowercased(name, "dpop")
        case 6: return HTTPSyntax.equalsLowercased(name, "cookie") || HTTPSyntax.equalsLowercased(name, "expect")
        case 7: return HTTPSyntax.equalsLowercased(name, "upgrade") || HTTPSyntax.equalsLowercased(name, "trailer")
        case 10:
            return HTTPSyntax.equalsLowercased(name, "connection") || HTTPSyntax.equalsLowercased(name, "keep-alive")
                || HTTPSyntax.equalsLowercased(name, "set-cookie")
        case 12: return HTTPSyntax.equalsLowercased(name, "content-type") || HTTPSyntax.equalsLowercased(name, "x-request-id")
        case 13:
            return HTTPSyntax.equalsLowercased(name, "content-range") || HTTPSyntax.equalsLowercased(name, "authorization")
                || HTTPSyntax.equalsLowercased(name, "cache-control")
        case 14: return HTTPSyntax.equalsLowercased(name, "content-length")
        case 16:
            return HTTPSyntax.equalsLowercased(name, "proxy-connection") || HTTPSyntax.equalsLowercased(name, "content-encoding")
        case 17: return HTTPSyntax.equalsLowercased(name, "transfer-encoding")
        case 18: return HTTPSyntax.equalsLowercased(name, "proxy-authenticate")
        case 19:
            return HTTPSyntax.equalsLowercasedByWords(name, "proxy-authorization")
                || HTTPSyntax.equalsLowercasedByWords(name, "x-firebase-appcheck")
        default: return false
        }
    }

    /// Whether a `TE` value lists `trailers` (RFC 9110 §10.1.4; parameters after `;` ignored).
    public static func listsTrailers(_ value: UnsafeRawBufferPointer) -> Bool {
        var start = 0
        while start <= value.count {
            var end = start
            while end < value.count && value[end] != UInt8(ascii: ",") { end += 1 }
            var lo = start, hi = end
            if let semi = value[lo..<hi].firstIndex(of: UInt8(ascii: ";")) { hi = semi }
            while lo < hi && (value[lo] == 0x20 || value[lo] == 0x09) { lo += 1 }
            while hi > lo && (value[hi - 1] == 0x20 || value[hi - 1] == 0x09) { hi -= 1 }
            if hi - lo == 8, HTTPSyntax.equalsLowercased(UnsafeRawBufferPointer(rebasing: value[lo..<hi]), "trailers") {
                return true
            }
            start = end + 1
        }
        return false
    }

    /// Calls `body` with each allowed field as one `name: value` line (no CRLF).
    public static func forEach(_ trailers: HTTPHeaders, _ body: (UnsafeRawBufferPointer) -> Void) {
        trailers.bytes.withUnsafeBytes { raw in
            for f in trailers.fields {
                let name = UnsafeRawBufferPointer(rebasing: raw[Int(f.nameStart)..<Int(f.nameEnd)])
                guard allows(name) else { continue }
                body(UnsafeRawBufferPointer(rebasing: raw[Int(f.nameStart)..<Int(f.valueEnd)]))
            }
        }
    }

    /// Calls `body` with each allowed field's name and value.
    public static func forEachField(_ trailers: HTTPHeaders, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void) {
        trailers.bytes.withUnsafeBytes { raw in
            for f in trailers.fields {
                let name = UnsafeRawBufferPointer(rebasing: raw[Int(f.nameStart)..<Int(f.nameEnd)])
                guard allows(name) else { continue }
                body(name, UnsafeRawBufferPointer(rebasing: raw[Int(f.valueStart)..<Int(f.valueEnd)]))
            }
        }
    }
}
