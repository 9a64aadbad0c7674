// Keychain Services' constants with Apple's own values (Security's SecItemConstants), so that a
// dictionary reads the same here as on a device, and values logged on one compare on the other.
// Which of them Keyferry honours is in Protocol/security.md; the others are refused with
// errSecUnimplemented, never ignored.
//
// They are Swift strings, so `kSecClass as String`, `value as CFString`, `[CFString: Any]`, a
// `switch` over them and passing them between actors compile as on Apple's platforms, where
// CFString bridges to String and is Sendable. Inlinable, so that a comparison with one in
// another module is a comparison with a literal, not a call into this one. Where app code needs an object instead (an
// `AnyObject` parameter, a `[String: AnyObject]`), SecConstantObjects has the same names.

/// A string constant such as `kSecClass`.
public typealias CFString = String

public let kCFBooleanTrue: Bool! = true
public let kCFBooleanFalse: Bool! = false

// Item classes
@inlinable public var kSecClass: CFString { "class" }
@inlinable public var kSecClassGenericPassword: CFString { "genp" }
@inlinable public var kSecClassInternetPassword: CFString { "inet" }
@inlinable public var kSecClassCertificate: CFString { "cert" }
@inlinable public var kSecClassKey: CFString { "keys" }
@inlinable public var kSecClassIdentity: CFString { "idnt" }

// Attributes
@inlinable public var kSecAttrAccessible: CFString { "pdmn" }
@inlinable public var kSecAttrAccessControl: CFString { "accc" }
@inlinable public var kSecAttrAccessGroup: CFString { "agrp" }
@inlinable public var kSecAttrSynchronizable: CFString { "sync" }
@inlinable public var kSecAttrCreationDate: CFString { "cdat" }
@inlinable public var kSecAttrModificationDate: CFString { "mdat" }
@inlinable public var kSecAttrDescription: CFString { "desc" }
@inlinable public var kSecAttrComment: CFString { "icmt" }
@inlinable public var kSecAttrCreator: CFString { "crtr" }
@inlinable public var kSecAttrType: CFString { "type" }
@inlinable public var kSecAttrLabel: CFString { "labl" }
@inlinable public var kSecAttrIsInvisible: CFString { "invi" }
@inlinable public var kSecAttrIsNegative: CFString { "nega" }
@inlinable public var kSecAttrAccount: CFString { "acct" }
@inlinable public var kSecAttrService: CFString { "svce" }
@inlinable public var kSecAttrGeneric: CFString { "gena" }
@inlinable public var kSecAttrSecurityDomain: CFString { "sdmn" }
@inlinable public var kSecAttrServer: CFString { "srvr" }
@inlinable public var kSecAttrProtocol: CFString { "ptcl" }
@inlinable public var kSecAttrAuthenticationType: CFString { "atyp" }
@inlinable public var kSecAttrPort: CFString { "port" }
@inlinable public var kSecAttrPath: CFString { "path" }
@inlinable public var kSecAttrSubject: CFString { "subj" }
@inlinable public var kSecAttrIssuer: CFString { "issr" }
@inlinable public var kSecAttrSerialNumber: CFString { "slnr" }
@inlinable public var kSecAttrSubjectKeyID: CFString { "skid" }
@inlinable public var kSecAttrPublicKeyHash: CFString { "pkhh" }
@inlinable public var kSecAttrCertificateType: CFString { "ctyp" }
@inlinable public var kSecAttrCertificateEncoding: CFString { "cenc" }
@inlinable public var kSecAttrKeyClass: CFString { "kcls" }
@inlinable public var kSecAttrApplicationLabel: CFString { "klbl" }
@inlinable public var kSecAttrIsPermanent: CFString { "perm" }
@inlinable public var kSecAttrIsSensitive: CFString { "sens" }
@inlinable public var kSecAttrIsExtractable: CFString { "extr" }
@inlinable public var kSecAttrApplicationTag: CFString { "atag" }
@inlinable public var kSecAttrKeyType: CFString { "type" }
@inlinable public var kSecAttrKeySizeInBits: CFString { "bsiz" }
@inlinable public var kSecAttrEffectiveKeySize: CFString { "esiz" }
@inlinable public var kSecAttrCanEncrypt: CFString { "encr" }
@inlinable public var kSecAttrCanDecrypt: CFString { "decr" }
@inlinable public var kSecAttrCanDerive: CFString { "drve" }
@inlinable public var kSecAttrCanSign: CFString { "sign" }
@inlinable public var kSecAttrCanVerify: CFString { "vrfy" }
@inlinable public var kSecAttrCanWrap: CFString { "wrap" }
@inlinable public var kSecAttrCanUnwrap: CFString { "unwp" }
@inlinable public var kSecAttrSyncViewHint: CFString { "vwht" }
@inlinable public var kSecAttrTokenID: CFString { "tkid" }
@inlinable public var kSecAttrPersistantReference: CFString { "persistref" }
@inlinable public var kSecAttrPersistentReference: CFString { "persistref" }

