import Gateway
import Dashboard

extension Worker: DashboardTallySource {
    /// On this worker's loop: hands the loop's dashboard counts over and starts an empty tally.
    func takeDashboardTally(_ deliver: @escaping @Sendable (DashboardTally) -> Void) {
        loop.execute { [self] in
            let tally = metrics.dashboard
            metrics.dashboard = DashboardTally()
            deliver(tally)
        }
    }
}
