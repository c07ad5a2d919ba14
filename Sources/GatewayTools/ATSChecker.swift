import COpenSSL
import EventLoop
import Foundation
import GatewayConfig
import Glibc

/// What `ats-check` connects to.
public struct ATSCheckOptions: Sendable {
    public var host: String
    public var port: UInt16
    /// Name for SNI and the certificate check; default `host`.
    public var serverName: String?
    /// PEM file of trusted CAs (a private CA); default the system store.
    public var caFile: String?
    /// Seconds per connection attempt and per blocking read or write.
    public var timeout: Double

    public init(host: String, port: UInt16, serverName: String? = nil, caFile: String? = nil, timeout: Double = 5) {
        self.host = host
        self.port = port
        self.serverName = serverName
        self.caFile = caFile
        self.timeout = timeout
    }

    /// Parses `HOST:PORT`, `[IPv6]:PORT`, or `HOST` (port 443).
    public static func parseTarget(_ text: String) -> (host: String, port: UInt16)? {
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            let host = String(text[text.index(after: text.startIndex)..<close])
            let rest = text[text.index(after: close)...]
            if rest.isEmpty { return host.isEmpty ? nil : (host, 443) }
            guard rest.hasPrefix(":"), let port = UInt16(rest.dropFirst()), port > 0, !host.isEmpty else { return nil }
            return (host, port)
        }
        let colons = text.filter { $0 == ":" }.count
        if colons == 0 { return text.isEmpty ? nil : (text, 443) }
        if colons > 1 { return SocketAddress(ip: text, port: 443) != nil ? (text, 443) : nil }  // bare IPv6
        guard let i = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: i)...]), port > 0 else { return nil }
        let host = String(text[..<i])
        return host.isEmpty ? nil : (host, port)
    }
}

/// One audited requirement: `PASS requirement: detail` or `FAIL requirement: detail`.
public struct ATSCheckLine: Sendable, Equatable, CustomStringConvertible {
    public var requirement: String
    public var passed: Bool
    public var detail: String
    public var description: String { "\(passed ? "PASS" : "FAIL") \(requirement): \(detail)" }
}

/// The endpoint could not be audited at all (resolution or TCP connection failed).
public struct ATSCheckError: Error, CustomStringConvertible, Sendable {
    public var message: String
    public var description: String { message }
}

/// Audits a live TLS endpoint against Apple App Transport Security (docs/behaviour.md), with blocking sockets and
/// timeouts (a command-line tool; never call it on an event-loop thread). Each probe is a separate
/// connection and handshake, no application data is sent.
public enum ATSChecker {
    public static let requirementProtocol = "TLS 1.2 or 1.3 accepted"
    public static let requirementLegacy = "TLS 1.0 and 1.1 refused"
    public static let requirementForwardSecrecy = "TLS 1.2 suites forward-secret"
    public static let requirementKeySize = "certificate key size"
    public static let requirementSignature = "signature hash SHA-256 or better"
    public static let requirementChain = "chain valid for host name"
    public static let requirementALPN = "ALPN h2"