// kSecAttrAccessible values
@inlinable public var kSecAttrAccessibleWhenUnlocked: CFString { "ak" }
@inlinable public var kSecAttrAccessibleAfterFirstUnlock: CFString { "ck" }
// Deprecated since iOS 12, and warned about as Apple's SDK does.
@available(*, deprecated, message: "readable before first unlock; use kSecAttrAccessibleAfterFirstUnlock (deprecated since iOS 12)")
@inlinable public var kSecAttrAccessibleAlways: CFString { "dk" }
@inlinable public var kSecAttrAccessibleWhenUnlockedThisDeviceOnly: CFString { "aku" }
@inlinable public var kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly: CFString { "cku" }
@available(*, deprecated, message: "readable before first unlock; use kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly (deprecated since iOS 12)")
@inlinable public var kSecAttrAccessibleAlwaysThisDeviceOnly: CFString { "dku" }
@inlinable public var kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly: CFString { "akpu" }

// Other attribute values
@inlinable public var kSecAttrSynchronizableAny: CFString { "syna" }
@inlinable public var kSecAttrAccessGroupToken: CFString { "com.apple.token" }
@inlinable public var kSecAttrTokenIDSecureEnclave: CFString { "com.apple.setoken" }
@inlinable public var kSecAttrKeyClassPublic: CFString { "0" }
@inlinable public var kSecAttrKeyClassPrivate: CFString { "1" }
@inlinable public var kSecAttrKeyClassSymmetric: CFString { "2" }
@inlinable public var kSecAttrKeyTypeRSA: CFString { "42" }
@inlinable public var kSecAttrKeyTypeEC: CFString { "73" }
@inlinable public var kSecAttrKeyTypeECSECPrimeRandom: CFString { "73" }

// kSecAttrProtocol values
@inlinable public var kSecAttrProtocolFTP: CFString { "ftp " }
@inlinable public var kSecAttrProtocolFTPAccount: CFString { "ftpa" }
@inlinable public var kSecAttrProtocolHTTP: CFString { "http" }
@inlinable public var kSecAttrProtocolIRC: CFString { "irc " }
@inlinable public var kSecAttrProtocolNNTP: CFString { "nntp" }
@inlinable public var kSecAttrProtocolPOP3: CFString { "pop3" }
@inlinable public var kSecAttrProtocolSMTP: CFString { "smtp" }
@inlinable public var kSecAttrProtocolSOCKS: CFString { "sox " }
@inlinable public var kSecAttrProtocolIMAP: CFString { "imap" }
@inlinable public var kSecAttrProtocolLDAP: CFString { "ldap" }
@inlinable public var kSecAttrProtocolAppleTalk: CFString { "atlk" }
@inlinable public var kSecAttrProtocolAFP: CFString { "afp " }
@inlinable public var kSecAttrProtocolTelnet: CFString { "teln" }
@inlinable public var kSecAttrProtocolSSH: CFString { "ssh " }
@inlinable public var kSecAttrProtocolFTPS: CFString { "ftps" }
@inlinable public var kSecAttrProtocolHTTPS: CFString { "htps" }
@inlinable public var kSecAttrProtocolHTTPProxy: CFString { "htpx" }
@inlinable public var kSecAttrProtocolHTTPSProxy: CFString { "htsx" }
@inlinable public var kSecAttrProtocolFTPProxy: CFString { "ftpx" }
@inlinable public var kSecAttrProtocolSMB: CFString { "smb " }
@inlinable public var kSecAttrProtocolRTSP: CFString { "rtsp" }
@inlinable public var kSecAttrProtocolRTSPProxy: CFString { "rtsx" }
@inlinable public var kSecAttrProtocolDAAP: CFString { "daap" }
@inlinable public var kSecAttrProtocolEPPC: CFString { "eppc" }
@inlinable public var kSecAttrProtocolIPP: CFString { "ipp " }
@inlinable public var kSecAttrProtocolNNTPS: CFString { "ntps" }
@inlinable public var kSecAttrProtocolLDAPS: CFString { "ldps" }
@inlinable public var kSecAttrProtocolTelnetS: CFString { "tels" }
@inlinable public var kSecAttrProtocolIMAPS: CFString { "imps" }
@inlinable public var kSecAttrProtocolIRCS: CFString { "ircs" }
@inlinable public var kSecAttrProtocolPOP3S: CFString { "pops" }

