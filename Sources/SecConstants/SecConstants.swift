// Keychain Services' constants with Apple's own values (Security's SecItemConstants), so that a
// dictionary reads the same here as on a device, and values logged on one compare on the other.
// Which of them Keyferry honours is in Protocol/security.md; the others are refused with
// errSecUnimplemented, never ignored.
//
// They are Swift strings, so `kSecClass as String`, `value as CFString`, `[CFString: Any]`, a
// `switch` over them and passing them between actors compile as on Apple's platforms, where
// CFString bridges to String and is Sendable. Where app code needs an object instead (an
// `AnyObject` parameter, a `[String: AnyObject]`), SecConstantObjects has the same names.

/// A string constant such as `kSecClass`.
public typealias CFString = String

public let kCFBooleanTrue: Bool! = true
public let kCFBooleanFalse: Bool! = false

// Item classes
public let kSecClass: CFString = "class"
public let kSecClassGenericPassword: CFString = "genp"
public let kSecClassInternetPassword: CFString = "inet"
public let kSecClassCertificate: CFString = "cert"
public let kSecClassKey: CFString = "keys"
public let kSecClassIdentity: CFString = "idnt"

// Attributes
public let kSecAttrAccessible: CFString = "pdmn"
public let kSecAttrAccessControl: CFString = "accc"
public let kSecAttrAccessGroup: CFString = "agrp"
public let kSecAttrSynchronizable: CFString = "sync"
public let kSecAttrCreationDate: CFString = "cdat"
public let kSecAttrModificationDate: CFString = "mdat"
public let kSecAttrDescription: CFString = "desc"
public let kSecAttrComment: CFString = "icmt"
public let kSecAttrCreator: CFString = "crtr"
public let kSecAttrType: CFString = "type"
public let kSecAttrLabel: CFString = "labl"
public let kSecAttrIsInvisible: CFString = "invi"
public let kSecAttrIsNegative: CFString = "nega"
public let kSecAttrAccount: CFString = "acct"
public let kSecAttrService: CFString = "svce"
public let kSecAttrGeneric: CFString = "gena"
public let kSecAttrSecurityDomain: CFString = "sdmn"
public let kSecAttrServer: CFString = "srvr"
public let kSecAttrProtocol: CFString = "ptcl"
public let kSecAttrAuthenticationType: CFString = "atyp"
public let kSecAttrPort: CFString = "port"
public let kSecAttrPath: CFString = "path"
public let kSecAttrSubject: CFString = "subj"
public let kSecAttrIssuer: CFString = "issr"
public let kSecAttrSerialNumber: CFString = "slnr"
public let kSecAttrSubjectKeyID: CFString = "skid"
public let kSecAttrPublicKeyHash: CFString = "pkhh"
public let kSecAttrCertificateType: CFString = "ctyp"
public let kSecAttrCertificateEncoding: CFString = "cenc"
public let kSecAttrKeyClass: CFString = "kcls"
public let kSecAttrApplicationLabel: CFString = "klbl"
public let kSecAttrIsPermanent: CFString = "perm"
public let kSecAttrIsSensitive: CFString = "sens"
public let kSecAttrIsExtractable: CFString = "extr"
public let kSecAttrApplicationTag: CFString = "atag"
public let kSecAttrKeyType: CFString = "type"
public let kSecAttrKeySizeInBits: CFString = "bsiz"
public let kSecAttrEffectiveKeySize: CFString = "esiz"
public let kSecAttrCanEncrypt: CFString = "encr"
public let kSecAttrCanDecrypt: CFString = "decr"
public let kSecAttrCanDerive: CFString = "drve"
public let kSecAttrCanSign: CFString = "sign"
public let kSecAttrCanVerify: CFString = "vrfy"
public let kSecAttrCanWrap: CFString = "wrap"
public let kSecAttrCanUnwrap: CFString = "unwp"
public let kSecAttrSyncViewHint: CFString = "vwht"
public let kSecAttrTokenID: CFString = "tkid"
public let kSecAttrPersistantReference: CFString = "persistref"
public let kSecAttrPersistentReference: CFString = "persistref"

// kSecAttrAccessible values
public let kSecAttrAccessibleWhenUnlocked: CFString = "ak"
public let kSecAttrAccessibleAfterFirstUnlock: CFString = "ck"
public let kSecAttrAccessibleAlways: CFString = "dk"
public let kSecAttrAccessibleWhenUnlockedThisDeviceOnly: CFString = "aku"
public let kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly: CFString = "cku"
public let kSecAttrAccessibleAlwaysThisDeviceOnly: CFString = "dku"
public let kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly: CFString = "akpu"

// Other attribute values
public let kSecAttrSynchronizableAny: CFString = "syna"
public let kSecAttrAccessGroupToken: CFString = "com.apple.token"
public let kSecAttrTokenIDSecureEnclave: CFString = "com.apple.setoken"
public let kSecAttrKeyClassPublic: CFString = "0"
public let kSecAttrKeyClassPrivate: CFString = "1"
public let kSecAttrKeyClassSymmetric: CFString = "2"
public let kSecAttrKeyTypeRSA: CFString = "42"
public let kSecAttrKeyTypeEC: CFString = "73"
public let kSecAttrKeyTypeECSECPrimeRandom: CFString = "73"

