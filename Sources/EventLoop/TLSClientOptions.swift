import COpenSSL

/// How `TLSClientContext` sets up an OpenSSL client context: the one place the package builds one.
///
/// The defaults are what the gateway's own connections need (upstreams, the key-set fetcher): TLS 1.2 to
/// 1.3, the peer's chain verified against the system store, ALPN `http/1.1`, OpenSSL's default security level
/// and cipher list. The ATS audit (`GatewayTools`) deliberately loosens them to see what a server accepts:
/// no peer verification (it reads the verify result itself), security level 0, single-suite cipher lists and
/// TLS 1.0/1.1 probes. Nothing else should change the loosening knobs.
package struct TLSClientOptions: Sendable {
    /// Where trusted CA certificates come from.
    package enum Trust: Sendable, Equatable {
        /// OpenSSL's default verify paths (`SSL_CTX_set_default_verify_paths`).
        case systemStore
        /// One PEM file of CA certificates (a private CA).
        case caFile(String)
        /// No anchors at all: only for a context that never verifies (`verifyPeer == false`) and does not
        /// read the verify result.
        case none
    }

    /// A TLS protocol version, as a handshake bound.
    package enum ProtocolVersion: Sendable, Comparable {
        case tls10, tls11, tls12, tls13

        var openSSLValue: Int32 {
            switch self {
            case .tls10: TLS1_VERSION
            case .tls11: TLS1_1_VERSION
            case .tls12: TLS1_2_VERSION
            case .tls13: TLS1_3_VERSION
            }
        }
    }

    /// Default `.systemStore`.
    package var trust: Trust
    /// Offered in this order; empty = no ALPN extension. Default `["http/1.1"]`.
    package var alpnProtocols: [String]
    /// Default TLS 1.2 (App Transport Security's floor).
    package var minimumVersion: ProtocolVersion
    /// Default TLS 1.3.
    package var maximumVersion: ProtocolVersion
    /// Fail the handshake on an unverified chain or name (`SSL_VERIFY_PEER`). Default true.
    package var verifyPeer: Bool
    /// OpenSSL security level; nil = OpenSSL's default (level 1 or 2 per build). Only the ATS audit sets 0.
    package var securityLevel: Int32?
    /// TLS ≤ 1.2 cipher list in OpenSSL syntax; nil = OpenSSL's default.
    package var cipherList: String?

    package init(trust: Trust = .systemStore, alpnProtocols: [String] = ["http/1.1"],
                 minimumVersion: ProtocolVersion = .tls12, maximumVersion: ProtocolVersion = .tls13,
                 verifyPeer: Bool = true, securityLevel: Int32? = nil, cipherList: String? = nil) {
        self.trust = trust
        self.alpnProtocols = alpnProtocols
        self.minimumVersion = minimumVersion
        self.maximumVersion = maximumVersion
        self.verifyPeer = verifyPeer
        self.securityLevel = securityLevel
        self.cipherList = cipherList
    }
}

extension TLSMinimumVersion {
    var protocolVersion: TLSClientOptions.ProtocolVersion { self == .tls12 ? .tls12 : .tls13 }
}
