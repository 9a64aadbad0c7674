import Foundation
import KeychainModel

/// The result code of every Keychain Services call.
public typealias OSStatus = Int32

/// MacTypes' "no error", which `import Security` brings along and wrappers compare with.
public let noErr: OSStatus = 0
public let errSecSuccess: OSStatus = 0
public let errSecUnimplemented: OSStatus = -4
public let errSecDiskFull: OSStatus = -34
public let errSecIO: OSStatus = -36
public let errSecOpWr: OSStatus = -49
public let errSecParam: OSStatus = -50
public let errSecAllocate: OSStatus = -108
public let errSecUserCanceled: OSStatus = -128
public let errSecBadReq: OSStatus = -909
public let errSecNotAvailable: OSStatus = -25291
public let errSecReadOnly: OSStatus = -25292
public let errSecAuthFailed: OSStatus = -25293
public let errSecNoSuchKeychain: OSStatus = -25294
public let errSecInvalidKeychain: OSStatus = -25295
public let errSecDuplicateItem: OSStatus = -25299
public let errSecItemNotFound: OSStatus = -25300
public let errSecBufferTooSmall: OSStatus = -25301
public let errSecDataTooLarge: OSStatus = -25302
public let errSecNoSuchAttr: OSStatus = -25303
public let errSecInvalidItemRef: OSStatus = -25304
public let errSecNoSuchClass: OSStatus = -25306
public let errSecInteractionNotAllowed: OSStatus = -25308
public let errSecReadOnlyAttr: OSStatus = -25309
public let errSecInteractionRequired: OSStatus = -25315
public let errSecDecode: OSStatus = -26275
public let errSecMissingEntitlement: OSStatus = -34018
public let errSecVerifyFailed: OSStatus = -67808
public let errSecInternalError: OSStatus = -67671
public let errSecWrPerm: OSStatus = -61
public let errSecInternalComponent: OSStatus = -2070
public let errSecCoreFoundationUnknown: OSStatus = -4960
public let errSecRestrictedAPI: OSStatus = -34020
public let errSecDuplicateKeychain: OSStatus = -25296
public let errSecDuplicateCallback: OSStatus = -25297
public let errSecInvalidCallback: OSStatus = -25298
public let errSecInvalidSearchRef: OSStatus = -25305
public let errSecNoDefaultKeychain: OSStatus = -25307
public let errSecWrongSecVersion: OSStatus = -25310
public let errSecKeySizeNotAllowed: OSStatus = -25311
public let errSecNoStorageModule: OSStatus = -25312
public let errSecNoCertificateModule: OSStatus = -25313
public let errSecNoPolicyModule: OSStatus = -25314
public let errSecDataNotAvailable: OSStatus = -25316
public let errSecDataNotModifiable: OSStatus = -25317
public let errSecCreateChainFailed: OSStatus = -25318
public let errSecInvalidPrefsDomain: OSStatus = -25319
public let errSecInDarkWake: OSStatus = -25320
public let errSecACLNotSimple: OSStatus = -25240
public let errSecPolicyNotFound: OSStatus = -25241
public let errSecInvalidTrustSetting: OSStatus = -25242
public let errSecNoAccessForItem: OSStatus = -25243
public let errSecInvalidOwnerEdit: OSStatus = -25244
public let errSecTrustNotAvailable: OSStatus = -25245
public let errSecUnsupportedFormat: OSStatus = -25256
public let errSecUnknownFormat: OSStatus = -25257
public let errSecKeyIsSensitive: OSStatus = -25258
public let errSecMultiplePrivKeys: OSStatus = -25259
public let errSecPassphraseRequired: OSStatus = -25260
public let errSecInvalidPasswordRef: OSStatus = -25261
public let errSecInvalidTrustSettings: OSStatus = -25262
public let errSecNoTrustSettings: OSStatus = -25263
public let errSecPkcs12VerifyFailure: OSStatus = -25264
public let errSecNotSigner: OSStatus = -26267
public let errSecServiceNotAvailable: OSStatus = -67585
public let errSecInsufficientClientID: OSStatus = -67586
public let errSecDeviceReset: OSStatus = -67587
public let errSecDeviceFailed: OSStatus = -67588
public let errSecNotTrusted: OSStatus = -67843

/// Apple's one-line meaning of a status, as `SecCopyErrorMessageString` gives it.
/// Keyferry's own sentence for the last failure, which names the cause, is
/// `KeyferryContext.lastFailure`.
public func SecCopyErrorMessageString(_ status: OSStatus, _ reserved: UnsafeMutableRawPointer?) -> CFString? {
    let known = KeychainStatus(rawValue: status)
    return known.name == "OSStatus" ? "OSStatus \(status)" : known.meaning
}
