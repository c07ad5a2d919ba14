import HTTPWire

/// A gRPC call (SPEC §6.1): a request on an HTTP/2 client connection whose `content-type` is `application/grpc` or
/// starts with `application/grpc+` (gRPC-Web, `application/grpc-web…`, is not one: it stays plain HTTP). The exchange
/// is the same as any request's (admission, the App Check step, metrics, logs); only the answers the gateway makes
/// itself take gRPC's form (`GRPCStatus`), and `grpc-timeout` bounds the whole call.
public struct GRPCCall {
    /// `grpc-timeout` in nanoseconds, when the client sent one (forwarded unchanged; the gateway ends the call with
    /// DEADLINE_EXCEEDED when it passes before the upstream's trailers).
    public let timeout: UInt64?
    /// The `grpc-status` the call ended with, logged as `grpc_status`: the gateway's own answer, DEADLINE_EXCEEDED
    /// after the upstream's head, or the upstream's (its trailers or its Trailers-Only head); nil when none was seen
    /// (a cut stream).
    public var status: Int? = nil

    public init(timeout: UInt64?, status: Int? = nil) {
        self.timeout = timeout
        self.status = status
    }

    /// What a request head is, for gRPC.
    public enum Detection: Equatable {
        /// Not gRPC (any other `content-type`, or none).
        case notGRPC
        case call(timeoutNanoseconds: UInt64?)
        /// gRPC with a `grpc-timeout` that is not `1*8DIGIT` and one unit, or sent twice: refused with
        /// INVALID_ARGUMENT (as a gRPC server refuses it), never forwarded.
        case malformedTimeout
    }

    /// Looks at the head of a request that arrived over HTTP/2 (the caller's part: gRPC exists only there).
    /// Costs one field lookup for a request that is not gRPC.
    public static func detect(_ headers: HTTPHeaders) -> Detection {
        guard let ct = headers.firstIndex(ofLiteral: "content-type"),
              headers.withValueBytes(at: ct, { isGRPCContentType($0) }) else { return .notGRPC }
        guard let t = headers.firstIndex(ofLiteral: "grpc-timeout") else { return .call(timeoutNanoseconds: nil) }
        if headers.firstIndex(ofLiteral: "grpc-timeout", after: t) != nil { return .malformedTimeout }
        guard let ns = headers.withValueBytes(at: t, { parseTimeout($0) }) else { return .malformedTimeout }
        return .call(timeoutNanoseconds: ns)
    }

    /// `application/grpc`, or `application/grpc+<codec>` (`+proto`, `+json`), optionally followed by parameters
    /// (`; charset=…`); the type is matched case-insensitively (RFC 9110 §8.3.1). `application/grpc-web…` is not.
    public static func isGRPCContentType(_ value: UnsafeRawBufferPointer) -> Bool {
        let type = Array("application/grpc".utf8)
        guard value.count >= type.count else { return false }
        for i in 0..<type.count where asciiLower(value[i]) != type[i] { return false }
        guard value.count > type.count else { return true }
        let next = value[type.count]
        return next == UInt8(ascii: "+") || next == UInt8(ascii: ";") || next == UInt8(ascii: " ")
            || next == UInt8(ascii: "\t")
    }

    /// The gRPC over HTTP/2 spec's `Timeout → TimeoutValue TimeoutUnit`: 1 to 8 ASCII digits, then one of `H` hours,
    /// `M` minutes, `S` seconds, `m` milliseconds, `u` microseconds, `n` nanoseconds. Nanoseconds, or nil when the
    /// text is anything else (a sign, a space, a ninth digit, no unit, an unknown unit). `0` is accepted (an
    /// already-passed deadline, as gRPC servers take it). A value past `UInt64.max` nanoseconds (584 years; the
    /// syntax reaches 11,000) is `UInt64.max`: no deadline the gateway would ever see.
    public static func parseTimeout(_ value: UnsafeRawBufferPointer) -> UInt64? {
        guard value.count >= 2, value.count <= 9 else { return nil }
        var n: UInt64 = 0
        for b in value.dropLast() {
            guard b >= UInt8(ascii: "0"), b <= UInt8(ascii: "9") else { return nil }
            n = n * 10 + UInt64(b - UInt8(ascii: "0"))
        }
        let unit: UInt64
        switch value[value.count - 1] {
        case UInt8(ascii: "H"): unit = 3_600_000_000_000
        case UInt8(ascii: "M"): unit = 60_000_000_000
        case UInt8(ascii: "S"): unit = 1_000_000_000
        case UInt8(ascii: "m"): unit = 1_000_000
        case UInt8(ascii: "u"): unit = 1_000
        case UInt8(ascii: "n"): unit = 1
        default: return nil
        }
        let (ns, overflow) = n.multipliedReportingOverflow(by: unit)
        return overflow ? .max : ns
    }

    /// The `grpc-status` in `fields` (an upstream's trailers or Trailers-Only head): 1 to 3 digits, else nil.
    public static func status(in fields: HTTPHeaders) -> Int? {
        guard let i = fields.firstIndex(ofLiteral: "grpc-status") else { return nil }
        return fields.withValueBytes(at: i) { v -> Int? in
            guard (1...3).contains(v.count) else { return nil }
            var n = 0
            for b in v {
                guard b >= UInt8(ascii: "0"), b <= UInt8(ascii: "9") else { return nil }
                n = n * 10 + Int(b - UInt8(ascii: "0"))
            }
            return n
        }
    }

    /// `parseTimeout` of a string (tests, tools).
    public static func parseTimeout(_ text: String) -> UInt64? {
        Array(text.utf8).withUnsafeBytes { parseTimeout($0) }
    }

    @inline(__always)
    private static func asciiLower(_ b: UInt8) -> UInt8 {
        b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z") ? b + 32 : b
    }
}
