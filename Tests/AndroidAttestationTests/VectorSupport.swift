import Foundation

/// Loads the test vectors in `Vectors/` (copied from android/keyattestation, see Vectors/README.md).
enum VectorSupport {
    static func url(_ name: String) throws -> URL {
        guard let url = Bundle.module.url(forResource: name, withExtension: nil, subdirectory: "Vectors") else {
            throw VectorError("vector \(name) is missing")
        }
        return url
    }

    /// The DER certificates of a PEM chain, in file order.
    static func chain(_ name: String) throws -> [[UInt8]] {
        let text = try String(contentsOf: try url(name + ".pem"), encoding: .utf8)
        var out: [[UInt8]] = []
        var body = ""
        var inside = false
        for line in text.split(whereSeparator: \.isNewline) {
            if line.hasPrefix("-----BEGIN CERTIFICATE") { inside = true; body = ""; continue }
            if line.hasPrefix("-----END CERTIFICATE") {
                inside = false
                guard let data = Data(base64Encoded: body) else { throw VectorError("bad base64 in \(name)") }
                out.append([UInt8](data))
                continue
            }
            if inside { body += line.trimmingCharacters(in: .whitespaces) }
        }
        return out
    }

    /// Google's expected parse result, with its `//` comment lines removed.
    static func expected(_ name: String) throws -> [String: Any] {
        let text = try String(contentsOf: try url(name + ".json"), encoding: .utf8)
        let json = text.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("//") }.joined(separator: "\n")
        guard let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else {
            throw VectorError("\(name).json is not an object")
        }
        return object
    }

    static func base64(_ text: String) throws -> [UInt8] {
        guard let data = Data(base64Encoded: text) else { throw VectorError("bad base64 \(text)") }
        return [UInt8](data)
    }
}

struct VectorError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
