"""agents_contract.files: the pure rules of the Files API, Uploads, session artifacts and environment files
(purposes, sizes, names, MIME types, list parameters, paths under /workspace), with their exact 400s."""

from __future__ import annotations

import base64

import pytest

from agents_contract import files
from agents_contract.errors import InvalidRequest

MiB = 1024 * 1024


def _refused(call, *args, **kwargs) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        call(*args, **kwargs)
    return caught.value


# ---- purposes, expiry, names, MIME types, sizes ----------------------------------------------------------

def test_user_data_is_the_only_purpose_stored():
    assert files.check_purpose("user_data") == "user_data"


@pytest.mark.parametrize("value, message, code", [
    (None, "Missing required parameter: 'purpose'.", "invalid_request_error"),
    ("", "Missing required parameter: 'purpose'.", "invalid_request_error"),
    (3, "Invalid type for 'purpose': expected a string.", "invalid_request_error"),
    ("assistants", "The purpose 'assistants' is not supported by this deployment; use 'user_data'.",
     "unsupported_value"),
    ("fine-tune", "The purpose 'fine-tune' is not supported by this deployment; use 'user_data'.",
     "unsupported_value"),
    ("photos", "Invalid value: 'photos'. Supported values are: 'assistants', 'batch', 'fine-tune', 'vision', "
               "'user_data', 'evals'.", "invalid_request_error"),
])
def test_other_purposes_are_refused_saying_why(value, message, code):
    error = _refused(files.check_purpose, value, param="purpose")
    assert (error.message, error.param, error.code, error.status) == (message, "purpose", code, 400)


def test_the_purpose_param_is_the_one_given():
    assert _refused(files.check_purpose, "batch", "form.purpose").param == "form.purpose"


def test_expiry_is_refused_only_when_sent():
    files.refuse_expiry(False)
    error = _refused(files.refuse_expiry, True)
    assert error.message == "expires_after is not supported by this deployment: files persist until deleted."
    assert (error.param, error.code) == ("expires_after", "unsupported_parameter")


@pytest.mark.parametrize("sent, kept", [
    ("report.pdf", "report.pdf"),
    ("/home/me/data/report.pdf", "report.pdf"),      # a path's directories are not kept
    ("C:\\Users\\me\\report.pdf", "report.pdf"),     # nor a Windows path's
    ("résumé 2026.txt", "résumé 2026.txt"),
    ("x" * 255, "x" * 255),                          # exactly the limit
    ("é" * 127 + "x", "é" * 127 + "x"),              # 255 bytes of UTF-8
    (".hidden", ".hidden"),
])
def test_a_file_name_is_its_base_name(sent, kept):
    assert files.check_filename(sent) == kept


@pytest.mark.parametrize("sent, message", [
    (None, "The file must have a file name."),
    ("", "The file must have a file name."),
    (b"a.txt", "The file must have a file name."),
    ("dir/", "Invalid file name: 'dir/'."),
    ("a/..", "Invalid file name: 'a/..'."),
    (".", "Invalid file name: '.'."),
    ("a\nb.txt", "The file name must not contain control characters."),
    ("a\x7f.txt", "The file name must not contain control characters."),
    ("x" * 256, "The file name is longer than 255 bytes."),
    ("é" * 128, "The file name is longer than 255 bytes."),   # 128 characters, 256 bytes
    ("bad\udc80.txt", "The file name must be valid UTF-8."),  # a lone surrogate (undecodable bytes)
])
def test_a_file_name_that_cannot_be_stored_is_a_400(sent, message):
    error = _refused(files.check_filename, sent, "filename")
    assert (error.message, error.param) == (message, "filename")


