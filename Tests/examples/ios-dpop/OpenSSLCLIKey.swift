import Foundation

/// A `DPoPKey` for this check only, on Linux: a software P-256 key made and used by the `openssl` command (no
/// CryptoKit here). It stands in for `SecureEnclaveDPoPKey`, which is not compiled here; it is not the platform.
struct OpenSSLCLIKey: DPoPKey {
    let pemPath: String
    let x963PublicKey: Data

    init(directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        pemPath = directory + "/dpop-key.pem"
        _ = try Self.openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", pemPath])
        // SubjectPublicKeyInfo DER of a P-256 key: 26 bytes of header, then the 65-byte uncompressed point.
        let spki = try Self.openssl(["ec", "-in", pemPath, "-pubout", "-outform", "DER"])
        guard spki.count == 91, spki[spki.startIndex + 26] == 0x04 else { throw CheckError("unexpected public key DER") }
        x963PublicKey = spki.suffix(65)
    }

    func signature(for data: Data) throws -> Data {
        let der = try Self.openssl(["dgst", "-sha256", "-sign", pemPath], input: data)
        // ECDSA-Sig-Value ::= SEQUENCE { r INTEGER, s INTEGER } (short lengths for P-256) to r ‖ s.
        let bytes = [UInt8](der)
        guard bytes.count > 8, bytes[0] == 0x30, bytes[2] == 0x02 else { throw CheckError("unexpected signature DER") }
        func integer(at i: Int) -> (value: [UInt8], next: Int) {
            let length = Int(bytes[i + 1])
            let raw = Array(bytes[(i + 2)..<(i + 2 + length)].drop { $0 == 0 })
            return ([UInt8](repeating: 0, count: 32 - raw.count) + raw, i + 2 + length)
        }
        let r = integer(at: 2), s = integer(at: r.next)
        return Data(r.value + s.value)
    }

    func sha256(_ data: Data) -> Data {
        do { return try Self.openssl(["dgst", "-sha256", "-binary"], input: data) } catch { fatalError("\(error)") }
    }

    static func openssl(_ arguments: [String], input: Data? = nil) throws -> Data {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        p.arguments = arguments
        let out = Pipe(), inPipe = Pipe(), errors = Pipe()
        p.standardOutput = out
        p.standardInput = inPipe
        p.standardError = errors  // its chatter ("read EC key") shown only on failure; a few bytes, read at the end
        try p.run()
        inPipe.fileHandleForWriting.write(input ?? Data())
        try inPipe.fileHandleForWriting.close()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else {
            let why = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            throw CheckError("openssl \(arguments.joined(separator: " ")) failed: \(why)")
        }
        return data
    }
}

struct CheckError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