    /// Runs every check; throws only when the endpoint cannot be reached at all.
    public static func run(_ options: ATSCheckOptions) throws(ATSCheckError) -> [ATSCheckLine] {
        signal(SIGPIPE, SIG_IGN)
        let addresses: [SocketAddress]
        do { addresses = try SocketAddress.resolve(host: options.host, port: options.port) } catch {
            throw ATSCheckError(message: "cannot resolve \(options.host): \(error)")
        }
        guard !addresses.isEmpty else { throw ATSCheckError(message: "cannot resolve \(options.host): no address") }
        // Reachability first, so that an unreachable endpoint is one clear error rather than seven FAILs.
        var reachable: SocketAddress?
        var lastFailure = ""
        for address in addresses {
            switch connect(address, timeout: options.timeout) {
            case .success(let fd): Glibc.close(fd); reachable = address
            case .failure(let message): lastFailure = message
            }
            if reachable != nil { break }
        }
        guard let address = reachable else {
            throw ATSCheckError(message: "cannot connect to \(options.host):\(options.port): \(lastFailure)")
        }
        let prober = Prober(address: address, options: options)
        var lines: [ATSCheckLine] = []

        // (a) TLS 1.3 and TLS 1.2, separately; the details of the chain come from the first that works.
        let p13 = prober.handshake(min: .tls13, max: .tls13, collect: true)
        let p12 = prober.handshake(min: .tls12, max: .tls12, collect: true)
        let accepted = [("TLS 1.3", p13), ("TLS 1.2", p12)].filter { $0.1.ok }
        if accepted.isEmpty {
            lines.append(ATSCheckLine(requirement: requirementProtocol, passed: false,
                detail: "no handshake succeeded (TLS 1.3: \(p13.error); TLS 1.2: \(p12.error))"))
        } else {
            let desc = accepted.map { "\($0.0) (\($0.1.cipher))" }.joined(separator: ", ")
            lines.append(ATSCheckLine(requirement: requirementProtocol, passed: true, detail: "accepted \(desc)"))
        }

        // (b) Legacy versions must be refused; the probe really offers them (security level 0).
        var legacyAccepted: [String] = []
        for (name, v) in [("TLS 1.0", TLSClientOptions.ProtocolVersion.tls10), ("TLS 1.1", .tls11)] {
            let p = prober.handshake(min: v, max: v, cipherList: "ALL:COMPLEMENTOFALL:@SECLEVEL=0")
            if p.ok { legacyAccepted.append("\(name) (\(p.cipher))") }
        }
        lines.append(legacyAccepted.isEmpty
            ? ATSCheckLine(requirement: requirementLegacy, passed: true, detail: "both refused")
            : ATSCheckLine(requirement: requirementLegacy, passed: false,
                           detail: "accepted \(legacyAccepted.joined(separator: ", "))"))

        // (c) Every TLS 1.2 suite OpenSSL knows, one handshake each.
        if !p12.ok {
            lines.append(ATSCheckLine(requirement: requirementForwardSecrecy, passed: true,
                                      detail: "TLS 1.2 not accepted (TLS 1.3 suites are all forward-secret)"))
        } else {
            var fs: [String] = []
            var nonFS: [String] = []
            for suite in tls12Suites() {
                let p = prober.handshake(min: .tls12, max: .tls12, cipherList: suite.name + ":@SECLEVEL=0")
                if p.ok { if suite.forwardSecret { fs.append(suite.name) } else { nonFS.append(suite.name) } }
            }
            if nonFS.isEmpty {
                lines.append(ATSCheckLine(requirement: requirementForwardSecrecy, passed: true,
                    detail: fs.isEmpty ? "no single-suite probe succeeded"
                        : "\(fs.count) accepted, all ECDHE/DHE: \(fs.joined(separator: " "))"))
            } else {
                lines.append(ATSCheckLine(requirement: requirementForwardSecrecy, passed: false,
                    detail: "accepted without forward secrecy: \(nonFS.joined(separator: " "))"))
            }
        }

        let main = p13.ok ? p13 : p12
        if !main.ok {
            for r in [requirementKeySize, requirementSignature, requirementChain, requirementALPN] {
                lines.append(ATSCheckLine(requirement: r, passed: false, detail: "no TLS 1.2/1.3 handshake"))
            }
            return lines
        }
        // (d) Leaf key size.
        lines.append(ATSCheckLine(requirement: requirementKeySize, passed: main.keyOK, detail: main.keyDetail))
        // (e) Signature hashes across the chain as sent.
        lines.append(main.weakSignatures.isEmpty
            ? ATSCheckLine(requirement: requirementSignature, passed: true,
                           detail: "\(main.chainLength) certificate(s): \(main.signatureSummary)")
            : ATSCheckLine(requirement: requirementSignature, passed: false,
                           detail: main.weakSignatures.joined(separator: "; ")))
        // (f) Chain and host name.
        let name = options.serverName ?? options.host
        let store = options.caFile.map { "CA file \($0)" } ?? "the system CA store"
        lines.append(main.verifyError == nil
            ? ATSCheckLine(requirement: requirementChain, passed: true, detail: "verified for \(name) against \(store)")
            : ATSCheckLine(requirement: requirementChain, passed: false,
                           detail: "\(main.verifyError ?? "") (host \(name), \(store))"))
        // (g) ALPN h2.
        let alpn = main.alpn
        lines.append(ATSCheckLine(requirement: requirementALPN, passed: alpn == "h2",
                                  detail: alpn == "h2" ? "h2 selected" : "offered h2,http/1.1; server selected \(alpn ?? "none")"))
        return lines
    }

    struct Suite { var name: String; var forwardSecret: Bool }

