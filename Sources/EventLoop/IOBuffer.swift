import Glibc
import Synchronization

/// A growable byte buffer with a reader and a writer index over one allocation (like NIO's `ByteBuffer`,
/// but a final class so a connection reuses one for its whole life without copy-on-write checks).
///
/// Readable bytes are `[readerIndex, writerIndex)`. Consumed space at the front is reclaimed by
/// `compact()` or automatically when the buffer empties.
public final class IOBuffer {
    public private(set) var base: UnsafeMutableRawPointer
    public private(set) var capacity: Int
    public private(set) var readerIndex = 0
    public private(set) var writerIndex = 0

    /// - Parameter capacity: initial allocation in bytes; 0 (or `releasedCapacity`) allocates nothing until the
    ///   first write.
    public init(capacity: Int = 4096) {
        if capacity <= Self.releasedCapacity {
            self.capacity = 0
            base = Self.noStorage
        } else {
            self.capacity = capacity
            base = Self.allocate(capacity)
        }
    }

    deinit { if capacity > 0 { Self.deallocate(base, capacity) } }

    /// Bytes of storage every `IOBuffer` of the process holds now (`gateway_buffer_bytes{kind="io"}`): what the
    /// gateway itself keeps in connection buffers, so an operator can tell a leak from the allocator's fragmentation.
    public static var heldBytes: Int { held.load(ordering: .relaxed) }
    private static let held = Atomic<Int>(0)

    /// Storage comes from `malloc` (16-byte aligned on every platform we build for): Swift's
    /// `UnsafeMutableRawPointer.allocate` always takes the runtime's aligned path (`posix_memalign`), several
    /// times the cost, and a connection grows and releases its buffers once per request.
    @inline(__always)
    private static func allocate(_ count: Int) -> UnsafeMutableRawPointer {
        guard let pointer = malloc(count) else { fatalError("IOBuffer: out of memory allocating \(count) bytes") }
        held.add(count, ordering: .relaxed)
        return pointer
    }

    @inline(__always)
    private static func deallocate(_ pointer: UnsafeMutableRawPointer, _ count: Int) {
        free(pointer)
        held.subtract(count, ordering: .relaxed)
    }

    /// What `base` points at while the buffer owns no storage (capacity 0): never read or written through.
    nonisolated(unsafe) private static let noStorage: UnsafeMutableRawPointer = malloc(16)!

    /// Number of unread bytes.
    @inline(__always) public var readableCount: Int { writerIndex - readerIndex }
    @inline(__always) public var isEmpty: Bool { readerIndex == writerIndex }
    /// Free bytes after the writer index.
    @inline(__always) public var writableCount: Int { capacity - writerIndex }

