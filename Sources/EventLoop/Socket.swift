import CSystemShims
import Glibc

/// Thin wrappers over the socket system calls. Each retries on `EINTR` and returns `EAGAIN` as
/// `.wouldBlock`. The file descriptor's owner closes it with `Socket.close`.
public enum Socket {
    /// Reads at most `max` bytes; a result below `max` means the socket was drained at that moment.
    @inline(__always)
    public static func read(_ fd: Int32, into buffer: IOBuffer, max: Int = 65536) -> IOResult {
        buffer.reserve(max)
        let w = buffer.writable
        while true {
            let n = CSystemShims_read(fd, w.baseAddress, max)
            if n > 0 { buffer.didWrite(n); return .processed(n) }
            if n == 0 { return .eof }
            let e = errno
            if e == EINTR { continue }
            if e == EAGAIN || e == EWOULDBLOCK { return .wouldBlock }
            return .error(e)
        }
    }

    /// Writes as much of `buffer` as the socket takes and consumes what was written.
    @inline(__always)
    public static func write(_ fd: Int32, from buffer: IOBuffer) -> IOResult {
        var total = 0
        while !buffer.isEmpty {
            let r = buffer.readable
            let n = CSystemShims_send(fd, r.baseAddress, r.count, Int32(MSG_NOSIGNAL))
            if n > 0 { buffer.consume(n); total += n; continue }
            let e = errno
            if e == EINTR { continue }
            if e == EAGAIN || e == EWOULDBLOCK { return total > 0 ? .processed(total) : .wouldBlock }
            return .error(e)
        }
        return .processed(total)
    }

    public static func close(_ fd: Int32) { _ = Glibc.close(fd) }

    public static func setNoDelay(_ fd: Int32) {
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Creates a non-blocking listening socket bound to `address` (`SO_REUSEADDR`, and `SO_REUSEPORT`
    /// so that each event loop can own a listener on the same port).
    public static func listen(_ address: SocketAddress, backlog: Int32 = 4096, reusePort: Bool = true) throws -> Int32 {
        let fd = CSystemShims_socket_nonblocking(address.family, Int32(SOCK_STREAM.rawValue))
        guard fd >= 0 else { throw SocketError("socket") }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if reusePort { _ = setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, socklen_t(MemoryLayout<Int32>.size)) }
        if address.family == AF_INET6 {
            _ = setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        let rc = address.withSockAddr { Glibc.bind(fd, $0, $1) }
        guard rc == 0 else { let e = SocketError("bind \(address)"); close(fd); throw e }
        guard Glibc.listen(fd, backlog) == 0 else { let e = SocketError("listen \(address)"); close(fd); throw e }
        return fd
    }

    /// Accepts one connection; `nil` when none is pending or on any error. A level-triggered listener that
    /// can run out of descriptors must use `ListenerGate` (or `tryAccept`) instead, or it spins on `EMFILE`.
    @inline(__always)
    public static func accept(_ fd: Int32) -> (fd: Int32, peer: SocketAddress)? {
        if case .connection(let c, let peer) = tryAccept(fd) { return (c, peer) }
        return nil
    }

    /// Accepts one connection and says why when it could not.
    public static func tryAccept(_ fd: Int32) -> AcceptResult {
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let c = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { CSystemShims_accept4(fd, $0, &len) }
        }
        if c >= 0 { return .connection(fd: c, peer: SocketAddress(storage: storage)) }
        let e = errno
        // accept(2): these leave the connection queued, so the listener stays readable.
        if e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM { return .exhausted(errno: e) }
        return .none
    }

    /// Starts a non-blocking connect. Returns the descriptor and whether the connection is already
    /// established (`false`: wait for writability, then check `pendingError`).
    public static func connect(_ address: SocketAddress) throws -> (fd: Int32, connected: Bool) {
        let fd = CSystemShims_socket_nonblocking(address.family, Int32(SOCK_STREAM.rawValue))
        guard fd >= 0 else { throw SocketError("socket") }
        let rc = address.withSockAddr { Glibc.connect(fd, $0, $1) }
        if rc == 0 { return (fd, true) }
        let e = errno
        if e == EINPROGRESS || e == EINTR { return (fd, false) }
        close(fd)
        throw SocketError("connect \(address)", errno: e)
    }

    /// The pending error of a socket (`SO_ERROR`), 0 when none.
    public static func pendingError(_ fd: Int32) -> Int32 {
        var err: Int32 = 0
        var len = socklen_t(MemoryLayout<Int32>.size)
        _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len)
        return err
    }

