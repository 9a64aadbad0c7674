import Dispatch
public import Foundation
import KeychainModel
import KeyferryThreads

// Keychain Services' four calls, with Apple's signatures. The device and app are the current
// `KeyferryContext`'s. Each comes twice: called by name, the second form is chosen, whose
// `file` and `line` default to the caller's so the audit can name the call site; stored as a
// value of Apple's function type (`var copy: (CFDictionary, UnsafeMutablePointer<CFTypeRef?>?)
// -> OSStatus = SecItemCopyMatching`), only the first has that type, and the audit names no line.

@_disfavoredOverload @discardableResult
public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    SecItemAdd(attributes, result, file: Site.functionValue, line: 0)
}

@discardableResult
public func SecItemAdd(
    _ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?,
    file: StaticString = #fileID, line: UInt = #line
) -> OSStatus {
    perform(.add, attributes, file: file, line: line) { context, attributes, _ in
        if let (certificate, privateKey) = try SecDictionary.newIdentity(attributes) {
            try context.backend.addIdentity(certificate: certificate, privateKey: privateKey, app: context.app)
            if result != nil, !certificate.returning.isEmpty {
                let returning = certificate.returning
                // What an add returns, read back as the identity it made.
                var query = try SecDictionary.query([kSecClass: kSecClassIdentity, kSecValueRef: attributes[kSecValueRef]!], for: .copy)
                query.returning = try SecDictionary.storeReturning(returning, itemClass: .identity)
                let records = try context.backend.copy(query, app: context.app)
                result?.pointee = try SecDictionary.result(records, returning: returning, matchLimit: .one, privateKey: context.privateKey(of:)).map {
                    $0 as AnyObject
                }
            }
            return
        }
        var item = try SecDictionary.newItem(attributes)
        let secret = item.data
        if ApplicationPassword.isRequired(by: item.accessControl) {
            item.data = try ApplicationPassword.seal(secret, password: ApplicationPassword.password(for: attributes, in: context))
        }
        let returning = item.returning
        item.returning = try SecDictionary.storeReturning(returning, itemClass: item.itemClass)
        var record = try context.backend.add(item, app: context.app)
        if record.data != nil { record.data = secret }
        result?.pointee = try SecDictionary.result([record], returning: returning, matchLimit: .one, privateKey: context.privateKey(of:))
            .map { $0 as AnyObject }
    }
}

@_disfavoredOverload @discardableResult
public func SecItemCopyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    SecItemCopyMatching(query, result, file: Site.functionValue, line: 0)
}

@discardableResult
public func SecItemCopyMatching(
    _ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?,
    file: StaticString = #fileID, line: UInt = #line
) -> OSStatus {
    perform(.copyMatching, query, file: file, line: line) { context, query, _ in
        var parsed = try SecDictionary.query(query, for: .copy)
        let mayPrompt = parsed.authentication.mayPrompt
        parsed.authentication = context.authentication(parsed.authentication)
        let returning = parsed.returning
        parsed.returning = try SecDictionary.storeReturning(returning, itemClass: parsed.itemClass)
        var records = try context.backend.copy(parsed, app: context.app)
        try context.openApplicationPasswords(&records, asked: query, responses: parsed.authentication.responses)
        // A secret behind user presence, read without an evaluated LAContext: the user was asked.
        if mayPrompt, records.contains(where: { $0.data != nil && $0.accessControl?.asksForUser == true }) {
            context.wait(context.latency.prompt)
        }
        result?.pointee = try SecDictionary.result(records, returning: returning, matchLimit: parsed.matchLimit ?? .one, privateKey: context.privateKey(of:))
            .map { $0 as AnyObject }
    }
}

