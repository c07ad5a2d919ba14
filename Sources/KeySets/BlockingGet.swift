/// One `GET` over a blocking socket with a total deadline, for documents the issuer refreshes itself (Android's
/// attestation status list). Blocks the calling thread: run it on a worker thread, never an event loop. `https://`
/// is verified against the system CA store and the URL's host, as for key sets; `file://` reads a file.
public struct BlockingGet: Sendable {
    /// A fetch that got no 200 answer (the text says why: resolve, connect, TLS, timeout, status, size, I/O).
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    private let client: BlockingHTTPClient

    /// - Parameters:
    ///   - timeout: seconds for the whole fetch (connect, TLS, request, response).
    ///   - maxBodyBytes: largest body accepted; a larger one is a failure.
    public init(timeout: Double, maxBodyBytes: Int, caFile: String? = nil) {
        client = BlockingHTTPClient(timeout: timeout, maxBodyBytes: maxBodyBytes, caFile: caFile)
    }

    /// The body of a 200 answer and its `Cache-Control` values (none for `file://`).
    public func get(_ url: String) throws(Failure) -> (body: [UInt8], cacheControl: [String]) {
        do {
            let response = try client.get(url)
            return (response.body, response.headers.values("Cache-Control"))
        } catch let error as FetchError {
            throw Failure(description: error.description)
        } catch {
            throw Failure(description: "\(error)")
        }
    }
}
