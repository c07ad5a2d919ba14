import Glibc

/// A failed system call, with `errno` and its text captured at the throw site.
public struct SocketError: Error, CustomStringConvertible, Sendable {
    public var operation: String
    public var errno: Int32
    public var description: String { "\(operation) failed: \((String(validatingCString: strerror(errno)) ?? "error")) (errno \(errno))" }

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
