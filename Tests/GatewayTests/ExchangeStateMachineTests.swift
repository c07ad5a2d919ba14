@testable import Gateway
@testable import ProxyCore
import HTTPWire
import Testing

/// `ExchangeStateMachine` as a value: no socket, no loop, no clock (a deadline is an event like any other). The table
/// gives, for every state an exchange can be in, what every event does: the one action and the state after it, or
/// `impossible` where the machine refuses the event with a `preconditionFailure` (an event no driver can produce
/// there: a response head before the request was forwarded, body bytes after the body's end). Client EOF is the
/// `clientClosed` column, deadlines the `deadline` column. What the states hold (the head while it may be written, the
/// upstream channel while one carries the request) is part of every expected state and action.
@Suite struct ExchangeStateMachineTests {
    /// The upstream channel, as the machine sees it: an identity.
    final class Channel: Equatable, Sendable, CustomStringConvertible {
        let name: String
        init(_ name: String) { self.name = name }
        static func == (a: Channel, b: Channel) -> Bool { a === b }
        var description: String { name }
    }

    /// The gateway's own answer, as the machine sees it: a value it carries from the event to the action.
    typealias Machine = ExchangeStateMachine<Channel, Int>
    typealias Event = Machine.Event
    typealias Action = Machine.Action
    typealias State = Machine.State

    enum Cell: Equatable {
        case to(Action, State)
        case impossible
    }

