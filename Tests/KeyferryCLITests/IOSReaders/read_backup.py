"""Opens an iOS backup with the tools people use on real iPhones' backups, and prints what each
one read, as JSON, for the tests to compare with what Keyferry wrote. Nothing here decrypts or
parses on its own: every byte read comes through one of the tools.

    read_backup.py ROOT UDID PASSWORD
"""
import hashlib
import json
import os
import plistlib
import sys
import tempfile
import warnings

warnings.simplefilter("ignore")

root, udid, password = sys.argv[1], sys.argv[2], sys.argv[3]
folder = os.path.join(root, udid)
out = {}


def digest(data):
    return hashlib.sha256(data).hexdigest()


# iphone-backup-decrypt: every regular file, by domain and path; a wrong password refused.
from iphone_backup_decrypt import EncryptedBackup
from iphone_backup_decrypt.google_iphone_dataprotection import Keybag

backup = EncryptedBackup(backup_directory=folder, passphrase=password)
backup.test_decryption()
files = {}
with backup.manifest_db_cursor() as cursor:
    cursor.execute("SELECT domain, relativePath FROM Files WHERE flags = 1")
    rows = cursor.fetchall()
for domain, path in rows:
    files[f"{domain}/{path}"] = digest(backup.extract_file_as_bytes(path, domain_like=domain))
out["iphone_backup_decrypt"] = {"files": files}
try:
    EncryptedBackup(backup_directory=folder, passphrase=password + "-wrong").test_decryption()
    out["iphone_backup_decrypt"]["wrong_password_refused"] = False
except Exception as error:
    out["iphone_backup_decrypt"]["wrong_password_refused"] = True
    out["iphone_backup_decrypt"]["wrong_password_error"] = type(error).__name__

# ios-backup-manager's keychain decoder, with the keybag of iphone-backup-decrypt it expects.
from keychain_decoder import decode_keychain_item

with open(os.path.join(folder, "Manifest.plist"), "rb") as handle:
    keybag = Keybag(plistlib.load(handle)["BackupKeyBag"])
assert keybag.unlockWithPassphrase(password.encode())
keychain = plistlib.loads(backup.extract_file_as_bytes("keychain-backup.plist", domain_like="KeychainDomain"))
items = []
for table in ("genp", "inet", "cert", "keys"):
    for entry in keychain.get(table, []):
        result = decode_keychain_item(entry["v_Data"], keybag=keybag)
        decoded = result.get("decoded") or {}
        secret = decoded.get("v_Data")
        items.append({
            "table": table, "status": result["status"], "class": result.get("protection_class"),
            "acct": decoded.get("acct"), "svce": decoded.get("svce"), "srvr": decoded.get("srvr"),
            "agrp": decoded.get("agrp"), "pdmn": decoded.get("pdmn"),
            "secret": secret if isinstance(secret, str) else (secret.decode() if isinstance(secret, bytes) else None),
        })
out["keychain"] = items

# pyiosbackup: its own listing and reads.
from pyiosbackup import Backup

out["pyiosbackup"] = {"files": {f"{f.domain}/{f.relative_path}": digest(f.read_bytes()) for f in Backup.from_path(folder, password).iter_files()}}

# iOSbackup: opens ROOT/UDID; each file decrypted to a folder of its own.
from iOSbackup import iOSbackup

reader = iOSbackup(udid=udid, cleartextpassword=password, backuproot=root)
ios_files = {}
with tempfile.TemporaryDirectory() as target:
    for entry in reader.getBackupFilesList():
        if entry["flags"] != 1:
            continue
        copy = reader.getFileDecryptedCopy(manifestEntry=reader.getFileManifestDBEntry(fileNameHash=entry["fileID"]), targetFolder=target)
        with open(copy["decryptedFilePath"], "rb") as handle:
            ios_files[f"{entry['domain']}/{entry['name']}"] = digest(handle.read())
out["iOSbackup"] = {"files": ios_files}

json.dump(out, sys.stdout, indent=1, sort_keys=True)
