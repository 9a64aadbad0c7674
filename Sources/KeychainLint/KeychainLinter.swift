package import KeychainModel
import SwiftOperators
import SwiftParser
import SwiftSyntax

/// Finds the rules' patterns in Swift source, before it runs: the calls of Keychain Services
/// with the dictionaries they are given, where the dictionary is written in the same function
/// (a literal, and the keys assigned to it after). A dictionary that comes from elsewhere
/// (a parameter, a merge) is not guessed at: the audit finds those calls when they run.
package enum KeychainLinter {
    /// The findings in one source file, in order of place. `file` is how reports name it.
    package static func lint(source: String, file: String) -> [LintFinding] {
        // Folded, `query as CFDictionary` and `item[key] = value` are the expressions they read
        // as, not flat sequences; an operator the table does not know is left unfolded.
        let tree = OperatorTable.standardOperators.foldAll(Parser.parse(source: source)) { _ in }
        let visitor = Visitor(file: file, converter: SourceLocationConverter(fileName: file, tree: tree))
        visitor.walk(tree)
        return visitor.findings.sorted { ($0.line, $0.column, $0.rule.name) < ($1.line, $1.column, $1.rule.name) }
    }
}

/// A dictionary as the source builds it: each `kSec` key with the first `kSec` name (or
/// boolean) of its value; `complete` when every key it gets is seen.
struct SourceDictionary {
    var entries: [String: String] = [:]
    var complete = true

    func has(_ key: String) -> Bool { entries[key] != nil }
}

private final class Visitor: SyntaxVisitor {
    let file: String
    let converter: SourceLocationConverter
    var findings: [LintFinding] = []
    private var flagged: Set<String> = []

    init(file: String, converter: SourceLocationConverter) {
        self.file = file
        self.converter = converter
        super.init(viewMode: .sourceAccurate)
    }

    private func record(_ rule: LintRule, at node: some SyntaxProtocol, _ detail: String? = nil) {
        let place = node.startLocation(converter: converter)
        guard flagged.insert("\(rule.name):\(place.line):\(place.column)").inserted else { return }
        findings.append(LintFinding(rule: rule, file: file, line: place.line, column: place.column, detail: detail))
    }

    // MARK: Names and literals

    override func visit(_ node: DeclReferenceExprSyntax) -> SyntaxVisitorContinueKind {
        let name = node.baseName.text
        if name == "kSecAttrAccessibleAlways" || name == "kSecAttrAccessibleAlwaysThisDeviceOnly", !node.isInsideADeprecatedDeclaration {
            record(.trap(.deprecatedAlways), at: node, "stores with \(name)")
        }
        return .visitChildren
    }

    override func visit(_ node: StringLiteralExprSyntax) -> SyntaxVisitorContinueKind {
        if let text = node.plainText, Self.looksLikeAKey(text) { record(.hardcodedSecret, at: node, "\"\(text.prefix(6))…\"") }
        return .visitChildren
    }

    override func visit(_ node: PatternBindingSyntax) -> SyntaxVisitorContinueKind {
        if let name = node.pattern.as(IdentifierPatternSyntax.self)?.identifier.text, Self.namesASecret(name),
            let literal = node.initializer?.value.as(StringLiteralExprSyntax.self), let text = literal.plainText,
            Self.looksLikeACredential(text)
        {
            record(.hardcodedSecret, at: literal, name)
        }
        return .visitChildren
    }

    /// Secret keys as services issue them (`sk-…`, `sk_live_…`).
    static func looksLikeAKey(_ text: String) -> Bool {
        (text.hasPrefix("sk-") || text.hasPrefix("sk_live_")) && text.count >= 12 && !text.contains(" ")
    }

    /// A value, not a name for one: eight or more characters without spaces that are not an
    /// environment variable's name (`PGPASSWORD`) or a key path (`auth.token`).
    static func looksLikeACredential(_ text: String) -> Bool {
        let nameCharacters = text.allSatisfy { $0.isUppercase || $0 == "_" || $0.isNumber }
        let keyPath = text.contains(".") && text.allSatisfy { $0.isLetter || $0 == "." || $0 == "_" }
        return text.count >= 8 && !text.contains(" ") && !nameCharacters && !keyPath
    }

    static func namesASecret(_ name: String) -> Bool {
        let lower = name.lowercased()
        return ["apikey", "api_key", "secret", "password", "accesstoken", "authtoken"].contains { lower.contains($0) }
    }

    // MARK: Calls