@_disfavoredOverload @discardableResult
public func SecItemUpdate(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus {
    SecItemUpdate(query, attributesToUpdate, file: Site.functionValue, line: 0)
}

@discardableResult
public func SecItemUpdate(
    _ query: CFDictionary, _ attributesToUpdate: CFDictionary,
    file: StaticString = #fileID, line: UInt = #line
) -> OSStatus {
    perform(.update, query, changes: attributesToUpdate, file: file, line: line) { context, query, attributesToUpdate in
        var parsed = try SecDictionary.query(query, for: .update)
        parsed.authentication = context.authentication(parsed.authentication)
        var changes = try SecDictionary.changes(attributesToUpdate, itemClass: parsed.itemClass)
        if let secret = changes.data {
            changes.data = try context.sealForUpdate(secret, matching: parsed, asked: query, responses: parsed.authentication.responses)
        }
        try context.backend.update(parsed, with: changes, app: context.app)
    }
}

@_disfavoredOverload @discardableResult
public func SecItemDelete(_ query: CFDictionary) -> OSStatus {
    SecItemDelete(query, file: Site.functionValue, line: 0)
}

@discardableResult
public func SecItemDelete(_ query: CFDictionary, file: StaticString = #fileID, line: UInt = #line) -> OSStatus {
    perform(.delete, query, file: file, line: line) { context, query, _ in
        try context.backend.delete(try SecDictionary.query(query, for: .delete), app: context.app)
    }
}

// An `NSDictionary` (or `NSMutableDictionary`) where Apple takes a CFDictionary, as toll-free
// bridging lets app code pass one there.

@discardableResult
public func SecItemAdd(
    _ attributes: NSDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?, file: StaticString = #fileID, line: UInt = #line
) -> OSStatus {
    SecItemAdd(CFDictionary(attributes), result, file: file, line: line)
}

@discardableResult
public func SecItemCopyMatching(
    _ query: NSDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?, file: StaticString = #fileID, line: UInt = #line
) -> OSStatus {
    SecItemCopyMatching(CFDictionary(query), result, file: file, line: line)
}

@discardableResult
public func SecItemUpdate(
    _ query: NSDictionary, _ attributesToUpdate: NSDictionary, file: StaticString = #fileID, line: UInt = #line
) -> OSStatus {
    SecItemUpdate(CFDictionary(query), CFDictionary(attributesToUpdate), file: file, line: line)
}

@discardableResult
public func SecItemDelete(_ query: NSDictionary, file: StaticString = #fileID, line: UInt = #line) -> OSStatus {
    SecItemDelete(CFDictionary(query), file: file, line: line)
}

extension Dictionary where Key == AnyHashable, Value == Any {
    init(_ dictionary: NSDictionary) {
        self.init(minimumCapacity: dictionary.count)
        for (key, value) in dictionary { self[key as? AnyHashable ?? AnyHashable("\(key)")] = value }
    }
}

/// Runs one call in the current context: Apple's status back, Keyferry's sentence kept, the
/// call shown to the audit. `body` gets the dictionaries keyed by strings (the update's second
/// one, or an empty one).
private func perform(
    _ function: SecItemFunction, _ dictionary: CFDictionary, changes: CFDictionary = [:], file: StaticString, line: UInt,
    _ body: (KeyferryContext, [String: Any], [String: Any]) throws -> Void
) -> OSStatus {
    guard let context = KeyferryContext.current else {
        KeyferryContext.reportMissing()
        return KeyferryContext.missing.status.rawValue
    }
    let onMainThread = MainQueue.isCurrent
    let started = onMainThread ? ContinuousClock.now : nil
    let latency = context.latency
    context.wait(latency.call)
    let strings = Result { () throws(KeychainError) in try SecDictionary.strings(dictionary) }
    let changeStrings = Result { () throws(KeychainError) in try SecDictionary.strings(changes) }
    let status: OSStatus
    if let injected = context.injectedStatus(for: function) {
        if injected != errSecSuccess {
            context.recordFailure(
                KeychainError(
                    KeychainStatus(rawValue: injected),
                    "\(function.rawValue) failed with \(injected) because the test asked for it, or killed the app."))
        }
        status = injected
    } else {
        do {
            try body(context, try strings.get(), try changeStrings.get())
            status = errSecSuccess
        } catch let error as KeychainError {
            context.recordFailure(error)
            status = error.status.rawValue
            // The user cancelled, or failed, a prompt they looked at first.
            if status == errSecUserCanceled || status == errSecAuthFailed { context.wait(latency.prompt) }
        } catch {
            // The device or its node failed, not the call: a device that is off, a node that died.
            let failure = KeychainError(.notAvailable, "\(error)")
            context.recordFailure(failure)
            status = failure.status.rawValue
        }
    }
    if case .success(let strings) = strings {
        context.observe(
            ObservedCall(
                function: function, dictionary: strings, changes: (try? changeStrings.get()) ?? [:], status: status,
                site: Site(function: function, file: file, line: Int(line)), onMainThread: onMainThread,
                blocked: started.map { ContinuousClock.now - $0 } ?? .zero))
    }
    return status
}

/// Whether a call is made by the main actor: a task running on the main queue. On Linux the
/// main queue is not always served by the main thread (`dispatchMain` ends it), so the queue
/// is marked and asked. A synchronous XCTest method runs on the main thread outside any task,
/// and is no app's UI.
private enum MainQueue {
    private static let marker: DispatchSpecificKey<Bool> = {
        let key = DispatchSpecificKey<Bool>()
        DispatchQueue.main.setSpecific(key: key, value: true)
        return key
    }()

    static var isCurrent: Bool {
        withUnsafeCurrentTask { $0 != nil } && (DispatchQueue.getSpecific(key: marker) == true || Thread.isMainThread)
    }
}

extension AuthenticationContext {
    /// No `LAContext` evaluated beforehand, and a prompt allowed: a read the item's access
    /// control constrains shows one.
    fileprivate var mayPrompt: Bool { responses.isEmpty && interactionAllowed }
}

extension KeyferryContext {
    /// A call's authentication: the dictionary's `LAContext` (no prompt allowed, or already
    /// evaluated), else the simulated user's next response.
    func authentication(_ parsed: AuthenticationContext) -> AuthenticationContext {
        var context = parsed
        if context.responses.isEmpty, context.interactionAllowed { context.responses = responses() }
        return context
    }

    private static let reported = Locked(false)

    /// Says once, on standard error, why calls fail with no context: a status alone would
    /// leave a user guessing.
    static func reportMissing() {
        guard
            reported.withLock({ done in
                defer { done = true }
                return !done
            })
        else { return }
        FileHandle.standardError.write(Data("keyferry: \(missing.message)\n".utf8))
    }
}
