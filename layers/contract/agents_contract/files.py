"""The Files API and Uploads (`client.files`, `client.uploads`) as this deployment accepts them: pure rules.

- Purposes: `user_data` is stored; the SDK's other purposes are a clear 400 saying so, anything else an
  invalid value. `expires_after` is refused (files persist until deleted).
- Sizes: `files.create` carries the whole file in one request, which reaches Lambda inside its 6 MB
  invocation payload (base64-encoded by API Gateway), so a file sent that way is at most MAX_CREATE_BYTES;
  larger files go through `client.uploads` in parts of at most MAX_PART_BYTES, up to MAX_UPLOAD_BYTES.
- Names: the base name of what the client sent, 1..MAX_FILENAME_BYTES of UTF-8, no control characters.
- MIME types (`uploads.create`'s `mime_type`, a part's Content-Type): `type/subtype` of RFC 6838 tokens.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from .errors import InvalidRequest

MiB = 1024 * 1024
MAX_CREATE_BYTES = 4 * MiB
MAX_FORM_BYTES = MAX_CREATE_BYTES + 64 * 1024  # the file plus the form's boundaries, headers and fields
MAX_PART_BYTES = 4 * MiB
MAX_UPLOAD_BYTES = 512 * MiB
MAX_PARTS = 10_000
MAX_FILENAME_BYTES = 255
UPLOAD_TTL_SECONDS = 3600  # an Upload not completed within an hour expires (as officially)
FILES_LIST_MAX = 10_000  # files.list: limit 1..10,000, default 10,000
# Session artifacts: what one completed hosted Turn may publish from /workspace/outputs (more is reported on the
# Turn as x_agents_core.artifacts_skipped, never silently dropped).
OUTPUTS = "/workspace/outputs"
MAX_ARTIFACT_BYTES = 100 * MiB
MAX_ARTIFACTS_PER_TURN = 50  # one row each in the completion's transaction (at most 100 writes)
MAX_ARTIFACT_BYTES_PER_TURN = 1024 * MiB

SUPPORTED_PURPOSES = ("user_data",)
KNOWN_PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals")

_MIME_PART = r"[A-Za-z0-9!#$&^_.+-]{1,127}"
_MIME = re.compile(rf"^{_MIME_PART}/{_MIME_PART}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_purpose(value: Any, param: str = "purpose") -> str:
    if value is None or value == "":
        raise InvalidRequest("Missing required parameter: 'purpose'.", param=param)
    if not isinstance(value, str):
        raise InvalidRequest("Invalid type for 'purpose': expected a string.", param=param)
    if value in SUPPORTED_PURPOSES:
        return value
    if value in KNOWN_PURPOSES:
        raise InvalidRequest(f"The purpose '{value}' is not supported by this deployment; use 'user_data'.",
                             param=param, code="unsupported_value")
    raise InvalidRequest(f"Invalid value: '{value}'. Supported values are: "
                         + ", ".join(f"'{p}'" for p in KNOWN_PURPOSES) + ".", param=param)


def refuse_expiry(present: bool, param: str = "expires_after") -> None:
    if present:
        raise InvalidRequest("expires_after is not supported by this deployment: files persist until deleted.",
                             param=param, code="unsupported_parameter")


def check_filename(value: Any, param: str = "file") -> str:
    """The base name of the client's file name (a path's directories are not kept)."""
    if not isinstance(value, str) or not value:
        raise InvalidRequest("The file must have a file name.", param=param)
    name = re.split(r"[/\\]", value)[-1]
    if name in ("", ".", ".."):
        raise InvalidRequest(f"Invalid file name: {value!r}.", param=param)
    if _CONTROL.search(name):
        raise InvalidRequest("The file name must not contain control characters.", param=param)
    if len(name.encode("utf-8", "surrogatepass")) > MAX_FILENAME_BYTES:
        raise InvalidRequest(f"The file name is longer than {MAX_FILENAME_BYTES} bytes.", param=param)
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRequest("The file name must be valid UTF-8.", param=param) from None
    return name


def check_mime_type(value: Any, param: str = "mime_type") -> str:
    if not isinstance(value, str) or not value:
        raise InvalidRequest(f"Missing required parameter: '{param}'.", param=param)
    base = value.split(";", 1)[0].strip()
    if not _MIME.match(base):
        raise InvalidRequest(f"Invalid MIME type: {value[:200]!r}. Expected 'type/subtype'.", param=param)
    return base.lower()


def check_size(size: int, limit: int, param: str, what: str) -> None:
    if size > limit:
        raise InvalidRequest(f"{what} is {size} bytes, over this deployment's limit of {limit} bytes.",
                             param=param, code="file_too_large")


def file_resource(record: dict[str, Any]) -> dict[str, Any]:
    """The official FileObject."""
    return {"id": record["id"], "object": "file", "bytes": record["bytes"], "created_at": record["created_at"],
            "filename": record["filename"], "purpose": record["purpose"], "status": "processed",
            "expires_at": None, "status_details": None}


def upload_resource(record: dict[str, Any], status: str, file: Optional[dict[str, Any]]) -> dict[str, Any]:
    """The official Upload (`file` is the FileObject once completed)."""
    return {"id": record["id"], "object": "upload", "bytes": record["bytes"], "created_at": record["created_at"],
            "expires_at": record["expires_at"], "filename": record["filename"], "purpose": record["purpose"],
            "status": status, "file": file}


def part_resource(record: dict[str, Any]) -> dict[str, Any]:
    return {"id": record["id"], "object": "upload.part", "created_at": record["created_at"],
            "upload_id": record["upload_id"]}


def parse_upload_create(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.", param=None)
    for name in ("bytes", "filename", "mime_type", "purpose"):
        if body.get(name) is None:
            raise InvalidRequest(f"Missing required parameter: '{name}'.", param=name)
    unknown = sorted(set(body) - {"bytes", "filename", "mime_type", "purpose", "expires_after"})
    if unknown:
        raise InvalidRequest(f"Unknown parameter: '{unknown[0]}'.", param=unknown[0], code="unknown_parameter")
    size = body["bytes"]
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise InvalidRequest("Invalid 'bytes': expected a non-negative integer.", param="bytes")
    check_size(size, MAX_UPLOAD_BYTES, "bytes", "The upload")
    refuse_expiry("expires_after" in body)
    return {"bytes": size, "filename": check_filename(body["filename"], "filename"),
            "mime_type": check_mime_type(body["mime_type"]), "purpose": check_purpose(body["purpose"])}


def parse_upload_complete(body: Any) -> tuple[list[str], Optional[str]]:
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.", param=None)
    unknown = sorted(set(body) - {"part_ids", "md5"})
    if unknown:
        raise InvalidRequest(f"Unknown parameter: '{unknown[0]}'.", param=unknown[0], code="unknown_parameter")
    part_ids = body.get("part_ids")
    if not isinstance(part_ids, list) or not all(isinstance(p, str) and p for p in part_ids):
        raise InvalidRequest("Invalid 'part_ids': expected an array of Part ids.", param="part_ids")
    if len(part_ids) > MAX_PARTS:
        raise InvalidRequest(f"An upload has at most {MAX_PARTS} parts.", param="part_ids")
    if len(set(part_ids)) != len(part_ids):
        raise InvalidRequest("Each Part may be listed once in 'part_ids'.", param="part_ids")
    md5 = body.get("md5")
    if md5 is not None and (not isinstance(md5, str) or not re.fullmatch(r"[0-9a-fA-F]{32}", md5)):
        raise InvalidRequest("Invalid 'md5': expected 32 hexadecimal characters.", param="md5")
    return part_ids, md5.lower() if md5 else None


def files_list_params(query: dict[str, str]) -> tuple[Optional[str], int, bool, Optional[str]]:
    """files.list: after, limit (1..10,000, default 10,000), order (default desc), purpose."""
    raw = query.get("limit", str(FILES_LIST_MAX))
    try:
        limit = int(raw)
    except ValueError:
        raise InvalidRequest("Invalid type for 'limit': expected an integer, but got a string instead.",
                             param="limit") from None
    if not 1 <= limit <= FILES_LIST_MAX:
        raise InvalidRequest(f"Invalid 'limit': integer out of range. Expected a value between 1 and "
                             f"{FILES_LIST_MAX}, but got {limit} instead.", param="limit")
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidRequest(f"Invalid value: '{order}'. Supported values are: 'asc' and 'desc'.", param="order")
    return query.get("after") or None, limit, order == "asc", query.get("purpose") or None


def artifact_resource(record: dict[str, Any]) -> dict[str, Any]:
    """The official SessionArtifact."""
    return {"id": record["id"], "object": "agent.session.artifact", "session_id": record["session_id"],
            "turn_id": record["turn_id"], "environment_id": record["environment_id"], "path": record["path"],
            "size_bytes": record["size_bytes"], "created_at": record["created_at"]}


def artifact_path(value: Any) -> Optional[str]:
    """A published file's absolute path: a regular file under /workspace/outputs (None when it is not one)."""
    if not isinstance(value, str) or not value.startswith(OUTPUTS + "/") or "\x00" in value or len(value) > 4096:
        return None
    parts = value[len(OUTPUTS) + 1:].split("/")
    if any(p in ("", ".", "..") for p in parts):
        return None
    return value


