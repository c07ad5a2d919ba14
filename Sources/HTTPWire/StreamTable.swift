/// The streams of one HTTP/2 connection by id: a dictionary with the last stream looked up kept beside it.
///
/// nghttp2 reports a request as a run of callbacks for one stream (begin headers, each header, the frame, data,
/// close), and the gateway's side answers it stream by stream, so most lookups ask for the id asked for just
/// before: those return the kept entry without hashing (a profile of HTTP/2 over TLS counted 19 dictionary lookups
/// per request, about 1,500 instructions of hashing). Stream ids are never 0, the id the empty cache holds.
public struct StreamTable<Value: AnyObject> {
    private var storage: [Int32: Value] = [:]
    private var lastID: Int32 = 0
    private var lastValue: Value?

    public init() {}

    public subscript(id: Int32) -> Value? {
        mutating get {
            if id == lastID, id != 0 { return lastValue }
            let value = storage[id]
            if value != nil { (lastID, lastValue) = (id, value) }
            return value
        }
        set {
            storage[id] = newValue
            if newValue != nil { (lastID, lastValue) = (id, newValue) } else if id == lastID { forget() }
        }
    }

    @discardableResult
    public mutating func removeValue(forKey id: Int32) -> Value? {
        if id == lastID { forget() }
        return storage.removeValue(forKey: id)
    }

    public mutating func removeAll() {
        forget()
        storage.removeAll()
    }

    public var count: Int { storage.count }
    public var isEmpty: Bool { storage.isEmpty }
    public var values: Dictionary<Int32, Value>.Values { storage.values }

    private mutating func forget() {
        lastID = 0
        lastValue = nil
    }
}
