package import Backup
package import NodeControl
package import PhoneBackup
package import Survival

// The control API's routes that answer with an engine's values, typed where those values are
// known: the node serves them and the command line calls them by these same constants.

extension NodeAPI.Route where Body == NodeAPI.Backup, Answer == ArchiveManifest {
    package static var backup: Self { Self("backup", cancelledWhenCallerLeaves: true) }
}

extension NodeAPI.Route where Body == NodeAPI.PhoneBackup, Answer == PhoneBackupWriter.Summary {
    package static var phoneBackup: Self { Self("backup/ios", cancelledWhenCallerLeaves: true) }
}

extension NodeAPI.Route where Body == NodeAPI.SurvivalOptions, Answer == SurvivalMatrix {
    package static var survival: Self { Self("survival", cancelledWhenCallerLeaves: true) }
}

extension NodeAPI.Route where Body == NodeAPI.SurvivalOptions, Answer == SurvivalComparison {
    package static var survivalAgainstSimulator: Self { Self("survival/simulator", cancelledWhenCallerLeaves: true) }
}
