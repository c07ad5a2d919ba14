import CSystemShims
import EventLoop
import Foundation
import Synchronization
import Testing

@Suite struct EventLoopTests {
    @Test func timersFireInDeadlineOrderAndCancelledOnesDoNot() throws {
        let loop = try EventLoop()
        let fired = Mutex<[Int]>([])
        let done = DispatchSemaphore(value: 0)
        loop.execute {
            var timers: [LoopTimer] = []
            for (i, ms) in [30, 10, 50, 20, 40].enumerated() {
                let t = LoopTimer { fired.withLock { $0.append(ms) }; if ms == 50 { done.signal() } }
                _ = i
                timers.append(t)
                loop.schedule(t, at: loop.now + UInt64(ms) * 1_000_000)
            }
            loop.cancel(timers[3])  // the 20 ms one
            loop.schedule(timers[0], at: loop.now + 5 * 1_000_000)  // 30 ms moved to 5 ms
        }
        loop.startThread(name: "t")
        #expect(done.wait(timeout: .now() + 5) == .success)
        loop.stop()
        #expect(fired.withLock { $0 } == [30, 10, 40, 50])
    }

    @Test func heapStaysConsistentUnderManyScheduleAndCancelCalls() throws {
        let loop = try EventLoop()
        var timers = (0..<500).map { _ in LoopTimer {} }
        var rng = SystemRandomNumberGenerator()
        for t in timers { loop.schedule(t, at: UInt64.random(in: 1...1_000_000, using: &rng)) }
        for t in timers.shuffled().prefix(200) { loop.cancel(t) }
        for t in timers.shuffled().prefix(100) { loop.schedule(t, at: UInt64.random(in: 1...1_000_000, using: &rng)) }
        #expect(loop.armedTimerCount == timers.filter(\.isArmed).count)
        timers.removeAll()
    }

    @Test func executeRunsTasksFromOtherThreadsOnTheLoopThread() throws {
        let loop = try EventLoop()
        loop.startThread(name: "t")
        let count = Atomic<Int>(0)
        let onLoop = Atomic<Int>(0)
        let group = DispatchGroup()
        for _ in 0..<4 {
            group.enter()
            DispatchQueue.global().async {
                for _ in 0..<250 {
                    loop.execute {
                        count.add(1, ordering: .relaxed)
                        if loop.inLoop { onLoop.add(1, ordering: .relaxed) }
                    }
                }
                group.leave()
            }
        }
        group.wait()
        let deadline = Date().addingTimeInterval(5)
        while count.load(ordering: .relaxed) < 1000 && Date() < deadline { usleep(1000) }
        loop.stop()
        #expect(count.load(ordering: .relaxed) == 1000)
        #expect(onLoop.load(ordering: .relaxed) == 1000)
    }

    @Test func ioBufferGrowsCompactsAndFormatsNumbers() {
        let b = IOBuffer(capacity: 64)
        b.append(Array(repeating: 7, count: 100))
        #expect(b.readableCount == 100)
        b.consume(90)
        b.append(Array(repeating: 8, count: 60))
        #expect(b.readableBytes() == Array(repeating: 7, count: 10) + Array(repeating: 8, count: 60))
        b.clear()
        b.appendDecimal(0); b.append(" "); b.appendDecimal(1_234_567); b.append(" "); b.appendDecimal(-42)
        b.append(" "); b.appendHex(0); b.append(" "); b.appendHex(0xABCDEF)
        #expect(String(decoding: b.readableBytes(), as: UTF8.self) == "0 1234567 -42 0 abcdef")
        b.consume(b.readableCount)
        #expect(b.isEmpty)
    }

    @Test func eventBitsAreTheSystemsOwn() {
        #expect(EventLoop.readable == CSystemShims_EPOLLIN)
        #expect(EventLoop.writable == CSystemShims_EPOLLOUT)
        #expect(EventLoop.error == CSystemShims_EPOLLERR)
        #expect(EventLoop.hangup == CSystemShims_EPOLLHUP)
        #expect(EventLoop.readHangup == CSystemShims_EPOLLRDHUP)
    }

    @Test func ioBufferAppendsSmallAndLargeStringsAndSubstrings() {
        let b = IOBuffer(capacity: 0)
        let large = String(repeating: "abcdefgh", count: 8)
        b.append("GET"); b.append(large); b.append(large.dropFirst(60)); b.append("é/ü")
        b.append(Substring("x")); b.append("")
        #expect(String(decoding: b.readableBytes(), as: UTF8.self) == "GET" + large + "efgh" + "é/ü" + "x")
    }

    @Test func socketPairReadWriteReportsWouldBlockAndEOF() throws {
        let address = try #require(SocketAddress(ip: "127.0.0.1", port: 0))
        let listener = try Socket.listen(address, reusePort: false)
        defer { Socket.close(listener) }
        let bound = try #require(Socket.localAddress(listener))
        let (client, _) = try Socket.connect(bound)
        var clientOpen = true
        // Closed exactly once: a second close(2) of a reused number would cut another test's socket.
        defer { if clientOpen { Socket.close(client) } }
        var accepted: (fd: Int32, peer: SocketAddress)?
        let deadline = Date().addingTimeInterval(2)
        while accepted == nil && Date() < deadline { accepted = Socket.accept(listener); if accepted == nil { usleep(1000) } }
        let server = try #require(accepted)
        let buf = IOBuffer()
        #expect(Socket.read(server.fd, into: buf) == .wouldBlock)
        let out = IOBuffer()
        out.append("ping")
        while Socket.write(client, from: out) == .wouldBlock { usleep(1000) }
        var got = IOResult.wouldBlock
        while got == .wouldBlock && Date() < deadline { got = Socket.read(server.fd, into: buf); usleep(500) }
        #expect(got == .processed(4))
        #expect(server.peer.ipString == "127.0.0.1")
        Socket.close(client)
        clientOpen = false
        got = .wouldBlock
        while got == .wouldBlock && Date() < deadline { got = Socket.read(server.fd, into: buf); usleep(500) }
        #expect(got == .eof)
        Socket.close(server.fd)
    }
}
