extension String {
    /// Control characters (newlines and escape sequences among them) as `\u{1B}`: text from
    /// outside (a device name in an archive, a member's name, a relay's refusal) written as is
    /// could forge log lines or rewrite the terminal.
    package var escapingControlCharacters: String {
        guard unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else { return self }
        return unicodeScalars.map { scalar in
            scalar.properties.generalCategory == .control ? "\\u{\(String(scalar.value, radix: 16, uppercase: true))}" : String(scalar)
        }.joined()
    }
}
