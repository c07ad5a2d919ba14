import HTTPWire
import ProxyCore

/// Which of an upstream's response fields reach the client, for HTTP/1.1 and HTTP/2 alike (docs/behaviour.md):
/// hop-by-hop fields and those named in `Connection` are removed (RFC 9110 §7.6.1), the upstream's `X-Request-Id`
/// is replaced by the exchange's, and `Content-Length` is left to the writer (which states the framing it uses)
/// except on a response without a body, where it is the upstream's own statement and passes unchanged.
enum ResponseHeaderFilter {
    /// Whether a field named `name` reaches the client: not hop-by-hop, not named in `Connection` (`tokens`), not
    /// the upstream's request id, and `Content-Length` only when `keepLength` (a response without a body).
    @inline(__always)
    static func forwards(_ name: UnsafeRawBufferPointer, keepLength: Bool, tokens: [String]) -> Bool {
        switch HeaderKind.classify(name) {
        case .hopByHop, .requestId: return false
        case .contentLength: return keepLength
        default: return tokens.isEmpty || !HeaderKind.isListed(name, in: tokens)
        }
    }

    /// Calls `field` with the name, the value and the whole `name: value` bytes of each field to forward, in order.
    @inline(__always)
    static func forEach(_ head: HTTPResponseHead, framing: ResponseBodyFraming,
                        _ field: (_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer,
                                  _ line: UnsafeRawBufferPointer) -> Void) {
        let tokens = head.connectionTokens
        let keepLength: Bool
        if case .none = framing { keepLength = true } else { keepLength = false }
        head.headers.bytes.withUnsafeBytes { raw in
            for f in head.headers.fields {
                let name = UnsafeRawBufferPointer(rebasing: raw[Int(f.nameStart)..<Int(f.nameEnd)])
                guard forwards(name, keepLength: keepLength, tokens: tokens) else { continue }
                field(name, UnsafeRawBufferPointer(rebasing: raw[Int(f.valueStart)..<Int(f.valueEnd)]),
                      UnsafeRawBufferPointer(rebasing: raw[Int(f.nameStart)..<Int(f.valueEnd)]))
            }
        }
    }

    /// The same fields as `forEach`, as the bytes `name: value` CRLF of each, in order, handed over in runs: lines to
    /// forward that follow each other in the head and end in CRLF right after their value (no trailing whitespace)
    /// go out as one run of the head's own bytes, CRLFs included (`lineEnd` false); any other line alone, without
    /// its line end (`lineEnd` true: the caller adds CRLF). One copy for the usual response's fields instead of two
    /// appends per line.
    @inline(__always)
    static func forEachRun(_ head: HTTPResponseHead, framing: ResponseBodyFraming,
                           _ run: (_ bytes: UnsafeRawBufferPointer, _ lineEnd: Bool) -> Void) {
        let tokens = head.connectionTokens
        let keepLength: Bool
        if case .none = framing { keepLength = true } else { keepLength = false }
        head.headers.bytes.withUnsafeBytes { raw in
            // The pending run, raw[runStart..<runEnd] (empty when equal).
            var runStart = 0
            var runEnd = 0
            for f in head.headers.fields {
                let name = UnsafeRawBufferPointer(rebasing: raw[Int(f.nameStart)..<Int(f.nameEnd)])
                guard forwards(name, keepLength: keepLength, tokens: tokens) else { continue }
                let start = Int(f.nameStart)
                let end = Int(f.valueEnd)
                if end + 1 < raw.count && raw[end] == 0x0D && raw[end + 1] == 0x0A {
                    if start == runEnd && runEnd > runStart {
                        runEnd = end + 2
                        continue
                    }
                    if runEnd > runStart { run(UnsafeRawBufferPointer(rebasing: raw[runStart..<runEnd]), false) }
                    runStart = start
                    runEnd = end + 2
                } else {
                    if runEnd > runStart { run(UnsafeRawBufferPointer(rebasing: raw[runStart..<runEnd]), false) }
                    runEnd = runStart
                    run(UnsafeRawBufferPointer(rebasing: raw[start..<end]), true)
                }
            }
            if runEnd > runStart { run(UnsafeRawBufferPointer(rebasing: raw[runStart..<runEnd]), false) }
        }
    }
}
