import ProxyCore
import EventLoop
import Glibc

/// The upstream connection's side of a WebSocket tunnel (`State.tunnel`, `TunnelRelay`): it stops being an HTTP
/// connection (no exchange, no deadline of its own: the relay's idle bound rules) and its socket's reads, writes
/// and half-close are done as the relay asks. It was opened for the handshake alone and is never pooled.
extension UpstreamConnection {
    func enterTunnel(_ relay: TunnelRelay) {
        client = nil
        dropParserStorage()
        disarmForTunnel()
        machine.tunnelOpened(TunnelHandle(relay))
    }

    /// Bytes the upstream sent after its `101` and that were read with it.
    var tunnelLeftover: IOBuffer { inBuf }

    func tunnelRead(into buffer: IOBuffer, max: Int) -> IOResult {
        if let tls { return tls.read(into: buffer, max: max) }
        return Socket.read(fd, into: buffer, max: max)
    }

    /// The connection to the upstream is TLS.
    var isTLS: Bool { tls != nil }

    func tunnelWrite() -> IOResult { tunnelWrite(from: outBuf) }

    /// Writes what `buffer` holds (the relay's scratch buffer, or the send buffer) to the upstream.
    func tunnelWrite(from buffer: IOBuffer) -> IOResult {
        if let tls { return tls.write(from: buffer) }
        return Socket.write(fd, from: buffer)
    }

    /// Shuts the sending half (the client ended its stream); false over TLS (see `ClientConnection.tunnelShutdownWrite`).
    func tunnelShutdownWrite() -> Bool {
        if tls != nil { return false }
        return Glibc.shutdown(fd, Int32(SHUT_WR)) == 0
    }
}
