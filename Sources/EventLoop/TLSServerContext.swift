import COpenSSL
import Glibc

/// The listener side of TLS: one `SSL_CTX` configured for Apple App Transport Security (docs/behaviour.md, TLS).
///
/// - TLS 1.2 (or 1.3 with `minimumVersion: .tls13`) up to TLS 1.3.
/// - TLS 1.2 suites: forward-secret ECDHE with AEAD only, AES-128-GCM first (`tls12CipherList`), server order.
///   TLS 1.3 suites: OpenSSL's defaults (all AEAD, all forward-secret).
/// - No compression, no renegotiation; key exchange groups X25519, P-256, P-384.
/// - ALPN: the server picks the first of `alpnProtocols` (default `h2`, `http/1.1`) that the client offers;
///   a client offering none of them gets no ALPN extension and is treated as HTTP/1.1 by the caller.
/// - Resumption: a server-side session cache (TLS 1.2 session IDs) and stateless tickets (TLS 1.2 tickets
///   and two TLS 1.3 tickets per full handshake), keyed by this context. A new context (reload) has new
///   ticket keys, so sessions from before a reload fall back to a full handshake.
///
/// Immutable after `init`; `SSL_CTX` is safe to share between threads for `SSL_new`, so one context serves
/// every event loop. Reload: build a new context from the files and swap the reference used for *new*
/// connections; each `TLSStream` keeps its own context alive until it is gone.
public final class TLSServerContext: @unchecked Sendable {
    /// The TLS 1.2 cipher list: ECDHE (forward secrecy) + AEAD only, AES-128-GCM first.
    public static let tls12CipherList =
        "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
        + "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"
    /// Key exchange groups, in preference order.
    public static let groups = "X25519:P-256:P-384"
    /// ALPN protocols offered by default, in server preference order.
    public static let defaultALPN = ["h2", "http/1.1"]
    /// Seconds a resumable session (cache entry or ticket) stays valid.
    public static let sessionTimeout = 3600

    let ctx: OpaquePointer
    /// ALPN list in wire format plus a terminating zero byte; the select callback's argument.
    private let alpnWire: UnsafeMutablePointer<UInt8>
    public let certificatePath: String
    public let privateKeyPath: String
    public let minimumVersion: TLSMinimumVersion
    public let alpnProtocols: [String]

