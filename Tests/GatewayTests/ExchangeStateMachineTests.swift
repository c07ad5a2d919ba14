@testable import Gateway
@testable import ProxyCore
import Testing

/// `ExchangeStateMachine` as a value: no socket, no loop, no clock (a deadline is an event like any other). The table
/// gives, for every state an exchange can be in, what every event does: the one action and the state after it, or
/// `impossible` where the machine refuses the event with a `preconditionFailure` (an event no driver can produce
/// there: a response head before the request was forwarded, body bytes after the body's end). Client EOF is the
/// `clientClosed` column, deadlines the `deadline` column.
@Suite struct ExchangeStateMachineTests {
    typealias Machine = ExchangeStateMachine
    typealias Event = Machine.Event
    typealias Action = Machine.Action
    typealias State = Machine.State

    enum Cell: Equatable {
        case to(Action, State)
        case impossible
    }

    static let big = Backpressure.highWater + 1

    /// A machine driven from its head by `events` (each must be possible); body limit 100 bytes.
    static func machine(bodyFollows: Bool, method: String = "GET", expectContinue: Bool = false,
                        _ events: [Event] = []) -> Machine {
        var m = Machine(bodyFollows: bodyFollows, expectContinue: expectContinue,
                        retryableMethod: method != "POST" && method != "PATCH")
        m.maxBodyBytes = 100
        for e in events { _ = m.handle(e) }
        return m
    }

