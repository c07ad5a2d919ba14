/// What one `accept4` on a non-blocking listening socket gave.
public enum AcceptResult {
    /// A new connection (non-blocking, close-on-exec).
    case connection(fd: Int32, peer: SocketAddress)
    /// Nothing pending (`EAGAIN`), or a connection that failed in the queue (`ECONNABORTED`, `EPROTO`, …).
    case none
    /// Out of descriptors (`EMFILE` per process, `ENFILE` system-wide) or kernel memory (`ENOBUFS`, `ENOMEM`).
    /// The connection stays queued and the listener stays readable: stop polling it for a while.
    case exhausted(errno: Int32)
}
