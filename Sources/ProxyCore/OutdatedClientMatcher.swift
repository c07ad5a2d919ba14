import Foundation
import HTTPWire

/// `app_check.outdated_client`: a header and a compiled regular expression.
public struct OutdatedClientMatcher: @unchecked Sendable {
    public let headerLowercased: String
    /// NSRegularExpression is immutable after creation and documented as safe to use from several threads.
    public let regex: NSRegularExpression

    public func matches(_ headers: HTTPHeaders) -> Bool {
        guard let value = headers.firstValue(forLowercased: headerLowercased) else { return false }
        return regex.firstMatch(in: value, range: NSRange(value.startIndex..., in: value)) != nil
    }
}
