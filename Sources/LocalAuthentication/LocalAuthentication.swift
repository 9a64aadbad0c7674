// `import LocalAuthentication` on Linux: the names Apple's framework gives, from the simulated
// device's KeyferrySecurity, so that code under `#if canImport(LocalAuthentication)` compiles
// its prompt paths here too instead of leaving them out.

@_exported import enum KeyferrySecurity.LABiometryType
@_exported import class KeyferrySecurity.LAContext
@_exported import enum KeyferrySecurity.LACredentialType
@_exported import struct KeyferrySecurity.LAError
@_exported import var KeyferrySecurity.LAErrorDomain
@_exported import enum KeyferrySecurity.LAPolicy