# ---- Environment files (`client.beta.agents.environments.files`) ---------------------------------------------

WORKSPACE = "/workspace"
MAX_ENVIRONMENT_FILE_BYTES = 4 * MiB  # inline data reaches Lambda inside its 6 MB invocation payload
MAX_INLINE_DATA_CHARS = 6_990_508  # the official bound on `data`
_RESERVED_FIRST = re.compile(r"^(\.codex|\.managed-agents(-.*)?)$")


def check_environment_path(value: Any, param: str = "path") -> str:
    """An absolute POSIX path inside /workspace, as the official service words its 400."""
    bad = InvalidRequest("path must be an absolute POSIX path inside /workspace", param=param)
    if not isinstance(value, str) or not value.startswith(WORKSPACE + "/") or len(value) > 4096:
        raise bad
    parts = value[len(WORKSPACE) + 1:].split("/")
    if any(p in ("", ".", "..") for p in parts) or "\x00" in value or "\\" in value:
        raise bad
    if any(len(p.encode("utf-8", "surrogatepass")) > 255 for p in parts):
        raise InvalidRequest("A path component is longer than 255 bytes.", param=param)
    if _RESERVED_FIRST.match(parts[0]) or value == OUTPUTS:
        raise InvalidRequest(f"{value} is reserved: .codex, .managed-agents* and /workspace/outputs itself cannot be "
                             "written.", param=param)
    return value


