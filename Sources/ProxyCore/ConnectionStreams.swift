/// The states of a connection's byte streams that every connection machine shares (the client HTTP/1.1 and HTTP/2
/// machines and the upstream HTTP/1.1 one); top-level so that the machines share one type and its rules.

/// Reading from the socket. `paused`: held (the exchange holds the body, or pipelined bytes wait for a response);
/// `…ReadOwed`: the socket has bytes no read took yet (an edge came while held, or while the input loop ran).
public enum ConnectionInput: Equatable, Sendable {
    case flowing, readOwed, paused, pausedReadOwed

    /// Reading is held (the peer cannot take more now); a read already owed stays owed.
    public mutating func pause() {
        switch self {
        case .flowing: self = .paused
        case .readOwed: self = .pausedReadOwed
        case .paused, .pausedReadOwed: break
        }
    }

    /// Reading may go on: false when it was not held.
    public mutating func resume() -> Bool {
        switch self {
        case .flowing, .readOwed: return false
        case .paused: self = .flowing
        case .pausedReadOwed: self = .readOwed
        }
        return true
    }
}

/// The client's byte stream: `ended` once epoll reported its end (RDHUP, HUP, ERR). Edge-triggered, so it is kept
/// (and handed to HTTP/2 with the socket); bytes before the end may still be unread.
public enum ConnectionPeerStream: Equatable, Sendable { case open, ended }

/// After the current exchange: `keepAlive` (read the next request) or `close`.
public enum ConnectionPersistence: Equatable, Sendable { case keepAlive, close }
