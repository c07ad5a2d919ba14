/// The HTTP/2 adapter's end-of-batch writes (issue 22's split of the loop context): connections whose streams
/// produced frames during a batch of events (`H2Connection.scheduleFlush`) each write once at the end of the batch,
/// so responses finished together share one TLS record and one write instead of one per stream event. The HTTP/2
/// upstream connections (`H2UpstreamConnection.scheduleFlush`) write the same way: a request's HEADERS, its DATA and
/// its end, and every other stream's frames of the batch, leave in one write (they took one `write` each before, three
/// per unary gRPC call). One per loop; touched only on its thread.
package final class H2FlushScheduler {
    private var queue: [H2Connection] = []
    private var upstreams: [H2UpstreamConnection] = []

    func schedule(_ connection: H2Connection) {
        queue.append(connection)
    }

    func schedule(upstream connection: H2UpstreamConnection) {
        upstreams.append(connection)
    }

    /// Runs after every batch of events: the common case (nothing queued) is two checks. A flush may queue more (an
    /// upstream's drained request body resumes a client, a client's drained output lets an upstream stream read on):
    /// it runs until both queues are empty.
    @inline(__always)
    func runDue() {
        while !queue.isEmpty || !upstreams.isEmpty {
            if !upstreams.isEmpty {
                let queued = upstreams
                upstreams.removeAll(keepingCapacity: true)
                for connection in queued { connection.scheduledFlushDue() }
            }
            if !queue.isEmpty {
                let queued = queue
                queue.removeAll(keepingCapacity: true)
                for connection in queued { connection.scheduledFlushDue() }
            }
        }
    }
}