    /// The events of the table, in column order; `upstreamBacklog` is one above the high-water mark.
    static let events: [Event] = [
        .bodyPart(count: 10), .bodyEnd, .clientClosed, .connectionClosed, .appCheckPassed, .builtinChosen,
        .answer(close: false), .upstreamConnected(backlog: 0), .upstreamBacklog(big), .upstreamDrained,
        .upstreamHead, .upstreamPart, .upstreamEnd, .upstreamFailed(.reset), .deadline,
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
        func cancelCells() -> [Cell] {
            [.to(.cancel, .done(.clientClosed)), .to(.cancel, .done(.connectionClosed))]
        }
        var rows: [Row] = []

        rows.append(Row(name: "admitting, body to come", start: machine(bodyFollows: true, method: "POST"), cells: [
            .to(.holdPart, .admitting(held)), .to(.none, .admitting(complete))] + cancelCells() + [
            .to(.forward, .forwarding(held, mayRetry: false)),
            .to(.wantBody(sendContinue: false, resumeInput: true), .builtinBody),
            .to(.answer(close: true), .done(.answered)),
            x, x, .to(.none, .admitting(held)), x, x, x, x,
            .to(.deferDeadline, .admitting(held)),
        ]))
        rows.append(Row(name: "admitting, no body", start: machine(bodyFollows: false), cells: [
            x, x] + cancelCells() + [
            .to(.forward, .forwarding(complete, mayRetry: true)),
            .to(.runBuiltin, .builtinWaiting),
            .to(.answer(close: false), .done(.answered)),
            x, x, .to(.none, .admitting(complete)), x, x, x, x,
            .to(.none, .admitting(complete)),
        ]))
        rows.append(Row(name: "built-in handler reading its body", start: machine(bodyFollows: true, [.builtinChosen]),
                        cells: [
            .to(.bufferBuiltinPart, .builtinBody), .to(.runBuiltin, .builtinWaiting)] + cancelCells() + [
            x, x,
            .to(.answer(close: true), .done(.answered)),
            x, x, .to(.none, .builtinBody), x, x, x, x,
            .to(.answerTimeout, .done(.answered)),
        ]))
        rows.append(Row(name: "built-in handler working", start: machine(bodyFollows: false, [.builtinChosen]), cells: [
            x, x] + cancelCells() + [
            x, x,
            .to(.answer(close: false), .done(.answered)),
            x, x, .to(.none, .builtinWaiting), x, x, x, x,
            .to(.none, .builtinWaiting),
        ]))
        rows.append(Row(name: "forwarding, body held until connected",
                        start: machine(bodyFollows: true, method: "POST", [.appCheckPassed]), cells: [
            .to(.forwardPart, .forwarding(held, mayRetry: false)),
            .to(.endRequestBody, .forwarding(complete, mayRetry: false))] + cancelCells() + [
            x, x,
            .to(.answer(close: true), .done(.answered)),
            .to(.wantBody(sendContinue: false, resumeInput: true), .forwarding(open, mayRetry: false)),
            .to(.none, .forwarding(held, mayRetry: false)),
            .to(.resumeInput, .forwarding(open, mayRetry: false)),
            .to(.writeHead, .streamingResponse(held)), x, x,
            .to(.answerUpstreamFailure(.reset, close: true), .done(.answered)),
            .to(.deferDeadline, .forwarding(held, mayRetry: false)),
        ]))
        rows.append(Row(name: "forwarding, body streaming",
                        start: machine(bodyFollows: true, method: "POST", [.appCheckPassed, .upstreamConnected(backlog: 0)]),
                        cells: [
            .to(.forwardPart, .forwarding(open, mayRetry: false)),
            .to(.endRequestBody, .forwarding(complete, mayRetry: false))] + cancelCells() + [
            x, x,
            .to(.answer(close: true), .done(.answered)),
            .to(.wantBody(sendContinue: false, resumeInput: false), .forwarding(open, mayRetry: false)),
            .to(.pauseInput, .forwarding(held, mayRetry: false)),
            .to(.none, .forwarding(open, mayRetry: false)),
            .to(.writeHead, .streamingResponse(open)), x, x,
            .to(.answerUpstreamFailure(.reset, close: true), .done(.answered)),
            .to(.answerTimeout, .done(.answered)),
        ]))
        rows.append(Row(name: "forwarding a body-less GET (retry allowed)",
                        start: machine(bodyFollows: false, [.appCheckPassed]), cells: [
            x, x] + cancelCells() + [
            x, x,
            .to(.answer(close: false), .done(.answered)),
            .to(.endRequestBody, .forwarding(complete, mayRetry: true)),
            x,
            .to(.none, .forwarding(complete, mayRetry: true)),
            .to(.writeHead, .streamingResponse(complete)), x, x,
            .to(.answerUpstreamFailure(.reset, close: false), .done(.answered)),
            .to(.none, .forwarding(complete, mayRetry: true)),
        ]))
        rows.append(Row(name: "forwarding a body-less POST (no retry)",
                        start: machine(bodyFollows: false, method: "POST", [.appCheckPassed]), cells: [
            x, x] + cancelCells() + [
            x, x,
            .to(.answer(close: false), .done(.answered)),
            .to(.endRequestBody, .forwarding(complete, mayRetry: false)),
            x,
            .to(.none, .forwarding(complete, mayRetry: false)),
            .to(.writeHead, .streamingResponse(complete)), x, x,
            .to(.answerUpstreamFailure(.reset, close: false), .done(.answered)),
            .to(.none, .forwarding(complete, mayRetry: false)),
        ]))
        rows.append(Row(name: "response streaming, request body streaming",
                        start: machine(bodyFollows: true, method: "POST",
                                       [.appCheckPassed, .upstreamConnected(backlog: 0), .upstreamHead]),
                        cells: [
            .to(.forwardPart, .streamingResponse(open)),
            .to(.endRequestBody, .streamingResponse(complete))] + cancelCells() + [
            x, x,
            .to(.cutResponse, .done(.cut)),
            x,
            .to(.pauseInput, .streamingResponse(held)),
            .to(.none, .streamingResponse(open)),
            x, .to(.writePart, .streamingResponse(open)),
            .to(.finishResponse(requestComplete: false), .done(.completed)),
            .to(.cutResponse, .done(.cut)),
            .to(.cutResponse, .done(.cut)),
        ]))
        rows.append(Row(name: "response streaming, request body held",
                        start: machine(bodyFollows: true, method: "POST",
                                       [.appCheckPassed, .upstreamConnected(backlog: 0), .upstreamHead,
                                        .bodyPart(count: 10), .upstreamBacklog(big)]),
                        cells: [
            .to(.forwardPart, .streamingResponse(held)),
            .to(.endRequestBody, .streamingResponse(complete))] + cancelCells() + [
            x, x,
            .to(.cutResponse, .done(.cut)),
            x,
            .to(.none, .streamingResponse(held)),
            .to(.resumeInput, .streamingResponse(open)),
            x, .to(.writePart, .streamingResponse(held)),
            .to(.finishResponse(requestComplete: false), .done(.completed)),
            .to(.cutResponse, .done(.cut)),
            .to(.deferDeadline, .streamingResponse(held)),
        ]))
        rows.append(Row(name: "response streaming, request complete",
                        start: machine(bodyFollows: false, [.appCheckPassed, .upstreamConnected(backlog: 0), .upstreamHead]),
                        cells: [
            x, x] + cancelCells() + [
            x, x,
            .to(.cutResponse, .done(.cut)),
            x, x,
            .to(.none, .streamingResponse(complete)),
            x, .to(.writePart, .streamingResponse(complete)),
            .to(.finishResponse(requestComplete: true), .done(.completed)),
            .to(.cutResponse, .done(.cut)),
            .to(.none, .streamingResponse(complete)),
        ]))
        // Every ending ignores whatever comes late (a timer, an App Check answer, bytes still being decoded).
        let endings: [(String, Machine)] = [
            ("done: completed", machine(bodyFollows: false, [.appCheckPassed, .upstreamConnected(backlog: 0),
                                                              .upstreamHead, .upstreamEnd])),
            ("done: answered", machine(bodyFollows: true, [.answer(close: false)])),
            ("done: cut", machine(bodyFollows: false, [.appCheckPassed, .upstreamConnected(backlog: 0), .upstreamHead,
                                                        .upstreamFailed(.reset)])),
            ("done: client closed", machine(bodyFollows: true, [.clientClosed])),
            ("done: connection closed", machine(bodyFollows: true, [.appCheckPassed, .connectionClosed])),
        ]
        for (name, m) in endings {
            rows.append(Row(name: name, start: m, cells: events.map { _ in .to(.none, m.state) }))
        }
        return rows
    }()

