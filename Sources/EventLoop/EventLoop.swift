import CSystemShims
import Foundation
import Glibc
import Synchronization

/// Something registered with an event loop for readiness events on one file descriptor.
public protocol EventHandler: AnyObject {
    /// Called on the loop's thread with the epoll event bits (`EventLoop.readable` etc.).
    func handleEvent(_ events: UInt32)
}

/// One epoll reactor driven by one thread. Everything registered with a loop is touched only on that
/// loop's thread; other threads talk to it through `execute(_:)`, which wakes it with an eventfd.
///
/// Sockets are registered once for their lifetime, edge-triggered for input and output
/// (`EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET`): a handler reads until `EAGAIN` (or a short read)
/// and remembers when it stopped early on purpose (backpressure).
public final class EventLoop: @unchecked Sendable {
    // The event bits are Linux's ABI values as literals: initialised from the C shim's constants they were lazy globals,
    // and every test of an event went through `swift_once` (several per request). EventLoopTests checks them against
    // the shim's.
    public static let readable: UInt32 = 0x001
    public static let writable: UInt32 = 0x004
    public static let error: UInt32 = 0x008
    public static let hangup: UInt32 = 0x010
    public static let readHangup: UInt32 = 0x2000
    /// The interest every stream socket is registered with.
    public static let streamInterest = CSystemShims_EPOLLIN | CSystemShims_EPOLLOUT | CSystemShims_EPOLLRDHUP | CSystemShims_EPOLLET

    /// Index of this loop among its siblings (0-based).
    public let index: Int
    private let epfd: Int32
    private let wakeFD: Int32
    private var handlers: [EventHandler?] = []
    private var timers: [LoopTimer] = []
    private let tasks = Mutex<[@Sendable () -> Void]>([])
    private let stopped = Atomic<Bool>(false)
    /// Monotonic nanoseconds, refreshed once per loop iteration (cheap "now" for the hot path).
    public private(set) var now: UInt64 = CSystemShims_monotonic_ns()
    /// Called after every batch of events on the loop thread (e.g. to flush buffered log lines).
    public var afterBatch: [() -> Void] = []
    private var loopThread: pthread_t?

    public init(index: Int = 0) throws {
        self.index = index
        epfd = CSystemShims_epoll_create()
        guard epfd >= 0 else { throw SocketError("epoll_create1") }
        wakeFD = CSystemShims_eventfd()
        // No explicit close on the failure paths: once every stored property is set, a throwing init runs
        // `deinit`, which closes both descriptors (closing here too would close a reused number twice).
        guard wakeFD >= 0 else { throw SocketError("eventfd") }
        guard CSystemShims_epoll_ctl(epfd, CSystemShims_EPOLL_CTL_ADD, wakeFD, CSystemShims_EPOLLIN) == 0 else {
            throw SocketError("epoll_ctl(eventfd)")
        }
    }

    deinit {
        if wakeFD >= 0 { Glibc.close(wakeFD) }
        if epfd >= 0 { Glibc.close(epfd) }
    }

    /// True when called on this loop's own thread.
    public var inLoop: Bool {
        guard let t = loopThread else { return false }
        return pthread_equal(t, pthread_self()) != 0
    }

    // MARK: registration

    /// Registers `fd` with `interest` (default: edge-triggered in and out).
    public func register(_ fd: Int32, _ handler: EventHandler, interest: UInt32 = EventLoop.streamInterest) throws {
        let i = Int(fd)
        if i >= handlers.count { handlers.append(contentsOf: repeatElement(nil, count: i + 1 - handlers.count + 64)) }
        handlers[i] = handler
        guard CSystemShims_epoll_ctl(epfd, CSystemShims_EPOLL_CTL_ADD, fd, interest) == 0 else {
            handlers[i] = nil
            throw SocketError("epoll_ctl(add)")
        }
    }

    /// Hands a registered descriptor to another handler (a connection switching protocol, e.g. to HTTP/2).
    /// Edge-triggered: the new handler must read what is already pending without waiting for an event.
    public func replaceHandler(_ fd: Int32, _ handler: EventHandler) {
        let i = Int(fd)
        if i < handlers.count { handlers[i] = handler }
    }

    /// Removes `fd`; call before closing it.
    public func deregister(_ fd: Int32) {
        let i = Int(fd)
        if i < handlers.count { handlers[i] = nil }
        _ = CSystemShims_epoll_ctl(epfd, CSystemShims_EPOLL_CTL_DEL, fd, 0)
    }

    // MARK: timers

    /// Arms `timer` to fire at `deadline` (monotonic ns), moving it if it is already armed.
    public func schedule(_ timer: LoopTimer, at deadline: UInt64) {
        if timer.heapIndex >= 0 {
            let old = timer.deadline
            timer.deadline = deadline
            if deadline < old { siftUp(timer.heapIndex) } else { siftDown(timer.heapIndex) }
            return
        }
        timer.deadline = deadline
        timer.heapIndex = timers.count
        timers.append(timer)
        siftUp(timer.heapIndex)
    }

