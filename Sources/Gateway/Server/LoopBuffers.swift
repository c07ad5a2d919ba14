import EventLoop

/// A loop's shared buffers (issue 22's split of the loop context): the read buffer connections borrow while reading,
/// the always-empty stand-in for a connection with nothing pending, and the buffer an exchange writes the upstream
/// request head into. Touched only on its loop's thread.
package final class LoopBuffers {
    /// The read buffer client and upstream connections borrow while reading (`lendScratch`): a connection keeps a
    /// buffer of its own only for bytes left over after processing.
    private let scratch = IOBuffer(capacity: 64 * 1024)
    private var scratchLent = false
    /// Where an exchange writes the upstream request head just before sending it (reused: no allocation per request).
    let requestHead = IOBuffer(capacity: 4096)
    /// A shared, always-empty buffer standing in for a connection's input when nothing is pending.
    /// Never written to: a connection swaps in `scratch` or a buffer of its own before appending.
    let empty = IOBuffer(capacity: IOBuffer.releasedCapacity)

    /// The loop's shared read buffer, empty, or nil while another reader holds it (a read nested inside another
    /// connection's processing: an upstream's response finishing a client's exchange lets that client read on).
    @inline(__always)
    func lendScratch() -> IOBuffer? {
        if scratchLent { return nil }
        scratchLent = true
        return scratch
    }

    /// True when `buffer` is the shared read buffer (its reader borrowed it and has not given it back yet).
    @inline(__always)
    func lent(_ buffer: IOBuffer) -> Bool { buffer === scratch }

    /// Takes the shared read buffer back (its bytes were processed or copied out).
    @inline(__always)
    func returnScratch() {
        scratch.clear()
        scratchLent = false
    }
}