    /// Loads `certificatePath` (PEM: leaf first, then intermediates) and `privateKeyPath` (PEM, unencrypted).
    /// Throws a `TLSError` naming the file when either cannot be loaded or the key does not match.
    public init(certificatePath: String, privateKeyPath: String, minimumVersion: TLSMinimumVersion = .tls12,
                alpnProtocols: [String] = TLSServerContext.defaultALPN) throws(TLSError) {
        TLSErrorQueue.clear()
        let wire = try alpnWireFormat(alpnProtocols)
        guard let ctx = SSL_CTX_new(TLS_server_method()) else { throw TLSError.openSSL("SSL_CTX_new") }
        alpnWire = .allocate(capacity: wire.count + 1)
        alpnWire.initialize(from: wire, count: wire.count)
        alpnWire[wire.count] = 0
        self.ctx = ctx
        self.certificatePath = certificatePath
        self.privateKeyPath = privateKeyPath
        self.minimumVersion = minimumVersion
        self.alpnProtocols = alpnProtocols

        guard COpenSSL_SSL_CTX_set_min_proto_version(ctx, minimumVersion.openSSLValue) == 1,
              COpenSSL_SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) == 1 else {
            throw TLSError.openSSL("cannot set the TLS protocol versions")
        }
        guard SSL_CTX_set_cipher_list(ctx, Self.tls12CipherList) == 1 else {
            throw TLSError.openSSL("cannot set the TLS 1.2 cipher list")
        }
        _ = COpenSSL_SSL_CTX_set_options64(ctx, COpenSSL_SSL_OP_CIPHER_SERVER_PREFERENCE()
                                           | COpenSSL_SSL_OP_NO_COMPRESSION() | COpenSSL_SSL_OP_NO_RENEGOTIATION())
        _ = COpenSSL_SSL_CTX_set_mode(ctx, Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER))
        guard COpenSSL_SSL_CTX_set1_groups_list(ctx, Self.groups) == 1 else {
            throw TLSError.openSSL("cannot set the key exchange groups \(Self.groups)")
        }

        // Resumption: server session cache + tickets (on by default; SSL_OP_NO_TICKET is not set).
        _ = COpenSSL_SSL_CTX_set_session_cache_mode(ctx, Int(SSL_SESS_CACHE_SERVER))
        _ = COpenSSL_SSL_CTX_sess_set_cache_size(ctx, 20_000)
        _ = SSL_CTX_set_timeout(ctx, Int(Self.sessionTimeout))
        _ = SSL_CTX_set_num_tickets(ctx, 2)
        let sidContext: [UInt8] = Array("appcheck-gateway".utf8)
        _ = SSL_CTX_set_session_id_context(ctx, sidContext, UInt32(sidContext.count))

        if !alpnProtocols.isEmpty {
            SSL_CTX_set_alpn_select_cb(ctx, tlsALPNSelect, UnsafeMutableRawPointer(alpnWire))
        }

        // An encrypted key is an error, never a prompt on the terminal.
        SSL_CTX_set_default_passwd_cb(ctx, COpenSSL_no_passphrase())
        guard SSL_CTX_use_certificate_chain_file(ctx, certificatePath) == 1 else {
            throw TLSError.openSSL("cannot load the certificate chain \(certificatePath)")
        }
        guard SSL_CTX_use_PrivateKey_file(ctx, privateKeyPath, SSL_FILETYPE_PEM) == 1 else {
            let reason = ERR_GET_REASON(ERR_peek_last_error())
            if reason == X509_R_KEY_VALUES_MISMATCH || reason == X509_R_KEY_TYPE_MISMATCH {
                TLSErrorQueue.clear()
                throw TLSError("the private key \(privateKeyPath) does not match the certificate \(certificatePath)")
            }
            throw TLSError.openSSL("cannot load the private key \(privateKeyPath)")
        }
        guard SSL_CTX_check_private_key(ctx) == 1 else {
            TLSErrorQueue.clear()
            throw TLSError("the private key \(privateKeyPath) does not match the certificate \(certificatePath)")
        }
        TLSErrorQueue.clear()
    }

    deinit {
        SSL_CTX_free(ctx)
        alpnWire.deallocate()
    }

    /// A server-side stream over the connected non-blocking socket `fd` (the caller keeps owning `fd`).
    public func makeStream(fd: Int32) throws(TLSError) -> TLSStream {
        TLSErrorQueue.clear()
        guard let ssl = SSL_new(ctx) else { throw TLSError.openSSL("SSL_new") }
        guard SSL_set_fd(ssl, fd) == 1 else { SSL_free(ssl); throw TLSError.openSSL("SSL_set_fd") }
        SSL_set_accept_state(ssl)
        return TLSStream(ssl: ssl, fd: fd, isServer: true, owner: self)
    }
}

/// Server-preference ALPN selection: the first protocol of ours (`arg`, wire format ending in a zero byte)
/// that the client listed. No match → `NOACK` (no ALPN in the handshake; the caller treats it as HTTP/1.1).
private let tlsALPNSelect: @convention(c) (
    OpaquePointer?, UnsafeMutablePointer<UnsafePointer<UInt8>?>?, UnsafeMutablePointer<UInt8>?,
    UnsafePointer<UInt8>?, UInt32, UnsafeMutableRawPointer?
) -> Int32 = { _, out, outLength, offered, offeredLength, arg in
    guard let out, let outLength, let offered, let arg else { return SSL_TLSEXT_ERR_NOACK }
    let ours = arg.assumingMemoryBound(to: UInt8.self)
    let total = Int(offeredLength)
    var i = 0
    while ours[i] != 0 {
        let length = Int(ours[i])
        var j = 0
        while j < total {
            let theirs = Int(offered[j])
            if j + 1 + theirs > total { break }
            if theirs == length && memcmp(offered + j + 1, ours + i + 1, length) == 0 {
                out.pointee = offered + j + 1
                outLength.pointee = UInt8(theirs)
                return SSL_TLSEXT_ERR_OK
            }
            j += 1 + theirs
        }
        i += 1 + length
    }
    return SSL_TLSEXT_ERR_NOACK
}
