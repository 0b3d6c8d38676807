"""multipart/form-data request bodies (`files.create`, `uploads.parts.create`), parsed with python-multipart.

The whole body is bounded before parsing (it already had to fit Lambda's invocation payload); a body that is
not a well-formed form, or lacks its file field, is a 400 naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header

from agents_contract.errors import InvalidRequest, PayloadTooLarge

MAX_FIELDS = 16
MAX_FIELD_BYTES = 4096  # a text field (purpose, expires_after[...])


@dataclass
class Part:
    name: str
    filename: Optional[str]
    content_type: Optional[str]
    data: bytearray = field(default_factory=bytearray)


@dataclass
class Form:
    fields: dict[str, str]
    files: dict[str, Part]


def parse(content_type: Optional[str], body: bytes, max_bytes: int) -> Form:
    if len(body) > max_bytes:
        raise PayloadTooLarge(f"The request body is {len(body)} bytes, over this route's limit of {max_bytes} bytes.")
    kind, params = parse_options_header(content_type or "")
    boundary = params.get(b"boundary")
    if kind != b"multipart/form-data" or not boundary:
        raise InvalidRequest("The request body must be multipart/form-data with a boundary.", param=None)
    parts: list[Part] = []
    headers: dict[bytes, bytes] = {}
    current: dict[str, bytes] = {"field": b"", "value": b""}

    def on_header_field(data: bytes, start: int, end: int) -> None:
        current["field"] += data[start:end]

    def on_header_value(data: bytes, start: int, end: int) -> None:
        current["value"] += data[start:end]

    def on_header_end() -> None:
        headers[current["field"].lower()] = current["value"]
        current["field"], current["value"] = b"", b""

    def on_headers_finished() -> None:
        _, disposition = parse_options_header(headers.get(b"content-disposition", b""))
        name = disposition.get(b"name", b"").decode("utf-8", "replace")
        filename = disposition.get(b"filename")
        ctype = headers.get(b"content-type")
        parts.append(Part(name, filename.decode("utf-8", "replace") if filename is not None else None,
                          ctype.decode("latin-1") if ctype else None))
        headers.clear()
        if len(parts) > MAX_FIELDS:
            raise InvalidRequest(f"The form has more than {MAX_FIELDS} fields.", param=None)

    def on_part_data(data: bytes, start: int, end: int) -> None:
        parts[-1].data += data[start:end]

    parser = MultipartParser(boundary, {"on_header_field": on_header_field, "on_header_value": on_header_value,
                                        "on_header_end": on_header_end, "on_headers_finished": on_headers_finished,
                                        "on_part_data": on_part_data})
    try:
        parser.write(body)
        parser.finalize()
    except FormParserError:
        raise InvalidRequest("The multipart/form-data body could not be parsed.", param=None) from None
    fields: dict[str, str] = {}
    files: dict[str, Part] = {}
    for part in parts:
        if part.name in fields or part.name in files:
            raise InvalidRequest(f"The form field '{part.name}' appears more than once.", param=part.name)
        if part.filename is not None:
            files[part.name] = part
            continue
        if len(part.data) > MAX_FIELD_BYTES:
            raise InvalidRequest(f"The form field '{part.name}' is longer than {MAX_FIELD_BYTES} bytes.",
                                 param=part.name)
        try:
            fields[part.name] = part.data.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidRequest(f"The form field '{part.name}' is not UTF-8.", param=part.name) from None
    return Form(fields, files)
