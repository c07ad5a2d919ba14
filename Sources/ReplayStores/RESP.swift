import EventLoop

/// The small part of RESP (Redis serialization protocol, RESP2 plus the RESP3 null `_`) the Redis client
/// needs: commands out as arrays of bulk strings; replies in as simple strings, errors, integers, bulk
/// strings, nulls and (nested, for `CLUSTER SLOTS` and scripts) arrays. Strict and bounded: anything else,
/// or anything over the limits, is a protocol error and the connection is dropped.
public enum RESP {
    /// One reply.
    public enum Value: Equatable, Sendable {
        case simple(String)
        case error(String)
        case integer(Int64)
        case bulk([UInt8])
        case null
        case array([Value])

        /// The text of a simple or bulk string.
        public var text: String? {
            switch self {
            case .simple(let s): return s
            case .bulk(let b): return String(decoding: b, as: UTF8.self)
            default: return nil
            }
        }
    }

    /// A reply that breaks the protocol or its bounds; the connection is dropped.
    public struct ProtocolError: Error, Equatable, CustomStringConvertible {
        public var description: String
    }

    /// What `parse` found at the start of its bytes.
    public enum ParseResult: Equatable {
        case value(Value, consumed: Int)
        case needMore
        case failure(ProtocolError)
    }

    /// Longest simple-string / error / integer line accepted (without CRLF).
    static let maxLineLength = 4096
    /// Largest bulk string accepted (our commands never get long replies; `INFO server` is ~2 KB).
    static let maxBulkLength = 64 * 1024
    /// Most elements in one array, and deepest nesting (`CLUSTER SLOTS` nests three levels).
    static let maxArrayCount = 16 * 1024
    static let maxDepth = 4

    /// Appends `*N\r\n` then each argument as `$len\r\n…\r\n`.
    static func encodeCommand(_ args: [[UInt8]], into out: IOBuffer) {
        out.append(byte: UInt8(ascii: "*"))
        out.appendDecimal(args.count)
        out.append(crlf)
        for a in args {
            out.append(byte: UInt8(ascii: "$"))
            out.appendDecimal(a.count)
            out.append(crlf)
            out.append(a)
            out.append(crlf)
        }
    }

    static func encodeCommand(_ args: [String], into out: IOBuffer) {
        encodeCommand(args.map { Array($0.utf8) }, into: out)
    }

    static let crlf: [UInt8] = [13, 10]

    /// Parses one reply at the start of `bytes` (public for the fuzz target `resp`).
    public static func parse(_ bytes: UnsafeRawBufferPointer) -> ParseResult {
        parse(bytes, depth: 0)
    }

    private static func parse(_ bytes: UnsafeRawBufferPointer, depth: Int) -> ParseResult {
        guard let type = bytes.first else { return .needMore }
        // The line after the type byte.
        var end = -1
        let limit = min(bytes.count, maxLineLength + 3)
        var i = 1
        while i < limit {
            if bytes[i] == 13 {
                if i + 1 >= bytes.count { return .needMore }
                guard bytes[i + 1] == 10 else { return .failure(ProtocolError(description: "CR without LF")) }
                end = i
                break
            }
            if bytes[i] == 10 { return .failure(ProtocolError(description: "LF without CR")) }
            i += 1
        }
        if end < 0 {
            return bytes.count >= maxLineLength + 3 ? .failure(ProtocolError(description: "line too long")) : .needMore
        }
        let line = UnsafeRawBufferPointer(rebasing: bytes[1..<end])
        let afterLine = end + 2
        switch type {
        case UInt8(ascii: "+"):
            return .value(.simple(String(decoding: line, as: UTF8.self)), consumed: afterLine)
        case UInt8(ascii: "-"):
            return .value(.error(String(decoding: line, as: UTF8.self)), consumed: afterLine)
        case UInt8(ascii: ":"):
            guard let n = parseInteger(line) else { return .failure(ProtocolError(description: "bad integer")) }
            return .value(.integer(n), consumed: afterLine)
        case UInt8(ascii: "_"):
            guard line.isEmpty else { return .failure(ProtocolError(description: "bad null")) }
            return .value(.null, consumed: afterLine)
        case UInt8(ascii: "$"), UInt8(ascii: "*"):
            guard let n = parseInteger(line) else { return .failure(ProtocolError(description: "bad length")) }
            if n == -1 { return .value(.null, consumed: afterLine) }
            if type == UInt8(ascii: "*") {
                guard depth < maxDepth else { return .failure(ProtocolError(description: "arrays nested too deep")) }
                guard n >= 0, n <= Int64(maxArrayCount) else { return .failure(ProtocolError(description: "bad array length \(n)")) }
                var items: [Value] = []
                items.reserveCapacity(Int(n))
                var offset = afterLine
                for _ in 0..<Int(n) {
                    switch parse(UnsafeRawBufferPointer(rebasing: bytes[offset...]), depth: depth + 1) {
                    case .needMore: return .needMore
                    case .failure(let e): return .failure(e)
                    case .value(let v, let used):
                        items.append(v)
                        offset += used
                    }
                }
                return .value(.array(items), consumed: offset)
            }
            guard n >= 0, n <= Int64(maxBulkLength) else { return .failure(ProtocolError(description: "bad bulk length \(n)")) }
            let len = Int(n)
            guard bytes.count >= afterLine + len + 2 else { return .needMore }
            guard bytes[afterLine + len] == 13, bytes[afterLine + len + 1] == 10 else {
                return .failure(ProtocolError(description: "bulk string not terminated by CRLF"))
            }
            return .value(.bulk(Array(bytes[afterLine..<(afterLine + len)])), consumed: afterLine + len + 2)
        default:
            return .failure(ProtocolError(description: "unexpected reply type byte \(type)"))
        }
    }

    /// A strict decimal integer: optional `-`, 1…19 digits, no `+`, no spaces.
    static func parseInteger(_ line: UnsafeRawBufferPointer) -> Int64? {
        var digits = line[...]
        var negative = false
        if digits.first == UInt8(ascii: "-") { negative = true; digits = digits.dropFirst() }
        guard !digits.isEmpty, digits.count <= 19 else { return nil }
        var value: Int64 = 0
        for d in digits {
            guard d >= 48, d <= 57 else { return nil }
            let (m, o1) = value.multipliedReportingOverflow(by: 10)
            let (s, o2) = m.addingReportingOverflow(Int64(d - 48))
            if o1 || o2 { return nil }
            value = s
        }
        return negative ? -value : value
    }
}
