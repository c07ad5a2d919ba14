@testable import Gateway
@testable import ProxyCore
@testable import GatewayConfig
import HTTPWire
import Testing

/// The pure parts of gRPC support (SPEC §6.1): `grpc-timeout`, the content types that make a call, `grpc-message`
/// encoding, the status mapping, and the route paths `check-config` takes for a gRPC service.
@Suite struct GRPCUnitTests {
    /// gRPC over HTTP/2: `TimeoutValue` is 1 to 8 ASCII digits, `TimeoutUnit` one of H M S m u n.
    static let validTimeouts: [(String, UInt64)] = [
        ("1H", 3_600_000_000_000), ("2M", 120_000_000_000), ("10S", 10_000_000_000), ("250m", 250_000_000),
        ("7u", 7_000), ("99n", 99), ("0S", 0), ("00000001S", 1_000_000_000),
        ("5124095H", 5_124_095 * 3_600_000_000_000), ("5124096H", .max), ("99999999H", .max), ("99999999M", 5_999_999_940_000_000_000),
        ("99999999S", 99_999_999_000_000_000), ("12345678n", 12_345_678),
    ]

    @Test func validTimeouts() {
        for (text, nanoseconds) in Self.validTimeouts {
            #expect(GRPCCall.parseTimeout(text) == nanoseconds, "\(text)")
        }
    }

    @Test(arguments: [
        "", "S", "1", "10", "123456789S", "1s", "1h", "1x", "-1S", "+1S", " 1S", "1S ", "1 S", "1.5S", "1SS", "１S",
        "0x10S", "1Ｓ",
    ])
    func malformedTimeouts(_ text: String) {
        #expect(GRPCCall.parseTimeout(text) == nil, "\(text)")
    }

    static func headers(_ list: [(String, String)]) -> HTTPHeaders {
        var bytes: [UInt8] = []
        var fields: [HTTPHeaderField] = []
        for (name, value) in list {
            let n = Int32(bytes.count)
            bytes += Array(name.utf8) + Array(": ".utf8)
            let v = Int32(bytes.count)
            bytes += Array(value.utf8)
            fields.append(HTTPHeaderField(nameStart: n, nameEnd: n + Int32(name.utf8.count), valueStart: v,
                                          valueEnd: Int32(bytes.count)))
            bytes += Array("\r\n".utf8)
        }
        return HTTPHeaders(bytes: bytes, fields: fields)
    }

