import ProxyCore
import Gateway
import EventLoop
import Foundation
import Synchronization

/// Gathers one scrape: asks every loop for a copy of its counters (on its own thread), sums them and
/// renders the text once all have answered. Extra sources (key set, replay store) add their families.
final class MetricsCollector: Sendable {
    typealias Source = @Sendable (inout MetricsText) -> Void

    private let sources = Mutex<[Source]>([])

    func addSource(_ source: @escaping Source) { sources.withLock { $0.append(source) } }

    /// Collects from `workers` and calls `completion` (on some loop thread) with the exposition text.
    func collect(workers: [Worker], openConnections: Int, completion: @escaping @Sendable (String) -> Void) {
        let state = Mutex<(LoopMetrics, Int)>((LoopMetrics(), workers.count))
        let extra = sources.withLock { $0 }
        for w in workers {
            w.loop.execute { [w] in
                let snapshot = w.snapshotMetrics()
                let done = state.withLock { s -> LoopMetrics? in
                    s.0.add(snapshot)
                    s.1 -= 1
                    return s.1 == 0 ? s.0 : nil
                }
                if let total = done {
                    completion(Self.render(total, openConnections: openConnections, extra: extra))
                }
            }
        }
    }

    static func render(_ m: LoopMetrics, openConnections: Int, extra: [Source]) -> String {
        var t = MetricsText()
        let routes = m.routes.keys.sorted()
        t.family("appcheck_requests_total", "counter",
                 "Requests by route, enforcement mode and Firebase request category (skipped: off routes, CORS preflight).")
        for name in routes {
            guard let r = m.routes[name] else { continue }
            for (i, outcome) in LoopMetrics.outcomes.enumerated() where r.outcomes[i] > 0 {
                t.sample("appcheck_requests_total", [("route", name), ("mode", r.mode), ("outcome", outcome)], r.outcomes[i])
            }
        }
        t.family("appcheck_rejections_total", "counter",
                 "Requests that failed App Check, by reason; on monitor routes the would-be rejections.")
        for name in routes {
            guard let r = m.routes[name] else { continue }
            for reason in r.rejections.keys.sorted() {
                t.sample("appcheck_rejections_total", [("route", name), ("mode", r.mode), ("reason", reason)],
                         r.rejections[reason] ?? 0)
            }
        }
        t.family("appcheck_dpop_bound_requests_total", "counter",
                 "Verified requests whose token was bound to a key (cnf.jkt) and came with a valid DPoP proof, by route: over the route's verified requests, the bound share.")
        for name in routes {
            guard let r = m.routes[name], r.dpopBound > 0 else { continue }
            t.sample("appcheck_dpop_bound_requests_total", [("route", name), ("mode", r.mode)], r.dpopBound)
        }
        t.family("appcheck_token_cache_total", "counter", "Verified-token cache lookups.")
        t.sample("appcheck_token_cache_total", [("result", "hit")], m.tokenCacheHits)
        t.sample("appcheck_token_cache_total", [("result", "miss")], m.tokenCacheMisses)
        t.family("gateway_requests_total", "counter", "Requests by route and response status.")
        for name in routes {
            guard let r = m.routes[name] else { continue }
            for status in r.statuses.keys.sorted() {
                t.sample("gateway_requests_total", [("route", name), ("status", String(status))], r.statuses[status] ?? 0)
            }
        }
        for status in m.unroutedStatuses.keys.sorted() {
            t.sample("gateway_requests_total", [("route", ""), ("status", String(status))], m.unroutedStatuses[status] ?? 0)
        }
        t.family("gateway_request_duration_seconds", "histogram", "Time from request head to the end of the response.")
        for name in routes {
            guard let r = m.routes[name] else { continue }
            var cumulative = 0
            for (i, le) in LoopMetrics.durationBuckets.enumerated() {
                cumulative += r.buckets[i]
                t.sample("gateway_request_duration_seconds_bucket", [("route", name), ("le", MetricsText.format(le))], cumulative)
            }
            t.sample("gateway_request_duration_seconds_bucket", [("route", name), ("le", "+Inf")], r.durationCount)
            t.sample("gateway_request_duration_seconds_sum", [("route", name)], r.durationSum)
            t.sample("gateway_request_duration_seconds_count", [("route", name)], r.durationCount)
        }
        t.family("gateway_upstream_errors_total", "counter", "Failures talking to upstreams, by kind.")
        for key in m.upstreamErrors.keys.sorted(by: { ($0.upstream, $0.kind) < ($1.upstream, $1.kind) }) {
            t.sample("gateway_upstream_errors_total", [("upstream", key.upstream), ("kind", key.kind)], m.upstreamErrors[key] ?? 0)
        }
        t.family("gateway_connections", "gauge",
                 "Client connections: open, active (a request in flight or a tunnel), idle, tunnel (WebSocket).")
        t.sample("gateway_connections", [("state", "open")], openConnections)
        t.sample("gateway_connections", [("state", "active")], m.connectionsActive)
        t.sample("gateway_connections", [("state", "idle")], m.connectionsIdle)
        t.sample("gateway_connections", [("state", "tunnel")], m.connectionsTunnel)
        t.family("gateway_connections_refused_total", "counter",
                 "New client connections closed at accept without an answer, by reason (per_address: max_connections_per_address).")
        for reason in m.connectionsRefused.keys.sorted() {
            t.sample("gateway_connections_refused_total", [("reason", reason)], m.connectionsRefused[reason] ?? 0)
        }
        t.family("gateway_tls_handshake_failures_total", "counter", "TLS handshakes that failed or timed out.")
        t.sample("gateway_tls_handshake_failures_total", [], m.tlsHandshakeFailures)
        t.family("gateway_h2_connection_errors_total", "counter",
                 "HTTP/2 connections closed with GOAWAY for protocol errors or abuse (floods, rapid reset), by reason.")
        for reason in m.h2ConnectionErrors.keys.sorted() {
            t.sample("gateway_h2_connection_errors_total", [("reason", reason)], m.h2ConnectionErrors[reason] ?? 0)
        }
        for source in extra { source(&t) }
        return t.text
    }
}
