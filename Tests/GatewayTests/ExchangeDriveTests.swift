@testable import Gateway
@testable import ProxyCore
import EventLoop
import GatewayConfig
import HTTPWire
import JSONLog
import TestSupport
import Testing

/// A whole `Exchange` built from plain values and driven by hand: events in (the head, body parts, the body's end),
/// actions out (what it asks of its responder), in order. The loop object is the environment's clock and timer heap
/// only: it is never run, no socket is opened, nothing is forwarded.
@Suite struct ExchangeDriveTests {
    /// The client side, recorded: every call the exchange makes on it, in order.
    final class RecordingResponder: ExchangeResponder {
        var calls: [String] = []
        var answered: (status: Int, body: [UInt8], close: Bool)?
        let peerIP = "192.0.2.7"
        let peerTrusted = false
        let peerKey = ConnectionAddressKey(SocketAddress(ip: "192.0.2.7", port: 40_000)!)
        let scheme = "http"

        func bufferedBodyProblem(maxBodyBytes: Int64) -> HTTPParseError? { nil }
        func sendContinue(exchange: Exchange) { calls.append("continue") }
        func resumeInput(exchange: Exchange) { calls.append("resumeInput") }
        func writeHead(_ head: HTTPResponseHead, framing: ResponseBodyFraming, exchange: Exchange) -> Bool {
            calls.append("writeHead \(head.status)")
            return true
        }
        func writePart(_ data: UnsafeRawBufferPointer, exchange: Exchange) -> Bool {
            calls.append("writePart \(data.count)")
            return true
        }
        func writeEnd(requestComplete: Bool, exchange: Exchange) { calls.append("writeEnd") }
        func respondComplete(status: Int, headers: [(String, String)], body: [UInt8], close: Bool, exchange: Exchange) {
            calls.append("respond \(status)")
            answered = (status, body, close)
        }
        func abortResponse(exchange: Exchange) { calls.append("abort") }
        func exchangeFinished(_ exchange: Exchange) { calls.append("finished") }
    }

    /// A built-in handler that answers at once with the body it was given.
    final class EchoHandler: BuiltinHandler {
        let name = "echo"
        let maxBodyBytes = 64
        var requests = 0
        func matches(_ path: Substring) -> Bool { path == "/echo" }
        func handle(_ request: BuiltinRequest, respond: @escaping (BuiltinResponse) -> Void) {
            requests += 1
            respond(BuiltinResponse(status: 200, headers: [("content-type", "text/plain")], body: request.body))
        }
    }

    static func environment(builtins: [BuiltinHandler] = []) throws -> LoopEnvironment {
        let yaml = """
        app_check:
          project_number: "123456789012"
        upstreams:
          api:
            url: http://127.0.0.1:9
        routes:
          - name: api
            prefix: /api/
            upstream: api
            enforcement: "off"
        """
        let settings = try ConfigLoader.load(yaml: yaml, path: "drive.yaml", environment: [:]).get()
        return LoopEnvironment(loop: try EventLoop(), runtime: try Runtime(settings: settings, generation: 0),
                               logSink: LogSink(), shared: SharedState(), builtins: builtins)
    }

    static func head(_ text: String) throws -> HTTPRequestHead {
        var parser = HTTPRequestHeadParser()
        let bytes = Array(text.utf8)
        guard case .complete(let head, _) = bytes.withUnsafeBytes({ parser.parse($0) }) else {
            throw HarnessError("head did not parse")
        }
        return head
    }

    @Test func builtinRequestWithABodyIsReadAnsweredAndRecorded() throws {
        let handler = EchoHandler()
        let env = try Self.environment(builtins: [handler])
        let responder = RecordingResponder()
        let ex = Exchange(head: try Self.head("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n"),
                          bodyFollows: true, context: env, responder: responder)
        ex.begin()
        #expect(responder.calls == ["resumeInput"])  // the body is wanted
        #expect(!ex.bodyEnded && !ex.finished)
        let taken = Array("hello".utf8).withUnsafeBytes { ex.receiveBody($0) }
        #expect(taken)
        #expect(handler.requests == 0)
        ex.receiveEnd()
        #expect(handler.requests == 1)
        #expect(responder.calls == ["resumeInput", "respond 200", "finished"])
        #expect(responder.answered?.body == Array("hello".utf8))
        #expect(responder.answered?.close == false)
        #expect(ex.finished && ex.status == 200 && ex.routeName == "echo")
        #expect(env.shared.builtinBodyBytes.current == 0)  // the body's reservation is given back
        env.recorder.foldRouteSlots()
        #expect(env.recorder.metrics.routes["echo"] != nil)  // recorded once, under the handler's name
    }

    @Test func requestWithoutARouteIsAnswered404AndNothingIsForwarded() throws {
        let env = try Self.environment()
        let responder = RecordingResponder()
        let ex = Exchange(head: try Self.head("GET /elsewhere HTTP/1.1\r\nHost: a\r\n\r\n"),
                          bodyFollows: false, context: env, responder: responder)
        ex.begin()
        #expect(responder.calls == ["respond 404", "finished"])
        #expect(ex.finished && ex.status == 404 && ex.upstream == nil)
        #expect(env.recorder.metrics.unroutedStatuses[404] == 1)
    }

    @Test func oversizedBuiltinBodyIsRefused413AndTheConnectionCloses() throws {
        let handler = EchoHandler()
        let env = try Self.environment(builtins: [handler])
        let responder = RecordingResponder()
        let ex = Exchange(head: try Self.head("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n"),
                          bodyFollows: true, context: env, responder: responder)
        ex.begin()
        #expect(responder.calls == ["respond 413", "finished"])
        #expect(responder.answered?.close == true)
        #expect(handler.requests == 0)
    }
}
