// App code that asks for Face ID only where LocalAuthentication exists, as apps shared with
// watchOS or Linux servers write it: on Linux, Keyferry's LocalAuthentication module makes the
// prompt path the one that compiles, so a test can answer (or cancel) the prompt.
#if canImport(LocalAuthentication)
import LocalAuthentication
#endif

enum BiometricGate {
    /// Whether the user let the app open its vault.
    static func open() async -> Bool {
        #if canImport(LocalAuthentication)
        let context = LAContext()
        do {
            return try await context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "Open the vault")
        } catch {
            return false
        }
        #else
        return true  // No prompt on this platform.
        #endif
    }
}
