import Gateway
import EventLoop
import Foundation
import Glibc
import HTTPWire

/// A blocking one-shot HTTP GET for the `healthcheck` command (no curl in the container image).
public enum AdminProbe {
    /// `MSG_NOSIGNAL` (Linux): a closed peer is an error, not a SIGPIPE.
    static let noSignal: Int32 = 0x4000

    public static func get(host: String, port: UInt16, path: String, timeout: Double) -> Result<(Int, String), SocketError> {
        guard let address = SocketAddress(ip: host, port: port) ?? (try? SocketAddress.resolve(host: host, port: port))?.first else {
            return .failure(SocketError("resolve \(host)", errno: 0))
        }
        let fd = socket(address.family, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return .failure(SocketError("socket")) }
        defer { Glibc.close(fd) }
        var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - Double(Int(timeout))) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        guard address.withSockAddr({ Glibc.connect(fd, $0, $1) }) == 0 else { return .failure(SocketError("connect \(address)")) }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n".utf8)
        guard request.withUnsafeBytes({ Glibc.send(fd, $0.baseAddress, $0.count, Self.noSignal) }) == request.count else {
            return .failure(SocketError("send"))
        }
        var data: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 { data.append(contentsOf: chunk[0..<n]); continue }
            if n == 0 { break }
            return .failure(SocketError("recv"))
        }
        var parser = HTTPResponseHeadParser()
        guard case .complete(let head, let consumed) = data.withUnsafeBytes({ parser.parse($0) }) else {
            return .failure(SocketError("malformed answer from \(address)", errno: 0))
        }
        return .success((head.status, String(decoding: data[consumed...], as: UTF8.self)))
    }
}