    @Test func everyStateHasACellForEveryEvent() {
        #expect(Self.events.count == Machine.Event.allCases.count)
        for row in Self.rows { #expect(row.cells.count == Self.events.count, "\(row.name)") }
        // Every state of the machine appears in the table.
        let states = Self.rows.map(\.start.state)
        #expect(states.contains { if case .admitting = $0 { return true } else { return false } })
        #expect(states.contains(.builtinBody) && states.contains(.builtinWaiting))
        #expect(states.contains { if case .forwarding = $0 { return true } else { return false } })
        #expect(states.contains { if case .streamingResponse = $0 { return true } else { return false } })
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
        var m = Self.machine(bodyFollows: true, method: "POST", [.appCheckPassed, .upstreamConnected(backlog: 0)])
        #expect(m.handle(.bodyPart(count: 10)) == .forwardPart)
        #expect(m.handle(.upstreamBacklog(Backpressure.highWater)) == .none)
        #expect(m.state == .forwarding(.streaming(held: false), mayRetry: false))
    }

    @Test func aBodyOverTheLimitIsRefusedWhereverItArrives() {
        let starts: [Machine] = [
            Self.machine(bodyFollows: true),
            Self.machine(bodyFollows: true, [.builtinChosen]),
            Self.machine(bodyFollows: true, method: "POST", [.appCheckPassed, .upstreamConnected(backlog: 0)]),
            Self.machine(bodyFollows: true, method: "POST", [.appCheckPassed, .upstreamConnected(backlog: 0), .upstreamHead]),
        ]
        for start in starts {
            var m = start
            #expect(m.handle(.bodyPart(count: 100)) != .refuseTooLarge)
            #expect(m.handle(.bodyPart(count: 1)) == .refuseTooLarge)
            // The refusal is the driver's answer: the machine stays where it was until then.
            #expect(m.state == start.state || m.state == .admitting(.streaming(held: true)))
            let answered = m.handle(.answer(close: true))
            #expect(answered == .answer(close: true) || answered == .cutResponse)
        }
    }

    @Test func aStalePooledConnectionIsRetriedOnceForABodylessIdempotentRequest() {
        var m = Self.machine(bodyFollows: false, method: "GET", [.appCheckPassed])
        #expect(m.handle(.upstreamFailed(.staleConnection)) == .retry)
        #expect(m.state == .forwarding(.complete, mayRetry: false))
        #expect(m.handle(.upstreamConnected(backlog: 0)) == .endRequestBody)
        #expect(m.handle(.upstreamFailed(.staleConnection)) == .answerUpstreamFailure(.staleConnection, close: false))
        for method in ["POST", "PATCH"] {
            var p = Self.machine(bodyFollows: false, method: method, [.appCheckPassed])
            #expect(p.handle(.upstreamFailed(.staleConnection)) == .answerUpstreamFailure(.staleConnection, close: false))
        }
        // A request with a body is never retried: its bytes went out.
        var b = Self.machine(bodyFollows: true, method: "PUT", [.appCheckPassed, .upstreamConnected(backlog: 0), .bodyEnd])
        #expect(b.handle(.upstreamFailed(.staleConnection)) == .answerUpstreamFailure(.staleConnection, close: false))
        // Nor is anything after the response head.
        var h = Self.machine(bodyFollows: false, [.appCheckPassed, .upstreamConnected(backlog: 0), .upstreamHead])
        #expect(h.handle(.upstreamFailed(.staleConnection)) == .cutResponse)
    }

    @Test func continueIsOwedOnceTheBodyIsWantedAndOnlyWithABody() {
        var routed = Self.machine(bodyFollows: true, method: "POST", expectContinue: true, [.appCheckPassed])
        #expect(routed.handle(.upstreamConnected(backlog: 0)) == .wantBody(sendContinue: true, resumeInput: true))
        var builtin = Self.machine(bodyFollows: true, method: "POST", expectContinue: true)
        #expect(builtin.handle(.builtinChosen) == .wantBody(sendContinue: true, resumeInput: true))
        var bodyless = Self.machine(bodyFollows: false, method: "POST", expectContinue: true, [.appCheckPassed])
        #expect(bodyless.handle(.upstreamConnected(backlog: 0)) == .endRequestBody)
        // Refused instead: the final status, and the connection closes (the body was never read).
        var refused = Self.machine(bodyFollows: true, method: "POST", expectContinue: true)
        #expect(refused.handle(.answer(close: false)) == .answer(close: true))
    }

    @Test func aBodyHeldDuringAdmissionResumesOnlyOnceTheUpstreamTookIt() {
        // HTTP/2 DATA that arrived while the App Check step decided went out with the head and filled the upstream's
        // buffer: the client's input stays paused until it drains.
        var m = Self.machine(bodyFollows: true, method: "POST")
        #expect(m.handle(.bodyPart(count: 50)) == .holdPart)
        #expect(m.handle(.appCheckPassed) == .forward)
        #expect(m.handle(.upstreamConnected(backlog: Self.big)) == .wantBody(sendContinue: false, resumeInput: false))
        #expect(m.handle(.deadline) == .deferDeadline)
        #expect(m.handle(.upstreamDrained) == .resumeInput)
        #expect(m.handle(.deadline) == .answerTimeout)
    }

    @Test func theClientLeavingEndsTheExchangeOnceInEveryState() {
        for row in Self.rows {
            var m = row.start
            let first = m.handle(.clientClosed)
            if row.start.isDone {
                #expect(first == .none, "\(row.name)")
            } else {
                #expect(first == .cancel, "\(row.name)")
                #expect(m.state == .done(.clientClosed), "\(row.name)")
            }
            #expect(m.handle(.clientClosed) == .none, "\(row.name)")
            #expect(m.handle(.connectionClosed) == .none, "\(row.name)")
            #expect(m.handle(.deadline) == .none, "\(row.name)")
        }
    }

    @Test func whatTheAdaptersReadFollowsTheState() {
        var m = Self.machine(bodyFollows: true, method: "POST")
        #expect(m.isAdmitting && !m.requestComplete && !m.responseStarted && !m.isDone)
        _ = m.handle(.appCheckPassed)
        _ = m.handle(.upstreamConnected(backlog: 0))
        #expect(!m.isAdmitting && !m.requestComplete)
        _ = m.handle(.upstreamHead)
        #expect(m.responseStarted && !m.requestComplete)
        _ = m.handle(.bodyEnd)
        #expect(m.requestComplete)
        _ = m.handle(.upstreamEnd)
        #expect(m.isDone && m.responseStarted && m.ending == .completed)
        var c = Self.machine(bodyFollows: true)
        _ = c.handle(.clientClosed)
        #expect(c.ending == .clientClosed && !c.responseStarted)
    }

    /// The machine is stored inline in every exchange and its actions are returned by value: both stay a few words.
    @Test func machineAndActionsAreSmallValues() {
        #expect(MemoryLayout<Machine>.size <= 40)
        #expect(MemoryLayout<Action>.size <= 8)
        #expect(MemoryLayout<State>.size <= 4)
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