@pytest.mark.parametrize("sent, kept", [
    ("text/plain", "text/plain"),
    ("Application/PDF", "application/pdf"),
    ("text/csv; charset=utf-8", "text/csv"),
    ("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
     "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
])
def test_a_mime_type_is_its_lowercased_type_and_subtype(sent, kept):
    assert files.check_mime_type(sent) == kept


@pytest.mark.parametrize("sent, message", [
    (None, "Missing required parameter: 'mime_type'."),
    ("", "Missing required parameter: 'mime_type'."),
    ("text", "Invalid MIME type: 'text'. Expected 'type/subtype'."),
    ("text/plain/x", "Invalid MIME type: 'text/plain/x'. Expected 'type/subtype'."),
    ("text/pl ain", "Invalid MIME type: 'text/pl ain'. Expected 'type/subtype'."),
    ("/plain", "Invalid MIME type: '/plain'. Expected 'type/subtype'."),
])
def test_a_malformed_mime_type_is_a_400(sent, message):
    error = _refused(files.check_mime_type, sent)
    assert (error.message, error.param) == (message, "mime_type")


def test_a_long_malformed_mime_type_is_quoted_truncated():
    error = _refused(files.check_mime_type, "x" * 1000, "Content-Type")
    assert error.message == f"Invalid MIME type: {'x' * 200!r}. Expected 'type/subtype'." and error.param == "Content-Type"


def test_a_size_at_the_limit_passes_one_byte_over_is_file_too_large():
    files.check_size(files.MAX_CREATE_BYTES, files.MAX_CREATE_BYTES, "file", "The file")
    error = _refused(files.check_size, files.MAX_CREATE_BYTES + 1, files.MAX_CREATE_BYTES, "file", "The file")
    assert error.message == f"The file is {4 * MiB + 1} bytes, over this deployment's limit of {4 * MiB} bytes."
    assert (error.param, error.code) == ("file", "file_too_large")


def test_the_limits_fit_lambdas_payload():
    assert files.MAX_CREATE_BYTES == files.MAX_PART_BYTES == files.MAX_ENVIRONMENT_FILE_BYTES == 4 * MiB
    assert files.MAX_FORM_BYTES > files.MAX_CREATE_BYTES and files.MAX_FORM_BYTES * 4 / 3 < 6 * MiB
    assert files.MAX_UPLOAD_BYTES == 512 * MiB and files.MAX_PARTS == 10_000


# ---- resources -------------------------------------------------------------------------------------------

RECORD = {"id": "file-1", "bytes": 12, "created_at": 1_700_000_000, "filename": "a.txt", "purpose": "user_data",
          "expires_at": 1_700_003_600, "upload_id": "upload_1", "session_id": "sess_1", "turn_id": "turn_1",
          "environment_id": "env_1", "path": "/workspace/outputs/r.csv", "size_bytes": 12}


def test_the_resources_have_the_official_shapes():
    file = files.file_resource(RECORD)
    assert file == {"id": "file-1", "object": "file", "bytes": 12, "created_at": 1_700_000_000, "filename": "a.txt",
                    "purpose": "user_data", "status": "processed", "expires_at": None, "status_details": None}
    assert files.upload_resource(RECORD, "pending", None) == {
        "id": "file-1", "object": "upload", "bytes": 12, "created_at": 1_700_000_000, "expires_at": 1_700_003_600,
        "filename": "a.txt", "purpose": "user_data", "status": "pending", "file": None}
    assert files.upload_resource(RECORD, "completed", file)["file"] is file
    assert files.part_resource(RECORD) == {"id": "file-1", "object": "upload.part", "created_at": 1_700_000_000,
                                           "upload_id": "upload_1"}
    assert files.artifact_resource(RECORD) == {
        "id": "file-1", "object": "agent.session.artifact", "session_id": "sess_1", "turn_id": "turn_1",
        "environment_id": "env_1", "path": "/workspace/outputs/r.csv", "size_bytes": 12, "created_at": 1_700_000_000}
    assert files.environment_file_resource("env_1", "/workspace/a", 3) == {
        "environment_id": "env_1", "object": "agent.environment.file", "path": "/workspace/a", "size_bytes": 3}


# ---- uploads.create / uploads.complete -------------------------------------------------------------------

UPLOAD = {"bytes": 10 * MiB, "filename": "dir/big.bin", "mime_type": "Application/Octet-Stream", "purpose": "user_data"}


def test_an_upload_create_is_validated_and_normalized():
    assert files.parse_upload_create(UPLOAD) == {"bytes": 10 * MiB, "filename": "big.bin",
                                                 "mime_type": "application/octet-stream", "purpose": "user_data"}
    assert files.parse_upload_create(UPLOAD | {"bytes": 0})["bytes"] == 0
    assert files.parse_upload_create(UPLOAD | {"bytes": files.MAX_UPLOAD_BYTES})["bytes"] == 512 * MiB


@pytest.mark.parametrize("body, message, param, code", [
    ([], "The request body must be a JSON object.", None, "invalid_request_error"),
    ({k: v for k, v in UPLOAD.items() if k != "mime_type"}, "Missing required parameter: 'mime_type'.",
     "mime_type", "invalid_request_error"),
    (UPLOAD | {"filename": None}, "Missing required parameter: 'filename'.", "filename", "invalid_request_error"),
    (UPLOAD | {"zeta": 1, "alpha": 2}, "Unknown parameter: 'alpha'.", "alpha", "unknown_parameter"),
    (UPLOAD | {"bytes": -1}, "Invalid 'bytes': expected a non-negative integer.", "bytes", "invalid_request_error"),
    (UPLOAD | {"bytes": True}, "Invalid 'bytes': expected a non-negative integer.", "bytes", "invalid_request_error"),
    (UPLOAD | {"bytes": 1.5}, "Invalid 'bytes': expected a non-negative integer.", "bytes", "invalid_request_error"),
    (UPLOAD | {"bytes": "10"}, "Invalid 'bytes': expected a non-negative integer.", "bytes", "invalid_request_error"),
    (UPLOAD | {"bytes": 512 * MiB + 1},
     f"The upload is {512 * MiB + 1} bytes, over this deployment's limit of {512 * MiB} bytes.", "bytes",
     "file_too_large"),
    (UPLOAD | {"expires_after": {"anchor": "created_at", "seconds": 3600}},
     "expires_after is not supported by this deployment: files persist until deleted.", "expires_after",
     "unsupported_parameter"),
    (UPLOAD | {"filename": "a/"}, "Invalid file name: 'a/'.", "filename", "invalid_request_error"),
    (UPLOAD | {"mime_type": "binary"}, "Invalid MIME type: 'binary'. Expected 'type/subtype'.", "mime_type",
     "invalid_request_error"),
    (UPLOAD | {"purpose": "batch"}, "The purpose 'batch' is not supported by this deployment; use 'user_data'.",
     "purpose", "unsupported_value"),
])
def test_an_invalid_upload_create_is_a_400(body, message, param, code):
    error = _refused(files.parse_upload_create, body)
    assert (error.message, error.param, error.code) == (message, param, code)


MD5 = "0123456789ABCDEF0123456789abcdef"


@pytest.mark.parametrize("body, expected", [
    ({"part_ids": ["part_a", "part_b"]}, (["part_a", "part_b"], None)),
    ({"part_ids": [], "md5": None}, ([], None)),
    ({"part_ids": ["part_a"], "md5": MD5}, (["part_a"], MD5.lower())),
    ({"part_ids": [f"part_{i}" for i in range(10_000)]}, ([f"part_{i}" for i in range(10_000)], None)),
])
def test_an_upload_complete_gives_the_parts_in_order_and_the_lowercased_md5(body, expected):
    assert files.parse_upload_complete(body) == expected


@pytest.mark.parametrize("body, message, param", [
    ("x", "The request body must be a JSON object.", None),
    ({"part_ids": [], "extra": 1}, "Unknown parameter: 'extra'.", "extra"),
    ({}, "Invalid 'part_ids': expected an array of Part ids.", "part_ids"),
    ({"part_ids": "part_a"}, "Invalid 'part_ids': expected an array of Part ids.", "part_ids"),
    ({"part_ids": ["part_a", ""]}, "Invalid 'part_ids': expected an array of Part ids.", "part_ids"),
    ({"part_ids": ["part_a", 3]}, "Invalid 'part_ids': expected an array of Part ids.", "part_ids"),
    ({"part_ids": [f"part_{i}" for i in range(10_001)]}, "An upload has at most 10000 parts.", "part_ids"),
    ({"part_ids": ["part_a", "part_b", "part_a"]}, "Each Part may be listed once in 'part_ids'.", "part_ids"),
    ({"part_ids": [], "md5": MD5[:-1]}, "Invalid 'md5': expected 32 hexadecimal characters.", "md5"),
    ({"part_ids": [], "md5": "g" * 32}, "Invalid 'md5': expected 32 hexadecimal characters.", "md5"),
    ({"part_ids": [], "md5": 5}, "Invalid 'md5': expected 32 hexadecimal characters.", "md5"),
])
def test_an_invalid_upload_complete_is_a_400(body, message, param):
    error = _refused(files.parse_upload_complete, body)
    assert (error.message, error.param) == (message, param)


def test_an_unknown_member_of_upload_complete_is_an_unknown_parameter():
    assert _refused(files.parse_upload_complete, {"part_ids": [], "x": 1}).code == "unknown_parameter"


# ---- files.list ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("query, expected", [
    ({}, (None, 10_000, False, None)),
    ({"limit": "1", "order": "asc", "after": "file-9", "purpose": "user_data"}, ("file-9", 1, True, "user_data")),
    ({"limit": "10000", "order": "desc", "after": "", "purpose": ""}, (None, 10_000, False, None)),
])
def test_files_list_parameters_and_their_defaults(query, expected):
    assert files.files_list_params(query) == expected


