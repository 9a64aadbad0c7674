/// Apple's `kSecAttrProtocol` values: four-character codes, some ending in a space
/// (`kSecAttrProtocolSSH` is `"ssh "`). An item stores the code; an app's query matches it
/// only when spelled exactly so.
public enum InternetProtocol {
    /// Each constant's name without `kSecAttrProtocol`, and its code.
    public static let all: [(name: String, code: String)] = [
        ("FTP", "ftp "), ("FTPAccount", "ftpa"), ("HTTP", "http"), ("IRC", "irc "), ("NNTP", "nntp"), ("POP3", "pop3"),
        ("SMTP", "smtp"), ("SOCKS", "sox "), ("IMAP", "imap"), ("LDAP", "ldap"), ("AppleTalk", "atlk"), ("AFP", "afp "),
        ("Telnet", "teln"), ("SSH", "ssh "), ("FTPS", "ftps"), ("HTTPS", "htps"), ("HTTPProxy", "htpx"), ("HTTPSProxy", "htsx"),
        ("FTPProxy", "ftpx"), ("SMB", "smb "), ("RTSP", "rtsp"), ("RTSPProxy", "rtsx"), ("DAAP", "daap"), ("EPPC", "eppc"),
        ("IPP", "ipp "), ("NNTPS", "ntps"), ("LDAPS", "ldps"), ("TelnetS", "tels"), ("IMAPS", "imps"), ("IRCS", "ircs"),
        ("POP3S", "pops"),
    ]

    /// The code for any spelling a person writes: the code (`htps`, or `ssh` for `"ssh "`),
    /// the name without prefix in any case (`HTTPS`, `https`), or the constant's name
    /// (`kSecAttrProtocolHTTPS`). nil for anything else.
    public static func code(for text: String) -> String? {
        let bare = text.hasPrefix("kSecAttrProtocol") ? String(text.dropFirst("kSecAttrProtocol".count)) : text
        if let match = all.first(where: { $0.code == text || $0.code == text + " " }) { return match.code }
        return all.first { $0.name.lowercased() == bare.lowercased() }?.code
    }
}