// kSecAttrProtocol values
public let kSecAttrProtocolFTP: CFString = "ftp "
public let kSecAttrProtocolFTPAccount: CFString = "ftpa"
public let kSecAttrProtocolHTTP: CFString = "http"
public let kSecAttrProtocolIRC: CFString = "irc "
public let kSecAttrProtocolNNTP: CFString = "nntp"
public let kSecAttrProtocolPOP3: CFString = "pop3"
public let kSecAttrProtocolSMTP: CFString = "smtp"
public let kSecAttrProtocolSOCKS: CFString = "sox "
public let kSecAttrProtocolIMAP: CFString = "imap"
public let kSecAttrProtocolLDAP: CFString = "ldap"
public let kSecAttrProtocolAppleTalk: CFString = "atlk"
public let kSecAttrProtocolAFP: CFString = "afp "
public let kSecAttrProtocolTelnet: CFString = "teln"
public let kSecAttrProtocolSSH: CFString = "ssh "
public let kSecAttrProtocolFTPS: CFString = "ftps"
public let kSecAttrProtocolHTTPS: CFString = "htps"
public let kSecAttrProtocolHTTPProxy: CFString = "htpx"
public let kSecAttrProtocolHTTPSProxy: CFString = "htsx"
public let kSecAttrProtocolFTPProxy: CFString = "ftpx"
public let kSecAttrProtocolSMB: CFString = "smb "
public let kSecAttrProtocolRTSP: CFString = "rtsp"
public let kSecAttrProtocolRTSPProxy: CFString = "rtsx"
public let kSecAttrProtocolDAAP: CFString = "daap"
public let kSecAttrProtocolEPPC: CFString = "eppc"
public let kSecAttrProtocolIPP: CFString = "ipp "
public let kSecAttrProtocolNNTPS: CFString = "ntps"
public let kSecAttrProtocolLDAPS: CFString = "ldps"
public let kSecAttrProtocolTelnetS: CFString = "tels"
public let kSecAttrProtocolIMAPS: CFString = "imps"
public let kSecAttrProtocolIRCS: CFString = "ircs"
public let kSecAttrProtocolPOP3S: CFString = "pops"

// kSecAttrAuthenticationType values
public let kSecAttrAuthenticationTypeNTLM: CFString = "ntlm"
public let kSecAttrAuthenticationTypeMSN: CFString = "msna"
public let kSecAttrAuthenticationTypeDPA: CFString = "dpaa"
public let kSecAttrAuthenticationTypeRPA: CFString = "rpaa"
public let kSecAttrAuthenticationTypeHTTPBasic: CFString = "http"
public let kSecAttrAuthenticationTypeHTTPDigest: CFString = "httd"
public let kSecAttrAuthenticationTypeHTMLForm: CFString = "form"
public let kSecAttrAuthenticationTypeDefault: CFString = "dflt"

// Search keys
public let kSecMatchPolicy: CFString = "m_Policy"
public let kSecMatchItemList: CFString = "m_ItemList"
public let kSecMatchSearchList: CFString = "m_SearchList"
public let kSecMatchIssuers: CFString = "m_Issuers"
public let kSecMatchEmailAddressIfPresent: CFString = "m_EmailAddressIfPresent"
public let kSecMatchSubjectContains: CFString = "m_SubjectContains"
public let kSecMatchCaseInsensitive: CFString = "m_CaseInsensitive"
public let kSecMatchTrustedOnly: CFString = "m_TrustedOnly"
public let kSecMatchValidOnDate: CFString = "m_ValidOnDate"
public let kSecMatchLimit: CFString = "m_Limit"
public let kSecMatchLimitOne: CFString = "m_LimitOne"
public let kSecMatchLimitAll: CFString = "m_LimitAll"

// Return keys
public let kSecReturnData: CFString = "r_Data"
public let kSecReturnAttributes: CFString = "r_Attributes"
public let kSecReturnRef: CFString = "r_Ref"
public let kSecReturnPersistentRef: CFString = "r_PersistentRef"

// Value keys
public let kSecValueData: CFString = "v_Data"
public let kSecValueRef: CFString = "v_Ref"
public let kSecValuePersistentRef: CFString = "v_PersistentRef"

// Use keys
public let kSecUseItemList: CFString = "u_ItemList"
public let kSecUseOperationPrompt: CFString = "u_OpPrompt"
public let kSecUseNoAuthenticationUI: CFString = "u_NoAuthUI"
public let kSecUseAuthenticationUI: CFString = "u_AuthUI"
public let kSecUseAuthenticationUIAllow: CFString = "u_AuthUIA"
public let kSecUseAuthenticationUIFail: CFString = "u_AuthUIF"
public let kSecUseAuthenticationUISkip: CFString = "u_AuthUIS"
public let kSecUseAuthenticationContext: CFString = "u_AuthCtx"
public let kSecUseDataProtectionKeychain: CFString = "nleg"

// Key generation
public let kSecPrivateKeyAttrs: CFString = "private"
public let kSecPublicKeyAttrs: CFString = "public"
public let kSecKeyKeyExchangeParameterRequestedSize: CFString = "requestedSize"
public let kSecKeyKeyExchangeParameterSharedInfo: CFString = "sharedInfo"
