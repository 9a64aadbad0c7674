// The constants of SecConstants again, as objects: on Apple's platforms CFStrings and
// CFBooleans are classes, so app code passes `kSecClassGenericPassword` where `AnyObject` or
// `CFTypeRef` is expected and keeps `kCFBooleanTrue` in a `[String: AnyObject]`. Each object is
// disfavoured: wherever SecConstants' string fits (`kSecClass as String`, a `[String: Any]`, a
// `switch`, `let x = kSecClass`) the compiler takes the string, and it takes the object only
// where nothing else compiles.
//
// The two modules are siblings, never imported publicly by one another: a module's names hide
// those of the modules it imports, and both must stay visible side by side. A test checks that
// every constant has its object.

public import Foundation
internal import SecConstants

@_disfavoredOverload public let kCFBooleanTrue: NSNumber! = NSNumber(value: true)
@_disfavoredOverload public let kCFBooleanFalse: NSNumber! = NSNumber(value: false)

// Item classes
@_disfavoredOverload nonisolated(unsafe) public let kSecClass = NSString(string: SecConstants.kSecClass)
@_disfavoredOverload nonisolated(unsafe) public let kSecClassGenericPassword = NSString(string: SecConstants.kSecClassGenericPassword)
@_disfavoredOverload nonisolated(unsafe) public let kSecClassInternetPassword = NSString(string: SecConstants.kSecClassInternetPassword)
@_disfavoredOverload nonisolated(unsafe) public let kSecClassCertificate = NSString(string: SecConstants.kSecClassCertificate)
@_disfavoredOverload nonisolated(unsafe) public let kSecClassKey = NSString(string: SecConstants.kSecClassKey)
@_disfavoredOverload nonisolated(unsafe) public let kSecClassIdentity = NSString(string: SecConstants.kSecClassIdentity)

// Attributes
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrAccessible = NSString(string: SecConstants.kSecAttrAccessible)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrAccessControl = NSString(string: SecConstants.kSecAttrAccessControl)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrAccessGroup = NSString(string: SecConstants.kSecAttrAccessGroup)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrSynchronizable = NSString(string: SecConstants.kSecAttrSynchronizable)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrCreationDate = NSString(string: SecConstants.kSecAttrCreationDate)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrModificationDate = NSString(string: SecConstants.kSecAttrModificationDate)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrDescription = NSString(string: SecConstants.kSecAttrDescription)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrComment = NSString(string: SecConstants.kSecAttrComment)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrCreator = NSString(string: SecConstants.kSecAttrCreator)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrType = NSString(string: SecConstants.kSecAttrType)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrLabel = NSString(string: SecConstants.kSecAttrLabel)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrIsInvisible = NSString(string: SecConstants.kSecAttrIsInvisible)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrIsNegative = NSString(string: SecConstants.kSecAttrIsNegative)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrAccount = NSString(string: SecConstants.kSecAttrAccount)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrService = NSString(string: SecConstants.kSecAttrService)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrGeneric = NSString(string: SecConstants.kSecAttrGeneric)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrSecurityDomain = NSString(string: SecConstants.kSecAttrSecurityDomain)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrServer = NSString(string: SecConstants.kSecAttrServer)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocol = NSString(string: SecConstants.kSecAttrProtocol)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrAuthenticationType = NSString(string: SecConstants.kSecAttrAuthenticationType)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrPort = NSString(string: SecConstants.kSecAttrPort)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrPath = NSString(string: SecConstants.kSecAttrPath)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrSubject = NSString(string: SecConstants.kSecAttrSubject)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrIssuer = NSString(string: SecConstants.kSecAttrIssuer)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrSerialNumber = NSString(string: SecConstants.kSecAttrSerialNumber)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrSubjectKeyID = NSString(string: SecConstants.kSecAttrSubjectKeyID)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrPublicKeyHash = NSString(string: SecConstants.kSecAttrPublicKeyHash)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrCertificateType = NSString(string: SecConstants.kSecAttrCertificateType)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrCertificateEncoding = NSString(string: SecConstants.kSecAttrCertificateEncoding)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrKeyClass = NSString(string: SecConstants.kSecAttrKeyClass)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrApplicationLabel = NSString(string: SecConstants.kSecAttrApplicationLabel)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrIsPermanent = NSString(string: SecConstants.kSecAttrIsPermanent)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrIsSensitive = NSString(string: SecConstants.kSecAttrIsSensitive)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrIsExtractable = NSString(string: SecConstants.kSecAttrIsExtractable)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrApplicationTag = NSString(string: SecConstants.kSecAttrApplicationTag)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrKeyType = NSString(string: SecConstants.kSecAttrKeyType)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrKeySizeInBits = NSString(string: SecConstants.kSecAttrKeySizeInBits)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrEffectiveKeySize = NSString(string: SecConstants.kSecAttrEffectiveKeySize)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrCanEncrypt = NSString(string: SecConstants.kSecAttrCanEncrypt)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrCanDecrypt = NSString(string: SecConstants.kSecAttrCanDecrypt)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrCanDerive = NSString(string: SecConstants.kSecAttrCanDerive)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrCanSign = NSString(string: SecConstants.kSecAttrCanSign)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrCanVerify = NSString(string: SecConstants.kSecAttrCanVerify)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrCanWrap = NSString(string: SecConstants.kSecAttrCanWrap)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrCanUnwrap = NSString(string: SecConstants.kSecAttrCanUnwrap)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrSyncViewHint = NSString(string: SecConstants.kSecAttrSyncViewHint)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrTokenID = NSString(string: SecConstants.kSecAttrTokenID)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrPersistantReference = NSString(string: SecConstants.kSecAttrPersistantReference)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrPersistentReference = NSString(string: SecConstants.kSecAttrPersistentReference)

