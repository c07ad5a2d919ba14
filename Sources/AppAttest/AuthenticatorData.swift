/// App Attest authenticator data (the WebAuthn layout with Apple's values), parsed by layout.
///
/// `rpIdHash`(32) `flags`(1) `counter`(4, big-endian), then — in an attestation — the attested credential
/// data: AAGUID(16), credential ID length(2, big-endian), credential ID, COSE key (one CBOR map). Then, in
/// both kinds, an optional extensions map (iOS 27 and later), accepted whether or not the ED flag (0x80) is
/// set, because Apple's own sample sets no ED flag. Nothing else may follow.
///
/// Assertions carry the AT flag (0x40) although they hold no credential data, so the parser decides by the
/// kind the caller names, never by the flags.
public struct AuthenticatorData: Sendable, Equatable {
    /// Which object the bytes came from: it decides whether attested credential data follows the counter.
    public enum Kind: Sendable {
        /// From an attestation: attested credential data is required.
        case attestation
        /// From an assertion: no attested credential data.
        case assertion
    }

    /// SHA-256 of the App ID (`<team_id>.<bundle_id>`), 32 bytes.
    public let rpIdHash: [UInt8]
    /// The flags byte, informational only.
    public let flags: UInt8
    /// The signature counter.
    public let counter: UInt32
    /// Present exactly for `.attestation`.
    public let credential: AttestedCredentialData?
    /// The trailing extensions map, when present.
    public let extensions: CBORMap?

    /// Longest credential ID accepted. App Attest's is 32 bytes (the key ID); WebAuthn caps it at 1023.
    public static let maxCredentialIdLength = 1023

    /// Parses `bytes` strictly; see the type's documentation for the layout.
    public init(_ bytes: [UInt8], kind: Kind) throws(AuthenticatorDataError) {
        guard bytes.count >= 37 else { throw .tooShort }
        rpIdHash = Array(bytes[0..<32])
        flags = bytes[32]
        counter = UInt32(bytes[33]) << 24 | UInt32(bytes[34]) << 16 | UInt32(bytes[35]) << 8 | UInt32(bytes[36])
        var offset = 37
        switch kind {
        case .assertion:
            credential = nil
        case .attestation:
            guard bytes.count >= offset + 18 else { throw .tooShort }
            let aaguid = Array(bytes[offset..<(offset + 16)])
            let idLength = Int(bytes[offset + 16]) << 8 | Int(bytes[offset + 17])
            offset += 18
            guard idLength <= Self.maxCredentialIdLength else { throw .credentialIdTooLong }
            guard bytes.count >= offset + idLength else { throw .tooShort }
            let credentialId = Array(bytes[offset..<(offset + idLength)])
            offset += idLength
            let key: CBORValue
            do { (key, offset) = try CBORDecoder.decodeItem(bytes, from: offset) } catch { throw .credentialPublicKey(error) }
            guard let keyMap = key.mapValue else { throw .credentialPublicKeyNotMap }
            credential = AttestedCredentialData(aaguid: aaguid, credentialId: credentialId, publicKey: keyMap)
        }
        if offset == bytes.count {
            extensions = nil
            return
        }
        let trailing: CBORValue
        do { (trailing, offset) = try CBORDecoder.decodeItem(bytes, from: offset) } catch { throw .extensions(error) }
        guard let map = trailing.mapValue else { throw .extensionsNotMap }
        guard offset == bytes.count else { throw .trailingBytes }
        extensions = map
    }
}
