import HTTPWire

/// The request head an `H2UpstreamStream` submitted, kept until the response head arrives for a resubmission after
/// REFUSED_STREAM (RFC 9113 §8.7): the records the exchange wrote for it (`H2RequestFields`, the usual one), or an
/// HTTP/1.1 text translated (`H2ClientRequestHead`, for a head given as text through `UpstreamChannel.sendHead`).
enum SubmittedHead {
    case fields(H2RequestFields)
    case text(H2ClientRequestHead)

    /// No body follows: HEADERS carries END_STREAM.
    var endStream: Bool {
        switch self {
        case .fields(let head): head.endStream
        case .text(let head): head.endStream
        }
    }
}
