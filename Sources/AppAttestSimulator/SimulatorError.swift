/// An OpenSSL call failed while the simulator made a key, a certificate or a signature.
public struct SimulatorError: Error, Sendable, CustomStringConvertible {
    /// The OpenSSL function that failed.
    public let operation: String
    /// Makes an error naming `operation`.
    public init(_ operation: String) { self.operation = operation }
    /// `"OpenSSL <operation> failed"`.
    public var description: String { "OpenSSL \(operation) failed" }
}
