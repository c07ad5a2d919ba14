import EventLoop

/// `RedisCommandExecutor` for one server (`redis://`, `rediss://`): one connection, every key goes to it.
final class RedisSingleClient: RedisCommandExecutor, RedisConnectionOwner {
    let connection: RedisConnection
    weak var observer: RedisExecutorObserver?
    /// The server's `run_id` at the previous handshake ("" before the first).
    private var knownRunID = ""

    init(loop: EventLoop, node: RedisEndpoint.Node, addresses: [SocketAddress], settings: RedisConnectionSettings) {
        connection = RedisConnection(loop: loop, node: node, addresses: addresses, settings: settings)
        connection.owner = self
    }

    func start() { connection.start() }
    func shutdown() { connection.shutdown() }

    func execute(_ args: [[UInt8]], routingKey: [UInt8], completion: @escaping (RedisReply) -> Void) {
        connection.execute(args, completion: completion)
    }

    func redisConnectionReady(_ connection: RedisConnection, runID: String) {
        let restarted = !knownRunID.isEmpty && knownRunID != runID
        knownRunID = runID
        observer?.redisNodeReady(restarted: restarted)
        observer?.redisStatusChanged(up: true, problem: nil)
    }

    func redisConnectionDown(_ connection: RedisConnection, reason: String) {
        observer?.redisStatusChanged(up: false, problem: reason)
    }
}
