import EventLoop
import Glibc
import HTTPWire
import ProxyCore

/// Lingering close (nginx's `lingering_close`): a connection that closes after answering a request whose body it
/// did not read (a refused upload, a 401 before the body) must not close with bytes still on their way, or the
/// kernel answers them with a reset that can reach the client before it has read the answer, which it then never
/// sees. So the connection shuts its sending side (after TLS `close_notify`), reads and drops what the client still
/// sends — the rest of a declared `Content-Length` exactly (over TLS, up to the client's close), else up to the
/// client's close — and closes then, after `idle` without a byte, or after `total` at most (docs/behaviour.md).
enum Linger: Equatable {
    /// The rest of a declared body: closes once this many more bytes were dropped.
    case bytes(Int64)
    /// A chunked body or bytes after a malformed head: closes when the client does (or `idle` passes).
    case untilClientCloses

    /// Longest wait for the client's next bytes (nginx's `lingering_timeout` is 5 s).
    static let idle: UInt64 = 2_000_000_000
    /// Longest linger in all (nginx's `lingering_time` is 30 s).
    static let total: UInt64 = 10_000_000_000

    /// What is left to drop of a request body that was answered before it was read, given the bytes of it already
    /// buffered; nil when nothing more is on its way.
    init?(unreadBody body: RequestBodyState, buffered: UnsafeRawBufferPointer) {
        switch body {
        case .none, .done:
            return nil
        case .length(let remaining):
            let left = remaining - Int64(buffered.count)
            if left <= 0 { return nil }
            self = .bytes(left)
        case .chunked(var decoder):
            if case .done = decoder.decode(buffered, onData: { _ in }) { return nil }
            self = .untilClientCloses
        }
    }
}

extension ClientConnection {
    // MARK: shutdown

    /// Closes the connection if it is between requests (graceful drain); otherwise marks it to close after the
    /// current response.
    package func drain() {
        if machine.drain(idle: exchange == nil && outBuf.isEmpty && inBuf.isEmpty) { close() }
    }

    /// Closes at once, dropping anything in flight.
    package func abort() { close() }

    func close(_ cause: Exchange.Cancellation = .connectionClosed) {
        guard case .close(let wasHandshaking, let relay) = machine.close() else { return }
        // A tunnel closed from here (shutdown's end) ends both its sides; the relay's own ending calls back in, and
        // finds this connection closed.
        defer { relay?.endpoint.finish(.shutdown) }
        timeouts.closed()
        context.loop.cancel(timer)
        if let ex = exchange {
            exchange = nil
            ex.cancel(cause)
        }
        context.loop.deregister(fd)
        if case .tls(let stream) = transport, !wasHandshaking { stream.shutdown() }
        Socket.close(fd)
        connections.connectionClosed(self)
    }

    // MARK: lingering close

    /// The last response is written and the connection is to close: lingers when the client is still sending
    /// (`linger`), closes otherwise.
    func closeOrLinger() {
        guard var plan = linger, machine.mayLinger(hasPlan: true) else { close(); return }
        if case .tls(let stream) = transport {
            stream.shutdown()
            // The rest of a declared body arrives in TLS records, longer than the bytes they carry: wait for the
            // client's close rather than count.
            plan = .untilClientCloses
        }
        guard Glibc.shutdown(fd, Int32(SHUT_WR)) == 0 else { close(); return }
        linger = plan
        machine.lingerStarted()
        timeouts.closed()
        context.loop.cancel(timer)
        lingerEnds = context.loop.now &+ Linger.total
        lingerRead()
    }

    /// True when the client has sent bytes not read yet (a peek; nothing is consumed).
    func clientHasUnreadBytes() -> Bool {
        var byte: UInt8 = 0
        return Glibc.recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) > 0
    }

    /// Reads and drops what arrived; closes once the plan's bytes are in, at the end of the client's stream, on an
    /// error, or when time is up.
    func lingerRead() {
        guard case .lingering = machine.state else { return }
        var sawBytes = false
        var plan = linger ?? .untilClientCloses
        let finished: Bool = withUnsafeTemporaryAllocation(byteCount: 16 * 1024, alignment: 16) { scratch in
            while true {
                var want = scratch.count
                if case .bytes(let left) = plan { want = Int(min(Int64(want), left)) }
                let n = Glibc.recv(fd, scratch.baseAddress, want, 0)
                if n > 0 {
                    sawBytes = true
                    if case .bytes(let left) = plan {
                        if left - Int64(n) <= 0 { return true }
                        plan = .bytes(left - Int64(n))
                    }
                    continue
                }
                if n == 0 { return true }
                let e = errno
                if e == EINTR { continue }
                return !(e == EAGAIN || e == EWOULDBLOCK)
            }
        }
        linger = plan
        let now = context.loop.now
        if finished || RequestDeadlines.expiry(of: lingerEnds, now: now) == .expired { close(); return }
        if sawBytes || !timer.isArmed { context.loop.schedule(timer, at: min(now &+ Linger.idle, lingerEnds)) }
    }
}
