/// Apple Root CA - G3: the anchor of App Attest **receipts** (not of the attestation chain, which ends at
/// `AppAttestRootCA`). A receipt is signed by "Application Attestation Fraud Receipt Signing" under
/// "Apple Application Integration CA 5 - G1" under this root.
///
/// Subject `CN=Apple Root CA - G3, OU=Apple Certification Authority, O=Apple Inc., C=US`, serial
/// `2DC5FC88D2C54B95`, P-384, valid 2014-04-30 to 2039-04-30, SHA-256 of the DER
/// `63343abfb89a6a03ebb57e9b3f5fa7be7c4f5c756f3017b3a8c488c3653e9179`. Taken from the project's research notes
/// (`shared/testdata/appattest/Apple_Root_CA_G3.pem`, itself from veehaitch/devicecheck-appattest
/// `ReceiptValidator.kt` @cb26211f); every receipt in the public vectors verifies to it.
public enum AppAttestReceiptRootCA {
    /// The certificate in PEM.
    public static let applePEM = """
-----BEGIN CERTIFICATE-----
MIICQzCCAcmgAwIBAgIILcX8iNLFS5UwCgYIKoZIzj0EAwMwZzEbMBkGA1UEAwwSQXBwbGUgUm9v
dCBDQSAtIEczMSYwJAYDVQQLDB1BcHBsZSBDZXJ0aWZpY2F0aW9uIEF1dGhvcml0eTETMBEGA1UE
CgwKQXBwbGUgSW5jLjELMAkGA1UEBhMCVVMwHhcNMTQwNDMwMTgxOTA2WhcNMzkwNDMwMTgxOTA2
WjBnMRswGQYDVQQDDBJBcHBsZSBSb290IENBIC0gRzMxJjAkBgNVBAsMHUFwcGxlIENlcnRpZmlj
YXRpb24gQXV0aG9yaXR5MRMwEQYDVQQKDApBcHBsZSBJbmMuMQswCQYDVQQGEwJVUzB2MBAGByqG
SM49AgEGBSuBBAAiA2IABJjpLz1AcqTtkyJygRMc3RCV8cWjTnHcFBbZDuWmBSp3ZHtfTjjTuxxE
tX/1H7YyYl3J6YRbTzBPEVoA/VhYDKX1DyxNB0cTddqXl5dvMVztK517IDvYuVTZXpmkOlEKMaNC
MEAwHQYDVR0OBBYEFLuw3qFYM4iapIqZ3r6966/ayySrMA8GA1UdEwEB/wQFMAMBAf8wDgYDVR0P
AQH/BAQDAgEGMAoGCCqGSM49BAMDA2gAMGUCMQCD6cHEFl4aXTQY2e3v9GwOAEZLuN+yRhHFD/3m
eoyhpmvOwgPUnPWTxnS4at+qIxUCMG1mihDK1A3UT82NQz60imOlM27jbdoXt2QfyFMm+YhidDkL
F1vLUagM6BgD56KyKA==
-----END CERTIFICATE-----

"""
}
