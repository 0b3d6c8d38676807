"""Hosted package admission over HTTP with the official SDK: an `openai_hosted` Environment's `packages.python`
entry that is not a requirement specifier, or `packages.npm` entry that is not a registry name, is a 400 in the
official error envelope naming the entry, on Session create and on `environments.create` alike, and the table
is unchanged. Given / When / Then."""

from __future__ import annotations

import boto3
import openai
import pytest

from agents_core import settings as settings_module
from agents_core import vault_crypto
from local import template
from tests.integration.conftest import scan
from tests.unit.test_hosted_packages import NPM, PYTHON

# (the install source, the manager, the refused entry)
REFUSED = [
    ("a direct reference to a file URL", "python", "pkg @ file:///tmp/x"),
    ("a git+file VCS URL", "python", "git+file:///tmp/repo"),
    ("a loopback archive URL", "python", "http://127.0.0.1/x.tar.gz"),
    ("a local path", "python", "./pkg"),
    ("a file: tarball", "npm", "file:../x.tgz"),
    ("a named git+ssh spec", "npm", "pkg@git+ssh://git@github.com/a/b"),
    ("a GitHub shorthand", "npm", "user/repo"),
    ("an npm: alias", "npm", "npm:other@1"),
]
MESSAGES = {"python": PYTHON, "npm": NPM}


@pytest.fixture
def kms(aws, monkeypatch):
    """moto's KMS with the template's key: an admitted Environment's preparation is sealed under it."""
    monkeypatch.setenv("VAULT_KEY_ID", template.create_keys(boto3.client("kms", region_name="us-east-1"))["VaultKey"])
    settings_module.get_settings.cache_clear()
    vault_crypto.default_sealer.cache_clear()
    yield
    settings_module.get_settings.cache_clear()
    vault_crypto.default_sealer.cache_clear()


def hosted(manager: str, entry: str) -> dict:
    fine = {"python": "requests>=2.31", "npm": "left-pad"}[manager]
    return {"type": "openai_hosted", "packages": {manager: [fine, entry]}}


def assert_refused(err: pytest.ExceptionInfo, manager: str) -> None:
    assert err.value.status_code == 400
    assert err.value.body == {"message": MESSAGES[manager].format(i=1), "type": "invalid_request_error",
                              "param": f"environment.packages.{manager}[1]", "code": "invalid_request_error"}
    assert err.value.response.headers["x-should-retry"] == "false"


@pytest.mark.parametrize("source,manager,entry", REFUSED, ids=[r[0] for r in REFUSED])
def test_session_create_refuses_the_entry_and_writes_nothing(client, aws, source, manager, entry):
    before = scan(aws)
    with pytest.raises(openai.BadRequestError) as err:
        client.beta.agents.sessions.create(agent={"model": "gpt-5"}, environment=hosted(manager, entry),
                                           input="hi", extra_body={"x_agents_core": {"harness": "scripted"}})
    assert_refused(err, manager)
    assert scan(aws) == before
    assert client.beta.agents.sessions.list().data == []


@pytest.mark.parametrize("source,manager,entry", REFUSED, ids=[r[0] for r in REFUSED])
def test_environments_create_refuses_the_entry_and_writes_nothing(client, aws, source, manager, entry):
    before = scan(aws)
    with pytest.raises(openai.BadRequestError) as err:
        client.beta.agents.environments.create(environment=hosted(manager, entry))
    assert_refused(err, manager)
    assert scan(aws) == before
    assert client.beta.agents.environments.list().data == []


def test_registry_packages_are_admitted_on_both_paths(client, kms):
    packages = {"python": ["requests[socks]>=2.31,<3", "pkg; python_version>='3.8'"],
                "npm": ["@scope/pkg@^1.2.3", "react@next"]}
    created = client.beta.agents.environments.create(environment={"type": "openai_hosted", "packages": packages})
    named = client.beta.agents.sessions.create(agent={"model": "gpt-5"}, input="hi",
                                               environment={"type": "openai_hosted", "environment_id": created.id},
                                               extra_body={"x_agents_core": {"harness": "scripted"}})
    session = client.beta.agents.sessions.create(agent={"model": "gpt-5"},
                                                 environment={"type": "openai_hosted", "packages": packages},
                                                 input="hi", extra_body={"x_agents_core": {"harness": "scripted"}})
    for one in (named, session):  # the Session's environment shows the names (the SDK's EnvironmentInfo does not)
        assert one.environment.to_dict()["packages"] == {**packages, "system": []}
