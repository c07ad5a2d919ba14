import ProxyCore
import EventLoop
import Glibc
import HTTPWire

/// The client connection's side of a WebSocket tunnel (`HTTP1ConnectionStateMachine.State.tunnel`, `TunnelRelay`): the `101` it answers, and
/// its socket's reads, writes and half-close as the relay asks for them.
extension ClientConnection {
    /// The upstream switched protocols: answers `101` (the upstream's fields, hop-by-hop ones removed, then
    /// `Connection: Upgrade`, `Upgrade: websocket` and `X-Request-Id`) and hands the connection to `relay`. No
    /// client deadline runs from here (the relay's idle bound does); the exchange is no longer this connection's.
    func enterTunnel(_ relay: TunnelRelay, head: HTTPResponseHead, requestId: RequestID) {
        ResponseHeadWriter.writeStatusLine(101, into: outBuf)
        head.withReasonBytes { outBuf.append($0) }
        outBuf.append(static: "\r\n")
        ResponseHeaderFilter.forEach(head, framing: .none) { _, _, line in
            outBuf.append(line)
            outBuf.append(static: "\r\n")
        }
        outBuf.append(static: "Connection: Upgrade\r\nUpgrade: websocket\r\nX-Request-Id: ")
        requestId.append(to: outBuf)
        outBuf.append(static: "\r\n\r\n")
        exchange = nil
        dropParserStorage()
        timeouts.closed()
        machine.tunnelOpened(TunnelHandle(relay))
    }

    /// Bytes the client sent after its handshake and that were read with it (a client should wait for the `101`,
    /// but may not).
    var tunnelLeftover: IOBuffer { inBuf }

    func tunnelRead(into buffer: IOBuffer, max: Int) -> IOResult { transport.read(fd, into: buffer, max: max) }

    func tunnelWrite() -> IOResult { transport.write(fd, from: outBuf) }

    /// Writes what `buffer` holds (the relay's scratch buffer) straight to the socket.
    func tunnelWrite(from buffer: IOBuffer) -> IOResult { transport.write(fd, from: buffer) }

    /// Shuts the sending half (the upstream ended its stream); false over TLS, whose `close_notify` would end the
    /// session both ways: the tunnel closes instead.
    func tunnelShutdownWrite() -> Bool {
        if transport.isTLS { return false }
        return Glibc.shutdown(fd, Int32(SHUT_WR)) == 0
    }

    /// True while the connection is a tunnel (`gateway_connections{state="tunnel"}`).
    package var isTunnel: Bool { if case .tunnel = machine.state { return true } else { return false } }
}
