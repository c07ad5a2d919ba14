import AppCheck
import Dispatch
import Foundation
import GatewayConfig
import KeySets
import Synchronization

/// What Apple's DeviceCheck API said about one device token (docs/issuer.md "DeviceCheck").
enum DeviceCheckAnswer: Sendable, Equatable {
    /// 200: the token came from a genuine device running this team's app.
    case valid
    /// 400: Apple refused the token; its plain-text reason (for the log line only, shortened).
    case refused(String)
    /// 401 or 403: Apple refused *our* key (wrong `key_id`, `.p8`, team, or DeviceCheck not enabled for the key).
    case keyRefused(Int, String)
    /// Any other status, no answer within `DeviceCheckClient.timeout`, or no connection.
    case unavailable(String)
}

/// Calls `POST <api_url>/v1/validate_device_token` for one app (docs/issuer.md): `Authorization: Bearer` an ES256 JWT
/// made with the app's `.p8` key (`kid` = `key_id`, claims `iss` = `team_id`, `iat`), reused for at most 20 minutes;
/// body `{"device_token","transaction_id","timestamp"}` (milliseconds).
///
/// The call blocks a thread of its own queue for up to `timeout` seconds and posts the answer back to the
/// awaiting exchange, so neither an event loop nor the issuer's executor waits on Apple.
final class DeviceCheckClient: Sendable {
    /// No answer within this many seconds is `unavailable`.
    static let timeout = 5.0
    /// A bearer token is reused for at most this many seconds (Apple accepts one for an hour).
    static let bearerLifetime = 20.0 * 60
    /// Largest response body read from Apple (its answers are a few bytes of text or a small JSON object).
    static let maxResponseBytes = 16 * 1024
    /// Apple's reason text in a log line is cut to this many characters.
    static let maxReasonCharacters = 200

    private static let queue = DispatchQueue(label: "appcheck-gateway.devicecheck", qos: .userInitiated,
                                             attributes: .concurrent)

    /// `<api_url>/v1/validate_device_token`.
    let endpoint: String
    let keyId: String
    let teamId: String
    private let key: ES256PrivateKey
    private let transport: BlockingPost
    private let bearer = Mutex<(token: String, madeAt: Double)?>(nil)

    /// Reads the app's `.p8` key (checked by the config loader; read again here because the file may have
    /// changed since).
    init(settings: DeviceCheckAppSettings, teamId: String) throws(IssuerStartError) {
        let pem: String
        do { pem = try String(contentsOfFile: settings.privateKeyPath, encoding: .utf8) } catch {
            throw IssuerStartError("device_check.private_key '\(settings.privateKeyPath)': cannot be read")
        }
        do { key = try ES256PrivateKey(pemRepresentation: pem) } catch {
            throw IssuerStartError("device_check.private_key '\(settings.privateKeyPath)': \(error)")
        }
        endpoint = settings.effectiveAPIURL + "/v1/validate_device_token"
        keyId = settings.keyId
        self.teamId = teamId
        transport = BlockingPost(timeout: Self.timeout, maxBodyBytes: Self.maxResponseBytes)
    }

    /// Asks Apple whether `deviceToken` (the raw bytes the device's `DCDevice` produced) is valid, at wall time `now`.
    func validate(deviceToken: [UInt8], now: Double) async -> DeviceCheckAnswer {
        let authorization: String
        do { authorization = "Bearer " + (try bearerToken(now: now)) } catch {
            return .unavailable("cannot sign the DeviceCheck bearer token: \(error)")
        }
        let body = "{\"device_token\":\(JSONText.quote(Data(deviceToken).base64EncodedString()))"
            + ",\"transaction_id\":\(JSONText.quote(UUID().uuidString))"
            + ",\"timestamp\":\(Int64((now * 1000).rounded(.down)))}"
        let call = Call(transport: transport, endpoint: endpoint, authorization: authorization, body: Array(body.utf8))
        return await withCheckedContinuation { continuation in
            Self.queue.async { continuation.resume(returning: call.run()) }
        }
    }

    /// The cached bearer token, or a new one when the cached one is 20 minutes old (or from the future: the clock
    /// stepped back).
    private func bearerToken(now: Double) throws(ES256KeyError) -> String {
        if let cached = bearer.withLock({ $0 }), now >= cached.madeAt, now - cached.madeAt < Self.bearerLifetime {
            return cached.token
        }
        let token = try DeviceCheckClientJWT.make(key: key, keyId: keyId, teamId: teamId, issuedAt: Int(now))
        bearer.withLock { $0 = (token, now) }
        return token
    }

    /// One blocking call and the reading of Apple's answer.
    private struct Call: Sendable {
        let transport: BlockingPost
        let endpoint: String
        let authorization: String
        let body: [UInt8]

        func run() -> DeviceCheckAnswer {
            let response: (status: Int, body: [UInt8])
            do {
                response = try transport.post(endpoint, headers: [("Authorization", authorization),
                                                                  ("Content-Type", "application/json"),
                                                                  ("Accept", "*/*")], body: body)
            } catch {
                return .unavailable(error.description)
            }
            let text = DeviceCheckClient.reason(response.body)
            switch response.status {
            case 200: return .valid
            case 400: return .refused(text)
            case 401, 403: return .keyRefused(response.status, text)
            default: return .unavailable("Apple answered HTTP \(response.status)" + (text.isEmpty ? "" : ": \(text)"))
            }
        }
    }

    /// Apple's plain-text reason, printable ASCII only and at most `maxReasonCharacters` long.
    static func reason(_ body: [UInt8]) -> String {
        let printable = body.prefix(maxReasonCharacters).map { (0x20...0x7E).contains($0) ? Character(UnicodeScalar($0)) : "?" }
        return String(printable).trimmingCharacters(in: .whitespaces)
    }
}
