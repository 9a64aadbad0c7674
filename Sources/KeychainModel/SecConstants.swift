// Apple's Keychain Services constants with Apple's own string values, so dictionaries written
// for SecItemAdd, SecItemCopyMatching, SecItemUpdate and SecItemDelete read the same here.

// Item classes
public let kSecClass = "class"
public let kSecClassGenericPassword = ItemClass.genericPassword.rawValue
public let kSecClassInternetPassword = ItemClass.internetPassword.rawValue
public let kSecClassCertificate = ItemClass.certificate.rawValue
public let kSecClassKey = ItemClass.key.rawValue
public let kSecClassIdentity = ItemClass.identity.rawValue

// Attributes
public let kSecAttrAccessible = AttributeKey.accessible.rawValue
public let kSecAttrAccessControl = AttributeKey.accessControl.rawValue
public let kSecAttrAccessGroup = AttributeKey.accessGroup.rawValue
public let kSecAttrSynchronizable = AttributeKey.synchronizable.rawValue
public let kSecAttrCreationDate = AttributeKey.creationDate.rawValue
public let kSecAttrModificationDate = AttributeKey.modificationDate.rawValue
public let kSecAttrAccount = AttributeKey.account.rawValue
public let kSecAttrService = AttributeKey.service.rawValue
public let kSecAttrGeneric = AttributeKey.generic.rawValue
public let kSecAttrLabel = AttributeKey.label.rawValue
public let kSecAttrDescription = AttributeKey.description.rawValue
public let kSecAttrComment = AttributeKey.comment.rawValue
public let kSecAttrCreator = AttributeKey.creator.rawValue
public let kSecAttrType = AttributeKey.type.rawValue
public let kSecAttrIsInvisible = AttributeKey.isInvisible.rawValue
public let kSecAttrIsNegative = AttributeKey.isNegative.rawValue
public let kSecAttrSecurityDomain = AttributeKey.securityDomain.rawValue
public let kSecAttrServer = AttributeKey.server.rawValue
public let kSecAttrProtocol = AttributeKey.protocol.rawValue
public let kSecAttrAuthenticationType = AttributeKey.authenticationType.rawValue
public let kSecAttrPort = AttributeKey.port.rawValue
public let kSecAttrPath = AttributeKey.path.rawValue
public let kSecAttrCertificateType = AttributeKey.certificateType.rawValue
public let kSecAttrCertificateEncoding = AttributeKey.certificateEncoding.rawValue
public let kSecAttrSubject = AttributeKey.subject.rawValue
public let kSecAttrIssuer = AttributeKey.issuer.rawValue
public let kSecAttrSerialNumber = AttributeKey.serialNumber.rawValue
public let kSecAttrSubjectKeyID = AttributeKey.subjectKeyID.rawValue
public let kSecAttrPublicKeyHash = AttributeKey.publicKeyHash.rawValue
public let kSecAttrKeyClass = AttributeKey.keyClass.rawValue
public let kSecAttrApplicationLabel = AttributeKey.applicationLabel.rawValue
public let kSecAttrApplicationTag = AttributeKey.applicationTag.rawValue
public let kSecAttrKeyType = AttributeKey.type.rawValue
public let kSecAttrKeySizeInBits = AttributeKey.keySizeInBits.rawValue
public let kSecAttrEffectiveKeySize = AttributeKey.effectiveKeySize.rawValue
public let kSecAttrIsPermanent = AttributeKey.isPermanent.rawValue
public let kSecAttrIsSensitive = AttributeKey.isSensitive.rawValue
public let kSecAttrIsExtractable = AttributeKey.isExtractable.rawValue
public let kSecAttrCanEncrypt = AttributeKey.canEncrypt.rawValue
public let kSecAttrCanDecrypt = AttributeKey.canDecrypt.rawValue
public let kSecAttrCanDerive = AttributeKey.canDerive.rawValue
public let kSecAttrCanSign = AttributeKey.canSign.rawValue
public let kSecAttrCanVerify = AttributeKey.canVerify.rawValue
public let kSecAttrCanWrap = AttributeKey.canWrap.rawValue
public let kSecAttrCanUnwrap = AttributeKey.canUnwrap.rawValue

// Attribute values
public let kSecAttrAccessibleWhenUnlocked = ProtectionClass.whenUnlocked.rawValue
public let kSecAttrAccessibleAfterFirstUnlock = ProtectionClass.afterFirstUnlock.rawValue
public let kSecAttrAccessibleAlways = ProtectionClass.always.rawValue
public let kSecAttrAccessibleWhenUnlockedThisDeviceOnly = ProtectionClass.whenUnlockedThisDeviceOnly.rawValue
public let kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly = ProtectionClass.afterFirstUnlockThisDeviceOnly.rawValue
public let kSecAttrAccessibleAlwaysThisDeviceOnly = ProtectionClass.alwaysThisDeviceOnly.rawValue
public let kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly = ProtectionClass.whenPasscodeSetThisDeviceOnly.rawValue
public let kSecAttrSynchronizableAny = "syna"
public let kSecAttrKeyClassPublic = "0"
public let kSecAttrKeyClassPrivate = "1"
public let kSecAttrKeyClassSymmetric = "2"
public let kSecAttrKeyTypeRSA = "42"
public let kSecAttrKeyTypeECSECPrimeRandom = "73"
public let kSecAttrProtocolHTTPS = "htps"
public let kSecAttrProtocolHTTP = "http"
public let kSecAttrAuthenticationTypeHTMLForm = "form"
public let kSecAttrAuthenticationTypeDefault = "dflt"

// Values, search, return and use keys
public let kSecValueData = "v_Data"
public let kSecValueRef = "v_Ref"
public let kSecValuePersistentRef = "v_PersistentRef"
public let kSecMatchLimit = "m_Limit"
public let kSecMatchLimitOne = "m_LimitOne"
public let kSecMatchLimitAll = "m_LimitAll"
public let kSecReturnData = "r_Data"
public let kSecReturnAttributes = "r_Attributes"
public let kSecReturnRef = "r_Ref"
public let kSecReturnPersistentRef = "r_PersistentRef"
public let kSecUseAuthenticationUI = "u_AuthUI"
public let kSecUseAuthenticationUIAllow = "u_AuthUIA"
public let kSecUseAuthenticationUIFail = "u_AuthUIF"
public let kSecUseAuthenticationUISkip = "u_AuthUIS"
public let kSecUseAuthenticationContext = "u_AuthCtx"
public let kSecUseOperationPrompt = "u_OpPrompt"
public let kSecUseDataProtectionKeychain = "nleg"