    override func visit(_ node: FunctionCallExprSyntax) -> SyntaxVisitorContinueKind {
        switch node.calleeName {
        case "SecItemAdd": add(node)
        case "SecItemCopyMatching", "SecItemUpdate": search(node)
        case "SecItemDelete":
            search(node)
            delete(node)
        case "set": userDefaultsSet(node)
        default: break
        }
        return .visitChildren
    }

    private func keychainCall(_ node: FunctionCallExprSyntax) {
        if node.runsOnTheMainActor { record(.trap(.mainThreadCall), at: node) }
    }

    private func add(_ node: FunctionCallExprSyntax) {
        keychainCall(node)
        if node.resultIsDiscarded, let scope = node.scope, !scope.mentionsADuplicate, !scope.deletes(before: node) {
            record(.trap(.unhandledDuplicate), at: node)
        }
        guard let attributes = dictionary(node, argument: 0) else { return }
        if attributes.complete, !attributes.has("kSecAttrAccessible"), !attributes.has("kSecAttrAccessControl") {
            record(.trap(.noAccessibilityOnAdd), at: node)
        }
        syncedThisDeviceOnly(attributes, node)
    }

    private func search(_ node: FunctionCallExprSyntax) {
        keychainCall(node)
        if let query = dictionary(node, argument: 0), let protection = query.entries["kSecAttrAccessible"] {
            record(.trap(.accessibilityInSearch), at: node, "searches with \(protection)")
        }
        if node.calleeName == "SecItemUpdate", let changes = dictionary(node, argument: 1) { syncedThisDeviceOnly(changes, node) }
    }

    private func delete(_ node: FunctionCallExprSyntax) {
        if let branch = node.lockedReadBranch { record(.trap(.deleteAfterLockedRead), at: node, "in the branch of \(branch)") }
        guard let query = dictionary(node, argument: 0), query.complete, query.has("kSecClass"), !query.has("kSecAttrSynchronizable") else { return }
        let narrowing = [
            "kSecAttrAccount", "kSecAttrService", "kSecAttrServer", "kSecAttrLabel", "kSecAttrApplicationTag", "kSecAttrApplicationLabel",
            "kSecValuePersistentRef", "kSecValueRef", "kSecMatchItemList",
        ]
        if !narrowing.contains(where: query.has) { record(.cleanupMissesSyncedItems, at: node) }
    }

    private func syncedThisDeviceOnly(_ dictionary: SourceDictionary, _ node: FunctionCallExprSyntax) {
        if let protection = dictionary.entries["kSecAttrAccessible"], protection.hasSuffix("ThisDeviceOnly"),
            ["true", "kCFBooleanTrue"].contains(dictionary.entries["kSecAttrSynchronizable"] ?? "")
        {
            record(.trap(.synchronizableThisDeviceOnly), at: node, "stores with \(protection)")
        }
    }

    /// `defaults.set(token, forKey: "authToken")` on UserDefaults.
    private func userDefaultsSet(_ node: FunctionCallExprSyntax) {
        guard let key = node.arguments.first(where: { $0.label?.text == "forKey" }),
            let base = node.calledExpression.as(MemberAccessExprSyntax.self)?.base,
            base.trimmedDescription.lowercased().contains("defaults")
        else { return }
        let name = key.expression.as(StringLiteralExprSyntax.self)?.plainText ?? key.expression.trimmedDescription
        let lower = name.lowercased()
        if ["token", "password", "secret", "apikey", "api_key", "credential"].contains(where: lower.contains) {
            record(.secretInUserDefaults, at: node, "key \(name)")
        }
    }

    /// The dictionary given as the call's `index`th argument, when the source shows it.
    private func dictionary(_ node: FunctionCallExprSyntax, argument index: Int) -> SourceDictionary? {
        let arguments = Array(node.arguments)
        guard index < arguments.count else { return nil }
        let expression = arguments[index].expression.withoutCasts
        if let literal = expression.as(DictionaryExprSyntax.self) { return SourceDictionary(literal) }
        guard let name = expression.as(DeclReferenceExprSyntax.self)?.baseName.text, let scope = node.scope else { return nil }
        return scope.dictionaries[name]
    }
}

// MARK: What the syntax says

extension FunctionCallExprSyntax {
    /// `SecItemAdd` in `SecItemAdd(...)`, `set` in `defaults.set(...)`.
    var calleeName: String? {
        if let name = calledExpression.as(DeclReferenceExprSyntax.self) { return name.baseName.text }
        return calledExpression.as(MemberAccessExprSyntax.self)?.declName.baseName.text
    }