    /// Disarms `timer` if armed.
    public func cancel(_ timer: LoopTimer) {
        let i = timer.heapIndex
        guard i >= 0 else { return }
        let last = timers.count - 1
        if i != last {
            timers.swapAt(i, last)
            timers[i].heapIndex = i
        }
        timers.removeLast()
        timer.heapIndex = -1
        if i < timers.count { siftDown(i); siftUp(i) }
    }

    /// Number of armed timers (for tests).
    public var armedTimerCount: Int { timers.count }

    private func siftUp(_ index: Int) {
        var i = index
        while i > 0 {
            let parent = (i - 1) / 2
            if timers[parent].deadline <= timers[i].deadline { break }
            timers.swapAt(parent, i)
            timers[parent].heapIndex = parent
            timers[i].heapIndex = i
            i = parent
        }
    }

    private func siftDown(_ index: Int) {
        var i = index
        let n = timers.count
        while true {
            let l = 2 * i + 1
            if l >= n { break }
            var m = l
            if l + 1 < n && timers[l + 1].deadline < timers[l].deadline { m = l + 1 }
            if timers[i].deadline <= timers[m].deadline { break }
            timers.swapAt(i, m)
            timers[i].heapIndex = i
            timers[m].heapIndex = m
            i = m
        }
    }

    private func fireDueTimers() {
        while let first = timers.first, first.deadline <= now {
            cancel(first)
            first.action()
        }
    }

    // MARK: cross-thread

    /// Runs `task` on the loop thread soon. Safe from any thread.
    public func execute(_ task: @escaping @Sendable () -> Void) {
        tasks.withLock { $0.append(task) }
        var one: UInt64 = 1
        _ = Glibc.write(wakeFD, &one, 8)
    }

    private func drainTasks() {
        var counter: UInt64 = 0
        _ = Glibc.read(wakeFD, &counter, 8)
        let pending = tasks.withLock { t -> [@Sendable () -> Void] in
            let p = t
            t.removeAll(keepingCapacity: true)
            return p
        }
        for task in pending { task() }
    }

    /// Asks the loop to return from `run()` after its current iteration. Safe from any thread.
    public func stop() {
        stopped.store(true, ordering: .sequentiallyConsistent)
        var one: UInt64 = 1
        _ = Glibc.write(wakeFD, &one, 8)
    }

    /// Refreshes `now`; handlers that measure durations inside a batch may call it.
    @discardableResult
    public func refreshNow() -> UInt64 {
        now = CSystemShims_monotonic_ns()
        return now
    }

    /// Runs the loop on the calling thread until `stop()`.
    public func run() {
        loopThread = pthread_self()
        let max = 256
        let fds = UnsafeMutablePointer<Int32>.allocate(capacity: max)
        let evs = UnsafeMutablePointer<UInt32>.allocate(capacity: max)
        defer { fds.deallocate(); evs.deallocate() }
        while !stopped.load(ordering: .relaxed) {
            var timeout: Int32 = -1
            if let first = timers.first {
                let ns = first.deadline > now ? first.deadline - now : 0
                timeout = Int32(min((ns + 999_999) / 1_000_000, 60_000))
            }
            let n = CSystemShims_epoll_wait(epfd, fds, evs, Int32(max), timeout)
            now = CSystemShims_monotonic_ns()
            if n > 0 {
                for i in 0..<Int(n) {
                    let fd = fds[i]
                    if fd == wakeFD { drainTasks(); continue }
                    let idx = Int(fd)
                    if idx < handlers.count, let h = handlers[idx] { h.handleEvent(evs[i]) }
                }
            }
            fireDueTimers()
            for hook in afterBatch { hook() }
        }
        // Run what was queued last (shutdown tasks), then finish.
        drainTasks()
        for hook in afterBatch { hook() }
    }

    /// Starts `run()` on a new thread named `name`; `onExit` runs on that thread when the loop returns.
    public func startThread(name: String, onExit: @escaping @Sendable () -> Void = {}) {
        let thread = Thread { [self] in
            self.run()
            onExit()
        }
        thread.name = name
        thread.stackSize = 1 << 20
        thread.start()
    }
}

/// A one-shot timer owned by its user and armed with `EventLoop.schedule`; reusable after it fires.
public final class LoopTimer {
    public internal(set) var deadline: UInt64 = 0
    var heapIndex = -1
    /// Runs on the loop thread when the timer fires. Settable so that an owner whose action captures itself can hold
    /// its timer in a `let` (`init()`, then set at the end of its own `init`): a `lazy var` costs a retain and a
    /// release on every read.
    public var action: () -> Void

    /// `action` runs on the loop thread. Capture the owner weakly or unowned and cancel on close.
    public init(_ action: @escaping () -> Void) { self.action = action }

    /// A timer that does nothing when it fires until `action` is set.
    public convenience init() { self.init({}) }

    public var isArmed: Bool { heapIndex >= 0 }
}

extension UInt64 {
    /// Seconds to monotonic nanoseconds.
    @inline(__always) public static func nanoseconds(_ seconds: Double) -> UInt64 {
        seconds <= 0 ? 0 : UInt64(seconds * 1_000_000_000)
    }
}