    /// TLS 1.2-capable suites compiled into OpenSSL, without PSK/SRP (they need credentials to probe).
    static func tls12Suites() -> [Suite] {
        ERR_clear_error()
        defer { ERR_clear_error() }
        let options = TLSClientOptions(trust: .none, alpnProtocols: [], minimumVersion: .tls10, verifyPeer: false,
                                       securityLevel: 0, cipherList: "ALL:COMPLEMENTOFALL:@SECLEVEL=0")
        guard let context = try? TLSClientContext(options: options) else { return [] }
        // The cipher stack belongs to the context: keep it alive until the last suite is read.
        return withExtendedLifetime(context) {
            guard let stack = SSL_CTX_get_ciphers(context.ctx) else { return [] }
            let skip: Set<Int32> = [NID_kx_any, NID_kx_psk, NID_kx_ecdhe_psk, NID_kx_dhe_psk, NID_kx_rsa_psk, NID_kx_srp]
            var out: [Suite] = []
            for i in 0..<COpenSSL_sk_SSL_CIPHER_num(stack) {
                guard let c = COpenSSL_sk_SSL_CIPHER_value(stack, i), let n = SSL_CIPHER_get_name(c) else { continue }
                let kx = SSL_CIPHER_get_kx_nid(c)
                if skip.contains(kx) || SSL_CIPHER_get_auth_nid(c) == NID_auth_srp { continue }
                out.append(Suite(name: String(cString: n), forwardSecret: kx == NID_kx_ecdhe || kx == NID_kx_dhe))
            }
            return out
        }
    }

    enum Connected { case success(Int32), failure(String) }

    /// A blocking TCP connection with `timeout` for the connect and for every later read and write.
    static func connect(_ address: SocketAddress, timeout: Double) -> Connected {
        let fd: Int32
        let done: Bool
        do { (fd, done) = try Socket.connect(address) } catch { return .failure(strerror(of: error)) }
        if !done {
            var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            let ms = Int32(max(1, min(timeout * 1000, 600_000)))
            var rc: Int32
            repeat { rc = poll(&p, 1, ms) } while rc < 0 && errno == EINTR
            if rc == 0 { Glibc.close(fd); return .failure("timed out after \(formatSeconds(timeout))") }
            let e = Socket.pendingError(fd)
            if rc < 0 || e != 0 {
                Glibc.close(fd)
                return .failure(String(cString: Glibc.strerror(e != 0 ? e : errno)))
            }
        }
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK)
        var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1_000_000))
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        return .success(fd)
    }

    static func strerror(of error: Error) -> String {
        if let e = error as? SocketError { return String(cString: Glibc.strerror(e.errno)) }
        return "\(error)"
    }

    static func formatSeconds(_ s: Double) -> String {
        s == s.rounded() ? "\(Int(s))s" : "\(s)s"
    }
}

/// The outcome of one probe handshake.
struct ProbeResult {
    var ok = false
    var error = ""
    var version = ""
    var cipher = ""
    var alpn: String?
    var keyOK = false
    var keyDetail = ""
    var chainLength = 0
    var weakSignatures: [String] = []
    var signatureSummary = ""
    var verifyError: String?
}

/// Makes one handshake per call against a fixed address.
struct Prober {
    let address: SocketAddress
    let options: ATSCheckOptions