// kSecAttrAccessible values
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrAccessibleWhenUnlocked = NSString(string: SecConstants.kSecAttrAccessibleWhenUnlocked)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrAccessibleAfterFirstUnlock = NSString(string: SecConstants.kSecAttrAccessibleAfterFirstUnlock)
@available(*, deprecated, message: "readable before first unlock; use kSecAttrAccessibleAfterFirstUnlock (deprecated since iOS 12)")
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrAccessibleAlways = NSString(string: SecConstants.kSecAttrAccessibleAlways)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrAccessibleWhenUnlockedThisDeviceOnly = NSString(
    string: SecConstants.kSecAttrAccessibleWhenUnlockedThisDeviceOnly)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly = NSString(
    string: SecConstants.kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly)
@available(*, deprecated, message: "readable before first unlock; use kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly (deprecated since iOS 12)")
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrAccessibleAlwaysThisDeviceOnly = NSString(
    string: SecConstants.kSecAttrAccessibleAlwaysThisDeviceOnly)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly = NSString(
    string: SecConstants.kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly)

// Other attribute values
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrSynchronizableAny = NSString(string: SecConstants.kSecAttrSynchronizableAny)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrAccessGroupToken = NSString(string: SecConstants.kSecAttrAccessGroupToken)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrTokenIDSecureEnclave = NSString(string: SecConstants.kSecAttrTokenIDSecureEnclave)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrKeyClassPublic = NSString(string: SecConstants.kSecAttrKeyClassPublic)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrKeyClassPrivate = NSString(string: SecConstants.kSecAttrKeyClassPrivate)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrKeyClassSymmetric = NSString(string: SecConstants.kSecAttrKeyClassSymmetric)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrKeyTypeRSA = NSString(string: SecConstants.kSecAttrKeyTypeRSA)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrKeyTypeEC = NSString(string: SecConstants.kSecAttrKeyTypeEC)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrKeyTypeECSECPrimeRandom = NSString(string: SecConstants.kSecAttrKeyTypeECSECPrimeRandom)