    /// The local address a socket is bound to.
    public static func localAddress(_ fd: Int32) -> SocketAddress? {
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        return rc == 0 ? SocketAddress(storage: storage) : nil
    }
}

/// An IPv4 or IPv6 socket address.
public struct SocketAddress: Sendable, CustomStringConvertible {
    public var storage: sockaddr_storage

    public init(storage: sockaddr_storage) { self.storage = storage }

    /// Parses a numeric IPv4 or IPv6 literal; `nil` for anything else (names are resolved by `resolve`).
    public init?(ip: String, port: UInt16) {
        var storage = sockaddr_storage()
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, ip, &v4) == 1 {
            withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                    $0.pointee.sin_family = sa_family_t(AF_INET)
                    $0.pointee.sin_port = port.bigEndian
                    $0.pointee.sin_addr = v4
                }
            }
        } else if inet_pton(AF_INET6, ip, &v6) == 1 {
            withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    $0.pointee.sin6_family = sa_family_t(AF_INET6)
                    $0.pointee.sin6_port = port.bigEndian
                    $0.pointee.sin6_addr = v6
                }
            }
        } else {
            return nil
        }
        self.storage = storage
    }

    /// Resolves a host name or literal with `getaddrinfo` (blocking: never call it on an event-loop thread).
    public static func resolve(host: String, port: UInt16) throws -> [SocketAddress] {
        if let literal = SocketAddress(ip: host, port: port) { return [literal] }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &result)
        guard rc == 0, let first = result else {
            throw SocketError("resolve \(host): \(String(validatingCString: gai_strerror(rc)) ?? "error \(rc)")", errno: 0)
        }
        defer { freeaddrinfo(first) }
        var out: [SocketAddress] = []
        var p: UnsafeMutablePointer<addrinfo>? = first
        while let ai = p {
            if let sa = ai.pointee.ai_addr, ai.pointee.ai_family == AF_INET || ai.pointee.ai_family == AF_INET6 {
                var storage = sockaddr_storage()
                withUnsafeMutableBytes(of: &storage) { dst in
                    dst.copyMemory(from: UnsafeRawBufferPointer(start: sa, count: Int(ai.pointee.ai_addrlen)))
                }
                out.append(SocketAddress(storage: storage))
            }
            p = ai.pointee.ai_next
        }
        return out
    }

    public var family: Int32 { Int32(storage.ss_family) }

    public var port: UInt16 {
        get {
            var s = storage
            return withUnsafePointer(to: &s) { p in
                family == AF_INET6
                    ? p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
                    : p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
            }
        }
        set {
            let fam = family
            withUnsafeMutablePointer(to: &storage) { p in
                if fam == AF_INET6 {
                    p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_port = newValue.bigEndian }
                } else {
                    p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_port = newValue.bigEndian }
                }
            }
        }
    }

    /// The raw address bytes: 4 for IPv4, 16 for IPv6 (IPv4-mapped IPv6 is reported as IPv4).
    public var ipBytes: [UInt8] {
        var s = storage
        return withUnsafePointer(to: &s) { p in
            if family == AF_INET6 {
                let bytes = p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sp in
                    withUnsafeBytes(of: sp.pointee.sin6_addr) { Array($0) }
                }
                if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
                    return Array(bytes[12..<16])
                }
                return bytes
            }
            return p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sp in
                withUnsafeBytes(of: sp.pointee.sin_addr) { Array($0) }
            }
        }
    }

    /// The address as text without the port (`127.0.0.1`, `::1`).
    public var ipString: String {
        let bytes = ipBytes
        if bytes.count == 4 { return "\(bytes[0]).\(bytes[1]).\(bytes[2]).\(bytes[3])" }
        var buf = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        var addr = in6_addr()
        withUnsafeMutableBytes(of: &addr) { $0.copyBytes(from: bytes) }
        inet_ntop(AF_INET6, &addr, &buf, socklen_t(buf.count))
        return String(decoding: buf.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    public var description: String { family == AF_INET6 ? "[\(ipString)]:\(port)" : "\(ipString):\(port)" }

    public func withSockAddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        var s = storage
        let len = socklen_t(family == AF_INET6 ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size)
        return withUnsafePointer(to: &s) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, len) } }
    }
}
