import Glibc

/// A failed system call, with `errno` and its text captured at the throw site.
public struct SocketError: Error, CustomStringConvertible, Sendable {
    public var operation: String
    public var errno: Int32
    /// `operation failed: strerror (errno N)`; for failures that carry no errno, just the operation's text.
    public var description: String {
        errno == 0 ? operation : "\(operation) failed: \((String(validatingCString: strerror(errno)) ?? "error")) (errno \(errno))"
    }

    public init(_ operation: String, errno: Int32 = Glibc.errno) {
        self.operation = operation
        self.errno = errno
    }
}

/// The outcome of a non-blocking read or write: `EAGAIN` is a value, not an error (see SwiftNIO's `IOResult`).
public enum IOResult: Equatable, Sendable {
    case processed(Int)
    case wouldBlock
    /// The peer closed (read returned 0).
    case eof
    case error(Int32)
}
