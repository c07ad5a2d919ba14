import COpenSSL
import Glibc

/// The client side of TLS, for `https://` upstreams and the key-set fetcher: TLS 1.2 minimum, the peer's
/// chain verified against the system CA store (or `caFile`), and per connection SNI plus a host-name (or
/// IP address) check. ALPN offers `http/1.1` by default. Every OpenSSL client context of the package is built
/// here, from `TLSClientOptions`.
///
/// Immutable after `init` and shareable between threads (like `TLSServerContext`).
public final class TLSClientContext: @unchecked Sendable {
    /// The `SSL_CTX*`, for callers that inspect it (the ATS audit lists its cipher suites); never modify it.
    package let ctx: OpaquePointer
    public let caFile: String?
    public let alpnProtocols: [String]

    /// - Parameters:
    ///   - caFile: PEM file of trusted CAs; `nil` = the system store (`SSL_CTX_set_default_verify_paths`).
    ///   - alpnProtocols: offered in this order; empty = no ALPN extension.
    public convenience init(caFile: String? = nil, alpnProtocols: [String] = ["http/1.1"],
                            minimumVersion: TLSMinimumVersion = .tls12) throws(TLSError) {
        try self.init(options: TLSClientOptions(trust: caFile.map { .caFile($0) } ?? .systemStore,
                                                alpnProtocols: alpnProtocols,
                                                minimumVersion: minimumVersion.protocolVersion))
    }

    /// A context set up as `options` say. Throws when OpenSSL refuses a setting (an unreadable CA file, a
    /// cipher list matching no suite, a malformed ALPN name).
    package init(options: TLSClientOptions) throws(TLSError) {
        TLSErrorQueue.clear()
        let wire = try alpnWireFormat(options.alpnProtocols)
        guard let ctx = SSL_CTX_new(TLS_client_method()) else { throw TLSError.openSSL("SSL_CTX_new") }
        self.ctx = ctx
        if case .caFile(let path) = options.trust { caFile = path } else { caFile = nil }
        alpnProtocols = options.alpnProtocols
        // The security level first: it decides which versions and suites the later calls may enable.
        if let level = options.securityLevel { SSL_CTX_set_security_level(ctx, level) }
        guard COpenSSL_SSL_CTX_set_min_proto_version(ctx, options.minimumVersion.openSSLValue) == 1,
              COpenSSL_SSL_CTX_set_max_proto_version(ctx, options.maximumVersion.openSSLValue) == 1 else {
            throw TLSError.openSSL("cannot set the TLS protocol versions")
        }
        _ = COpenSSL_SSL_CTX_set_options64(ctx, COpenSSL_SSL_OP_NO_COMPRESSION() | COpenSSL_SSL_OP_NO_RENEGOTIATION())
        _ = COpenSSL_SSL_CTX_set_mode(ctx, Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER))
        if let list = options.cipherList, SSL_CTX_set_cipher_list(ctx, list) != 1 {
            throw TLSError.openSSL("cipher list \(list) unsupported")
        }
        SSL_CTX_set_verify(ctx, options.verifyPeer ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nil)
        switch options.trust {
        case .caFile(let path):
            guard SSL_CTX_load_verify_locations(ctx, path, nil) == 1 else {
                throw TLSError.openSSL("cannot load the CA file \(path)")
            }
        case .systemStore:
            guard SSL_CTX_set_default_verify_paths(ctx) == 1 else {
                throw TLSError.openSSL("cannot load the system CA store")
            }
        case .none:
            break
        }
        if !wire.isEmpty {
            // Note: SSL_CTX_set_alpn_protos returns 0 on success.
            guard SSL_CTX_set_alpn_protos(ctx, wire, UInt32(wire.count)) == 0 else {
                throw TLSError.openSSL("cannot set ALPN protocols")
            }
        }
        TLSErrorQueue.clear()
    }

    deinit { SSL_CTX_free(ctx) }

    /// A client-side stream over the connected (or connecting) non-blocking socket `fd`.
    ///
    /// `serverName` is checked against the certificate: a DNS name (also sent as SNI; wildcards only as a
    /// whole left-most label) or an IPv4/IPv6 literal (checked against IP subjectAltNames; no SNI, as
    /// RFC 6066 forbids literals there).
    public func makeStream(fd: Int32, serverName: String) throws(TLSError) -> TLSStream {
        let ssl = try makeSSL(serverName: serverName)
        guard SSL_set_fd(ssl, fd) == 1 else { SSL_free(ssl); throw TLSError.openSSL("SSL_set_fd") }
        SSL_set_connect_state(ssl)
        return TLSStream(ssl: ssl, fd: fd, isServer: false, owner: self)
    }

    /// A new client `SSL*` expecting `serverName` (see `makeStream`), not yet bound to a socket. For the
    /// blocking clients (key-set fetcher, ATS audit); the caller frees it with `SSL_free` and keeps this
    /// context alive as long as the `SSL*`.
    package func makeSSL(serverName: String) throws(TLSError) -> OpaquePointer {
        TLSErrorQueue.clear()
        guard let ssl = SSL_new(ctx) else { throw TLSError.openSSL("SSL_new") }
        var literal = serverName
        if literal.hasPrefix("[") && literal.hasSuffix("]") { literal = String(literal.dropFirst().dropLast()) }
        if SocketAddress(ip: literal, port: 0) != nil {
            guard X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), literal) == 1 else {
                SSL_free(ssl)
                throw TLSError.openSSL("invalid IP address \(literal)")
            }
        } else {
            SSL_set_hostflags(ssl, UInt32(X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS))
            guard COpenSSL_SSL_set_tlsext_host_name(ssl, serverName) == 1, SSL_set1_host(ssl, serverName) == 1 else {
                SSL_free(ssl)
                throw TLSError.openSSL("invalid server name \(serverName)")
            }
        }
        return ssl
    }
}
