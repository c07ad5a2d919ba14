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

    /// - Parameter capacity: initial allocation in bytes (at least 64).
    public init(capacity: Int = 4096) {
        self.capacity = max(Self.releasedCapacity, capacity)
        base = UnsafeMutableRawPointer.allocate(byteCount: self.capacity, alignment: 16)
    }

    deinit { base.deallocate() }

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
    public func reserve(_ count: Int) {
        if capacity - writerIndex >= count { return }
        if readerIndex > 0 {
            let n = readableCount
            if n > 0 { (base).copyMemory(from: base + readerIndex, byteCount: n) }
            readerIndex = 0
            writerIndex = n
            if capacity - writerIndex >= count { return }
        }
        var newCapacity = max(capacity, Self.minimumGrowth)
        while newCapacity - writerIndex < count { newCapacity *= 2 }
        let newBase = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 16)
        if writerIndex > 0 { newBase.copyMemory(from: base, byteCount: writerIndex) }
        base.deallocate()
        base = newBase
        capacity = newCapacity
    }

    /// A released buffer grows straight back to this size on its next use.
    public static let minimumGrowth = 2048
    /// The allocation a released buffer keeps.
    public static let releasedCapacity = 64

    /// Gives the storage back (keeping `releasedCapacity` bytes) when the buffer is empty: idle connections
    /// then cost almost nothing. Does nothing while bytes are unread.
    public func release() {
        guard isEmpty, capacity > Self.releasedCapacity else { return }
        base.deallocate()
        capacity = Self.releasedCapacity
        base = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
        readerIndex = 0
        writerIndex = 0
    }

    /// Releases a large allocation once the buffer is empty, so idle connections stay small.
    public func shrinkIfIdle(to target: Int) {
        guard isEmpty, capacity > target * 4 else { return }
        base.deallocate()
        capacity = max(64, target)
        base = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
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

    public func append(_ string: String) {
        var s = string
        s.withUTF8 { append(UnsafeRawBufferPointer($0)) }
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
