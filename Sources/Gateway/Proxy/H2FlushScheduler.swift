/// The HTTP/2 adapter's end-of-batch writes (issue 22's split of the loop context): connections whose streams
/// produced frames during a batch of events (`H2Connection.scheduleFlush`) each write once at the end of the batch,
/// so responses finished together share one TLS record and one write instead of one per stream event. One per loop;
/// touched only on its thread.
final class H2FlushScheduler {
    private var queue: [H2Connection] = []

    func schedule(_ connection: H2Connection) {
        queue.append(connection)
    }

    /// Runs after every batch of events: the common case (nothing queued) is one check.
    @inline(__always)
    func runDue() {
        while !queue.isEmpty {
            let queued = queue
            queue.removeAll(keepingCapacity: true)
            for connection in queued { connection.scheduledFlushDue() }
        }
    }
}