    /// - Parameters:
    ///   - cipherList: TLS ≤ 1.2 cipher list (default OpenSSL's).
    ///   - collect: record the certificate, chain verification and ALPN.
    func handshake(min: TLSClientOptions.ProtocolVersion, max: TLSClientOptions.ProtocolVersion,
                   cipherList: String? = nil, collect: Bool = false) -> ProbeResult {
        var result = ProbeResult()
        ERR_clear_error()
        defer { ERR_clear_error() }
        // Level 0 everywhere and no verification: the probe must see what the server does, and judges key,
        // digest and the verify result itself. Trust anchors only when the chain is judged.
        var tls = TLSClientOptions(trust: .none, alpnProtocols: ["h2", "http/1.1"], minimumVersion: min,
                                   maximumVersion: max, verifyPeer: false, securityLevel: 0, cipherList: cipherList)
        if collect { tls.trust = options.caFile.map { .caFile($0) } ?? .systemStore }
        let context: TLSClientContext
        do {
            context = try TLSClientContext(options: tls)
        } catch {
            // An unreadable CA file fails the chain requirement, not the handshake: probe without anchors.
            guard collect, let ca = options.caFile else { result.error = error.message; return result }
            tls.trust = .none
            do { context = try TLSClientContext(options: tls) } catch { result.error = error.message; return result }
            result.verifyError = "cannot load CA file \(ca)"
        }
        let ssl: OpaquePointer
        do { ssl = try context.makeSSL(serverName: options.serverName ?? options.host) } catch {
            result.error = error.message
            return result
        }
        defer { SSL_free(ssl) }
        let fd: Int32
        switch ATSChecker.connect(address, timeout: options.timeout) {
        case .success(let f): fd = f
        case .failure(let message): result.error = "connect: \(message)"; return result
        }
        defer { Glibc.close(fd) }
        _ = SSL_set_fd(ssl, fd)
        ERR_clear_error()
        errno = 0
        let rc = SSL_connect(ssl)
        if rc != 1 {
            let err = SSL_get_error(ssl, rc)
            let e = errno
            var reasons: [String] = []
            while true {
                let code = ERR_get_error()
                if code == 0 { break }
                if let r = ERR_reason_error_string(code) { reasons.append(String(cString: r)) }
            }
            if reasons.isEmpty {
                reasons.append(err == SSL_ERROR_SYSCALL
                    ? (e == EAGAIN || e == EWOULDBLOCK ? "timed out" : e == 0 ? "connection closed by the server"
                       : String(cString: Glibc.strerror(e)))
                    : "handshake failed (SSL error \(err))")
            }
            result.error = reasons.joined(separator: "; ")
            return result
        }
        result.ok = true
        result.version = String(cString: SSL_get_version(ssl))
        if let c = SSL_get_current_cipher(ssl), let n = SSL_CIPHER_get_name(c) { result.cipher = String(cString: n) }
        if collect { collectDetails(ssl, into: &result) }
        _ = SSL_shutdown(ssl)
        return result
    }

    private func collectDetails(_ ssl: OpaquePointer, into result: inout ProbeResult) {
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        if let data, length > 0 {
            result.alpn = String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
        }
        if let leaf = SSL_get0_peer_certificate(ssl), let key = X509_get0_pubkey(leaf) {
            let bits = Int(EVP_PKEY_get_bits(key))
            let type = EVP_PKEY_get_base_id(key)
            if type == EVP_PKEY_RSA || type == EVP_PKEY_RSA_PSS {
                result.keyOK = bits >= 2048
                result.keyDetail = "RSA \(bits) bits" + (result.keyOK ? "" : " (ATS requires at least 2048)")
            } else if type == EVP_PKEY_EC {
                result.keyOK = bits >= 256
                result.keyDetail = "EC \(bits) bits" + (result.keyOK ? "" : " (ATS requires at least 256)")
            } else {
                let n = OBJ_nid2sn(type).map { String(cString: $0) } ?? "unknown"
                result.keyDetail = "\(n) key; ATS accepts RSA (≥ 2048 bits) or EC (≥ 256 bits)"
            }
        } else {
            result.keyDetail = "the server sent no certificate"
        }
        if let chain = SSL_get_peer_cert_chain(ssl) {
            let n = Int(COpenSSL_sk_X509_num(chain))
            result.chainLength = n
            var hashes: [String] = []
            for i in 0..<n {
                guard let cert = COpenSSL_sk_X509_value(chain, Int32(i)) else { continue }
                let selfSigned = X509_get_extension_flags(cert) & UInt32(EXFLAG_SS) != 0
                if selfSigned && i > 0 { continue }  // a root's own signature is never checked
                var mdnid: Int32 = 0, pknid: Int32 = 0, secbits: Int32 = 0
                var flags: UInt32 = 0
                if X509_get_signature_info(cert, &mdnid, &pknid, &secbits, &flags) == 1 {
                    hashes.append(mdnid == NID_undef ? (OBJ_nid2sn(pknid).map { String(cString: $0) } ?? "?")
                                  : (OBJ_nid2sn(mdnid).map { String(cString: $0).uppercased() } ?? "?"))
                }
                if let weak = CertificateAudit.weakSignatureHash(cert) {
                    result.weakSignatures.append("\(CertificateAudit.describe(cert, index: i)) is signed with \(weak)")
                }
            }
            result.signatureSummary = hashes.joined(separator: ", ")
        }
        let verify = SSL_get_verify_result(ssl)
        if verify != Int(X509_V_OK), result.verifyError == nil {
            result.verifyError = String(cString: X509_verify_cert_error_string(verify))
        }
    }
}
