@testable import Gateway
@testable import ProxyCore
import HTTPWire
import Testing

@Suite struct RequestTargetTests {
    @Test(arguments: [
        ("/", "/"), ("/a/b", "/a/b"), ("/a/./b", "/a/b"), ("/a/../b", "/b"), ("//a///b", "/a/b"), ("/a/b/", "/a/b/"),
        ("/%61%62c", "/abc"), ("/a%2db", "/a-b"), ("/a%20b", "/a%20b"), ("/a%3fb", "/a%3Fb"), ("/a/b/..", "/a/"),
        ("/a/.", "/a/"),
    ])
    func normalises(_ raw: String, _ expected: String) throws {
        let t = try RequestTarget.parse(raw).get()
        #expect(t.path == expected)
    }

    @Test(arguments: ["/..", "/a/../..", "/a%2Fb", "/a%2fb", "/a%5Cb", "/a\\b", "/a%00", "/a%zz", "/a%4", "*", "example.com:443"])
    func refuses(_ raw: String) {
        #expect((try? RequestTarget.parse(raw).get()) == nil, "\(raw)")
    }

    @Test func splitsQueryAndAbsoluteForm() throws {
        let t = try RequestTarget.parse("http://Example.com:8080/a/../b?x=1&y").get()
        #expect(t.path == "/b")
        #expect(t.query == "x=1&y")
        #expect(t.absoluteHost == "Example.com:8080")
        #expect(try RequestTarget.parse("/p?").get().query == "")
        #expect(try RequestTarget.parse("/p").get().query == nil)
    }

    @Test func findsTheTokenInTheQueryInAnyCaseOrEncoding() {
        #expect(RequestTarget.queryHasToken("X-Firebase-AppCheck=abc"))
        #expect(RequestTarget.queryHasToken("a=1&x-firebase-appcheck=abc"))
        #expect(RequestTarget.queryHasToken("a=1&X%2DFirebase%2DAppCheck=abc"))
        #expect(RequestTarget.queryHasToken("x-firebase-appcheck"))
        #expect(!RequestTarget.queryHasToken("a=X-Firebase-AppCheck"))
        #expect(!RequestTarget.queryHasToken("x-firebase-appcheck-not=1"))
    }
}

@Suite struct TokenCacheTests {
    @Test func expiresAndEvictsOldestWhenFull() throws {
        let claims = try AppCheckTestClaims.make()
        let cache = TokenCache(capacity: 2)
        let k1 = TokenCache.Key(token: Array("token-1".utf8))
        let k2 = TokenCache.Key(token: Array("token-2".utf8))
        let k3 = TokenCache.Key(token: Array("token-3".utf8))
        #expect(k1 == TokenCache.Key(token: Array("token-1".utf8)))
        #expect(k1 != k2)
        cache.put(k1, .init(claims: claims, kid: "a", fingerprint: "f", until: 100), now: 0)
        cache.put(k2, .init(claims: claims, kid: "a", fingerprint: "f", until: 100), now: 0)
        #expect(cache.get(k1, now: 50) != nil)
        cache.put(k3, .init(claims: claims, kid: "a", fingerprint: "f", until: 100), now: 0)
        #expect(cache.count == 2)
        #expect(cache.get(k1, now: 50) == nil)
        #expect(cache.get(k3, now: 50) != nil)
        #expect(cache.get(k3, now: 100) == nil)
        #expect(TokenCache(capacity: 0).count == 0)
    }
}