    /// The status is dropped: the call is a statement of its own, or assigned to `_`.
    var resultIsDiscarded: Bool {
        var node = Syntax(self)
        while let parent = node.parent {
            // A statement of its own, unless it is the only one of a body that returns a value.
            if parent.is(CodeBlockItemSyntax.self) {
                guard let items = parent.parent?.as(CodeBlockItemListSyntax.self), items.count == 1 else { return true }
                if items.parent?.is(ClosureExprSyntax.self) == true { return false }
                guard let owner = items.parent?.parent else { return true }
                if let function = owner.as(FunctionDeclSyntax.self) { return function.signature.returnClause == nil }
                return !(owner.is(AccessorBlockSyntax.self) || owner.is(AccessorDeclSyntax.self))
            }
            if let infix = parent.as(InfixOperatorExprSyntax.self) {
                return infix.operator.is(AssignmentExprSyntax.self) && infix.leftOperand.is(DiscardAssignmentExprSyntax.self)
            }
            guard
                parent.is(AsExprSyntax.self) || parent.is(TupleExprSyntax.self) || parent.is(LabeledExprListSyntax.self) || parent.is(LabeledExprSyntax.self)
                    || parent.is(ExprListSyntax.self)
            else { return false }
            node = parent
        }
        return false
    }

    /// The body the call is written in: a function's, an initializer's, an accessor's, a
    /// closure's, or the file's top level.
    var scope: Scope? {
        var node = Syntax(self)
        while let parent = node.parent {
            if parent.is(FunctionDeclSyntax.self) || parent.is(InitializerDeclSyntax.self) || parent.is(AccessorDeclSyntax.self)
                || parent.is(ClosureExprSyntax.self) || parent.is(SourceFileSyntax.self)
            {
                return Scope(parent)
            }
            node = parent
        }
        return nil
    }

    /// Whether the call runs on the main actor: inside a declaration marked `@MainActor` (and
    /// not `nonisolated`), `MainActor.run { }` or `DispatchQueue.main.async { }`.
    var runsOnTheMainActor: Bool {
        var node = Syntax(self)
        while let parent = node.parent {
            if let closure = parent.as(ClosureExprSyntax.self) {
                if closure.signature?.attributes.contains(where: \.isMainActor) == true { return true }
                if let call = closure.parent?.as(FunctionCallExprSyntax.self) ?? closure.parent?.parent?.parent?.as(FunctionCallExprSyntax.self) {
                    let callee = call.calledExpression.trimmedDescription
                    if callee == "MainActor.run" || callee.hasPrefix("DispatchQueue.main.") { return true }
                    // A `Task { }` keeps the actor it is made on; a detached one leaves it.
                    if callee == "Task.detached" { return false }
                }
            }
            if let modifiers = parent.asProtocol(WithModifiersSyntax.self)?.modifiers, modifiers.contains(where: { $0.name.text == "nonisolated" }) {
                return false
            }
            if let attributes = parent.asProtocol(WithAttributesSyntax.self)?.attributes, attributes.contains(where: \.isMainActor) { return true }
            if parent.is(ActorDeclSyntax.self) { return false }
            node = parent
        }
        return false
    }

    /// The condition of the `if`, `case` or `catch` around a delete when it names -25308.
    var lockedReadBranch: String? {
        var node = Syntax(self)
        while let parent = node.parent {
            if parent.is(FunctionDeclSyntax.self) || parent.is(ClosureExprSyntax.self) { return nil }
            let condition: String? =
                if let branch = parent.as(IfExprSyntax.self), node.id == branch.body.id {
                    branch.conditions.trimmedDescription
                } else if let branch = parent.as(SwitchCaseSyntax.self) {
                    branch.label.trimmedDescription
                } else if let branch = parent.as(CatchClauseSyntax.self) {
                    branch.catchItems.trimmedDescription
                } else {
                    nil
                }
            if let condition, condition.contains("errSecInteractionNotAllowed") || condition.contains("25308") || condition.contains("interactionNotAllowed") {
                return condition
            }
            node = parent
        }
        return nil
    }
}

extension SyntaxProtocol {
    /// Inside a declaration marked deprecated, where the compiler does not warn either: the
    /// definition of a deprecated constant naming another.
    var isInsideADeprecatedDeclaration: Bool {
        var node = parent
        while let current = node {
            if let attributes = current.asProtocol(WithAttributesSyntax.self)?.attributes,
                attributes.contains(where: { $0.trimmedDescription.hasPrefix("@available") && $0.trimmedDescription.contains("deprecated") })
            {
                return true
            }
            node = current.parent
        }
        return false
    }
}

