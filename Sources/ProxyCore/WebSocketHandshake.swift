import HTTPWire

/// The WebSocket opening handshake as the gateway sees it (RFC 6455 §4, SPEC §6.1), read only on routes with
/// `websocket: true` (the plain path never looks at these fields).
///
/// A request is a handshake when it is an HTTP/1.1 `GET` without a body whose `Connection` lists `upgrade` (a list,
/// any case), whose `Upgrade` lists `websocket` (any case), with a `Sec-WebSocket-Key` and `Sec-WebSocket-Version: 13`.
/// Anything else on such a route is an ordinary request (`Upgrade` removed as a hop-by-hop field). No other upgrade
/// (`h2c`, …) is ever tunnelled.
///
/// Browsers cannot set headers on a WebSocket, so they may carry the App Check token as a `Sec-WebSocket-Protocol`
/// entry `x-firebase-appcheck.<token>` (prefix matched in any case). `withSubprotocolTokenMoved` removes every such
/// entry and, when the request has no `X-Firebase-AppCheck` field, moves the first one's token into that field, so
/// the App Check step reads it exactly as it reads the header (no protocol-specific branch in the checks) and the
/// upstream never sees the entry (the token field is removed before forwarding unless `forward_token`).
public enum WebSocketHandshake {
    /// The subprotocol entry prefix, lower-case.
    public static let tokenPrefix = "x-firebase-appcheck."

    /// True when `head` is a WebSocket opening handshake (see the type's documentation).
    public static func isHandshake(_ head: HTTPRequestHead) -> Bool {
        guard head.method == "GET", head.versionMinor == 1, case .none = head.framing,
              head.connectionTokens.contains("upgrade") else { return false }
        let h = head.headers
        guard let upgrade = h.firstIndex(forLowercased: "upgrade"), listContains(h, upgrade, "websocket"),
              h.contains(lowercased: "sec-websocket-key"),
              let version = h.firstValue(forLowercased: "sec-websocket-version"),
              version.trimmingOWS == "13" else { return false }
        return true
    }

    /// True when the upstream's `101` switches to WebSocket (its `Upgrade` lists `websocket`, any case).
    public static func upgradesToWebSocket(_ head: HTTPResponseHead) -> Bool {
        guard head.status == 101, let upgrade = head.headers.firstIndex(forLowercased: "upgrade") else { return false }
        return listContains(head.headers, upgrade, "websocket")
    }

    private static func listContains(_ headers: HTTPHeaders, _ index: Int, _ lowercased: String) -> Bool {
        var found = false
        headers.forEachListElement(at: index) { element in
            if element.count == lowercased.utf8.count && HTTPSyntax.equalsLowercased(element, string: lowercased) {
                found = true
                return false
            }
            return true
        }
        return found
    }

    /// What `withSubprotocolTokenMoved` made of a handshake.
    public enum Rewrite {
        /// No `x-firebase-appcheck.` entry: the head is used as it is.
        case unchanged
        /// The entries are gone; the token, if one was taken, is in `X-Firebase-AppCheck`.
        case rewritten(HTTPRequestHead)
        /// The rewritten head does not parse within the limits (the field added made it too large): 431.
        case tooLarge
    }

    /// Removes every `x-firebase-appcheck.<token>` entry of `Sec-WebSocket-Protocol` (a field left empty is dropped)
    /// and, when there is no `X-Firebase-AppCheck` field, adds one with the first entry's token. The head is written
    /// again and parsed with the same limits, so what the exchange holds is an ordinary parsed head.
    public static func withSubprotocolTokenMoved(_ head: HTTPRequestHead, limits: HTTPParserLimits) -> Rewrite {
        let h = head.headers
        let protocols = h.indices(forLowercased: "sec-websocket-protocol")
        if protocols.isEmpty { return .unchanged }
        var token: [UInt8]?
        var kept: [Int: [UInt8]] = [:]
        var sawEntry = false
        for index in protocols {
            var remaining: [UInt8] = []
            h.forEachListElement(at: index) { element in
                if element.count > tokenPrefix.utf8.count,
                   HTTPSyntax.equalsLowercased(UnsafeRawBufferPointer(rebasing: element[0..<tokenPrefix.utf8.count]),
                                               string: tokenPrefix) {
                    sawEntry = true
                    if token == nil { token = Array(element[tokenPrefix.utf8.count...]) }
                } else {
                    if !remaining.isEmpty { remaining += Array(", ".utf8) }
                    remaining += element
                }
                return true
            }
            kept[index] = remaining
        }
        guard sawEntry else { return .unchanged }
        let hasHeader = h.firstIndex(ofLiteral: "x-firebase-appcheck") != nil
        var bytes = Array("\(head.method) \(head.target) HTTP/1.1\r\n".utf8)
        for index in h.fields.indices {
            if let value = kept[index] {
                if value.isEmpty { continue }
                h.withNameBytes(at: index) { bytes += $0 }
                bytes += Array(": ".utf8)
                bytes += value
            } else {
                h.withNameBytes(at: index) { bytes += $0 }
                bytes += Array(": ".utf8)
                h.withValueBytes(at: index) { bytes += $0 }
            }
            bytes += [13, 10]
        }
        if !hasHeader, let token {
            bytes += Array("X-Firebase-AppCheck: ".utf8)
            bytes += token
            bytes += [13, 10]
        }
        bytes += [13, 10]
        var parser = HTTPRequestHeadParser(limits: limits)
        let result = bytes.withUnsafeBytes { parser.parse($0) }
        guard case .complete(let rewritten, _) = result else { return .tooLarge }
        return .rewritten(rewritten)
    }

    /// The fields the forwarded handshake carries again after the hop-by-hop ones were removed.
    public static let forwardedUpgradeFields: StaticString = "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
}

extension String {
    /// Without leading and trailing spaces and tabs (HTTP's OWS).
    fileprivate var trimmingOWS: Substring {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return s
    }
}