@pytest.mark.parametrize("query, message, param", [
    ({"limit": "ten"}, "Invalid type for 'limit': expected an integer, but got a string instead.", "limit"),
    ({"limit": "0"}, "Invalid 'limit': integer out of range. Expected a value between 1 and 10000, but got 0 instead.",
     "limit"),
    ({"limit": "10001"},
     "Invalid 'limit': integer out of range. Expected a value between 1 and 10000, but got 10001 instead.", "limit"),
    ({"order": "up"}, "Invalid value: 'up'. Supported values are: 'asc' and 'desc'.", "order"),
])
def test_invalid_files_list_parameters_are_a_400(query, message, param):
    error = _refused(files.files_list_params, query)
    assert (error.message, error.param) == (message, param)


# ---- session artifacts -----------------------------------------------------------------------------------

@pytest.mark.parametrize("value, published", [
    ("/workspace/outputs/report.csv", True),
    ("/workspace/outputs/deep/dir/chart.png", True),
    ("/workspace/outputs/.hidden", True),
    ("/workspace/outputs", False),                 # the directory itself
    ("/workspace/outputs/", False),
    ("/workspace/outputs/../secret", False),
    ("/workspace/outputs/a/./b", False),
    ("/workspace/outputs/a//b", False),
    ("/workspace/outputsx/a", False),
    ("/workspace/other.txt", False),
    ("workspace/outputs/a", False),
    ("/workspace/outputs/a\x00b", False),
    ("/workspace/outputs/" + "a" * 4078, False),   # 4097 characters
    (None, False),
])
def test_only_a_regular_path_under_workspace_outputs_is_an_artifact(value, published):
    assert files.artifact_path(value) == (value if published else None)


