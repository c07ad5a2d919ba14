import Glibc

/// Checks 2 and 3 of docs/behaviour.md: splitting and decoding a compact JWS (RFC 7515 §7.1) and judging its header.
///
/// Only the header is interpreted here; the payload is decoded (it must be a JSON object without duplicate
/// keys, as step 2 requires) but its claims are judged only after the signature check.
public enum AppCheckToken {
    /// Largest accepted token, in bytes (docs/behaviour.md check 1: 4 KiB). The gateway enforces it on the header;
    /// `parse` enforces it again so the parser is bounded on its own.
    public static let maxLength = 4096

    /// The only accepted `alg` (RFC 7518 §3.3). Fixed: the token never chooses the algorithm.
    public static let algorithm = "RS256"

    /// The only accepted `typ`.
    public static let type = "JWT"

    /// Header parameters whose mere presence is `malformed`: this verifier never honours them
    /// (RFC 7515 §4.1.2–4.1.6 and §4.1.11: keys or certificates supplied by the token, critical extensions;
    /// RFC 7797 `b64`, an unencoded payload, which Firebase's Admin SDK refuses too).
    public static let forbiddenHeaders = ["crit", "jku", "x5u", "jwk", "x5c", "b64"]

    static let algKey = JSONValue.ShortKey("alg")!
    static let typKey = JSONValue.ShortKey("typ")!
    static let kidKey = JSONValue.ShortKey("kid")!
    static let forbiddenKeys = Set(forbiddenHeaders.map { JSONValue.ShortKey($0)! })

    /// Parses `token` (the header value, UTF-8).
    ///
    /// Order, first failure wins: empty → `missing`; longer than `maxLength` → `tooLarge`; not exactly three
    /// dot-separated parts, a part that is not strict base64url (`Base64URL`), header or payload not a JSON
    /// object, or not strict JSON (`StrictJSON`: duplicate keys, bad UTF-8, …) → `malformed`; then the header:
    /// `alg` missing or not exactly `RS256` → `unsupportedAlgorithm`; `typ` missing or not exactly `JWT` →
    /// `wrongType`; `kid` missing, not a string or empty → `malformed`; any of `forbiddenHeaders` present →
    /// `malformed`. An empty signature part is structurally fine and fails later as `badSignature`.
    ///
    /// `memo` (one per thread, an event loop's) remembers the last few header parts accepted: a token whose
    /// header part is byte for byte one of them is not decoded and scanned again (the verdict is a function of those
    /// bytes; the payload is judged as always). It also lends the payload's `iss`, `sub` and `aud` strings when their
    /// bytes are those of recent ones (the same values, without making new Strings), resumes a payload that starts with
    /// the bytes of a recent one after them (`StrictJSON.StringMemo.ObjectPrefix`), copies the decoded bytes of the
    /// whole base64url quanta a payload part shares with the last one (`decodePayload`), and lends its buffer for the
    /// signature's bytes (`decodeSignature`). Every one of these gives the result the plain parse gives.
    public static func parse(_ token: [UInt8], memo: ParseMemo? = nil) -> Result<ParsedToken, AppCheckReason> {
        parse(token[...], memo: memo)
    }

    /// Parses `token` where it lies (in the gateway, a slice of the request head's bytes: no copy); see `parse(_:memo:)`
    /// for `[UInt8]`.
    public static func parse(_ token: ArraySlice<UInt8>, memo: ParseMemo? = nil) -> Result<ParsedToken, AppCheckReason> {
        do { return .success(try parsed(token, memo: memo)) } catch { return .failure(error) }
    }

    /// `parse(_:memo:)` that returns the token itself and throws the reason: the caller owns the value returned (a
    /// `Result` switched on was copied, every string and array of the token retained and released once more).
    public static func parsed(_ token: ArraySlice<UInt8>, memo: ParseMemo? = nil) throws(AppCheckReason) -> ParsedToken {
        if token.isEmpty { throw .missing }
        if token.count > maxLength { throw .tooLarge }
        var reason = AppCheckReason.malformed
        guard let parsed = token.withUnsafeBytes({ parse($0, token: token, memo: memo, reason: &reason) }) else {
            throw reason
        }
        return parsed
    }

