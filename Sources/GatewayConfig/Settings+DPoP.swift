extension Settings {
    /// The replay store is made when a route consumes tokens (`replay_protection`) or may meet a key-bound token,
    /// whose proofs' `jti`s are consumed in it (SPEC §4.4): a checking route of a deployment whose own issuer or a
    /// trusted issuer can mint bound tokens, or a route with `dpop: required`. (Firebase never binds its tokens, so a
    /// deployment that only checks Firebase's needs no store for DPoP; a bound token reaching it anyway is refused
    /// `replay_store_unavailable`, fail closed.)
    public var needsReplayStore: Bool {
        let bindingIssuers = issuer != nil || !appCheck.trustedIssuers.isEmpty
        return routes.contains { route in
            route.replayProtection || (route.enforcement != .off && (bindingIssuers || route.dpop == .required))
        }
    }
}