def parse_environment_file(body: Any) -> tuple[str, str, Any]:
    """(type, path, decoded bytes or file id) of `environments.files.create`."""
    import base64
    import binascii

    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.", param=None)
    kind = body.get("type")
    if kind not in ("inline", "file_id"):
        raise InvalidRequest("Invalid value for 'type': expected 'inline' or 'file_id'.", param="type")
    member = "data" if kind == "inline" else "file_id"
    unknown = sorted(set(body) - {"type", "path", member})
    if unknown:
        raise InvalidRequest(f"Unknown parameter: '{unknown[0][:64]}'.", param=unknown[0][:64], code="unknown_parameter")
    for name in ("path", member):
        if name not in body:
            raise InvalidRequest(f"Missing required parameter: '{name}'.", param=name)
    path = check_environment_path(body["path"])
    if kind == "file_id":
        if not isinstance(body["file_id"], str) or not 1 <= len(body["file_id"]) <= 256:
            raise InvalidRequest("Invalid 'file_id': expected a file id (1 to 256 characters).", param="file_id")
        return kind, path, body["file_id"]
    data = body["data"]
    if not isinstance(data, str) or len(data) > MAX_INLINE_DATA_CHARS:
        raise InvalidRequest(f"Invalid 'data': standard base64 of at most {MAX_INLINE_DATA_CHARS} characters.",
                             param="data")
    try:
        decoded = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest("Invalid 'data': expected standard base64.", param="data") from None
    check_size(len(decoded), MAX_ENVIRONMENT_FILE_BYTES, "data", "The file (use a file_id for larger files)")
    return kind, path, decoded


def environment_file_resource(environment_id: str, path: str, size: int) -> dict[str, Any]:
    return {"environment_id": environment_id, "object": "agent.environment.file", "path": path, "size_bytes": size}
