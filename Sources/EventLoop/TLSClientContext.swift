import COpenSSL
import Glibc

/// The client side of TLS, for `https://` upstreams and the key-set fetcher: TLS 1.2 minimum, the peer's
/// chain verified against the system CA store (or `caFile`), and per connection SNI plus a host-name (or
/// IP address) check. ALPN offers `http/1.1` by default.
///
/// Immutable after `init` and shareable between threads (like `TLSServerContext`).
public final class TLSClientContext: @unchecked Sendable {
    let ctx: OpaquePointer
    public let caFile: String?
    public let alpnProtocols: [String]

    /// - Parameters:
    ///   - caFile: PEM file of trusted CAs; `nil` = the system store (`SSL_CTX_set_default_verify_paths`).
    ///   - alpnProtocols: offered in this order; empty = no ALPN extension.
    public init(caFile: String? = nil, alpnProtocols: [String] = ["http/1.1"],
                minimumVersion: TLSMinimumVersion = .tls12) throws(TLSError) {
        TLSErrorQueue.clear()
        let wire = try alpnWireFormat(alpnProtocols)
        guard let ctx = SSL_CTX_new(TLS_client_method()) else { throw TLSError.openSSL("SSL_CTX_new") }
        self.ctx = ctx
        self.caFile = caFile
        self.alpnProtocols = alpnProtocols
        guard COpenSSL_SSL_CTX_set_min_proto_version(ctx, minimumVersion.openSSLValue) == 1,
              COpenSSL_SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) == 1 else {
            throw TLSError.openSSL("cannot set the TLS protocol versions")
        }
        _ = COpenSSL_SSL_CTX_set_options64(ctx, COpenSSL_SSL_OP_NO_COMPRESSION() | COpenSSL_SSL_OP_NO_RENEGOTIATION())
        _ = COpenSSL_SSL_CTX_set_mode(ctx, Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER))
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
        if let caFile {
            guard SSL_CTX_load_verify_locations(ctx, caFile, nil) == 1 else {
                throw TLSError.openSSL("cannot load the CA file \(caFile)")
            }
        } else {
            guard SSL_CTX_set_default_verify_paths(ctx) == 1 else {
                throw TLSError.openSSL("cannot load the system CA store")
            }
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
        guard SSL_set_fd(ssl, fd) == 1 else { SSL_free(ssl); throw TLSError.openSSL("SSL_set_fd") }
        SSL_set_connect_state(ssl)
        return TLSStream(ssl: ssl, fd: fd, isServer: false, owner: self)
    }
}