def test_an_artifact_path_of_exactly_4096_characters_is_kept():
    path = "/workspace/outputs/" + "a" * (4096 - len("/workspace/outputs/"))
    assert len(path) == 4096 and files.artifact_path(path) == path


# ---- environment files -----------------------------------------------------------------------------------

OUTSIDE = "path must be an absolute POSIX path inside /workspace"


@pytest.mark.parametrize("path", [
    "/workspace/a.txt", "/workspace/src/main.py", "/workspace/outputs/seed.csv", "/workspace/.codexx",
    "/workspace/managed-agents", "/workspace/x/.codex", "/workspace/" + "a" * 255,
])
def test_an_environment_path_inside_workspace_is_kept(path):
    assert files.check_environment_path(path) == path


@pytest.mark.parametrize("path", [
    None, 3, "", "/workspace", "/workspace/", "workspace/a", "/tmp/a", "/workspacex/a", "/workspace/../etc/passwd",
    "/workspace/a/../../etc", "/workspace/./a", "/workspace/a//b", "/workspace/a/", "/workspace/a\x00",
    "/workspace/a\\b", "/workspace/" + "a/" * 2043 + "a",
])
def test_an_environment_path_outside_workspace_is_the_official_400(path):
    error = _refused(files.check_environment_path, path, "files[0].path")
    assert (error.message, error.param) == (OUTSIDE, "files[0].path")


def test_an_environment_path_component_over_255_bytes_is_a_400():
    error = _refused(files.check_environment_path, "/workspace/d/" + "é" * 128)
    assert (error.message, error.param) == ("A path component is longer than 255 bytes.", "path")


@pytest.mark.parametrize("path", [
    "/workspace/.codex", "/workspace/.codex/config.toml", "/workspace/.managed-agents",
    "/workspace/.managed-agents-cache/x", "/workspace/outputs",
])
def test_reserved_environment_paths_cannot_be_written(path):
    error = _refused(files.check_environment_path, path)
    assert error.message == (f"{path} is reserved: .codex, .managed-agents* and /workspace/outputs itself cannot be "
                             "written.")
    assert error.param == "path"


