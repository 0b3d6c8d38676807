#!/bin/sh
# The Lambda Web Adapter (AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap) starts this, waits for /healthz, then
# forwards each REST API request to it. The contract layer is in /opt/python.
export PYTHONPATH="/opt/python:${LAMBDA_TASK_ROOT}:${PYTHONPATH}"
exec python3 -m uvicorn --host 127.0.0.1 --port "${AWS_LWA_PORT:-8080}" --no-access-log --log-level warning app:app