// kSecAttrProtocol values
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolFTP = NSString(string: SecConstants.kSecAttrProtocolFTP)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolFTPAccount = NSString(string: SecConstants.kSecAttrProtocolFTPAccount)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolHTTP = NSString(string: SecConstants.kSecAttrProtocolHTTP)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolIRC = NSString(string: SecConstants.kSecAttrProtocolIRC)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolNNTP = NSString(string: SecConstants.kSecAttrProtocolNNTP)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolPOP3 = NSString(string: SecConstants.kSecAttrProtocolPOP3)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolSMTP = NSString(string: SecConstants.kSecAttrProtocolSMTP)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolSOCKS = NSString(string: SecConstants.kSecAttrProtocolSOCKS)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolIMAP = NSString(string: SecConstants.kSecAttrProtocolIMAP)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolLDAP = NSString(string: SecConstants.kSecAttrProtocolLDAP)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolAppleTalk = NSString(string: SecConstants.kSecAttrProtocolAppleTalk)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolAFP = NSString(string: SecConstants.kSecAttrProtocolAFP)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolTelnet = NSString(string: SecConstants.kSecAttrProtocolTelnet)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolSSH = NSString(string: SecConstants.kSecAttrProtocolSSH)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolFTPS = NSString(string: SecConstants.kSecAttrProtocolFTPS)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolHTTPS = NSString(string: SecConstants.kSecAttrProtocolHTTPS)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolHTTPProxy = NSString(string: SecConstants.kSecAttrProtocolHTTPProxy)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolHTTPSProxy = NSString(string: SecConstants.kSecAttrProtocolHTTPSProxy)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolFTPProxy = NSString(string: SecConstants.kSecAttrProtocolFTPProxy)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolSMB = NSString(string: SecConstants.kSecAttrProtocolSMB)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolRTSP = NSString(string: SecConstants.kSecAttrProtocolRTSP)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolRTSPProxy = NSString(string: SecConstants.kSecAttrProtocolRTSPProxy)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolDAAP = NSString(string: SecConstants.kSecAttrProtocolDAAP)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolEPPC = NSString(string: SecConstants.kSecAttrProtocolEPPC)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolIPP = NSString(string: SecConstants.kSecAttrProtocolIPP)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolNNTPS = NSString(string: SecConstants.kSecAttrProtocolNNTPS)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolLDAPS = NSString(string: SecConstants.kSecAttrProtocolLDAPS)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolTelnetS = NSString(string: SecConstants.kSecAttrProtocolTelnetS)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolIMAPS = NSString(string: SecConstants.kSecAttrProtocolIMAPS)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolIRCS = NSString(string: SecConstants.kSecAttrProtocolIRCS)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrProtocolPOP3S = NSString(string: SecConstants.kSecAttrProtocolPOP3S)

// kSecAttrAuthenticationType values
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrAuthenticationTypeNTLM = NSString(string: SecConstants.kSecAttrAuthenticationTypeNTLM)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrAuthenticationTypeMSN = NSString(string: SecConstants.kSecAttrAuthenticationTypeMSN)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrAuthenticationTypeDPA = NSString(string: SecConstants.kSecAttrAuthenticationTypeDPA)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrAuthenticationTypeRPA = NSString(string: SecConstants.kSecAttrAuthenticationTypeRPA)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrAuthenticationTypeHTTPBasic = NSString(string: SecConstants.kSecAttrAuthenticationTypeHTTPBasic)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrAuthenticationTypeHTTPDigest = NSString(string: SecConstants.kSecAttrAuthenticationTypeHTTPDigest)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrAuthenticationTypeHTMLForm = NSString(string: SecConstants.kSecAttrAuthenticationTypeHTMLForm)
@_disfavoredOverload nonisolated(unsafe) public let kSecAttrAuthenticationTypeDefault = NSString(string: SecConstants.kSecAttrAuthenticationTypeDefault)

// Search keys
@_disfavoredOverload nonisolated(unsafe) public let kSecMatchPolicy = NSString(string: SecConstants.kSecMatchPolicy)
@_disfavoredOverload nonisolated(unsafe) public let kSecMatchItemList = NSString(string: SecConstants.kSecMatchItemList)
@_disfavoredOverload nonisolated(unsafe) public let kSecMatchSearchList = NSString(string: SecConstants.kSecMatchSearchList)
@_disfavoredOverload nonisolated(unsafe) public let kSecMatchIssuers = NSString(string: SecConstants.kSecMatchIssuers)
@_disfavoredOverload nonisolated(unsafe) public let kSecMatchEmailAddressIfPresent = NSString(string: SecConstants.kSecMatchEmailAddressIfPresent)
@_disfavoredOverload nonisolated(unsafe) public let kSecMatchSubjectContains = NSString(string: SecConstants.kSecMatchSubjectContains)
@_disfavoredOverload nonisolated(unsafe) public let kSecMatchCaseInsensitive = NSString(string: SecConstants.kSecMatchCaseInsensitive)
@_disfavoredOverload nonisolated(unsafe) public let kSecMatchTrustedOnly = NSString(string: SecConstants.kSecMatchTrustedOnly)
@_disfavoredOverload nonisolated(unsafe) public let kSecMatchValidOnDate = NSString(string: SecConstants.kSecMatchValidOnDate)
@_disfavoredOverload nonisolated(unsafe) public let kSecMatchLimit = NSString(string: SecConstants.kSecMatchLimit)
@_disfavoredOverload nonisolated(unsafe) public let kSecMatchLimitOne = NSString(string: SecConstants.kSecMatchLimitOne)
@_disfavoredOverload nonisolated(unsafe) public let kSecMatchLimitAll = NSString(string: SecConstants.kSecMatchLimitAll)

