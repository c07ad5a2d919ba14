import ProxyCore
import GatewayConfig

/// A loop's upstream pools, one per configured upstream, by index (issue 22's split of the loop context), and their
/// reconciliation across configuration generations.
package struct UpstreamPools {
    private var pools: [UpstreamPool] = []

    @inline(__always)
    subscript(index: Int) -> UpstreamPool { pools[index] }

    /// The pools of `runtime`'s upstreams, new.
    mutating func build(_ runtime: Runtime, context: LoopEnvironment) {
        pools = runtime.settings.upstreams.enumerated().map { i, u in
            UpstreamPool(settings: u, addresses: runtime.upstreamAddresses[i], tls: runtime.upstreamTLS[i],
                         h2TLS: runtime.upstreamH2TLS[i], context: context)
        }
    }

    /// Switches from `old`'s upstreams to `new`'s. Pools to an unchanged endpoint are kept (with their idle
    /// connections); the others retire.
    mutating func apply(_ new: Runtime, after old: Runtime, context: LoopEnvironment) {
        var kept: [UpstreamPool] = []
        for (i, u) in new.settings.upstreams.enumerated() {
            if let j = old.settings.upstreams.firstIndex(where: { $0.name == u.name }),
               Self.sameEndpoint(old.settings.upstreams[j], u), j < pools.count,
               pools[j].addresses.count == new.upstreamAddresses[i].count {
                kept.append(pools[j])
            } else {
                kept.append(UpstreamPool(settings: u, addresses: new.upstreamAddresses[i], tls: new.upstreamTLS[i],
                                         h2TLS: new.upstreamH2TLS[i], context: context))
            }
        }
        for p in pools where !kept.contains(where: { $0 === p }) { p.retire() }
        pools = kept
    }

    private static func sameEndpoint(_ a: UpstreamSettings, _ b: UpstreamSettings) -> Bool {
        a.scheme == b.scheme && a.host == b.host && a.port == b.port && a.basePath == b.basePath
            && a.connectTimeout == b.connectTimeout && a.responseTimeout == b.responseTimeout
            && a.maxIdleConnections == b.maxIdleConnections && a.caFile == b.caFile
            && a.httpProtocol == b.httpProtocol
    }

    /// Closes idle upstream connections and makes busy ones close when done (shutdown).
    package func retireAll() {
        for p in pools { p.retire() }
    }
}
