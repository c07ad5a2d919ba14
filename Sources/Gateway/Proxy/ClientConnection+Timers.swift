import ProxyCore
import EventLoop

/// The HTTP/1.1 connection's one timer, driven by its `RequestDeadlines`, and the hand-over to HTTP/2.
extension ClientConnection {
    /// Schedules the timer for `timeouts.deadline`. Lazy both ways, so a keep-alive request costs no timer-heap
    /// work: the timer only moves earlier here (one that fires early re-schedules itself for the real deadline), and
    /// no deadline leaves it armed (firing then does nothing). `close()` cancels it.
    func syncTimer() {
        guard machine.state.isServing else { return }
        let at = timeouts.deadline
        if at == 0 { return }
        if !timer.isArmed || timer.deadline > at { context.loop.schedule(timer, at: at) }
    }

    /// Body bytes arrived: `body_timeout` is the longest gap between two of them.
    @inline(__always)
    func bodyProgressed() {
        timeouts.bodyProgressed(now: context.loop.now)
        syncTimer()
    }

    func timerFired() {
        switch machine.state {
        case .closed: return
        case .lingering: close(); return
        default: break
        }
        switch timeouts.fire(now: context.loop.now, readPaused: machine.readHeld, responseStarted: exchange?.headSent ?? false) {
        case .none:
            return
        case .reschedule(let at):
            context.loop.schedule(timer, at: at)
        case .close:
            close()
        case .abort:
            abort()
        case .requestTimeout(let reason):
            if let ex = exchange {
                ex.bodyTimedOut()
            } else {
                answerWithoutRequest(status: 408, code: "request_timeout", reason: reason)
            }
        }
    }

    /// This socket now speaks HTTP/2: the worker moves it to an `H2Connection` (same fd, same transport).
    func handOverToHTTP2(initial: UnsafeRawBufferPointer) {
        machine.handedOver()
        timeouts.closed()
        context.loop.cancel(timer)
        connections.handOver(self, initial: initial)
    }
}