def test_an_inline_environment_file_is_decoded():
    data = base64.b64encode(b"hello\x00world").decode()
    assert files.parse_environment_file({"type": "inline", "path": "/workspace/h.bin", "data": data}) == (
        "inline", "/workspace/h.bin", b"hello\x00world")
    assert files.parse_environment_file({"type": "inline", "path": "/workspace/empty", "data": ""}) == (
        "inline", "/workspace/empty", b"")


def test_an_inline_environment_file_of_exactly_4_mib_is_accepted_one_byte_more_is_not():
    at_limit = base64.b64encode(b"\0" * (4 * MiB)).decode()
    assert len(files.parse_environment_file({"type": "inline", "path": "/workspace/z", "data": at_limit})[2]) == 4 * MiB
    over = base64.b64encode(b"\0" * (4 * MiB + 1)).decode()
    error = _refused(files.parse_environment_file, {"type": "inline", "path": "/workspace/z", "data": over})
    assert error.message == (f"The file (use a file_id for larger files) is {4 * MiB + 1} bytes, over this "
                             f"deployment's limit of {4 * MiB} bytes.")
    assert (error.param, error.code) == ("data", "file_too_large")


def test_a_file_id_environment_file_names_the_file():
    assert files.parse_environment_file({"type": "file_id", "path": "/workspace/big.bin", "file_id": "file-abc"}) == (
        "file_id", "/workspace/big.bin", "file-abc")
    assert files.parse_environment_file({"type": "file_id", "path": "/workspace/b", "file_id": "f" * 256})[2] == "f" * 256


@pytest.mark.parametrize("body, message, param", [
    ([], "The request body must be a JSON object.", None),
    ({"path": "/workspace/a", "data": ""}, "Invalid value for 'type': expected 'inline' or 'file_id'.", "type"),
    ({"type": "url", "path": "/workspace/a"}, "Invalid value for 'type': expected 'inline' or 'file_id'.", "type"),
    ({"type": "inline", "path": "/workspace/a", "file_id": "file-1"}, "Unknown parameter: 'file_id'.", "file_id"),
    ({"type": "file_id", "path": "/workspace/a", "data": ""}, "Unknown parameter: 'data'.", "data"),
    ({"type": "inline", "path": "/workspace/a", "data": "", "z" * 100: 1}, f"Unknown parameter: '{'z' * 64}'.",
     "z" * 64),
    ({"type": "inline", "data": ""}, "Missing required parameter: 'path'.", "path"),
    ({"type": "inline", "path": "/workspace/a"}, "Missing required parameter: 'data'.", "data"),
    ({"type": "file_id", "path": "/workspace/a"}, "Missing required parameter: 'file_id'.", "file_id"),
    ({"type": "inline", "path": "/etc/passwd", "data": ""}, OUTSIDE, "path"),
    ({"type": "file_id", "path": "/workspace/a", "file_id": ""},
     "Invalid 'file_id': expected a file id (1 to 256 characters).", "file_id"),
    ({"type": "file_id", "path": "/workspace/a", "file_id": "f" * 257},
     "Invalid 'file_id': expected a file id (1 to 256 characters).", "file_id"),
    ({"type": "file_id", "path": "/workspace/a", "file_id": 7},
     "Invalid 'file_id': expected a file id (1 to 256 characters).", "file_id"),
    ({"type": "inline", "path": "/workspace/a", "data": 7},
     "Invalid 'data': standard base64 of at most 6990508 characters.", "data"),
    ({"type": "inline", "path": "/workspace/a", "data": "A" * 6_990_512},
     "Invalid 'data': standard base64 of at most 6990508 characters.", "data"),
    ({"type": "inline", "path": "/workspace/a", "data": "aGVsbG8"}, "Invalid 'data': expected standard base64.", "data"),
    ({"type": "inline", "path": "/workspace/a", "data": "aGVs bG8="}, "Invalid 'data': expected standard base64.",
     "data"),
    ({"type": "inline", "path": "/workspace/a", "data": "a-_b"}, "Invalid 'data': expected standard base64.", "data"),
    ({"type": "inline", "path": "/workspace/a", "data": "aGVsbG8é"}, "Invalid 'data': expected standard base64.",
     "data"),
])
def test_an_invalid_environment_file_is_a_400(body, message, param):
    error = _refused(files.parse_environment_file, body)
    assert (error.message, error.param) == (message, param)