// kSecAttrAuthenticationType values
@inlinable public var kSecAttrAuthenticationTypeNTLM: CFString { "ntlm" }
@inlinable public var kSecAttrAuthenticationTypeMSN: CFString { "msna" }
@inlinable public var kSecAttrAuthenticationTypeDPA: CFString { "dpaa" }
@inlinable public var kSecAttrAuthenticationTypeRPA: CFString { "rpaa" }
@inlinable public var kSecAttrAuthenticationTypeHTTPBasic: CFString { "http" }
@inlinable public var kSecAttrAuthenticationTypeHTTPDigest: CFString { "httd" }
@inlinable public var kSecAttrAuthenticationTypeHTMLForm: CFString { "form" }
@inlinable public var kSecAttrAuthenticationTypeDefault: CFString { "dflt" }

// Search keys
@inlinable public var kSecMatchPolicy: CFString { "m_Policy" }
@inlinable public var kSecMatchItemList: CFString { "m_ItemList" }
@inlinable public var kSecMatchSearchList: CFString { "m_SearchList" }
@inlinable public var kSecMatchIssuers: CFString { "m_Issuers" }
@inlinable public var kSecMatchEmailAddressIfPresent: CFString { "m_EmailAddressIfPresent" }
@inlinable public var kSecMatchSubjectContains: CFString { "m_SubjectContains" }
@inlinable public var kSecMatchCaseInsensitive: CFString { "m_CaseInsensitive" }
@inlinable public var kSecMatchTrustedOnly: CFString { "m_TrustedOnly" }
@inlinable public var kSecMatchValidOnDate: CFString { "m_ValidOnDate" }
@inlinable public var kSecMatchLimit: CFString { "m_Limit" }
@inlinable public var kSecMatchLimitOne: CFString { "m_LimitOne" }
@inlinable public var kSecMatchLimitAll: CFString { "m_LimitAll" }

// Return keys
@inlinable public var kSecReturnData: CFString { "r_Data" }
@inlinable public var kSecReturnAttributes: CFString { "r_Attributes" }
@inlinable public var kSecReturnRef: CFString { "r_Ref" }
@inlinable public var kSecReturnPersistentRef: CFString { "r_PersistentRef" }

// Value keys
@inlinable public var kSecValueData: CFString { "v_Data" }
@inlinable public var kSecValueRef: CFString { "v_Ref" }
@inlinable public var kSecValuePersistentRef: CFString { "v_PersistentRef" }

// Use keys
@inlinable public var kSecUseItemList: CFString { "u_ItemList" }
@inlinable public var kSecUseOperationPrompt: CFString { "u_OpPrompt" }
@inlinable public var kSecUseNoAuthenticationUI: CFString { "u_NoAuthUI" }
@inlinable public var kSecUseAuthenticationUI: CFString { "u_AuthUI" }
@inlinable public var kSecUseAuthenticationUIAllow: CFString { "u_AuthUIA" }
@inlinable public var kSecUseAuthenticationUIFail: CFString { "u_AuthUIF" }
@inlinable public var kSecUseAuthenticationUISkip: CFString { "u_AuthUIS" }
@inlinable public var kSecUseAuthenticationContext: CFString { "u_AuthCtx" }
@inlinable public var kSecUseDataProtectionKeychain: CFString { "nleg" }

// Key generation
@inlinable public var kSecPrivateKeyAttrs: CFString { "private" }
@inlinable public var kSecPublicKeyAttrs: CFString { "public" }
@inlinable public var kSecKeyKeyExchangeParameterRequestedSize: CFString { "requestedSize" }
@inlinable public var kSecKeyKeyExchangeParameterSharedInfo: CFString { "sharedInfo" }

// PKCS #12 import (SecImportExport.h)
@inlinable public var kSecImportExportPassphrase: CFString { "passphrase" }
@inlinable public var kSecImportItemLabel: CFString { "label" }
@inlinable public var kSecImportItemKeyID: CFString { "keyid" }
@inlinable public var kSecImportItemTrust: CFString { "trust" }
@inlinable public var kSecImportItemCertChain: CFString { "chain" }
@inlinable public var kSecImportItemIdentity: CFString { "identity" }
