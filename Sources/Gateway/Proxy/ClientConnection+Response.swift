import ProxyCore
import EventLoop
import HTTPWire

/// The HTTP/1.1 connection's side of `ExchangeResponder`: response heads, bodies (chunked, by length, or until close),
/// the gateway's own complete answers and `100 Continue`, written into the connection's output buffer.
extension ClientConnection {
    /// HTTP/1.1 pushes back through `writePart`'s answer (the client buffer's high-water mark), so the body may
    /// always start.
    func writeHead(_ head: HTTPResponseHead, framing: ResponseBodyFraming, exchange ex: Exchange) -> Bool {
        machine.responseHead(requestComplete: ex.bodyEnded, draining: context.draining)
        var close = machine.closesAfterResponse
        // A route with `stream_idle_timeout`: the upstream connection's idle bound replaces `body_timeout` now.
        if ex.streamsIdle {
            timeouts.streamStarted()
            syncTimer()
        }
        ResponseHeadWriter.write(head, framing: framing, into: outBuf, requestId: ex.id,
                                 responseFraming: &responseFraming, clientVersionMinor: clientVersionMinor,
                                 closeAfterResponse: &close)
        if close { machine.responseDelimitedByClose() }
        return true
    }

    func writePart(_ data: UnsafeRawBufferPointer, exchange ex: Exchange) -> Bool {
        switch responseFraming {
        case .chunked:
            outBuf.appendHex(data.count)
            outBuf.append(Self.crlf)
            outBuf.append(data)
            outBuf.append(Self.crlf)
        case .length(let remaining):
            let n = min(Int64(data.count), remaining)
            outBuf.append(UnsafeRawBufferPointer(rebasing: data[0..<Int(n)]))
            responseFraming = .length(remaining: remaining - n)
        case .close:
            outBuf.append(data)
        case .none, .pending:
            break
        }
        // Streamed responses (server-sent events, slow producers) go out as they arrive.
        flush()
        return outBuf.readableCount <= Backpressure.highWater
    }

    static let crlf: [UInt8] = [13, 10]
    static let lastChunk: [UInt8] = Array("0\r\n\r\n".utf8)
    static let lastChunkLine: [UInt8] = Array("0\r\n".utf8)

    func writeEnd(requestComplete: Bool, exchange ex: Exchange) {
        if case .chunked = responseFraming {
            if ex.acceptsTrailers, let trailers = ex.responseTrailers {
                // The last chunk, the trailer section, the empty line (RFC 9112 §7.1.2); only for a client that sent
                // `TE: trailers` (SPEC §6.1), else they are dropped.
                outBuf.append(Self.lastChunkLine)
                TrailerFilter.forEach(trailers) { line in
                    outBuf.append(line)
                    outBuf.append(Self.crlf)
                }
                outBuf.append(Self.crlf)
            } else {
                outBuf.append(Self.lastChunk)
            }
        }
        // Answered before the body was read: the rest of the body must not be read as a request.
        machine.responseEnd(requestComplete: requestComplete)
    }

    func respondComplete(status: Int, headers: [(String, String)], body: [UInt8], close: Bool, exchange ex: Exchange) {
        machine.ownAnswer(close: close)
        ResponseHeadWriter.writeStatusLine(status, into: outBuf)
        outBuf.append(ErrorResponse.reasonPhrase(status))
        for (name, value) in headers {
            outBuf.append(Self.crlf)
            outBuf.append(name)
            outBuf.append(Self.colon)
            outBuf.append(value)
        }
        outBuf.append(Self.contentLength)
        outBuf.appendDecimal(body.count)
        outBuf.append(Self.requestIdField)
        outBuf.append(ex.requestId)
        if machine.closesAfterResponse { outBuf.append(Self.connectionClose) }
        outBuf.append(Self.endOfHead)
        if !ex.isHead { outBuf.append(body) }
    }

    static let colon: [UInt8] = Array(": ".utf8)
    static let contentLength: [UInt8] = Array("\r\nContent-Length: ".utf8)
    static let requestIdField: [UInt8] = Array("\r\nX-Request-Id: ".utf8)
    static let connectionClose: [UInt8] = Array("\r\nConnection: close".utf8)
    static let endOfHead: [UInt8] = Array("\r\n\r\n".utf8)

    func sendContinue(exchange ex: Exchange) {
        outBuf.append(Self.continueResponse)
        flush()
    }

    static let continueResponse: [UInt8] = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

    func abortResponse(exchange ex: Exchange) { abort() }
}

/// How an HTTP/1.1 request body is delimited on the connection (RFC 9112 §6.3), as it is being read.
enum RequestBodyState {
    case none
    case length(remaining: Int64)
    case chunked(ChunkedDecoder)
    case done
}