    /// `application/grpc` and `application/grpc+codec` (any case, with parameters) are gRPC; gRPC-Web and anything
    /// else are not. The timeout is read, and refused when malformed or sent twice.
    @Test func detection() {
        for ct in ["application/grpc", "application/grpc+proto", "application/grpc+json", "Application/GRPC",
                   "application/grpc; charset=utf-8", "application/grpc+proto;x=y"] {
            #expect(GRPCCall.detect(Self.headers([("content-type", ct)])) == .call(timeoutNanoseconds: nil), "\(ct)")
        }
        for ct in ["application/grpc-web", "application/grpc-web+proto", "application/grpc-web-text",
                   "application/grpcx", "application/json", "text/grpc", "application/grp", ""] {
            #expect(GRPCCall.detect(Self.headers([("content-type", ct)])) == .notGRPC, "\(ct)")
        }
        #expect(GRPCCall.detect(Self.headers([])) == .notGRPC)
        #expect(GRPCCall.detect(Self.headers([("grpc-timeout", "1S")])) == .notGRPC, "a timeout alone makes no call")
        #expect(GRPCCall.detect(Self.headers([("content-type", "application/grpc"), ("grpc-timeout", "1500m")]))
                == .call(timeoutNanoseconds: 1_500_000_000))
        #expect(GRPCCall.detect(Self.headers([("content-type", "application/grpc"), ("grpc-timeout", "1.5S")]))
                == .malformedTimeout)
        #expect(GRPCCall.detect(Self.headers([("content-type", "application/grpc"), ("grpc-timeout", "1S"),
                                              ("grpc-timeout", "1S")])) == .malformedTimeout)
    }

    /// `Percent-Encoded`: bytes outside 0x20–0x7E and `%` itself as `%XX` (upper-case hex), everything else kept.
    @Test func percentEncoding() {
        #expect(GRPCStatus.percentEncoded("app_check_token_missing: missing") == "app_check_token_missing: missing")
        #expect(GRPCStatus.percentEncoded("100% sure") == "100%25 sure")
        #expect(GRPCStatus.percentEncoded("a\r\nb\tc") == "a%0D%0Ab%09c")
        #expect(GRPCStatus.percentEncoded("\u{7F}~ ") == "%7F~ ")
        #expect(GRPCStatus.percentEncoded("é☺") == "%C3%A9%E2%98%BA")
        #expect(GRPCStatus.percentEncoded("") == "")
    }

    /// `<error>: <reason>`, or `<error>` alone when there is no reason or it repeats the error.
    @Test func messages() {
        #expect(GRPCStatus.message(code: "app_check_token_missing", reason: "missing") == "app_check_token_missing: missing")
        #expect(GRPCStatus.message(code: "no_route", reason: "no_route") == "no_route")
        #expect(GRPCStatus.message(code: "bad_request", reason: "") == "bad_request")
        #expect(GRPCStatus.message(code: "x", reason: "50%") == "x: 50%25")
    }

    /// SPEC §6.1's table, and the choices for the statuses it leaves open (docs/behaviour.md).
    @Test func statusMapping() {
        let table: [(Int, Int)] = [(400, 3), (401, 16), (403, 7), (404, 12), (408, 4), (413, 8), (429, 8), (431, 8),
                                   (500, 13), (502, 14), (503, 14), (504, 4), (405, 2), (418, 2)]
        for (http, grpc) in table { #expect(GRPCStatus.code(forHTTPStatus: http) == grpc, "\(http)") }
        let fields = GRPCStatus.fields(httpStatus: 503, code: "jwks_unavailable", reason: "jwks_unavailable",
                                       retryAfter: 5, dpopChallenge: false)
        #expect(fields.map(\.0) == ["content-type", "grpc-status", "grpc-message", "retry-after"])
        #expect(fields.map(\.1) == ["application/grpc", "14", "jwks_unavailable", "5"])
        let dpop = GRPCStatus.fields(httpStatus: 401, code: "app_check_token_invalid", reason: "dpop_missing",
                                     retryAfter: nil, dpopChallenge: true)
        #expect(dpop.map(\.1) == ["application/grpc", "16", "app_check_token_invalid: dpop_missing",
                                  "DPoP error=\"invalid_dpop_proof\""])
    }

    /// `/package.Service/` (prefix) and `/package.Service/Method` (exact path) look like gRPC; REST-like paths do not.
    @Test func grpcLookingRoutes() {
        for (path, isPrefix) in [("/helloworld.Greeter/", true), ("/helloworld.Greeter", true),
                                 ("/helloworld.Greeter/SayHello", false), ("/grpc.health.v1.Health/", true),
                                 ("/my_pkg.v2.Chat_Service/", true), ("/a.B/", true)] {
            #expect(ConfigDecoder.looksLikeGRPCService(path, isPrefix: isPrefix), "\(path)")
        }
        for (path, isPrefix) in [("/", true), ("/v1/", true), ("/v1.2/", true), ("/static.files/", true),
                                 ("/Greeter/", true), ("/helloworld.Greeter/SayHello", true),
                                 ("/helloworld.Greeter/", false), ("/helloworld.Greeter/a/b", false),
                                 ("/api/helloworld.Greeter/", true), ("/.Greeter/", true), ("/a..B/", true),
                                 ("/1pkg.Greeter/", true), ("/pkg.Gre-eter/", true)] {
            #expect(!ConfigDecoder.looksLikeGRPCService(path, isPrefix: isPrefix), "\(path)")
        }
    }
}
