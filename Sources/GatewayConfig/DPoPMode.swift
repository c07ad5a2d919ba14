/// A route's `dpop` key (SPEC §4.4): what it asks of tokens bound to a key (`cnf.jkt`) and of bearer tokens.
public enum DPoPMode: String, Sendable {
    /// Default: a bound token needs a valid `DPoP` proof; an unbound (bearer) token passes as before.
    case optional
    /// Every token must be bound and come with a valid proof; a bearer token is refused (`dpop_unbound`).
    case required
}
