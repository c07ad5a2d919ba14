import Testing
@testable import AppCheck

/// `DPoPRequest(method:scheme:host:target:…)` reads the path and an absolute form's authority from the target's bytes
/// when it compares `htu`: for every target and `htu` below it answers exactly as a request built from
/// `DPoPRequest.split(target:)` (the Character-based split, made into Strings) does.
@Suite struct DPoPRequestTargetTests {
    static let targets = [
        "/", "/v1/items", "/v1/items?q=1", "/v1/items#f", "/v1/items?q=1#f", "/?", "/#", "", "*", "?q", "#f",
        "https://api.example.com/v1/items", "https://api.example.com", "https://api.example.com?q", "https://api.example.com#f",
        "HTTPS://API.EXAMPLE.COM:443/v1/items", "http://api.example.com:80/", "http:///v1/items", "https://other.example/v1/items",
        "api.example.com:443", "x://y://z/p", "/a://b/c", "https://api.example.com/v1/items?x=://", "https://u@api.example.com/v1",
        "/v1/it\u{E9}ms", "/v1/\u{301}items", "https:/\u{301}/api.example.com/v1/items", "https://api.example.com/\u{301}v1",
        "/v1/items/\u{1F600}?q",
    ]
    static let htus = [
        "https://api.example.com/v1/items", "https://api.example.com/", "https://api.example.com", "HTTPS://API.example.com:443/v1/items",
        "https://other.example/v1/items", "https://api.example.com/v1/items?q=1", "https://api.example.com/v1/items#f",
        "http://api.example.com/", "https://api.example.com/*", "https://api.example.com/api.example.com:443",
        "https://y://z/p", "https://api.example.com/a://b/c", "https://api.example.com/v1/it\u{E9}ms",
        "https://api.example.com/v1/\u{301}items", "https://api.example.com/v1/items/\u{1F600}", "https:///v1/items",
        "https://api.example.com/\u{301}v1", "https://api.example.com/x://y://z/p", "",
    ]

    @Test func targetAnswersAsTheSplitStringsDo() {
        for scheme in ["https", "http"] {
            for target in Self.targets {
                let byTarget = DPoPRequest(method: "GET", scheme: scheme, host: "api.example.com", target: target,
                                           thumbprint: nil, clockSkew: 5, accessTokenHash: nil)
                let (absolute, path) = DPoPRequest.split(target: target)
                let bySplit = DPoPRequest(method: "GET", scheme: scheme, authority: absolute ?? "api.example.com", path: path,
                                          accessToken: nil, thumbprint: nil, clockSkew: 5)
                for htu in Self.htus {
                    var bytes = htu
                    let answer = bytes.withUTF8 { byTarget.matches(htu: $0) }
                    #expect(answer == bySplit.matches(htu: htu), "target \(target), htu \(htu), scheme \(scheme)")
                }
            }
        }
        // The cases the table is for: each form does match its own URI.
        let origin = DPoPRequest(method: "GET", scheme: "https", host: "api.example.com:443", target: "/v1/items?q=1",
                                 thumbprint: nil, clockSkew: 5, accessTokenHash: nil)
        var htu = "https://api.example.com/v1/items"
        #expect(htu.withUTF8 { origin.matches(htu: $0) })
        let absolute = DPoPRequest(method: "GET", scheme: "https", host: "ignored.example", target: "https://api.example.com",
                                   thumbprint: nil, clockSkew: 5, accessTokenHash: nil)
        htu = "https://api.example.com/"
        #expect(htu.withUTF8 { absolute.matches(htu: $0) })
    }
}
