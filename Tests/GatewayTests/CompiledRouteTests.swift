@testable import Gateway
@testable import ProxyCore
import EventLoop
import GatewayConfig
import HTTPWire
import JSONLog
import TestSupport
import Testing

/// `CompiledRoute`: built once per configuration load, handed out by reference by the router, held by the exchange;
/// a reload builds new instances while exchanges already routed keep theirs.
@Suite struct CompiledRouteTests {
    static let yaml = """
    app_check:
      project_number: "123456789012"
    upstreams:
      api:
        url: http://127.0.0.1:9
      grpc:
        url: http://127.0.0.1:9
        protocol: h2
    routes:
      - name: api
        prefix: /api/
        upstream: api
        enforcement: "off"
        stream_idle_timeout: 2s
      - name: writes
        path: /submit
        methods: [POST]
        upstream: grpc
        enforcement: monitor
        max_body_bytes: 1024
        providers: [app_attest]
        websocket: true
    """

    static func runtime(generation: Int = 0) throws -> Runtime {
        let settings = try ConfigLoader.load(yaml: yaml, path: "compiled.yaml", environment: [:]).get()
        return try Runtime(settings: settings, generation: generation)
    }

    @Test func theRouterHandsOutTheSameInstanceForEveryRequestOfARoute() throws {
        let runtime = try Self.runtime()
        let first = try #require(runtime.router.match(method: "GET", path: "/api/a"))
        let second = try #require(runtime.router.match(method: "GET", path: "/api/a"))
        let other = try #require(runtime.router.match(method: "DELETE", path: "/api/b/c"))
        #expect(first === second)
        #expect(first === other)
        #expect(first === runtime.routes[0])
        let writes = try #require(runtime.router.match(method: "POST", path: "/submit"))
        #expect(writes === runtime.routes[1])
        #expect(writes !== first)
        #expect(runtime.router.match(method: "GET", path: "/submit") == nil)
        #expect(runtime.router.match(method: "POST", path: "/submit/x") == nil)
        #expect(runtime.router.match(method: "GET", path: "/other") == nil)
    }

    @Test func whatTheRequestPathNeedsIsWorkedOutOnce() throws {
        let runtime = try Self.runtime()
        let api = runtime.routes[0]
        #expect(api.index == 0 && api.name == "api" && api.mode == "off" && !api.verifies)
        #expect(api.upstreamIndex == 0 && !api.upstreamIsH2)
        #expect(api.streamIdleTimeoutNS == 2_000_000_000 && api.tunnelIdleTimeoutNS == 2_000_000_000)
        #expect(!api.limitsProviders && !api.websocket)
        let writes = runtime.routes[1]
        #expect(writes.index == 1 && writes.mode == "monitor" && writes.verifies && writes.enforcement == .monitor)
        #expect(writes.upstreamIndex == 1 && writes.upstreamIsH2)
        #expect(writes.maxBodyBytes == 1024 && writes.methods == ["POST"])
        #expect(writes.limitsProviders && writes.providers == ["app_attest"] && writes.websocket)
        // No `stream_idle_timeout`: no stream bound, and a tunnel gets the 5-minute default.
        #expect(writes.streamIdleTimeoutNS == nil && writes.tunnelIdleTimeoutNS == 300_000_000_000)
    }

    @Test func aReloadBuildsNewInstances() throws {
        let old = try Self.runtime(generation: 0)
        let new = try Self.runtime(generation: 1)
        let before = try #require(old.router.match(method: "GET", path: "/api/a"))
        let after = try #require(new.router.match(method: "GET", path: "/api/a"))
        #expect(before !== after)
        #expect(after === new.routes[0] && after.name == before.name && after.index == before.index)
    }

    /// Through the exchange and the loop's reload step (`LoopEnvironment.apply`, what SIGHUP runs on each loop):
    /// two requests share the route's instance, a request after the reload gets the new runtime's, and an exchange
    /// routed before keeps the old one. The requests declare a body over the route's limit: refused 413 after
    /// routing (counted under the route), so nothing is forwarded.
    @Test func exchangesShareTheRouteAndAReloadHandsOutNewOnes() throws {
        let env = try ExchangeDriveTests.environment()
        let oldRuntime = env.runtime
        // The exchange does not retain its responder (the connection outlives it): the test holds it.
        let responder = ExchangeDriveTests.RecordingResponder()
        func exchange() throws -> Exchange {
            let head = try ExchangeDriveTests.head(
                "POST /api/upload HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999\r\n\r\n")
            let ex = Exchange(head: head, bodyFollows: true, context: env, responder: responder)
            ex.begin()
            #expect(ex.finished && ex.status == 413)
            return ex
        }
        let first = try exchange()
        let second = try exchange()
        let route = try #require(first.route)
        #expect(second.route === route)
        #expect(route === oldRuntime.routes[0])
        #expect(first.routeName == "api" && first.mode == "off")
        // Refused at admission: the App Check step never decided it.
        #expect(!first.appCheckDecided)

        env.apply(try Runtime(settings: oldRuntime.settings, generation: 1))
        let third = try exchange()
        let reloaded = try #require(third.route)
        #expect(reloaded !== route)
        #expect(reloaded === env.runtime.routes[0])
        #expect(third.routeTable === env.runtime)
        #expect(first.route === route && first.routeTable === oldRuntime)
        #expect(responder.calls.filter { $0 == "respond 413" }.count == 3)
    }

    /// `Exchange.appCheckStage`: `.decided` once the step answered (here: no token on an enforce route, refused 401
    /// by the step), `.notReached` when admission refused first (a token in the URL); only a decided request gets
    /// the step's outcome and no admission reason.
    @Test func theAppCheckStageSaysWhetherTheStepDecided() throws {
        let yaml = """
        app_check:
          project_number: "123456789012"
        upstreams:
          api:
            url: http://127.0.0.1:9
        routes:
          - name: guarded
            prefix: /
            upstream: api
        """
        let settings = try ConfigLoader.load(yaml: yaml, path: "stage.yaml", environment: [:]).get()
        let env = LoopEnvironment(loop: try EventLoop(), runtime: try Runtime(settings: settings, generation: 0),
                                  logSink: LogSink(), shared: SharedState())
        let responder = ExchangeDriveTests.RecordingResponder()
        let missing = Exchange(head: try ExchangeDriveTests.head("GET /a HTTP/1.1\r\nHost: a\r\n\r\n"),
                               bodyFollows: false, context: env, responder: responder)
        missing.begin()
        #expect(missing.finished && missing.status == 401)
        #expect(missing.appCheckDecided && missing.appCheck.status == .missing)
        let inURL = Exchange(head: try ExchangeDriveTests.head("GET /a?X-Firebase-AppCheck=t HTTP/1.1\r\nHost: a\r\n\r\n"),
                             bodyFollows: false, context: env, responder: responder)
        inURL.begin()
        #expect(inURL.finished && inURL.status == 400)
        #expect(!inURL.appCheckDecided && inURL.appCheck.reason == "token_in_url")
        #expect(inURL.route === missing.route && missing.route === env.runtime.routes[0])
    }
}
