"""Files in and out (issue 38): the Files API and Uploads, with their bytes in S3 and their metadata in the one table.

- `objects`: the S3 bucket (the only module that calls S3): object keys by kind, then tenant, so each
  function's policy names only the prefixes it uses (`files/*`, `uploads/*`).
- `forms`: multipart/form-data bodies (python-multipart), bounded before anything is written.
- `records`: Files: create, retrieve, list, delete, content.
- `uploads`: Uploads: create, add a part, complete (the parts composed into one object), cancel.
"""