    /// The unread bytes; valid until the next mutating call.
    @inline(__always) public var readable: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: base + readerIndex, count: writerIndex - readerIndex)
    }

    /// Space to write into; call `didWrite(_:)` with the number of bytes written.
    @inline(__always) public var writable: UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(start: base + writerIndex, count: capacity - writerIndex)
    }

    @inline(__always) public func didWrite(_ count: Int) {
        precondition(count >= 0 && count <= capacity - writerIndex)
        writerIndex += count
    }

    /// Marks `count` unread bytes as read.
    @inline(__always) public func consume(_ count: Int) {
        precondition(count >= 0 && count <= readableCount)
        readerIndex += count
        if readerIndex == writerIndex { readerIndex = 0; writerIndex = 0 }
    }

    public func clear() { readerIndex = 0; writerIndex = 0 }

    /// Makes room for at least `count` more bytes after the writer index, compacting first and then growing.
    @inline(__always)
    public func reserve(_ count: Int) {
        if capacity - writerIndex >= count { return }
        grow(count)
    }

    /// `reserve`'s slow path: compacts, then reallocates.
    private func grow(_ count: Int) {
        if readerIndex > 0 {
            let n = readableCount
            if n > 0 { (base).copyMemory(from: base + readerIndex, byteCount: n) }
            readerIndex = 0
            writerIndex = n
            if capacity - writerIndex >= count { return }
        }
        // A buffer without storage whose first write fits `firstGrowth` takes just that: a block glibc's per-thread
        // cache serves (a few dozen instructions each way, where a 2 KiB block takes the arena's bins, ~300 per
        // malloc/free pair; a client's out buffer is allocated and released once per response).
        var newCapacity = capacity == 0 && count <= Self.firstGrowth ? Self.firstGrowth : max(capacity, Self.minimumGrowth)
        while newCapacity - writerIndex < count { newCapacity *= 2 }
        let newBase = Self.allocate(newCapacity)
        if writerIndex > 0 { newBase.copyMemory(from: base, byteCount: writerIndex) }
        if capacity > 0 { Self.deallocate(base, capacity) }
        base = newBase
        capacity = newCapacity
    }

    /// A buffer grows to at least this size (doubling from there).
    public static let minimumGrowth = 2048
    /// A buffer without storage whose first write needs at most this many bytes is given exactly this many: the
    /// largest block glibc's tcache keeps (1,032 usable bytes on 64-bit), rounded down to 1 KiB.
    public static let firstGrowth = 1024
    /// A buffer created with at most this capacity owns no storage until its first write.
    public static let releasedCapacity = 64

    /// Gives the storage back when the buffer is empty: an idle connection's buffer then costs nothing. Does
    /// nothing while bytes are unread.
    public func release() {
        guard isEmpty, capacity > 0 else { return }
        Self.deallocate(base, capacity)
        capacity = 0
        base = Self.noStorage
        readerIndex = 0
        writerIndex = 0
    }

    /// Releases a large allocation once the buffer is empty, so idle connections stay small.
    public func shrinkIfIdle(to target: Int) {
        guard isEmpty, capacity > target * 4 else { return }
        Self.deallocate(base, capacity)
        capacity = max(64, target)
        base = Self.allocate(capacity)
        readerIndex = 0
        writerIndex = 0
    }

    public func append(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0, let src = bytes.baseAddress else { return }
        reserve(bytes.count)
        (base + writerIndex).copyMemory(from: src, byteCount: bytes.count)
        writerIndex += bytes.count
    }

    public func append(_ bytes: [UInt8]) { bytes.withUnsafeBytes { append($0) } }

    /// Appends the string's UTF-8 bytes, read in place (native and small strings; no copy of the string value).
    public func append(_ string: String) {
        if string.utf8.withContiguousStorageIfAvailable({ append(UnsafeRawBufferPointer($0)) }) != nil { return }
        var s = string
        s.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }

    public func append(_ string: Substring) {
        if string.utf8.withContiguousStorageIfAvailable({ append(UnsafeRawBufferPointer($0)) }) != nil { return }
        var s = string
        s.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }

    /// Appends a literal's bytes, read in place.
    @inline(__always) public func append(static literal: StaticString) {
        append(UnsafeRawBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// Appends a copy of unread bytes `from..<to` of this buffer (indices from `base`, as `writerIndex` gave them).
    public func appendCopy(from: Int, to: Int) {
        precondition(from >= readerIndex && from <= to && to <= writerIndex)
        let count = to - from
        guard count > 0 else { return }
        let offset = from - readerIndex
        reserve(count)  // may move the unread bytes to the front
        (base + writerIndex).copyMemory(from: base + readerIndex + offset, byteCount: count)
        writerIndex += count
    }

    @inline(__always) public func append(byte: UInt8) {
        reserve(1)
        base.storeBytes(of: byte, toByteOffset: writerIndex, as: UInt8.self)
        writerIndex += 1
    }

    /// Appends `value` in decimal.
    public func appendDecimal(_ value: Int) {
        if value < 0 { append(byte: UInt8(ascii: "-")); appendDecimal(-value); return }
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var n = value
        var count = 0
        withUnsafeMutableBytes(of: &digits) { d in
            repeat {
                d[19 - count] = UInt8(ascii: "0") + UInt8(n % 10)
                n /= 10
                count += 1
            } while n > 0
            append(UnsafeRawBufferPointer(rebasing: d[(20 - count)...]))
        }
    }

    /// Appends `value` in lower-case hexadecimal (for chunk sizes).
    public func appendHex(_ value: Int) {
        let hex: StaticString = "0123456789abcdef"
        var shift = 60
        while shift > 0 && (value >> shift) & 0xF == 0 { shift -= 4 }
        while shift >= 0 {
            append(byte: hex.utf8Start[(value >> shift) & 0xF])
            shift -= 4
        }
    }

    /// A copy of the unread bytes (for tests and slow paths).
    public func readableBytes() -> [UInt8] { Array(readable) }
}
