/// The command path to a Redis deployment — one server (`RedisSingleClient`) or a cluster
/// (`RedisClusterClient`) — for one event loop. Replay keys use it; the issuer's state (challenges, attested
/// keys with a counter compare-and-set, used inputs) is meant to use it too: any command whose keys all share
/// one hash slot works in every mode (`SET k v NX PXAT ms`, `GET k`, and `EVAL script n k… arg…` for
/// compare-and-set, with the keys in one `{hash tag}` in cluster mode).
///
/// Loop-confined: call only on the loop the executor was made for.
public protocol RedisCommandExecutor: AnyObject {
    /// Sends `args` (`args[0]` is the command name) to the node that serves `routingKey`'s hash slot (any node
    /// in single mode). `completion` is called exactly once, on the loop, within the store's `timeout` per
    /// attempt: `.value` with the server's reply (a Redis error is a `.value(.error)`), or `.failure` when no
    /// node answered. In cluster mode `MOVED` and `ASK` are followed (at most twice) before answering.
    func execute(_ args: [[UInt8]], routingKey: [UInt8], completion: @escaping (RedisReply) -> Void)
}

/// Told by an executor about its connections, on its loop.
protocol RedisExecutorObserver: AnyObject {
    /// A node connection finished its handshake. `restarted` is true when the node's `run_id` differs from the
    /// one this executor saw before (the server restarted: it may have come back with less than it had).
    /// Commands sent from this callback reach that node before any command held during its reconnect.
    func redisNodeReady(restarted: Bool)
    /// Whether every needed connection is up, with the first problem when not.
    func redisStatusChanged(up: Bool, problem: String?)
}

extension RedisCommandExecutor {
    /// `execute` with string arguments.
    public func execute(_ args: [String], routingKey: String, completion: @escaping (RedisReply) -> Void) {
        execute(args.map { Array($0.utf8) }, routingKey: Array(routingKey.utf8), completion: completion)
    }
}
