import GatewayConfig

/// `ConfigErrorTableTests` rows: the DPoP route keys `dpop` and `dpop_max_age` (SPEC §4.4) and the issuer app's
/// `require_dpop`.
extension ConfigErrorTable {
    static let dpop: [ConfigErrorCase] = [
        bad(route("    dpop: always\n"), 10, 11, "invalid value 'always' for route 'a' dpop: expected optional or required"),
        bad(route("    enforcement: off\n    dpop: required\n"), 11, 11,
            "route 'a' dpop: required has no effect with enforcement: off (no token is examined)"),
        bad(route("    dpop_max_age: 0s\n"), 10, 19, "route 'a' dpop_max_age must be positive, got 0s"),
        bad(route("    dpop_max_age: 2h\n"), 10, 19, "route 'a' dpop_max_age must be between 1s and 1h, got 2h"),
        bad(route("    dpop_max_age: soon\n"), 10, 19,
            "invalid duration 'soon' for route 'a' dpop_max_age: expected a number and a unit ms, s, m, h or d (e.g. 250ms, 30s, 1.5s)"),
        bad(route("    enforcement: off\n    dpop_max_age: 30s\n"), 11, 19,
            "route 'a' dpop_max_age has no effect with enforcement: off (no token is examined)"),
        bad(app(secret + "      require_dpop: maybe\n"), 7, 21,
            "invalid value 'maybe' for issuer.apps[0].require_dpop: expected true or false"),
    ]
}
