// libFuzzer target: the App Check token parser (AppCheck.AppCheckToken.parse: compact JWS split, strict
// base64url, strict JSON header and payload, header rules). Never crashes; a success is self-consistent; and a
// parse through the memo that lives across inputs (as an event loop's does across requests: remembered header parts,
// claim strings and `aud` arrays) gives every input exactly the verdict it gets without one; so does a parse of the
// same bytes as a slice of a larger buffer (as the gateway parses a token where it lies in the request head).
import AppCheck

/// Lives across inputs on purpose, so a finding of the memo check may need the inputs before it: rerun the corpus
/// (or the run's last inputs) to reproduce one, not only the crashing input.
nonisolated(unsafe) private let memo = AppCheckToken.ParseMemo()

/// What a verdict consists of: the reason, or everything an accepted token carries.
private func verdict(_ result: Result<ParsedToken, AppCheckReason>) -> String {
    switch result {
    case .failure(let reason): return "refused \(reason)"
    case .success(let parsed):
        let c = parsed.claims
        return "kid \(parsed.kid) signature \(parsed.signature) range \(parsed.signingInputRange) iss \(String(describing: c.issuer)) "
            + "exp \(String(describing: c.expiresAt)) \(c)"
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let token = Array(UnsafeBufferPointer(start: data, count: size))
    let plain = AppCheckToken.parse(token)
    if case .success(let parsed) = plain {
        precondition(parsed.token.elementsEqual(token) && !parsed.kid.isEmpty)
        precondition(parsed.signingInputRange.upperBound <= token.count)
    }
    let memoized = AppCheckToken.parse(token, memo: memo)
    precondition(verdict(memoized) == verdict(plain), "the parse memo changed a verdict")
    let framed = Array("X: ".utf8) + token + Array("\r\n".utf8)
    let sliced = AppCheckToken.parse(framed[3..<(3 + size)], memo: memo)
    precondition(verdict(sliced) == verdict(plain), "a slice of a larger buffer changed a verdict")
    return 0
}
