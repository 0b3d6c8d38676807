"""The files bucket: the one module that calls S3.

Object keys start with their kind, then the tenant (URL-quoted, so no tenant id can reach into another's
prefix): `files/{tenant}/{file_id}` (a File's bytes), `uploads/{tenant}/{upload_id}/{part_id}` (an Upload's
parts until it completes; a lifecycle rule removes what an abandoned upload leaves). The template grants each
function only the kinds it uses. The bucket encrypts every object with the stack's KMS key (SSE-KMS, bucket key).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Optional
from urllib.parse import quote

from botocore.config import Config
from botocore.exceptions import ClientError

from agents_contract.errors import AgentsError, NotFound, ServerError, Unavailable

from ..aws import botocore_session
from ..observability import logger
from ..settings import get_settings

CHUNK_BYTES = 1024 * 1024  # what a download reads from S3 at a time
COMPOSE_PART_BYTES = 8 * 1024 * 1024  # S3 multipart parts (at least 5 MiB each, except the last)
_THROTTLES = {"SlowDown", "ThrottlingException", "RequestLimitExceeded", "ServiceUnavailable", "503"}


def _tenant(tenant: str) -> str:
    return quote(tenant, safe="")


quote_tenant = _tenant


def file_key(tenant: str, file_id: str) -> str:
    return f"files/{_tenant(tenant)}/{file_id}"


def part_key(tenant: str, upload_id: str, part_id: str) -> str:
    return f"uploads/{_tenant(tenant)}/{upload_id}/{part_id}"


def artifact_prefix(tenant: str, session_id: str, turn_id: str) -> str:
    """Where a completed Turn's artifacts are uploaded (the Runtime names each object under it)."""
    return f"artifacts/{_tenant(tenant)}/{session_id}/{turn_id}/"


def session_artifacts_prefix(tenant: str, session_id: str) -> str:
    return f"artifacts/{_tenant(tenant)}/{session_id}/"


def _domain(exc: ClientError) -> AgentsError:
    code = exc.response.get("Error", {}).get("Code", "")
    if code in ("NoSuchKey", "404", "NotFound"):
        return NotFound()
    if code in _THROTTLES:
        return Unavailable()
    logger.error("S3 error", extra={"aws_error_code": code, "aws_error": str(exc)[:300]})
    return ServerError()


@dataclass
class ObjectStore:
    client: Any
    bucket: str

    def put(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> None:
        try:
            self.client.put_object(Bucket=self.bucket, Key=key, Body=data, ContentType=content_type)
        except ClientError as exc:
            raise _domain(exc) from exc

    def read(self, key: str) -> tuple[int, Iterator[bytes]]:
        """(size, the bytes in chunks): a download streams them as S3 hands them over."""
        try:
            out = self.client.get_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            raise _domain(exc) from exc
        body = out["Body"]

        def chunks() -> Iterator[bytes]:
            try:
                while True:
                    chunk = body.read(CHUNK_BYTES)
                    if not chunk:
                        return
                    yield chunk
            finally:
                body.close()

        return int(out["ContentLength"]), chunks()

    def read_all(self, key: str) -> bytes:
        return b"".join(self.read(key)[1])

    def presigned_get(self, key: str, seconds: int) -> str:
        """A URL that reads this one object for `seconds` (signed with the caller's role: no other access)."""
        return self.client.generate_presigned_url("get_object", Params={"Bucket": self.bucket, "Key": key},
                                                  ExpiresIn=seconds)

    def presigned_post(self, prefix: str, max_bytes: int, seconds: int) -> dict[str, Any]:
        """A form that uploads objects under `prefix` only, each at most `max_bytes`, for `seconds` (signed with
        the caller's role): `{url, fields}`, the object's key in the `key` field."""
        post = self.client.generate_presigned_post(
            self.bucket, prefix + "${filename}", ExpiresIn=seconds,
            Conditions=[["starts-with", "$key", prefix], ["content-length-range", 0, max_bytes]])
        return {"url": post["url"], "fields": {k: v for k, v in post["fields"].items() if k != "key"}}

    def size(self, key: str) -> Optional[int]:
        """The object's size, or None when there is none."""
        try:
            return int(self.client.head_object(Bucket=self.bucket, Key=key)["ContentLength"])
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise _domain(exc) from exc

    def delete(self, keys: list[str]) -> None:
        """Best effort after the metadata is gone: what remains is unreachable and logged."""
        for start in range(0, len(keys), 1000):
            batch = [{"Key": k} for k in keys[start:start + 1000]]
            try:
                out = self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})
            except ClientError as exc:
                logger.error("S3 delete failed", extra={"aws_error": str(exc)[:300], "objects": len(batch)})
                continue
            if out.get("Errors"):
                logger.error("S3 delete left objects", extra={"objects": len(out["Errors"])})

    def compose(self, key: str, sources: list[str], content_type: str) -> str:
        """Write the sources' bytes, in order, as one object; answers their MD5 (hex). One S3 multipart upload
        of parts of COMPOSE_PART_BYTES (S3 wants at least 5 MiB per part but the last), or one put when smaller."""
        digest = hashlib.md5(usedforsecurity=False)
        buffer = bytearray()
        upload_id: Optional[str] = None
        parts: list[dict[str, Any]] = []
        try:
            for source in sources:
                for chunk in self.read(source)[1]:
                    digest.update(chunk)
                    buffer += chunk
                    while len(buffer) >= 2 * COMPOSE_PART_BYTES:  # keep one part back: the last may be small
                        if upload_id is None:
                            upload_id = self.client.create_multipart_upload(
                                Bucket=self.bucket, Key=key, ContentType=content_type)["UploadId"]
                        parts.append(self._part(key, upload_id, len(parts) + 1, bytes(buffer[:COMPOSE_PART_BYTES])))
                        del buffer[:COMPOSE_PART_BYTES]
            if upload_id is None:
                self.client.put_object(Bucket=self.bucket, Key=key, Body=bytes(buffer), ContentType=content_type)
            else:
                parts.append(self._part(key, upload_id, len(parts) + 1, bytes(buffer)))
                self.client.complete_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id,
                                                      MultipartUpload={"Parts": parts})
        except ClientError as exc:
            if upload_id is not None:
                self._abort(key, upload_id)
            raise _domain(exc) from exc
        except BaseException:
            if upload_id is not None:
                self._abort(key, upload_id)
            raise
        return digest.hexdigest()

    def _part(self, key: str, upload_id: str, number: int, data: bytes) -> dict[str, Any]:
        out = self.client.upload_part(Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=data)
        return {"PartNumber": number, "ETag": out["ETag"]}

    def _abort(self, key: str, upload_id: str) -> None:
        try:
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
        except ClientError:  # the bucket's lifecycle rule aborts it after a day
            logger.warning("S3 multipart upload not aborted", extra={"key_kind": key.split("/", 1)[0]})


@lru_cache(maxsize=1)
def default_objects() -> ObjectStore:
    settings = get_settings()
    if not settings.files_bucket:
        raise ServerError()
    # An explicit endpoint (the local stack's moto server) is addressed path-style, so presigned URLs reach it.
    config = Config(retries={"mode": "standard", "max_attempts": 5}, signature_version="s3v4",
                    s3={"addressing_style": "path"} if settings.s3_endpoint_url else None)
    client = botocore_session().create_client("s3", endpoint_url=settings.s3_endpoint_url,
                                              region_name=settings.aws_region, config=config)
    return ObjectStore(client, settings.files_bucket)
