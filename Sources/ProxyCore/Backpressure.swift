/// The watermarks of the request path's send buffers, in one place for every protocol: the exchange holds the
/// client's request body back while the upstream connection's send buffer is above `highWater` (resumed below
/// `lowWater`), and an HTTP/1.1 connection stops reading its upstream's response while its own send buffer is above
/// `highWater` (resumed below `lowWater`), and an HTTP/2 connection pulls frames from nghttp2 only while its send buffer
/// is under `highWater`. HTTP/2's per-stream, per-connection and process-wide response limits are in `H2Connection`.
public enum Backpressure {
    public static let highWater = 256 * 1024
    public static let lowWater = 64 * 1024
}