// Return keys
@_disfavoredOverload nonisolated(unsafe) public let kSecReturnData = NSString(string: SecConstants.kSecReturnData)
@_disfavoredOverload nonisolated(unsafe) public let kSecReturnAttributes = NSString(string: SecConstants.kSecReturnAttributes)
@_disfavoredOverload nonisolated(unsafe) public let kSecReturnRef = NSString(string: SecConstants.kSecReturnRef)
@_disfavoredOverload nonisolated(unsafe) public let kSecReturnPersistentRef = NSString(string: SecConstants.kSecReturnPersistentRef)

// Value keys
@_disfavoredOverload nonisolated(unsafe) public let kSecValueData = NSString(string: SecConstants.kSecValueData)
@_disfavoredOverload nonisolated(unsafe) public let kSecValueRef = NSString(string: SecConstants.kSecValueRef)
@_disfavoredOverload nonisolated(unsafe) public let kSecValuePersistentRef = NSString(string: SecConstants.kSecValuePersistentRef)

// Use keys
@_disfavoredOverload nonisolated(unsafe) public let kSecUseItemList = NSString(string: SecConstants.kSecUseItemList)
@_disfavoredOverload nonisolated(unsafe) public let kSecUseOperationPrompt = NSString(string: SecConstants.kSecUseOperationPrompt)
@_disfavoredOverload nonisolated(unsafe) public let kSecUseNoAuthenticationUI = NSString(string: SecConstants.kSecUseNoAuthenticationUI)
@_disfavoredOverload nonisolated(unsafe) public let kSecUseAuthenticationUI = NSString(string: SecConstants.kSecUseAuthenticationUI)
@_disfavoredOverload nonisolated(unsafe) public let kSecUseAuthenticationUIAllow = NSString(string: SecConstants.kSecUseAuthenticationUIAllow)
@_disfavoredOverload nonisolated(unsafe) public let kSecUseAuthenticationUIFail = NSString(string: SecConstants.kSecUseAuthenticationUIFail)
@_disfavoredOverload nonisolated(unsafe) public let kSecUseAuthenticationUISkip = NSString(string: SecConstants.kSecUseAuthenticationUISkip)
@_disfavoredOverload nonisolated(unsafe) public let kSecUseAuthenticationContext = NSString(string: SecConstants.kSecUseAuthenticationContext)
@_disfavoredOverload nonisolated(unsafe) public let kSecUseDataProtectionKeychain = NSString(string: SecConstants.kSecUseDataProtectionKeychain)

// Key generation
@_disfavoredOverload nonisolated(unsafe) public let kSecPrivateKeyAttrs = NSString(string: SecConstants.kSecPrivateKeyAttrs)
@_disfavoredOverload nonisolated(unsafe) public let kSecPublicKeyAttrs = NSString(string: SecConstants.kSecPublicKeyAttrs)
@_disfavoredOverload nonisolated(unsafe) public let kSecKeyKeyExchangeParameterRequestedSize = NSString(
    string: SecConstants.kSecKeyKeyExchangeParameterRequestedSize)
@_disfavoredOverload nonisolated(unsafe) public let kSecKeyKeyExchangeParameterSharedInfo = NSString(
    string: SecConstants.kSecKeyKeyExchangeParameterSharedInfo)
@_disfavoredOverload nonisolated(unsafe) public let kSecImportExportPassphrase = NSString(string: SecConstants.kSecImportExportPassphrase)
@_disfavoredOverload nonisolated(unsafe) public let kSecImportItemLabel = NSString(string: SecConstants.kSecImportItemLabel)
@_disfavoredOverload nonisolated(unsafe) public let kSecImportItemKeyID = NSString(string: SecConstants.kSecImportItemKeyID)
@_disfavoredOverload nonisolated(unsafe) public let kSecImportItemTrust = NSString(string: SecConstants.kSecImportItemTrust)
@_disfavoredOverload nonisolated(unsafe) public let kSecImportItemCertChain = NSString(string: SecConstants.kSecImportItemCertChain)
@_disfavoredOverload nonisolated(unsafe) public let kSecImportItemIdentity = NSString(string: SecConstants.kSecImportItemIdentity)
