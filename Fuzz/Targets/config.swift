// libFuzzer target: the YAML configuration loader (GatewayConfig.ConfigLoader.load(yaml:…): libyaml's events,
// composed by YAMLComposer, then the decoder's validation). Any input gives settings or a non-empty list of located
// errors, never a crash.
import GatewayConfig

let environment = ["FUZZ": "1", "PORT": "8080", "EMPTY": ""]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    switch ConfigLoader.load(yaml: text, path: "fuzz.yaml", environment: environment, cores: 2) {
    case .success: break
    case .failure(let errors): precondition(!errors.errors.isEmpty)
    }
    return 0
}
