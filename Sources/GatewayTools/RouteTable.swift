import AppCheck
import Foundation
import GatewayConfig
import Issuer

/// The resolved configuration as `check-config` prints it (README, Commands): a listener summary, then one line per route
/// in match order with its name, match (`= /exact` or `/prefix*`), methods (`*` = any), upstream name and URL,
/// enforcement, replay protection and effective body limit. Columns are padded to align; ends with a newline.
public func describeRoutes(_ settings: Settings) -> String {
    var lines: [String] = ["listeners:"]
    let server = settings.server
    var listeners: [[String]] = server.listen.map { ["http", $0.description, "HTTP/1.1"] }
    if let tls = server.tls {
        listeners += tls.listen.map { ["https", $0.description, "TLS \(tls.minVersion)+, h2 and http/1.1 by ALPN"] }
    }
    listeners.append(["admin", server.adminListen?.description ?? "off", "/metrics /healthz /readyz /dashboard"])
    lines += alignedRows(listeners).map { "  " + $0 }
    lines.append("threads: \(server.threads)")
    lines.append("routes (first match wins):")
    var rows = [["NAME", "MATCH", "METHODS", "UPSTREAM", "ENFORCEMENT", "REPLAY", "MAX BODY"]]
    for route in settings.routes {
        let match: String
        switch route.match {
        case let .exact(path): match = "= \(path)"
        case let .prefix(prefix): match = "\(prefix)*"
        }
        var upstream = "?"
        if settings.upstreams.indices.contains(route.upstreamIndex) {
            let target = settings.upstreams[route.upstreamIndex]
            let address = HostPort(host: target.host, port: target.port)
            upstream = "\(target.name) \(target.scheme)://\(address)\(target.basePath)"
        }
        rows.append([
            route.name, match, route.methods.isEmpty ? "*" : route.methods.joined(separator: ","), upstream,
            route.enforcement.rawValue, route.replayProtection ? "yes" : "no",
            ConfigValueParser.formatSize(route.maxBodyBytes),
        ])
    }
    lines += alignedRows(rows).map { "  " + $0 }
    lines += describeKeySets(settings)
    if let issuer = settings.issuer {
        lines += describeIssuer(issuer, projectNumber: settings.appCheck.projectNumber)
        lines += issuer.warnings(allowedAppIds: settings.appCheck.appIds)
    }
    lines += settings.warnings
    return lines.joined(separator: "\n") + "\n"
}

/// The key sets the gateway will trust, one line each: whose tokens each verifies (`iss`) and where its keys come from.
/// Firebase's line says so when `app_check.jwks.url` is `none`. Custom-token backends are listed too: their sets
/// verify what `exchangeCustomToken` accepts, not route tokens.
public func describeKeySets(_ settings: Settings) -> [String] {
    let number = settings.appCheck.projectNumber
    var rows: [[String]] = []
    if settings.appCheck.jwks.isNone {
        rows.append(["firebase", "not used (app_check.jwks.url: none): Firebase-issued tokens are refused (wrong_issuer)"])
    } else {
        rows.append(["firebase", "iss \(AppCheckPolicy.firebaseIssuer(projectNumber: number)) from \(settings.appCheck.jwks.url)"])
    }
    if let issuer = settings.issuer {
        let count = issuer.signingKeyPaths.count
        rows.append(["own issuer", "iss \(issuer.tokenIssuer(projectNumber: number)) from signing_keys (\(count) key\(count == 1 ? "" : "s"), local)"])
    }
    for entry in settings.appCheck.trustedIssuers {
        rows.append(["trusted", "iss \(entry.iss) from \(entry.jwksURL)"])
    }
    for entry in settings.issuer?.customTokenIssuers ?? [] {
        rows.append(["custom token", "iss \(entry.iss) from \(entry.jwksURL) (exchangeCustomToken only)"])
    }
    return ["key sets trusted:"] + alignedRows(rows).map { "  " + $0 }
}

/// The issuer block of `check-config`: where it answers, what it signs with, and per app its methods.
private func describeIssuer(_ issuer: IssuerSettings, projectNumber: String) -> [String] {
    var lines = [
        "issuer (answered before routes):",
        "  api:  \(issuer.basePath)/v1/projects/{project}/apps/{app_id}:{method}",
        "  jwks: \(issuer.basePath)/v1/jwks",
        "  discovery: \(IssuerPath.discoveryPath(issuerURL: issuer.issuerURL, projectNumber: projectNumber) ?? "-")",
        "  iss:  \(issuer.tokenIssuer(projectNumber: projectNumber))",
        "  signing keys: \(issuer.signingKeyPaths.count) (signs with \(issuer.signingKeyPaths.first ?? "?"))",
        "  ttl: session \(ConfigValueParser.formatDuration(issuer.sessionTTL)), limited use \(ConfigValueParser.formatDuration(issuer.limitedUseTTL)), challenge \(ConfigValueParser.formatDuration(issuer.challengeTTL))",
        "  state: \(issuer.state.store.rawValue); at most \(issuer.maxExchangesPerSecond) exchanges/s, \(issuer.maxExchangesPerAddress) per address, \(issuer.maxChallengesPerAddress) outstanding challenges per address",
    ]
    var rows = [["APP ID", "METHODS"]]
    for app in issuer.apps {
        var methods = issuer.methods(for: app)
        if let attest = app.appAttest {
            methods = methods.map { $0 == "exchangeAppAttestAttestation" ? "\($0) (\(attest.environments.map(\.rawValue).joined(separator: "+")))" : $0 }
        }
        rows.append([app.appId, methods.joined(separator: ", ")])
    }
    lines += alignedRows(rows).map { "  " + $0 }
    if !issuer.customTokenIssuers.isEmpty {
        lines.append("  custom tokens from: " + issuer.customTokenIssuers.map(\.iss).joined(separator: ", "))
    }
    return lines
}

/// Pads every column but the last to its widest cell, two spaces apart.
private func alignedRows(_ rows: [[String]]) -> [String] {
    let columns = rows.map(\.count).max() ?? 0
    var widths = [Int](repeating: 0, count: columns)
    for row in rows {
        for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) }
    }
    return rows.map { row in
        row.enumerated().map { index, cell in
            index == row.count - 1 ? cell : cell.padding(toLength: widths[index] + 2, withPad: " ", startingAt: 0)
        }.joined()
    }
}