    /// `parse` on the bytes of `token` (`raw`: the same bytes, counted from 0); nil with `reason` set on a refusal.
    private static func parse(_ raw: UnsafeRawBufferPointer, token: ArraySlice<UInt8>, memo: ParseMemo?,
                              reason: inout AppCheckReason) -> ParsedToken? {
        guard let (firstDot, secondDot) = CompactJWS.dots(raw) else { reason = .malformed; return nil }
        let signaturePart = UnsafeRawBufferPointer(rebasing: raw[(secondDot + 1)...])
        let decoded = if let memo { memo.decodeSignature(signaturePart) } else { Base64URL.decode(signaturePart) }
        guard let signature = decoded else { reason = .malformed; return nil }

        // Header and payload are decoded onto the stack and checked as strict JSON objects in one pass each, exactly
        // as `StrictJSON.parse` would judge them (`CompactJWS.decode`), without building either: only the members
        // read below are kept. Both are judged before any header rule, so a fault in either is `malformed` first.
        // A header part accepted before (`memo`) passed every header rule: its kid is known.
        let headerPart = UnsafeRawBufferPointer(rebasing: raw[0..<firstDot])
        let knownKid = memo?.kid(forHeaderPart: headerPart)
        var header = StrictJSON.MemberSlots()
        var payload = StrictJSON.MemberSlots()
        let wellFormed = (knownKid != nil || decodeAndScan(headerPart, into: &header, select: headerSlot))
            && decodeAndScan(UnsafeRawBufferPointer(rebasing: raw[(firstDot + 1)..<secondDot]), into: &payload,
                             strings: memo?.claimStrings, memoSlots: TokenClaims.memoSlots, payloads: memo,
                             select: TokenClaims.claimSlot)
        guard wellFormed else { reason = .malformed; return nil }
        let kid: String
        if let knownKid {
            kid = knownKid
        } else {
            guard let alg = header.v0, alg.stringEquals(algorithm) else { reason = .unsupportedAlgorithm; return nil }
            guard let typ = header.v1, typ.stringEquals(type) else { reason = .wrongType; return nil }
            guard let headerKid = header.v2?.stringValue, !headerKid.isEmpty else { reason = .malformed; return nil }
            if header.v3 != nil { reason = .malformed; return nil }  // a forbidden header parameter
            kid = headerKid
            memo?.remember(headerPart, kid: kid)
        }

        let signingInputRange = 0..<secondDot
        let claims = TokenClaims(slots: &payload) {
            var material = Array(raw[signingInputRange])
            material.append(UInt8(ascii: "."))
            material.append(contentsOf: signature)
            return material.withUnsafeBytes { SHA256Digest.value($0) }
        }
        return ParsedToken(token: token, kid: kid, firstDot: firstDot, claims: claims, signature: signature,
                           signingInputRange: signingInputRange)
    }

