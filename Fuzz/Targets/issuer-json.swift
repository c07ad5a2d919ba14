// libFuzzer target: the issuer's exchange request bodies (Issuer.IssuerJSON: strict JSON through StrictJSON, snake_case
// or lowerCamelCase fields, a field given under both spellings refused, byte fields in base64 or base64url, canonical),
// read with every accessor the exchange methods use. Never crashes; every refusal carries a rule; a byte field read
// back re-encodes (standard base64 with padding) to text that decodes to the same bytes.
import Issuer

let stringFields = ["debug_token", "custom_token", "key_id", "challenge"]
let byteFields = ["artifact", "assertion", "attestation", "challenge", "device_token", "key_id"]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let body = Array(UnsafeBufferPointer(start: data, count: size))
    let json: IssuerJSON
    do { json = try IssuerJSON(body: body) } catch {
        precondition(!error.rule.isEmpty && error.code >= 400)
        return 0
    }
    for name in stringFields {
        do {
            let text = try json.string(name)
            precondition(!text.isEmpty)
        } catch { precondition(!error.rule.isEmpty) }
    }
    for name in byteFields {
        do {
            let bytes = try json.bytes(name, maxBytes: 4096)
            precondition(!bytes.isEmpty && bytes.count <= 4096)
            precondition(IssuerJSON.decodeBase64(IssuerJSON.encodeBase64(bytes)) == bytes)
        } catch { precondition(!error.rule.isEmpty) }
    }
    do { _ = try json.limitedUse() } catch { precondition(error.rule == "invalid_limited_use" || error.rule == "field_twice") }
    return 0
}
