/// The outcome of one call to a head parser (`HTTPRequestHeadParser`, `HTTPResponseHeadParser`).
public enum HeadParseResult<Head: Sendable>: Sendable {
    /// The head is not complete yet and no limit or rule is violated so far: call again with the same
    /// bytes plus whatever arrives next.
    case needMore
    /// A complete head. `consumed` is the number of bytes of the buffer it used (including skipped leading
    /// empty lines and the terminating empty line); the body or the next message starts right after.
    case complete(Head, consumed: Int)
    /// The head is malformed or too large. The connection must be answered (or dropped) and closed.
    case failure(HTTPParseError)
}

extension HeadParseResult: Equatable where Head: Equatable {}

extension HeadParseResult {
    /// The parsed head when `.complete`, else `nil`.
    public var head: Head? {
        if case .complete(let head, _) = self { return head }
        return nil
    }

    /// The error when `.failure`, else `nil`.
    public var error: HTTPParseError? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
