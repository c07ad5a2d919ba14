import Glibc
import Synchronization

/// The keys of DPoP proof headers already judged (`DPoPProof.judge(header:)` passed), by the header part's exact bytes
/// (base64url, as sent). A device puts the same header (`typ`, `alg`, `jwk`) on every proof, and everything the header
/// rules decide is a function of those bytes alone, so a proof whose header part is byte for byte one judged before
/// gets the same key without decoding it, parsing its JSON or looking its `jwk` up again (~20,000 instructions per
/// proof). Only headers that passed are kept; a header part over `maxPartLength` bytes is never kept (a P-384 proof's
/// is about 300).
///
/// A two-way set-associative cache of `limit` entries (about 2 MiB at most): a part's slot pair is chosen by a cheap
/// hash keyed per process of its length and last 64 bytes (`hash(_:)`), and a hit is a full byte comparison, so a hash collision only ever costs a
/// miss. Whatever an attacker's headers hash to, a look-up compares at most two entries, and a header pushed out is
/// judged again on its next proof. (Swift's SipHash over the ~300-byte part and copying it into an array to look it
/// up cost ~2,000 instructions per proof.)
enum DPoPHeaderMemo {
    static let maxPartLength = 512
    /// Entries; a power of two.
    static let limit = 4096

    /// One remembered header part.
    struct Entry {
        let hash: UInt64
        let bytes: [UInt8]
        let key: DPoPPublicKey
    }

    private static let memo = Mutex<[Entry?]>(Array(repeating: nil, count: limit))
    /// The hash's key, random per process, so which parts share a slot pair cannot be known in advance.
    private static let seed = UInt64.random(in: .min ... .max)

    static func lookup(_ part: ArraySlice<UInt8>) -> DPoPPublicKey? {
        guard part.count <= maxPartLength else { return nil }
        return part.withUnsafeBufferPointer { part -> DPoPPublicKey? in
            let hash = Self.hash(part)
            let slot = Int(truncatingIfNeeded: hash) & (limit - 1)
            return memo.withLock { entries -> DPoPPublicKey? in
                entries.withUnsafeBufferPointer { entries -> DPoPPublicKey? in
                    func match(_ index: Int) -> DPoPPublicKey? {
                        guard let entry = entries[index], entry.hash == hash,
                              entry.bytes.withUnsafeBufferPointer({ bytesEqual($0, part) }) else { return nil }
                        return entry.key
                    }
                    return match(slot) ?? match(slot ^ 1)
                }
            }
        }
    }

    static func remember(_ part: ArraySlice<UInt8>, _ publicKey: DPoPPublicKey) {
        guard part.count <= maxPartLength else { return }
        let bytes = Array(part)
        let hash = bytes.withUnsafeBufferPointer { Self.hash($0) }
        let slot = Int(truncatingIfNeeded: hash) & (limit - 1)
        let entry = Entry(hash: hash, bytes: bytes, key: publicKey)
        memo.withLock { (entries: inout [Entry?]) -> Void in
            // The newer entry of the pair goes first; the older one moves to the second slot, and the second's goes.
            let same = entries[slot].map { $0.hash == hash && $0.bytes == bytes } ?? false
            if !same {
                entries[slot ^ 1] = entries[slot]
            }
            entries[slot] = entry
        }
    }

    /// How many bytes at the end of a part `hash` reads: a header's `jwk` (the device's key) comes last, and
    /// the start (`typ`, `alg`) is the same for every device.
    static let hashedTail = 64

    /// A 64-bit hash of the length of `part` and its last `hashedTail` bytes, keyed with `seed`: eight bytes a step,
    /// each multiplied in and folded. Not a cryptographic hash: it only spreads parts over the slots (two parts
    /// that share their length and tail share a slot pair, and the full comparison tells them apart).
    static func hash(_ part: UnsafeBufferPointer<UInt8>) -> UInt64 {
        let multiplier: UInt64 = 0x9E37_79B9_7F4A_7C15
        var h = seed ^ (UInt64(part.count) &* multiplier)
        let bytes = part.count > hashedTail ? UnsafeBufferPointer(rebasing: part[(part.count - hashedTail)...]) : part
        guard let base = bytes.baseAddress else { return h }
        let raw = UnsafeRawPointer(base)
        var i = 0
        while i + 8 <= bytes.count {
            h = (h ^ raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)) &* multiplier
            h ^= h >> 29
            i += 8
        }
        var tail: UInt64 = 0
        var shift: UInt64 = 0
        while i < bytes.count {
            tail |= UInt64(bytes[i]) << shift
            shift += 8
            i += 1
        }
        h = (h ^ tail) &* multiplier
        h ^= h >> 32
        return h
    }
}
