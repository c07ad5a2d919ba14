import Foundation

/// Tests share one process, and `Process.run()` copies the process environment while it spawns a child: a test that
/// changes the environment (`setenv`, `unsetenv`) at the same moment makes that copy read freed memory (seen as a
/// SIGSEGV in `Process.run`). Every spawn in the test helpers, and every test that changes the environment, holds
/// this lock while it does so.
public let environmentLock = NSLock()

extension Process {
    /// `run()` under `environmentLock`.
    public func runHoldingEnvironment() throws {
        environmentLock.lock()
        defer { environmentLock.unlock() }
        try run()
    }
}
