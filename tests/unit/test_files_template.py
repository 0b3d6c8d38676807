"""The files bucket and who may reach it (template.yaml, issue 38): SSE-KMS under the stack's key, public access
blocked, TLS only, versioning off, lifecycle for what an abandoned upload leaves; each function's S3 grants name only
the object kinds it uses (`files/`, `uploads/`, `artifacts/`), no function may list or reach the whole bucket, and
the local IAM mapping turns S3 calls into the object ARNs those grants name."""

from __future__ import annotations

from local import iam_requests, template

BUCKET = template.resources("AWS::S3::Bucket")["FilesBucket"]["Properties"]


def test_the_bucket_is_encrypted_with_the_stacks_key_private_and_expires_what_uploads_leave():
    [rule] = BUCKET["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule == {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms",
                                                      "KMSMasterKeyID": {"Fn::GetAtt": ["VaultKey", "Arn"]}},
                    "BucketKeyEnabled": True}
    assert all(BUCKET["PublicAccessBlockConfiguration"].values()) and len(BUCKET["PublicAccessBlockConfiguration"]) == 4
    assert "VersioningConfiguration" not in BUCKET
    rules = {r["Id"]: r for r in BUCKET["LifecycleConfiguration"]["Rules"]}
    assert rules["AbortIncompleteMultipartUploads"]["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 1}
    assert (rules["UploadPartsExpire"]["Prefix"], rules["UploadPartsExpire"]["ExpirationInDays"]) == ("uploads/", 2)
    [deny] = template.resources("AWS::S3::BucketPolicy")["FilesBucketPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert (deny["Effect"], deny["Action"], deny["Condition"]) == ("Deny", "s3:*", {"Bool": {"aws:SecureTransport": "false"}})


def _s3_grants() -> dict[str, set[tuple[str, str]]]:
    out: dict[str, set[tuple[str, str]]] = {}
    for name, res in template.resources("AWS::Serverless::Function").items():
        for policy in res["Properties"].get("Policies") or []:
            for s in (policy.get("Statement") or []) if isinstance(policy, dict) else []:
                actions = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
                resources = s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]
                for action in actions:
                    if action.startswith("s3:"):
                        assert s["Effect"] == "Allow"
                        for r in resources:
                            out.setdefault(name, set()).add((action, r["Fn::Sub"].replace("${FilesBucket.Arn}", "")))
    return out


def test_each_function_reaches_only_the_object_kinds_it_uses():
    assert _s3_grants() == {
        "FilesFunction": {(a, p) for a in ("s3:PutObject", "s3:GetObject", "s3:DeleteObject", "s3:AbortMultipartUpload")
                          for p in ("/files/*", "/uploads/*")} | {("s3:GetObject", "/artifacts/*"),
                                                                  ("s3:DeleteObject", "/artifacts/*")},
        "DispatchFunction": {("s3:GetObject", "/files/*"), ("s3:PutObject", "/artifacts/*")},  # it signs URLs and forms
        "RuntimeGatewayFunction": {("s3:GetObject", "/artifacts/*")},
        # deletes a deleted Session's artifacts; stages environments.files.create's inline bytes, signs File URLs
        "AdmissionFunction": {("s3:DeleteObject", "/artifacts/*"), ("s3:PutObject", "/envfiles/*"),
                              ("s3:GetObject", "/envfiles/*"), ("s3:DeleteObject", "/envfiles/*"),
                              ("s3:GetObject", "/files/*")},
    }


def test_s3_calls_are_authorized_on_the_objects_they_name():
    assert iam_requests.requests("s3", "PutObject", {"Bucket": "b", "Key": "files/t/file-1"}, {}) == [
        ("s3:PutObject", "arn:aws:s3:::b/files/t/file-1", {})]
    assert iam_requests.requests("s3", "UploadPart", {"Bucket": "b", "Key": "files/t/f", "PartNumber": 1}, {}) == [
        ("s3:PutObject", "arn:aws:s3:::b/files/t/f", {})]
    assert iam_requests.requests("s3", "HeadObject", {"Bucket": "b", "Key": "artifacts/x"}, {})[0][0] == "s3:GetObject"
    assert iam_requests.requests("s3", "DeleteObjects", {"Bucket": "b", "Delete": {"Objects": [
        {"Key": "uploads/a"}, {"Key": "files/b"}]}}, {}) == [("s3:DeleteObject", "arn:aws:s3:::b/uploads/a", {}),
                                                             ("s3:DeleteObject", "arn:aws:s3:::b/files/b", {})]
    assert iam_requests.requests("s3", "ListObjectsV2", {"Bucket": "b", "Prefix": "files/"}, {}) == [
        ("s3:ListBucket", "arn:aws:s3:::b", {"s3:prefix": ["files/"]})]
    assert iam_requests.requests("s3", "CopyObject", {"Bucket": "b", "Key": "files/n",
                                                      "CopySource": {"Bucket": "b", "Key": "uploads/p"}}, {}) == [
        ("s3:PutObject", "arn:aws:s3:::b/files/n", {}), ("s3:GetObject", "arn:aws:s3:::b/uploads/p", {})]


def test_only_the_files_function_ships_python_multipart_so_nothing_else_imports_it():
    """python-multipart is in functions/files/requirements.txt, not the layer: the layer modules other functions
    import (admission, Session create, Dispatch, the Runtime gateway) must load without it."""
    import subprocess
    import sys

    from local.template import ROOT

    code = ("import sys; sys.modules['python_multipart'] = None\n"
            "import agents_core.environments.hosted_preparation, agents_core.runtimes.dispatch, agents_core.sessions\n"
            "import agents_core.runtimes.observations\n"
            "from agents_core.files import artifacts, environment, records, uploads\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT / "layers" / "contract"), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "python-multipart" in (ROOT / "functions" / "files" / "requirements.txt").read_text()
    assert "python-multipart" not in (ROOT / "layers" / "contract" / "requirements.txt").read_text()
