/// The two escape hatches from Swift's ownership and concurrency checking the gateway uses, each in one place.

/// A loop-confined value carried across threads (through a `@Sendable` closure) to be used again only on its own
/// loop (via `EventLoop.execute`). The compiler cannot see that confinement; this type says it.
public struct LoopBound<T>: @unchecked Sendable {
    public let value: T
    public init(_ value: T) { self.value = value }
}

/// A reference that neither keeps its object alive nor costs reference counting in release builds
/// (`unowned(unsafe)`): for back-references from objects of a loop's request path to objects that outlive them
/// (a connection's loop context, an exchange's responder), read several times per request.
///
/// The owner guarantees the lifetime; a mistake would be a use after free. Debug builds (`make test`) check it: they
/// also hold a weak reference and trap with the type's name when the object is gone.
public struct Unretained<T: AnyObject> {
    @usableFromInline unowned(unsafe) let object: T
    #if DEBUG
    @usableFromInline weak var check: T?
    #endif

    @inlinable public init(_ object: T) {
        self.object = object
        #if DEBUG
        check = object
        #endif
    }

    @inlinable public var value: T {
        @inline(__always) get {
            #if DEBUG
            precondition(check != nil, "Unretained<\(T.self)>: the object was freed while still referenced")
            #endif
            return object
        }
    }
}
