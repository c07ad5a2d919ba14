import Gateway
import ProxyCore
import KeySets

/// The provider already rate-limits `unknownKid(_:)` by `unknown_kid_refresh_interval`; loops ask it directly.
extension KeySetProvider: KeyRefetching {}
