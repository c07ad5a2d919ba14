extension ConfigDecoder {
    /// A route's `websocket` (default false) and `stream_idle_timeout` (1 ms to 1 day; nil when absent) (SPEC §6.1).
    func decodeStreams(_ f: ConfigFields, _ context: String) -> (websocket: Bool, streamIdleTimeout: Double?) {
        var websocket = false
        if let v = f.value("websocket"), let value = bool(v, "\(context) websocket") { websocket = value }
        var idle: Double?
        if let v = f.value("stream_idle_timeout") {
            idle = duration(v, "\(context) stream_idle_timeout", in: 0.001...86400)
        }
        return (websocket, idle)
    }
}
