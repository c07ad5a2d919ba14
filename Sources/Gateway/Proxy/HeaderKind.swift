import HTTPWire

/// What the proxy does with a request header, decided from its name without allocating.
enum HeaderKind {
    case pass
    /// RFC 9110 §7.6.1 hop-by-hop (and `proxy-connection`): never forwarded.
    case hopByHop
    /// `X-AppCheck-*`: ours alone; a client-sent one is dropped.
    case appCheckInternal
    case token
    /// `DPoP` (RFC 9449): the proof that goes with the token, forwarded only with it (`forward_token`).
    case dpop
    case forwardedFor, forwardedProto, forwardedHost
    case requestId
    case contentLength
    case expect
    case host

    static func classify(_ name: UnsafeRawBufferPointer) -> HeaderKind {
        switch name.count {
        case 2: if HTTPSyntax.equalsLowercased(name, "te") { return .hopByHop }
        case 4:
            if HTTPSyntax.equalsLowercased(name, "host") { return .host }
            if HTTPSyntax.equalsLowercased(name, "dpop") { return .dpop }
        case 6: if HTTPSyntax.equalsLowercased(name, "expect") { return .expect }
        case 7:
            if HTTPSyntax.equalsLowercased(name, "upgrade") || HTTPSyntax.equalsLowercased(name, "trailer") { return .hopByHop }
        case 10:
            if HTTPSyntax.equalsLowercased(name, "connection") || HTTPSyntax.equalsLowercased(name, "keep-alive") { return .hopByHop }
        case 12: if HTTPSyntax.equalsLowercased(name, "x-request-id") { return .requestId }
        case 14: if HTTPSyntax.equalsLowercased(name, "content-length") { return .contentLength }
        case 15: if HTTPSyntax.equalsLowercased(name, "x-forwarded-for") { return .forwardedFor }
        case 16:
            if HTTPSyntax.equalsLowercased(name, "x-forwarded-host") { return .forwardedHost }
            if HTTPSyntax.equalsLowercased(name, "proxy-connection") { return .hopByHop }
        case 17:
            if HTTPSyntax.equalsLowercased(name, "x-forwarded-proto") { return .forwardedProto }
            if HTTPSyntax.equalsLowercased(name, "transfer-encoding") { return .hopByHop }
        case 18: if HTTPSyntax.equalsLowercased(name, "proxy-authenticate") { return .hopByHop }
        case 19:
            if HTTPSyntax.equalsLowercased(name, "x-firebase-appcheck") { return .token }
            if HTTPSyntax.equalsLowercased(name, "proxy-authorization") { return .hopByHop }
        default: break
        }
        if name.count >= 11, HTTPSyntax.equalsLowercased(UnsafeRawBufferPointer(rebasing: name[0..<11]), "x-appcheck-") {
            return .appCheckInternal
        }
        return .pass
    }

    /// True when `name` is one of the tokens listed in the message's `Connection` headers.
    static func isListed(_ name: UnsafeRawBufferPointer, in tokens: [String]) -> Bool {
        for t in tokens where t.utf8.count == name.count && HTTPSyntax.equalsLowercased(name, string: t) { return true }
        return false
    }
}
