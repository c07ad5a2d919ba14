import HTTPWire
import ProxyCore

/// Which of an upstream's response fields reach the client, for HTTP/1.1 and HTTP/2 alike (docs/behaviour.md):
/// hop-by-hop fields and those named in `Connection` are removed (RFC 9110 §7.6.1), the upstream's `X-Request-Id`
/// is replaced by the exchange's, and `Content-Length` is left to the writer (which states the framing it uses)
/// except on a response without a body, where it is the upstream's own statement and passes unchanged.
enum ResponseHeaderFilter {
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
                switch HeaderKind.classify(name) {
                case .hopByHop, .requestId: continue
                case .contentLength: if !keepLength { continue }
                default:
                    if !tokens.isEmpty && HeaderKind.isListed(name, in: tokens) { continue }
                }
                field(name, UnsafeRawBufferPointer(rebasing: raw[Int(f.valueStart)..<Int(f.valueEnd)]),
                      UnsafeRawBufferPointer(rebasing: raw[Int(f.nameStart)..<Int(f.valueEnd)]))
            }
        }
    }
}