    /// Decodes one base64url part onto the stack and scans it as a strict JSON object of at most `maxLength` bytes
    /// (`StrictJSON.scanObject`); false on any fault.
    static func decodeAndScan(_ part: UnsafeRawBufferPointer, into slots: inout StrictJSON.MemberSlots,
                              strings: StrictJSON.StringMemo? = nil, memoSlots: Int = 0, payloads: ParseMemo? = nil,
                              select: (JSONValue.ShortKey?) -> Int) -> Bool {
        guard let capacity = Base64URL.decodedCount(part.count) else { return false }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(capacity, 1)) { buffer in
            let decoded = if let payloads { payloads.decodePayload(part, into: buffer.baseAddress!) }
                          else { Base64URL.decode(part, into: buffer.baseAddress!) }
            guard let count = decoded else { return false }
            do {
                try StrictJSON.scanObject(UnsafeBufferPointer(rebasing: buffer[..<count]), maxBytes: maxLength,
                                          into: &slots, strings: strings, memoSlots: memoSlots, select: select)
                return true
            } catch {
                return false
            }
        }
    }

    /// What `parse` remembers between tokens, for one thread (an event loop's): the header parts (base64url text,
    /// before the first dot) it last accepted, with their `kid` (at most `capacity`, the oldest replaced first:
    /// Firebase signs with a handful of keys, so its tokens carry a handful of headers); recent `iss`, `sub` and
    /// `aud` strings and payload starts (`claimStrings`); the last kind of payload part, as text and bytes; and a
    /// buffer for signatures.
    public final class ParseMemo {
        static let capacity = 4
        private var entries: [(part: [UInt8], kid: String)] = []
        private var next = 0
        let claimStrings = StrictJSON.StringMemo()
        /// The last signature decoded (`decodeSignature`).
        private var signature: [UInt8] = []

        public init() {}

        /// A payload part decoded before (text and bytes), and how many of its characters, a whole number of
        /// quanta, the payload parts after it have shared (0 until two have been compared).
        private var payloadText: [UInt8] = []
        private var payloadBytes: [UInt8] = []
        private var sharedChars = 0
        /// Fewer shared characters than this are decoded as usual.
        static let minSharedChars = 32

        /// `part` (a payload part) decoded from strict base64url into `out`, which has room for
        /// `Base64URL.decodedCount(part.count)` bytes: the number written, nil on any deviation. The payloads of one
        /// app's tokens start with the same claims, so their parts start with the same characters: the whole quanta
        /// this part shares with the remembered one are not decoded again but copied from its bytes. That is the same
        /// result: base64url decodes quantum by quantum, and the remembered part decoded without fault (its last,
        /// partial quantum, the only one with a canonical-bits rule, lies past any shared whole quanta here).
        func decodePayload(_ part: UnsafeRawBufferPointer, into out: UnsafeMutablePointer<UInt8>) -> Int? {
            var shared = 0
            if let base = part.baseAddress, !payloadText.isEmpty {
                shared = payloadText.withUnsafeBytes { remembered -> Int in
                    // The length learnt, when this part shares it (one memcmp); else the common whole quanta now.
                    if sharedChars >= Self.minSharedChars && sharedChars <= part.count
                        && memcmp(remembered.baseAddress!, base, sharedChars) == 0 { return sharedChars }
                    var common = 0
                    let limit = min(remembered.count, part.count)
                    while common + 8 <= limit && remembered.loadUnaligned(fromByteOffset: common, as: UInt64.self)
                        == part.loadUnaligned(fromByteOffset: common, as: UInt64.self) { common += 8 }
                    while common < limit && remembered[common] == part[common] { common += 1 }
                    return common / 4 * 4
                }
            }
            guard shared >= Self.minSharedChars else {
                // Another kind of payload (or the first): decode it whole and remember it.
                guard let count = Base64URL.decode(part, into: out) else { return nil }
                payloadText.removeAll(keepingCapacity: true)
                payloadText.append(contentsOf: part)
                payloadBytes.removeAll(keepingCapacity: true)
                payloadBytes.append(contentsOf: UnsafeBufferPointer(start: out, count: count))
                sharedChars = 0
                return count
            }
            sharedChars = shared
            let prefix = shared / 4 * 3
            payloadBytes.withUnsafeBufferPointer { out.initialize(from: $0.baseAddress!, count: prefix) }
            guard let rest = Base64URL.decode(UnsafeRawBufferPointer(rebasing: part[shared...]), into: out + prefix) else {
                return nil
            }
            return prefix + rest
        }

        /// `part` decoded from strict base64url into the memo's buffer, which the returned array shares: when the
        /// last token parsed is gone (in the gateway, verified and dropped before the next is parsed), the buffer is
        /// unique and reused, so a token's signature costs no allocation. nil on any deviation (`Base64URL`).
        func decodeSignature(_ part: UnsafeRawBufferPointer) -> [UInt8]? {
            guard let count = Base64URL.decodedCount(part.count) else { return nil }
            if signature.count != count { signature = [UInt8](repeating: 0, count: count) }
            if count == 0 { return signature }
            let written = signature.withUnsafeMutableBufferPointer { Base64URL.decode(part, into: $0.baseAddress!) }
            guard written == count else { return nil }
            return signature
        }

        /// The `kid` of `part` when it is, byte for byte, a header part accepted before.
        func kid(forHeaderPart part: UnsafeRawBufferPointer) -> String? {
            guard let base = part.baseAddress, part.count > 0 else { return nil }
            // Read in place: no copy of each entry.
            return entries.withUnsafeBufferPointer { stored in
                for i in stored.indices where stored[i].part.count == part.count {
                    if stored[i].part.withUnsafeBytes({ memcmp($0.baseAddress!, base, part.count) }) == 0 { return stored[i].kid }
                }
                return nil
            }
        }

        /// Remembers an accepted header part and its `kid`.
        func remember(_ part: UnsafeRawBufferPointer, kid: String) {
            guard part.count > 0 else { return }
            let entry = (part: [UInt8](part), kid: kid)
            if entries.count < Self.capacity {
                entries.append(entry)
            } else {
                entries[next] = entry
                next = (next + 1) % Self.capacity
            }
        }
    }

    /// The header members `parse` reads, by slot: `alg` 0, `typ` 1, `kid` 2, any of `forbiddenHeaders` 3 (one
    /// slot: its presence is the fault); -1 for the others.
    static func headerSlot(_ key: JSONValue.ShortKey?) -> Int {
        guard let key else { return -1 }
        switch key {
        case algKey: return 0
        case typKey: return 1
        case kidKey: return 2
        default: return forbiddenKeys.contains(key) ? 3 : -1
        }
    }

    /// Parses the UTF-8 of `token`; see `parse(_:)` for `[UInt8]`.
    public static func parse(_ token: String) -> Result<ParsedToken, AppCheckReason> {
        parse(Array(token.utf8))
    }
}
