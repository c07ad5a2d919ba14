extension ConfigDecoder {
    /// The DPoP key of an issuer app (SPEC §10 "Key-bound tokens").
    static let dpopAppKeys = ["require_dpop"]

    /// `require_dpop: true | false` (default false) of `issuer.apps[]`.
    func decodeAppDPoP(_ f: ConfigFields, _ context: String, into app: inout IssuerAppSettings) {
        if let v = f.value("require_dpop"), let b = bool(v, "\(context).require_dpop") { app.requireDPoP = b }
    }

    /// The longest `dpop_max_age` accepted: a proof is meant for one request, sent at once.
    static let maxDPoPMaxAge: Double = 3600

    /// `dpop: optional | required` (default `optional`) and `dpop_max_age` (default 60 s, 1 s–1 h) of a route
    /// (SPEC §4.4). Either key on an `enforcement: off` route is an error: no token is examined there.
    func decodeRouteDPoP(_ f: ConfigFields, _ context: String, enforcement: Enforcement) -> (DPoPMode, Double) {
        var mode = DPoPMode.optional
        var maxAge = 60.0
        if let v = f.value("dpop"), let value = choice(v, "\(context) dpop", [DPoPMode.optional, .required]) {
            if enforcement == .off, value == .required {
                error(v, "\(context) dpop: required has no effect with enforcement: off (no token is examined)")
            }
            mode = value
        }
        if let v = f.value("dpop_max_age"), let seconds = duration(v, "\(context) dpop_max_age", in: 1...Self.maxDPoPMaxAge) {
            if enforcement == .off {
                error(v, "\(context) dpop_max_age has no effect with enforcement: off (no token is examined)")
            }
            maxAge = seconds
        }
        return (mode, maxAge)
    }
}
