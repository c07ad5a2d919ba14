/// A complete response to one `BlockingHTTPClient.get`.
struct FetchedResponse: Sendable {
    /// The final status (always 200: other statuses are `FetchError.status`; 200 for `file://`).
    var status: Int
    /// The response's header fields (empty for `file://`).
    var headers: ResponseHeaders
    /// The whole decoded body.
    var body: [UInt8]
}

/// Response header fields in arrival order, looked up by name without regard to ASCII case (RFC 9110 §5.1).
struct ResponseHeaders: Sendable {
    /// `(name, value)` pairs as received.
    var fields: [(name: String, value: String)] = []

    /// The first value of `name`, or `nil`.
    subscript(_ name: String) -> String? { values(name).first }

    /// Every value of `name`, in order.
    func values(_ name: String) -> [String] {
        fields.filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
    }
}
