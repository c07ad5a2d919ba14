@testable import AppCheck
import COpenSSL
import Testing

/// `SHA256Digest` (the low-level one-shot `COpenSSL_sha256`, which pads inputs of up to 119 bytes itself and hands
/// their one or two blocks over in one call) against OpenSSL's provider digest (`EVP_Digest` with `EVP_sha256()`), an
/// independent path, at every length around the block and padding boundaries.
@Suite struct SHA256DigestTests {
    static func providerDigest(_ bytes: [UInt8]) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let ok = bytes.withUnsafeBytes { input in
            out.withUnsafeMutableBufferPointer { EVP_Digest(input.baseAddress, input.count, $0.baseAddress, &length, EVP_sha256(), nil) }
        }
        try #require(ok == 1 && length == 32)
        return out
    }

    @Test func everyLengthUpTo200MatchesTheProviderDigest() throws {
        for count in 0...200 {
            let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            let expected = try Self.providerDigest(bytes)
            #expect(SHA256Digest.hash(bytes) == expected, "length \(count)")
            #expect(bytes.withUnsafeBytes { SHA256Digest.value($0) }.bytes == expected, "length \(count)")
        }
    }

    @Test func knownVectors() {
        // FIPS 180-4 examples: empty, "abc" (one block) and the 56-byte two-block message.
        #expect(SHA256Digest.hex(SHA256Digest.hash([UInt8]())) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256Digest.hex(SHA256Digest.hash(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        let twoBlocks = Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)
        #expect(SHA256Digest.hex(SHA256Digest.hash(twoBlocks)) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }
}
