import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a value could not be parsed; the caller adds the key and position.
struct ConfigValueFailure: Error, Sendable {
    var message: String
    init(_ message: String) { self.message = message }
}

/// Pure parsers for the value syntaxes of docs/configuration.md. They know nothing of YAML or positions.
package enum ConfigValueParser {
    /// Seconds from `250ms`, `30s`, `5m`, `6h`, `7d`; a decimal number is allowed (`1.5s`), a unit is required,
    /// no sign, no spaces. Nil when malformed.
    package static func duration(_ text: String) -> Double? {
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86400)]
        for (unit, factor) in units where text.hasSuffix(unit) {
            let number = text.dropLast(unit.count)
            // "5ms" also ends in "s"; the longer unit is tried first, so a leftover letter means "not this unit".
            guard isDecimal(number), let value = Double(number) else { continue }
            return value * factor
        }
        return nil
    }

    /// Bytes from a whole number with an optional unit: `B`; `KB`, `MB`, `GB` (powers of 1000);
    /// `KiB`, `MiB`, `GiB` (powers of 1024). A bare number is bytes. Units are case-sensitive; no decimals,
    /// no sign; at most `Int64.max`. Nil when malformed.
    static func size(_ text: String) -> Int64? {
        let units: [(String, Int64)] = [
            ("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30),
            ("KB", 1_000), ("MB", 1_000_000), ("GB", 1_000_000_000), ("B", 1),
        ]
        var number = Substring(text)
        var factor: Int64 = 1
        for (unit, unitFactor) in units where text.hasSuffix(unit) {
            number = text.dropLast(unit.count)
            factor = unitFactor
            break
        }
        guard !number.isEmpty, number.allSatisfy({ $0.isASCII && $0.isNumber }), let value = Int64(number) else {
            return nil
        }
        let (product, overflow) = value.multipliedReportingOverflow(by: factor)
        return overflow ? nil : product
    }

    private static func isDecimal(_ text: Substring) -> Bool {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 1 || parts.count == 2 else { return false }
        return parts.allSatisfy { !$0.isEmpty && $0.allSatisfy { $0.isASCII && $0.isNumber } }
    }

    /// `host:port` or `[v6]:port`. The host is an IPv4 literal, an IPv6 literal in brackets or a DNS name.
    /// With `defaultPort` the `:port` part may be omitted. Ports are 0…65535 (0 = any free port, for tests).
    static func hostPort(_ text: String, defaultPort: UInt16?) -> Result<HostPort, ConfigValueFailure> {
        var host: Substring
        var portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else {
                return .failure(.init("missing ']' after the IPv6 address"))
            }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            if rest.isEmpty {
                portText = nil
            } else if rest.hasPrefix(":") {
                portText = rest.dropFirst()
            } else {
                return .failure(.init("expected ':port' after ']'"))
            }
            guard ipv6Bytes(String(host)) != nil else {
                return .failure(.init("'\(host)' is not an IPv6 address"))
            }
        } else {
            let colons = text.filter { $0 == ":" }.count
            if colons > 1 {
                return .failure(.init("an IPv6 address must be written in brackets, e.g. [::1]:8080"))
            }
            if let colon = text.firstIndex(of: ":") {
                host = text[..<colon]
                portText = text[text.index(after: colon)...]
            } else {
                host = Substring(text)
                portText = nil
            }
            if host.isEmpty {
                return .failure(.init("missing host (write 0.0.0.0:PORT to listen on every IPv4 address)"))
            }
            if portText == nil, defaultPort == nil, host.allSatisfy({ $0.isASCII && $0.isNumber }) {
                return .failure(.init("expected host:port (for every interface write 0.0.0.0:\(host))"))
            }
            if host.allSatisfy({ $0.isNumber || $0 == "." }) {
                guard ipv4Bytes(String(host)) != nil else {
                    return .failure(.init("'\(host)' is not an IPv4 address"))
                }
            } else if !isHostName(host) {
                return .failure(.init("'\(host)' is not a valid host name"))
            }
        }
        let port: UInt16
        if let portText {
            guard !portText.isEmpty, portText.allSatisfy({ $0.isASCII && $0.isNumber }),
                  let value = Int(portText), value <= 65535 else {
                return .failure(.init("port must be a number from 0 to 65535"))
            }
            port = UInt16(value)
        } else if let defaultPort {
            port = defaultPort
        } else {
            return .failure(.init("expected host:port, the port is missing"))
        }
        return .success(HostPort(host: String(host), port: port))
    }

    /// Letters, digits, `-` and `.` labels of 1…63 characters; at most 253 characters.
    static func isHostName(_ host: Substring) -> Bool {
        guard !host.isEmpty, host.count <= 253 else { return false }
        return host.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
            !label.isEmpty && label.count <= 63 && !label.hasPrefix("-") && !label.hasSuffix("-")
                && label.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }
        }
    }

    /// `a.b.c.d/n` or `v6/n`; a bare address is a single host (/32 or /128). Host bits beyond the prefix are
    /// cleared, so `10.1.2.3/8` means `10.0.0.0/8`.
    static func cidr(_ text: String) -> Result<CIDR, ConfigValueFailure> {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 1 || parts.count == 2 else {
            return .failure(.init("expected an address or address/prefix-length"))
        }
        let addressText = String(parts[0])
        guard let bytes = ipv4Bytes(addressText) ?? ipv6Bytes(addressText) else {
            return .failure(.init("'\(addressText)' is not an IPv4 or IPv6 address"))
        }
        let maxPrefix = bytes.count * 8
        var prefix = maxPrefix
        if parts.count == 2 {
            guard !parts[1].isEmpty, parts[1].allSatisfy({ $0.isASCII && $0.isNumber }),
                  let value = Int(parts[1]), value <= maxPrefix else {
                return .failure(.init("prefix length must be 0 to \(maxPrefix)"))
            }
            prefix = value
        }
        var masked = bytes
        for i in masked.indices {
            let bitsHere = max(0, min(8, prefix - i * 8))
            let mask: UInt8 = bitsHere == 0 ? 0 : UInt8(truncatingIfNeeded: 0xFF << (8 - bitsHere))
            masked[i] &= mask
        }
        return .success(CIDR(address: masked, prefixLength: prefix))
    }

    /// The 4 bytes of a dotted-quad IPv4 literal (`inet_pton` rules: no leading zeros, no short forms).
    static func ipv4Bytes(_ text: String) -> [UInt8]? {
        var address = in_addr()
        guard inet_pton(AF_INET, text, &address) == 1 else { return nil }
        return withUnsafeBytes(of: &address) { Array($0) }
    }

    /// The 16 bytes of an IPv6 literal, without brackets or zone.
    static func ipv6Bytes(_ text: String) -> [UInt8]? {
        var address = in6_addr()
        guard inet_pton(AF_INET6, text, &address) == 1 else { return nil }
        return withUnsafeBytes(of: &address) { Array($0) }
    }

    /// True for `0.0.0.0` and `::`, which listen on every address of their family.
    static func isWildcard(_ host: String) -> Bool {
        ipv4Bytes(host) == [0, 0, 0, 0] || ipv6Bytes(host) == [UInt8](repeating: 0, count: 16)
    }

    /// `1.5s`, `250ms`, `5m`, `6h`, `7d`: the largest unit that divides exactly, else seconds.
    package static func formatDuration(_ seconds: Double) -> String {
        if seconds >= 86400, seconds.truncatingRemainder(dividingBy: 86400) == 0 { return "\(Int(seconds / 86400))d" }
        if seconds >= 3600, seconds.truncatingRemainder(dividingBy: 3600) == 0 { return "\(Int(seconds / 3600))h" }
        if seconds >= 60, seconds.truncatingRemainder(dividingBy: 60) == 0 { return "\(Int(seconds / 60))m" }
        if seconds >= 1, seconds == seconds.rounded() { return "\(Int(seconds))s" }
        let ms = seconds * 1000
        if ms == ms.rounded() { return "\(Int(ms))ms" }
        return "\(seconds)s"
    }

    /// `10MiB`, `16KiB`, `1GiB` when exact, else bytes.
    package static func formatSize(_ bytes: Int64) -> String {
        for (unit, factor) in [("GiB", Int64(1) << 30), ("MiB", Int64(1) << 20), ("KiB", Int64(1) << 10)]
        where bytes >= factor && bytes % factor == 0 {
            return "\(bytes / factor)\(unit)"
        }
        return "\(bytes)B"
    }
}
