/// An HTTP/2 error code (RFC 9113 §7), as carried by RST_STREAM and GOAWAY.
public struct H2ErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The 32-bit code on the wire.
    public var rawValue: UInt32

    /// Wraps a wire code (unknown codes are kept as they are, RFC 9113 §7).
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// `NO_ERROR` (0x0): graceful shutdown, or "stop sending the request body" after a complete response.
    public static let noError = H2ErrorCode(rawValue: 0x0)
    /// `PROTOCOL_ERROR` (0x1): malformed frame or request (RFC 9113 §8.1.1).
    public static let protocolError = H2ErrorCode(rawValue: 0x1)
    /// `INTERNAL_ERROR` (0x2).
    public static let internalError = H2ErrorCode(rawValue: 0x2)
    /// `FLOW_CONTROL_ERROR` (0x3).
    public static let flowControlError = H2ErrorCode(rawValue: 0x3)
    /// `SETTINGS_TIMEOUT` (0x4).
    public static let settingsTimeout = H2ErrorCode(rawValue: 0x4)
    /// `STREAM_CLOSED` (0x5).
    public static let streamClosed = H2ErrorCode(rawValue: 0x5)
    /// `FRAME_SIZE_ERROR` (0x6).
    public static let frameSizeError = H2ErrorCode(rawValue: 0x6)
    /// `REFUSED_STREAM` (0x7): not processed; the client may retry.
    public static let refusedStream = H2ErrorCode(rawValue: 0x7)
    /// `CANCEL` (0x8).
    public static let cancel = H2ErrorCode(rawValue: 0x8)
    /// `COMPRESSION_ERROR` (0x9).
    public static let compressionError = H2ErrorCode(rawValue: 0x9)
    /// `CONNECT_ERROR` (0xa).
    public static let connectError = H2ErrorCode(rawValue: 0xa)
    /// `ENHANCE_YOUR_CALM` (0xb): the peer is abusive (floods, too many glitches).
    public static let enhanceYourCalm = H2ErrorCode(rawValue: 0xb)
    /// `INADEQUATE_SECURITY` (0xc).
    public static let inadequateSecurity = H2ErrorCode(rawValue: 0xc)
    /// `HTTP_1_1_REQUIRED` (0xd).
    public static let http11Required = H2ErrorCode(rawValue: 0xd)

    /// The RFC name in snake_case (`"protocol_error"`), or `"error_0x…"` for unknown codes. Safe to log.
    public var description: String {
        switch rawValue {
        case 0x0: "no_error"
        case 0x1: "protocol_error"
        case 0x2: "internal_error"
        case 0x3: "flow_control_error"
        case 0x4: "settings_timeout"
        case 0x5: "stream_closed"
        case 0x6: "frame_size_error"
        case 0x7: "refused_stream"
        case 0x8: "cancel"
        case 0x9: "compression_error"
        case 0xa: "connect_error"
        case 0xb: "enhance_your_calm"
        case 0xc: "inadequate_security"
        case 0xd: "http_1_1_required"
        default: "error_0x" + String(rawValue, radix: 16)
        }
    }
}

/// What `H2ServerSession.receive(_:)` tells the connection.
public enum H2Status: Hashable, Sendable {
    /// Keep going: flush `send(...)`, then close the connection if `isFinished`.
    case ok
    /// The session is broken or was terminated for abuse. A GOAWAY has been queued: flush `send(...)`
    /// (best effort, bounded by a short timeout), then close the connection. `reason` is a short
    /// snake_case identifier safe to log (`"settings_flood"`, `"nghttp2_bad_client_magic"`, …).
    case closeConnection(reason: String)
}

/// Whether the first bytes of a plain-text connection are the HTTP/2 client connection preface
/// (RFC 9113 §3.4), for h2c with prior knowledge.
public enum H2PrefaceMatch: Hashable, Sendable {
    /// All 24 preface bytes are present.
    case match
    /// The bytes so far are a proper prefix of the preface: read more before deciding.
    case needMoreBytes
    /// Not HTTP/2: parse as HTTP/1.x.
    case mismatch
}