    static let big = Backpressure.highWater + 1
    static let up = Channel("upstream")
    static let answer = 413
    static let get = head("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
    static let post = head("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n")
    static let postContinue = head("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n")
    static let response = HTTPResponseHead(status: 200, reasonRange: 0..<0, versionMinor: 1, headers: HTTPHeaders(),
                                           contentLength: nil, isChunked: true, connectionTokens: [], keepAlive: true)
    static let switching = HTTPResponseHead(status: 101, reasonRange: 0..<0, versionMinor: 1, headers: HTTPHeaders(),
                                            contentLength: nil, isChunked: false, connectionTokens: [], keepAlive: true)

    static func head(_ text: String) -> HTTPRequestHead {
        var parser = HTTPRequestHeadParser()
        guard case .complete(let head, _) = Array(text.utf8).withUnsafeBytes({ parser.parse($0) }) else {
            preconditionFailure("a test head did not parse: \(text)")
        }
        return head
    }

    /// A machine driven from `head` by `events` (each must be possible); body limit 100 bytes.
    static func machine(_ head: HTTPRequestHead, bodyFollows: Bool, _ events: [Event] = []) -> Machine {
        var m = Machine(head: head, bodyFollows: bodyFollows)
        m.maxBodyBytes = 100
        for e in events { _ = m.handle(e) }
        return m
    }

    /// The events of the table, in column order; `upstreamBacklog` is one above the high-water mark.
    static let events: [Event] = [
        .bodyPart(count: 10), .bodyEnd, .clientClosed, .connectionClosed, .appCheckPassed, .builtinChosen,
        .answer(answer, close: false), .upstreamConnected(up, backlog: 0), .upstreamBacklog(big), .upstreamDrained,
        .upstreamHead(response, .chunked), .upstreamUpgraded(switching), .upstreamPart, .upstreamEnd,
        .upstreamFailed(.reset), .tunnelClosed, .deadline,
    ]

    struct Row {
        let name: String
        let start: Machine
        let cells: [Cell]
    }

    static let rows: [Row] = {
        let held = Machine.RequestBody.streaming(held: true)
        let open = Machine.RequestBody.streaming(held: false)
        let complete = Machine.RequestBody.complete
        let x = Cell.impossible
        let (get, post, up, answer) = (Self.get, Self.post, Self.up, Self.answer)
        func cancelCells(_ abandon: Channel?) -> [Cell] {
            [.to(.cancel(abandon: abandon), .done(.clientClosed)), .to(.cancel(abandon: abandon), .done(.connectionClosed))]
        }
        let writeHead = Action.writeHead(response, .chunked)
        var rows: [Row] = []

        rows.append(Row(name: "refusing a request that did not parse", start: Machine(refusing: ()), cells: [
            x, x] + cancelCells(nil) + [
            x, x,
            .to(.answer(answer, close: false, abandon: nil), .done(.answered)),
            x, x, .to(.none, .refusing), x, x, x, x, x, x,
            .to(.none, .refusing),
        ]))
        rows.append(Row(name: "admitting, body to come", start: machine(post, bodyFollows: true), cells: [
            .to(.holdPart, .admitting(held, post)), .to(.none, .admitting(complete, post))] + cancelCells(nil) + [
            .to(.forward(post), .connecting(held, retry: nil)),
            .to(.wantBody(sendContinue: false, resumeInput: true), .builtinBody(post)),
            .to(.answer(answer, close: true, abandon: nil), .done(.answered)),
            x, x, .to(.none, .admitting(held, post)), x, x, x, x, x, x,
            .to(.deferDeadline, .admitting(held, post)),
        ]))
        rows.append(Row(name: "admitting, no body", start: machine(get, bodyFollows: false), cells: [
            x, x] + cancelCells(nil) + [
            .to(.forward(get), .connecting(complete, retry: get)),
            .to(.runBuiltin(get), .builtinWaiting),
            .to(.answer(answer, close: false, abandon: nil), .done(.answered)),
            x, x, .to(.none, .admitting(complete, get)), x, x, x, x, x, x,
            .to(.none, .admitting(complete, get)),
        ]))
        rows.append(Row(name: "built-in handler reading its body", start: machine(post, bodyFollows: true, [.builtinChosen]),
                        cells: [
            .to(.bufferBuiltinPart, .builtinBody(post)), .to(.runBuiltin(post), .builtinWaiting)] + cancelCells(nil) + [
            x, x,
            .to(.answer(answer, close: true, abandon: nil), .done(.answered)),
            x, x, .to(.none, .builtinBody(post)), x, x, x, x, x, x,
            .to(.answerTimeout(abandon: nil), .done(.answered)),
        ]))
        rows.append(Row(name: "built-in handler working", start: machine(get, bodyFollows: false, [.builtinChosen]), cells: [
            x, x] + cancelCells(nil) + [
            x, x,
            .to(.answer(answer, close: false, abandon: nil), .done(.answered)),
            x, x, .to(.none, .builtinWaiting), x, x, x, x, x, x,
            .to(.none, .builtinWaiting),
        ]))
        rows.append(Row(name: "connecting, body held", start: machine(post, bodyFollows: true, [.appCheckPassed]), cells: [
            .to(.holdPart, .connecting(held, retry: nil)),
            .to(.none, .connecting(complete, retry: nil))] + cancelCells(nil) + [
            x, x,
            .to(.answer(answer, close: true, abandon: nil), .done(.answered)),
            .to(.wantBody(sendContinue: false, resumeInput: true), .forwarding(open, retry: nil, up)),
            x, .to(.none, .connecting(held, retry: nil)), x, x, x, x,
            .to(.answerUpstreamFailure(.reset, close: true), .done(.answered)),
            x,
            .to(.deferDeadline, .connecting(held, retry: nil)),
        ]))
        rows.append(Row(name: "connecting, a body-less GET (retry allowed)", start: machine(get, bodyFollows: false, [.appCheckPassed]),
                        cells: [
            x, x] + cancelCells(nil) + [
            x, x,
            .to(.answer(answer, close: false, abandon: nil), .done(.answered)),
            .to(.endRequestBody(up), .forwarding(complete, retry: get, up)),
            x, .to(.none, .connecting(complete, retry: get)), x, x, x, x,
            .to(.answerUpstreamFailure(.reset, close: false), .done(.answered)),
            x,
            .to(.none, .connecting(complete, retry: get)),
        ]))
        rows.append(Row(name: "forwarding, body streaming",
                        start: machine(post, bodyFollows: true, [.appCheckPassed, .upstreamConnected(up, backlog: 0)]),
                        cells: [
            .to(.forwardPart(up), .forwarding(open, retry: nil, up)),
            .to(.endRequestBody(up), .forwarding(complete, retry: nil, up))] + cancelCells(up) + [
            x, x,
            .to(.answer(answer, close: true, abandon: up), .done(.answered)),
            x,
            .to(.pauseInput, .forwarding(held, retry: nil, up)),
            .to(.none, .forwarding(open, retry: nil, up)),
            .to(writeHead, .streamingResponse(open, up)),
            .to(.openTunnel(up, switching), .tunnel),
            x, x,
            .to(.answerUpstreamFailure(.reset, close: true), .done(.answered)),
            x,
            .to(.answerTimeout(abandon: up), .done(.answered)),
        ]))
        rows.append(Row(name: "forwarding, body held by the upstream's backlog",
                        start: machine(post, bodyFollows: true, [.appCheckPassed, .upstreamConnected(up, backlog: big)]),
                        cells: [
            .to(.forwardPart(up), .forwarding(held, retry: nil, up)),
            .to(.endRequestBody(up), .forwarding(complete, retry: nil, up))] + cancelCells(up) + [
            x, x,
            .to(.answer(answer, close: true, abandon: up), .done(.answered)),
            x,
            .to(.none, .forwarding(held, retry: nil, up)),
            .to(.resumeInput, .forwarding(open, retry: nil, up)),
            .to(writeHead, .streamingResponse(held, up)),
            .to(.openTunnel(up, switching), .tunnel),
            x, x,
            .to(.answerUpstreamFailure(.reset, close: true), .done(.answered)),
            x,
            .to(.deferDeadline, .forwarding(held, retry: nil, up)),
        ]))
        rows.append(Row(name: "forwarding a body-less GET (retry allowed)",
                        start: machine(get, bodyFollows: false, [.appCheckPassed, .upstreamConnected(up, backlog: 0)]), cells: [
            x, x] + cancelCells(up) + [
            x, x,
            .to(.answer(answer, close: false, abandon: up), .done(.answered)),
            x, x,
            .to(.none, .forwarding(complete, retry: get, up)),
            .to(writeHead, .streamingResponse(complete, up)),
            .to(.openTunnel(up, switching), .tunnel),
            x, x,
            .to(.answerUpstreamFailure(.reset, close: false), .done(.answered)),
            x,
            .to(.none, .forwarding(complete, retry: get, up)),
        ]))
        rows.append(Row(name: "forwarding a body-less POST (no retry)",
                        start: machine(head("POST / HTTP/1.1\r\nHost: a\r\n\r\n"), bodyFollows: false,
                                       [.appCheckPassed, .upstreamConnected(up, backlog: 0)]), cells: [
            x, x] + cancelCells(up) + [
            x, x,
            .to(.answer(answer, close: false, abandon: up), .done(.answered)),
            x, x,
            .to(.none, .forwarding(complete, retry: nil, up)),
            .to(writeHead, .streamingResponse(complete, up)),
            .to(.openTunnel(up, switching), .tunnel),
            x, x,
            .to(.answerUpstreamFailure(.reset, close: false), .done(.answered)),
            x,
            .to(.none, .forwarding(complete, retry: nil, up)),
        ]))
        rows.append(Row(name: "response streaming, request body streaming",
                        start: machine(post, bodyFollows: true,
                                       [.appCheckPassed, .upstreamConnected(up, backlog: 0), .upstreamHead(response, .chunked)]),
                        cells: [
            .to(.forwardPart(up), .streamingResponse(open, up)),
            .to(.endRequestBody(up), .streamingResponse(complete, up))] + cancelCells(up) + [
            x, x,
            .to(.cutResponse(abandon: up, answer: answer), .done(.cut)),
            x,
            .to(.pauseInput, .streamingResponse(held, up)),
            .to(.none, .streamingResponse(open, up)),
            x, x, .to(.writePart, .streamingResponse(open, up)),
            .to(.finishResponse(requestComplete: false), .done(.completed)),
            .to(.cutResponse(abandon: nil, answer: nil), .done(.cut)),
            x,
            .to(.cutResponse(abandon: up, answer: nil), .done(.cut)),
        ]))
        rows.append(Row(name: "response streaming, request body held",
                        start: machine(post, bodyFollows: true,
                                       [.appCheckPassed, .upstreamConnected(up, backlog: 0), .upstreamHead(response, .chunked),
                                        .bodyPart(count: 10), .upstreamBacklog(big)]),
                        cells: [
            .to(.forwardPart(up), .streamingResponse(held, up)),
            .to(.endRequestBody(up), .streamingResponse(complete, up))] + cancelCells(up) + [
            x, x,
            .to(.cutResponse(abandon: up, answer: answer), .done(.cut)),
            x,
            .to(.none, .streamingResponse(held, up)),
            .to(.resumeInput, .streamingResponse(open, up)),
            x, x, .to(.writePart, .streamingResponse(held, up)),
            .to(.finishResponse(requestComplete: false), .done(.completed)),
            .to(.cutResponse(abandon: nil, answer: nil), .done(.cut)),
            x,
            .to(.deferDeadline, .streamingResponse(held, up)),
        ]))
        rows.append(Row(name: "response streaming, request complete",
                        start: machine(get, bodyFollows: false,
                                       [.appCheckPassed, .upstreamConnected(up, backlog: 0), .upstreamHead(response, .chunked)]),
                        cells: [
            x, x] + cancelCells(up) + [
            x, x,
            .to(.cutResponse(abandon: up, answer: answer), .done(.cut)),
            x, x,
            .to(.none, .streamingResponse(complete, up)),
            x, x, .to(.writePart, .streamingResponse(complete, up)),
            .to(.finishResponse(requestComplete: true), .done(.completed)),
            .to(.cutResponse(abandon: nil, answer: nil), .done(.cut)),
            x,
            .to(.none, .streamingResponse(complete, up)),
        ]))
        // The relay owns both connections: the exchange only waits for the tunnel's end.
        rows.append(Row(name: "tunnel", start: machine(get, bodyFollows: false,
                                                        [.appCheckPassed, .upstreamConnected(up, backlog: 0),
                                                         .upstreamUpgraded(switching)]),
                        cells: [
            .to(.none, .tunnel), .to(.none, .tunnel), .to(.none, .tunnel), .to(.none, .tunnel),
            x, x,
            .to(.none, .tunnel),
            x,
            .to(.none, .tunnel), .to(.none, .tunnel),
            x, x, x, x, x,
            .to(.finishTunnel, .done(.completed)),
            .to(.none, .tunnel),
        ]))
        // Every ending ignores whatever comes late (a timer, an App Check answer, bytes still being decoded).
        let endings: [(String, Machine)] = [
            ("done: completed", machine(get, bodyFollows: false, [.appCheckPassed, .upstreamConnected(up, backlog: 0),
                                                                   .upstreamHead(response, .chunked), .upstreamEnd])),
            ("done: a tunnel completed", machine(get, bodyFollows: false, [.appCheckPassed, .upstreamConnected(up, backlog: 0),
                                                                            .upstreamUpgraded(switching), .tunnelClosed])),
            ("done: answered", machine(post, bodyFollows: true, [.answer(answer, close: false)])),
            ("done: cut", machine(get, bodyFollows: false, [.appCheckPassed, .upstreamConnected(up, backlog: 0),
                                                             .upstreamHead(response, .chunked), .upstreamFailed(.reset)])),
            ("done: client closed", machine(post, bodyFollows: true, [.clientClosed])),
            ("done: connection closed", machine(post, bodyFollows: true, [.appCheckPassed, .connectionClosed])),
        ]
        for (name, m) in endings {
            rows.append(Row(name: name, start: m, cells: events.map { _ in .to(.none, m.state) }))
        }
        return rows
    }()

    @Test func everyStateHasACellForEveryEvent() {
        for row in Self.rows { #expect(row.cells.count == Self.events.count, "\(row.name)") }
        // Every state of the machine appears in the table.
        let states = Self.rows.map(\.start.state)
        func has(_ match: (State) -> Bool) -> Bool { states.contains(where: match) }
        #expect(has { if case .refusing = $0 { true } else { false } })
        #expect(has { if case .admitting = $0 { true } else { false } })
        #expect(has { if case .builtinBody = $0 { true } else { false } })
        #expect(states.contains(.builtinWaiting))
        #expect(has { if case .connecting = $0 { true } else { false } })
        #expect(has { if case .forwarding = $0 { true } else { false } })
        #expect(has { if case .streamingResponse = $0 { true } else { false } })
        #expect(states.contains(.tunnel))
        for ending in [Machine.Ending.completed, .answered, .cut, .clientClosed, .connectionClosed] {
            #expect(states.contains(.done(ending)))
        }
    }

    @Test(arguments: rows.indices)
    func table(_ index: Int) {
        let row = Self.rows[index]
        for (event, cell) in zip(Self.events, row.cells) {
            guard case .to(let action, let after) = cell else { continue }
            var m = row.start
            let got = m.handle(event)
            #expect(got == action, "\(row.name), \(event)")
            #expect(m.state == after, "\(row.name), \(event)")
        }
    }

    // MARK: what the table's single columns do not show

    @Test func aLowUpstreamBacklogChangesNothing() {
        var m = Self.machine(Self.post, bodyFollows: true, [.appCheckPassed, .upstreamConnected(Self.up, backlog: 0)])
        #expect(m.handle(.bodyPart(count: 10)) == .forwardPart(Self.up))
        #expect(m.handle(.upstreamBacklog(Backpressure.highWater)) == .none)
        #expect(m.state == .forwarding(.streaming(held: false), retry: nil, Self.up))
    }

    @Test func aBodyOverTheLimitIsRefusedWhereverItArrives() {
        let up = Self.up
        let starts: [Machine] = [
            Self.machine(Self.post, bodyFollows: true),
            Self.machine(Self.post, bodyFollows: true, [.builtinChosen]),
            Self.machine(Self.post, bodyFollows: true, [.appCheckPassed]),
            Self.machine(Self.post, bodyFollows: true, [.appCheckPassed, .upstreamConnected(up, backlog: 0)]),
            Self.machine(Self.post, bodyFollows: true, [.appCheckPassed, .upstreamConnected(up, backlog: 0),
                                                        .upstreamHead(Self.response, .chunked)]),
        ]
        for start in starts {
            var m = start
            #expect(m.handle(.bodyPart(count: 100)) != .refuseTooLarge)
            #expect(m.handle(.bodyPart(count: 1)) == .refuseTooLarge)
            // The refusal is the driver's answer: the machine stays where it was until then.
            #expect(m.state == start.state || m.state == .admitting(.streaming(held: true), Self.post))
            let answered = m.handle(.answer(Self.answer, close: true))
            #expect(answered == .answer(Self.answer, close: true, abandon: m.upstream ?? start.upstream)
                    || answered == .cutResponse(abandon: up, answer: Self.answer))
            #expect(m.upstream == nil)
        }
    }

    @Test func aStalePooledConnectionIsRetriedOnceForABodylessIdempotentRequest() {
        let (up, fresh) = (Self.up, Channel("fresh"))
        var m = Self.machine(Self.get, bodyFollows: false, [.appCheckPassed, .upstreamConnected(up, backlog: 0)])
        // The stale connection is dropped with the retry; the head, written again, is not kept for another.
        #expect(m.handle(.upstreamFailed(.staleConnection)) == .retry(Self.get))
        #expect(m.state == .connecting(.complete, retry: nil))
        #expect(m.handle(.upstreamConnected(fresh, backlog: 0)) == .endRequestBody(fresh))
        #expect(m.handle(.upstreamFailed(.staleConnection)) == .answerUpstreamFailure(.staleConnection, close: false))
        // A connection that failed before the channel was handed over is retried the same way.
        var c = Self.machine(Self.get, bodyFollows: false, [.appCheckPassed])
        #expect(c.handle(.upstreamFailed(.staleConnection)) == .retry(Self.get))
        for method in ["POST", "PATCH"] {
            var p = Self.machine(Self.head("\(method) / HTTP/1.1\r\nHost: a\r\n\r\n"), bodyFollows: false,
                                 [.appCheckPassed, .upstreamConnected(up, backlog: 0)])
            #expect(p.handle(.upstreamFailed(.staleConnection)) == .answerUpstreamFailure(.staleConnection, close: false))
        }
        // A request with a body is never retried: its bytes went out.
        var b = Self.machine(Self.head("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\n"), bodyFollows: true,
                             [.appCheckPassed, .upstreamConnected(up, backlog: 0), .bodyEnd])
        #expect(b.handle(.upstreamFailed(.staleConnection)) == .answerUpstreamFailure(.staleConnection, close: false))
        // Nor is anything after the response head.
        var h = Self.machine(Self.get, bodyFollows: false, [.appCheckPassed, .upstreamConnected(up, backlog: 0),
                                                            .upstreamHead(Self.response, .chunked)])
        #expect(h.handle(.upstreamFailed(.staleConnection)) == .cutResponse(abandon: nil, answer: nil))
    }

    @Test func continueIsOwedOnceTheBodyIsWantedAndOnlyWithABody() {
        var routed = Self.machine(Self.postContinue, bodyFollows: true, [.appCheckPassed])
        #expect(routed.handle(.upstreamConnected(Self.up, backlog: 0)) == .wantBody(sendContinue: true, resumeInput: true))
        var builtin = Self.machine(Self.postContinue, bodyFollows: true)
        #expect(builtin.handle(.builtinChosen) == .wantBody(sendContinue: true, resumeInput: true))
        var bodyless = Self.machine(Self.postContinue, bodyFollows: false, [.appCheckPassed])
        #expect(bodyless.handle(.upstreamConnected(Self.up, backlog: 0)) == .endRequestBody(Self.up))
        // Refused instead: the final status, and the connection closes (the body was never read).
        var refused = Self.machine(Self.postContinue, bodyFollows: true)
        #expect(refused.handle(.answer(Self.answer, close: false)) == .answer(Self.answer, close: true, abandon: nil))
    }

    @Test func aBodyHeldDuringAdmissionResumesOnlyOnceTheUpstreamTookIt() {
        // HTTP/2 DATA that arrived while the App Check step decided went out with the head and filled the upstream's
        // buffer: the client's input stays paused until it drains.
        var m = Self.machine(Self.post, bodyFollows: true)
        #expect(m.handle(.bodyPart(count: 50)) == .holdPart)
        #expect(m.handle(.appCheckPassed) == .forward(Self.post))
        #expect(m.handle(.upstreamConnected(Self.up, backlog: Self.big)) == .wantBody(sendContinue: false, resumeInput: false))
        #expect(m.handle(.deadline) == .deferDeadline)
        #expect(m.handle(.upstreamDrained) == .resumeInput)
        #expect(m.handle(.deadline) == .answerTimeout(abandon: Self.up))
    }

    @Test func aRewrittenHeadIsTheOneForwarded() {
        var m = Self.machine(Self.get, bodyFollows: false)
        let rewritten = Self.head("GET /rewritten HTTP/1.1\r\nHost: a\r\n\r\n")
        m.replaceHead(rewritten)
        #expect(m.handle(.appCheckPassed) == .forward(rewritten))
        #expect(m.state == .connecting(.complete, retry: rewritten))
    }

    @Test func theClientLeavingEndsTheExchangeOnceInEveryState() {
        for row in Self.rows {
            var m = row.start
            let first = m.handle(.clientClosed)
            if row.start.isDone || row.start.state == .tunnel {
                // A tunnel is its relay's to end (`tunnelClosed`).
                #expect(first == .none, "\(row.name)")
            } else {
                #expect(first == .cancel(abandon: row.start.upstream), "\(row.name)")
                #expect(m.state == .done(.clientClosed), "\(row.name)")
                #expect(m.upstream == nil, "\(row.name)")
            }
            #expect(m.handle(.clientClosed) == .none, "\(row.name)")
            #expect(m.handle(.connectionClosed) == .none, "\(row.name)")
            #expect(m.handle(.deadline) == .none, "\(row.name)")
        }
    }

    @Test func whatTheAdaptersReadFollowsTheState() {
        var m = Self.machine(Self.post, bodyFollows: true)
        #expect(m.isAdmitting && !m.requestComplete && !m.responseStarted && !m.isDone && m.upstream == nil)
        _ = m.handle(.appCheckPassed)
        #expect(m.upstream == nil)
        _ = m.handle(.upstreamConnected(Self.up, backlog: 0))
        #expect(!m.isAdmitting && !m.requestComplete && m.upstream == Self.up)
        _ = m.handle(.upstreamHead(Self.response, .chunked))
        #expect(m.responseStarted && !m.requestComplete && m.upstream == Self.up)
        _ = m.handle(.bodyEnd)
        #expect(m.requestComplete)
        _ = m.handle(.upstreamEnd)
        #expect(m.isDone && m.responseStarted && m.ending == .completed && m.upstream == nil)
        var c = Self.machine(Self.post, bodyFollows: true)
        _ = c.handle(.clientClosed)
        #expect(c.ending == .clientClosed && !c.responseStarted)
    }

    /// The machine is stored inline in every exchange and its actions are returned by value: both stay a few words
    /// (the gateway's channel is an existential of two words; its answer is built only on the answer's path).
    @Test func machineAndActionsAreSmallValues() {
        #expect(MemoryLayout<Exchange.Machine>.size <= 72)
        #expect(MemoryLayout<Exchange.Machine.State>.size <= 40)
        #expect(MemoryLayout<Exchange.Machine.Action>.size <= 32)
        #expect(MemoryLayout<Exchange.Machine.Event>.size <= 32)
    }
}

@Suite struct AppCheckOutcomeTests {
    /// Metrics count a category by its raw value: it must be its index in `LoopMetrics.outcomes`, whose names are
    /// the metric labels and the log lines' `outcome`.
    @Test func categoryRawValuesAreTheMetricIndices() {
        #expect(AppCheckOutcome.Category.allCases.count == LoopMetrics.outcomes.count)
        for category in AppCheckOutcome.Category.allCases {
            #expect(LoopMetrics.outcomes[Int(category.rawValue)] == category.name)
            #expect(LoopMetrics.outcomeIndex(category.name) == Int(category.rawValue))
        }
        #expect(AppCheckOutcome.Status.allCases.map(\.name) == ["verified", "missing", "invalid", "reused", "skipped"])
    }
}
