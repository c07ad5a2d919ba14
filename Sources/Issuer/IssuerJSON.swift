import AppCheck

/// The JSON bodies of the exchange methods (docs/issuer.md): an object whose fields may be written in snake_case or
/// lowerCamelCase (proto-JSON), byte fields in standard base64 with padding or base64url (with or without
/// padding), `limited_use` a boolean. Unknown fields are ignored (as proto-JSON readers do for forward
/// compatibility); the same field written twice under its two spellings is refused as ambiguous.
public struct IssuerJSON: Sendable {
    /// The largest body an exchange accepts (docs/issuer.md); larger is 413.
    public static let maxBodyBytes = 64 * 1024

    private let members: [(key: String, value: JSONValue)]

    /// Parses `body`; an empty body is an empty object (Apple's client sends none for a challenge).
    public init(body: [UInt8]) throws(IssuerError) {
        if body.isEmpty {
            members = []
            return
        }
        guard body.count <= Self.maxBodyBytes else { throw .bodyTooLarge }
        let value: JSONValue
        do { value = try StrictJSON.parse(body, maxDepth: 8, maxBytes: Self.maxBodyBytes) } catch {
            throw .invalidArgument("body_not_json", "Invalid JSON payload: \(error).")
        }
        guard let object = value.objectMembers else {
            throw .invalidArgument("body_not_object", "Invalid JSON payload: expected an object.")
        }
        members = object
    }

    /// The value written under `snake` or its lowerCamelCase twin (or `aliases`); nil when absent or null.
    func field(_ snake: String, aliases: [String] = []) throws(IssuerError) -> JSONValue? {
        let names = [snake, Self.camelCase(snake)] + aliases
        var found: JSONValue?
        for member in members where names.contains(member.key) {
            if found != nil {
                throw .invalidArgument("field_twice", "Field \(snake) is given more than once.")
            }
            found = member.value
        }
        if case .null? = found { return nil }
        return found
    }

    /// A required non-empty string field.
    public func string(_ snake: String, aliases: [String] = []) throws(IssuerError) -> String {
        guard let value = try field(snake, aliases: aliases) else {
            throw .invalidArgument("missing_\(snake)", "Field \(snake) is required.")
        }
        guard let text = value.stringValue, !text.isEmpty else {
            throw .invalidArgument("invalid_\(snake)", "Field \(snake) must be a non-empty string.")
        }
        return text
    }

    /// A required byte field: standard base64 (padding optional) or base64url; at most `maxBytes` decoded.
    public func bytes(_ snake: String, aliases: [String] = [], maxBytes: Int = maxBodyBytes) throws(IssuerError) -> [UInt8] {
        let text = try string(snake, aliases: aliases)
        guard let decoded = Self.decodeBase64(text), !decoded.isEmpty, decoded.count <= maxBytes else {
            throw .invalidArgument("invalid_base64_\(snake)", "Field \(snake) must be base64.")
        }
        return decoded
    }

    /// `limited_use`: absent or null is false; anything but a boolean is 400.
    public func limitedUse() throws(IssuerError) -> Bool {
        guard let value = try field("limited_use") else { return false }
        guard case let .bool(flag) = value else {
            throw .invalidArgument("invalid_limited_use", "Field limited_use must be a boolean.")
        }
        return flag
    }

    /// `key_id` → `keyId`.
    static func camelCase(_ snake: String) -> String {
        var out = ""
        var upper = false
        for ch in snake {
            if ch == "_" { upper = true; continue }
            out.append(upper ? Character(ch.uppercased()) : ch)
            upper = false
        }
        return out
    }

    /// Standard base64 or base64url, padding optional but correct when present, canonical (unused trailing
    /// bits zero), one alphabet per value. nil on any deviation.
    public static func decodeBase64(_ text: String) -> [UInt8]? {
        var body = Array(text.utf8)
        var padding = 0
        while body.last == UInt8(ascii: "=") {
            body.removeLast()
            padding += 1
        }
        if padding > 0 && (body.count + padding) % 4 != 0 { return nil }
        if padding > 2 { return nil }
        let standard = body.contains { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "/") }
        let url = body.contains { $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") }
        if standard && url { return nil }
        if standard {
            for i in body.indices {
                if body[i] == UInt8(ascii: "+") { body[i] = UInt8(ascii: "-") } else if body[i] == UInt8(ascii: "/") { body[i] = UInt8(ascii: "_") }
            }
        }
        return Base64URL.decode(body)
    }

    /// Standard base64 with padding, as Google's APIs write bytes.
    public static func encodeBase64(_ bytes: [UInt8]) -> String {
        var text = Array(Base64URL.encode(bytes).utf8)
        for i in text.indices {
            if text[i] == UInt8(ascii: "-") { text[i] = UInt8(ascii: "+") } else if text[i] == UInt8(ascii: "_") { text[i] = UInt8(ascii: "/") }
        }
        while text.count % 4 != 0 { text.append(UInt8(ascii: "=")) }
        return String(decoding: text, as: UTF8.self)
    }

    /// A protobuf Duration string: whole seconds as `"3600s"`.
    public static func duration(_ seconds: Int) -> String { "\(seconds)s" }
}
