import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// Compiles docs/examples/ios/dpop/GatewayDPoP.swift as written (with this folder's OpenSSLCLIKey for the key) and
// runs it against a real gateway: the exchange with `exchangeHook`'s proof mints a token bound to the key, and
// `data(for:token:)` then passes a `dpop: required` route; the token without a proof, or with another key's, does not.
// Arguments: gateway base URL, exchange URL, debug secret, scratch directory. Ends with `ios-dpop: PASS` or exits 1.

let args = CommandLine.arguments
guard args.count == 5 else { print("usage: check BASE EXCHANGE_URL SECRET DIR"); exit(2) }
let (base, exchangeURL, secret, dir) = (args[1], args[2], args[3], args[4])
var failures = 0
@MainActor func check(_ ok: Bool, _ what: String) {
    print((ok ? "ok   " : "FAIL ") + what)
    if !ok { failures += 1 }
}

func payload(_ token: String) -> [String: Any] {
    let parts = token.split(separator: ".")
    guard parts.count == 3 else { return [:] }
    let part = String(parts[1])
    var b64 = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while b64.count % 4 != 0 { b64 += "=" }
    return (try? JSONSerialization.jsonObject(with: Data(base64Encoded: b64) ?? Data())) as? [String: Any] ?? [:]
}

func status(_ response: URLResponse) -> Int { (response as? HTTPURLResponse)?.statusCode ?? -1 }

// The `htu` rule, on URLs a client might use.
let htuCases: [(String, String)] = [
    ("https://api.example.com/v1/items?page=2#top", "https://api.example.com/v1/items"),
    ("https://api.example.com:443/v1/a%20b", "https://api.example.com/v1/a%20b"),
    ("http://127.0.0.1:8080/x/?q", "http://127.0.0.1:8080/x/"),
    ("https://api.example.com", "https://api.example.com/"),
]
for (url, want) in htuCases {
    let got = GatewayDPoP.htu(for: URL(string: url)!)
    check(got == want, "htu(\(url)) = \(got)")
}

let key = try OpenSSLCLIKey(directory: dir)
let dpop = GatewayDPoP(key: key)

// The exchange, its proof added by the hook as AppCheckCore would run it.
let exchange = NSMutableURLRequest(url: URL(string: exchangeURL)!)
exchange.httpMethod = "POST"
exchange.setValue("application/json", forHTTPHeaderField: "Content-Type")
exchange.httpBody = Data("{\"debug_token\":\"\(secret)\"}".utf8)
dpop.exchangeHook(exchange)
check(exchange.value(forHTTPHeaderField: "DPoP") != nil, "exchangeHook adds DPoP")
let (body, minted) = try await URLSession.shared.data(for: exchange as URLRequest)
check(status(minted) == 200, "exchange with the hook's proof: \(status(minted))" + (status(minted) == 200 ? "" : " \(String(decoding: body, as: UTF8.self))"))
let token = ((try? JSONSerialization.jsonObject(with: body)) as? [String: Any])?["token"] as? String ?? ""
let cnf = payload(token)["cnf"] as? [String: Any]
check(cnf?["jkt"] as? String == dpop.thumbprint, "the minted token's cnf.jkt is the key's thumbprint \(dpop.thumbprint)")

// Requests with fresh proofs, on a `dpop: required` route, a query included (not part of htu).
let url = URL(string: base + "/strict/items?page=2")!
for i in 1...2 {
    let (_, r) = try await dpop.data(for: URLRequest(url: url), token: token)
    check(status(r) == 200, "data(for:token:) #\(i): \(status(r))")
}
var bare = URLRequest(url: url)
bare.setValue(token, forHTTPHeaderField: "X-Firebase-AppCheck")
let (_, stolen) = try await URLSession.shared.data(for: bare)
check(status(stolen) == 401, "the token without a proof: \(status(stolen))")
let thief = GatewayDPoP(key: try OpenSSLCLIKey(directory: dir + "/thief"))
let (_, other) = try await thief.data(for: URLRequest(url: url), token: token)
check(status(other) == 401, "the token with another key's proof: \(status(other))")

print(failures == 0 ? "ios-dpop: PASS" : "ios-dpop: FAIL (\(failures))")
exit(failures == 0 ? 0 : 1)
