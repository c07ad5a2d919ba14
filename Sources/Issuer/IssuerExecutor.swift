import Dispatch

/// Where the issuer's work runs: a concurrent dispatch queue of its own, never Swift's cooperative pool. Exchanges
/// spend CPU (X.509 chains, ECDSA) and wait on their state store; on the cooperative pool (one thread per core) a
/// few of them — or any blocking code elsewhere in the process — could hold every thread and stall the rest.
/// Dispatch adds threads when its threads block.
package final class IssuerExecutor: TaskExecutor, @unchecked Sendable {
    package static let shared = IssuerExecutor()

    private let queue = DispatchQueue(label: "appcheck-gateway.issuer", qos: .userInitiated, attributes: .concurrent)

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}