extension AttributeListSyntax.Element {
    var isMainActor: Bool {
        if case .attribute(let attribute) = self { return attribute.attributeName.trimmedDescription == "MainActor" }
        return false
    }
}

extension ExprSyntax {
    /// `query as CFDictionary`, `(query)`: the expression inside.
    var withoutCasts: ExprSyntax {
        if let cast = self.as(AsExprSyntax.self) { return cast.expression.withoutCasts }
        if let tuple = self.as(TupleExprSyntax.self), tuple.elements.count == 1, let only = tuple.elements.first, only.label == nil {
            return only.expression.withoutCasts
        }
        return self
    }

    /// The first `kSec…` or `kCF…` name in it, or a boolean literal: how a dictionary's key or
    /// value is read whatever casts are written around it.
    var secName: String? {
        for token in tokens(viewMode: .sourceAccurate) {
            switch token.tokenKind {
            case .identifier(let text) where text.hasPrefix("kSec") || text.hasPrefix("kCF"): return text
            case .keyword(.true): return "true"
            case .keyword(.false): return "false"
            default: continue
            }
        }
        return nil
    }
}

extension StringLiteralExprSyntax {
    /// The text of a literal without interpolation.
    var plainText: String? {
        var text = ""
        for segment in segments {
            guard case .stringSegment(let piece) = segment else { return nil }
            text += piece.content.text
        }
        return text
    }
}

extension SourceDictionary {
    init(_ literal: DictionaryExprSyntax) {
        guard case .elements(let elements) = literal.content else { return }
        for element in elements {
            guard let key = element.key.secName else {
                complete = false
                continue
            }
            entries[key] = element.value.secName ?? element.value.trimmedDescription
        }
    }
}

/// One function's body, read once for the dictionaries it builds.
struct Scope {
    let node: Syntax

    init(_ node: Syntax) { self.node = node }

    /// Each variable initialised with a dictionary literal or a copy of one, with the keys its
    /// subscript assignments add; a merge, or any other start, makes it incomplete.
    var dictionaries: [String: SourceDictionary] {
        var found: [String: SourceDictionary] = [:]
        for token in node.tokens(viewMode: .sourceAccurate) {
            guard case .identifier(let name) = token.tokenKind, let parent = token.parent else { continue }
            if let binding = parent.parent?.as(PatternBindingSyntax.self), binding.pattern.id == parent.id,
                let value = binding.initializer?.value.withoutCasts
            {
                if let literal = value.as(DictionaryExprSyntax.self) {
                    found[name] = SourceDictionary(literal)
                } else if let copied = value.as(DeclReferenceExprSyntax.self)?.baseName.text, let original = found[copied] {
                    found[name] = original
                } else {
                    found[name] = SourceDictionary(complete: false)
                }
            } else if let reference = parent.as(DeclReferenceExprSyntax.self), found[name] != nil {
                guard let use = reference.parent else { continue }
                if let subscriptCall = use.as(SubscriptCallExprSyntax.self), subscriptCall.calledExpression.id == reference.id,
                    let assignment = subscriptCall.parent?.as(InfixOperatorExprSyntax.self), assignment.leftOperand.id == subscriptCall.id,
                    assignment.operator.is(AssignmentExprSyntax.self)
                {
                    if let key = subscriptCall.arguments.first?.expression.secName {
                        found[name]?.entries[key] = assignment.rightOperand.secName ?? assignment.rightOperand.trimmedDescription
                    } else {
                        found[name]?.complete = false
                    }
                } else if let member = use.as(MemberAccessExprSyntax.self), member.base?.id == reference.id,
                    ["merge", "updateValue", "addEntries"].contains(member.declName.baseName.text)
                {
                    found[name]?.complete = false
                }
            }
        }
        return found
    }

    /// The code handles -25299 somewhere in this body.
    var mentionsADuplicate: Bool {
        node.tokens(viewMode: .sourceAccurate).contains { token in
            token.text == "errSecDuplicateItem" || token.text == "duplicateItem" || token.text == "25299"
        }
    }

    /// A delete runs before `call` in this body: delete-then-add never meets a duplicate.
    func deletes(before call: FunctionCallExprSyntax) -> Bool {
        node.tokens(viewMode: .sourceAccurate).contains { token in
            token.text == "SecItemDelete" && token.position < call.position
        }
    }
}
