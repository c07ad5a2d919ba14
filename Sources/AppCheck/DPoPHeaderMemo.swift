import Glibc
import Synchronization

/// The keys of DPoP proof headers already judged (`DPoPProof.judge(header:)` passed), by the header part's exact bytes
/// (base64url, as sent). A device puts the same header (`typ`, `alg`, `jwk`) on every proof, and everything the header
/// rules decide is a function of those bytes alone, so a proof whose header part is byte for byte one judged before
/// gets the same key without decoding it, parsing its JSON or looking its `jwk` up again (~20,000 instructions per
/// proof). Only headers that passed are kept; a header part over `maxPartLength` bytes is never kept (a P-384 proof's
/// is about 300). Bounded: at most `limit` entries (about 2 MiB), emptied when full, like `DPoPPublicKey`'s own memo.
enum DPoPHeaderMemo {
    static let maxPartLength = 512
    static let limit = 4096

    /// The header part's bytes, hashed in one pass (an array's own `hash(into:)` combines byte by byte) and compared
    /// with one `memcmp` (an array's `==` compares byte by byte: ~1,300 instructions for a 300-byte header part).
    struct Key: Hashable {
        let bytes: [UInt8]

        func hash(into hasher: inout Hasher) {
            bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
        }

        static func == (a: Key, b: Key) -> Bool {
            guard a.bytes.count == b.bytes.count else { return false }
            return a.bytes.withUnsafeBytes { x in
                b.bytes.withUnsafeBytes { y in
                    guard let p = x.baseAddress, let q = y.baseAddress else { return true }  // both empty
                    return memcmp(p, q, x.count) == 0
                }
            }
        }
    }

    private static let memo = Mutex<[Key: DPoPPublicKey]>([:])

    static func lookup(_ part: ArraySlice<UInt8>) -> DPoPPublicKey? {
        guard part.count <= maxPartLength else { return nil }
        let key = Key(bytes: Array(part))
        return memo.withLock { $0[key] }
    }

    static func remember(_ part: ArraySlice<UInt8>, _ publicKey: DPoPPublicKey) {
        guard part.count <= maxPartLength else { return }
        let key = Key(bytes: Array(part))
        memo.withLock { memo in
            if memo.count >= limit { memo.removeAll(keepingCapacity: true) }
            memo[key] = publicKey
        }
    }
}
