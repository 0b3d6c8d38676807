"""Vaults and credentials through the official SDK (client.beta.agents.vaults), the real handlers and moto's
DynamoDB and KMS; credential selection at Session creation. Secrets are write-only: no response and no
stored item holds one in plaintext."""

import base64
import json

import boto3
import openai
import pytest

from agents_core import settings as settings_module
from agents_core import vault_crypto
from local import template
from tests.integration.conftest import scan

TOKEN = "sb-secret-token-5f1e2d"
ACCESS = "oa-access-token-77c1aa"
REFRESH = "oa-refresh-token-90b3ee"
CLIENT_SECRET = "oa-client-secret-1d4c22"
SECRETS = (TOKEN, ACCESS, REFRESH, CLIENT_SECRET)
URL = "https://mcp.example.com/mcp"


@pytest.fixture
def kms(aws, monkeypatch):
    """moto's KMS with the template's Vault key (as the local stack creates it)."""
    client = boto3.client("kms", region_name="us-east-1")
    monkeypatch.setenv("VAULT_KEY_ID", template.create_keys(client)["VaultKey"])
    settings_module.get_settings.cache_clear()
    vault_crypto.default_sealer.cache_clear()
    yield client
    settings_module.get_settings.cache_clear()
    vault_crypto.default_sealer.cache_clear()


def _dump(value) -> str:
    return json.dumps(value, default=lambda o: base64.b64encode(bytes(getattr(o, "value", o))).decode()
                      if isinstance(o, (bytes, bytearray)) or hasattr(o, "value") else str(o))


def assert_no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


def static(url=URL, token=TOKEN):
    return {"type": "static_bearer", "mcp_server_url": url, "token": token}


def oauth(url=URL, **extra):
    return {"type": "mcp_oauth", "mcp_server_url": url, "access_token": ACCESS, "expires_at": "2030-01-01T00:00:00Z",
            "refresh": {"client_id": "client-1", "refresh_token": REFRESH, "token_endpoint": "https://idp.example.com/token",
                        "token_endpoint_auth": {"type": "client_secret_post", "client_secret": CLIENT_SECRET},
                        "scope": "read"}, **extra}


def mcp(url=URL, label="tickets", **extra):
    return {"type": "mcp", "server_label": label, "transport": {"type": "http", "server_url": url}, **extra}


def session_body(tools, vault_ids=None):
    body = {"environment": {"type": "none"}, "agent": {"model": "gpt-5", "tools": tools}, "input": "say hi"}
    if vault_ids is not None:
        body["vault_ids"] = vault_ids
    return body


# ---- Vaults -----------------------------------------------------------------------------------------------

def test_vault_crud_and_list_filters(client, kms):
    a = client.beta.agents.vaults.create(name="  team tools  ", metadata={"team": "core"})
    assert a.id.startswith("vault_") and a.object == "vault" and a.name == "team tools" and a.metadata == {"team": "core"}
    b = client.beta.agents.vaults.create()
    assert b.name is None and b.metadata == {}
    assert client.beta.agents.vaults.retrieve(a.id) == a
    renamed = client.beta.agents.vaults.update(a.id, name="renamed")
    assert renamed.name == "renamed" and renamed.metadata == {"team": "core"}
    cleared = client.beta.agents.vaults.update(a.id, name=None, metadata={})
    assert cleared.name is None and cleared.metadata == {}
    client.beta.agents.vaults.update(b.id, metadata={"team": "x"})
    assert [v.id for v in client.beta.agents.vaults.list()] == [b.id, a.id]
    assert [v.id for v in client.beta.agents.vaults.list(order="asc", limit=1)] == [a.id, b.id]  # pages
    assert [v.id for v in client.beta.agents.vaults.list(metadata={"team": "x"})] == [b.id]
    assert [v.id for v in client.beta.agents.vaults.list(status="active")] == [b.id, a.id]
    assert [v.id for v in client.beta.agents.vaults.list(status=["active", "archived"])] == [b.id, a.id]
    assert list(client.beta.agents.vaults.list(status=["archived"])) == []
    with pytest.raises(openai.BadRequestError, match="Supported values are: 'active' and 'archived'"):
        client.beta.agents.vaults.list(status="gone")
    deleted = client.beta.agents.vaults.delete(a.id)
    assert deleted.id == a.id and deleted.deleted and deleted.object == "vault.deleted"
    with pytest.raises(openai.NotFoundError):
        client.beta.agents.vaults.retrieve(a.id)


@pytest.mark.parametrize("body, param", [
    ({"name": "   "}, "name"),
    ({"name": "x" * 257}, "name"),
    ({"name": None}, "name"),
    ({"metadata": {"k": "v" * 513}}, "metadata.k"),
    ({"nope": 1}, "nope"),
])
def test_vault_create_rejections_write_nothing(client, kms, aws, body, param):
    before = scan(aws)
    with pytest.raises(openai.BadRequestError) as err:
        client.post("/vaults", body=body, cast_to=object, options={"headers": {"OpenAI-Beta": "agents=v1"}})
    assert err.value.body["param"] == param
    assert scan(aws) == before


def test_foreign_and_missing_vaults_are_404(client, other, kms):
    vault = client.beta.agents.vaults.create(name="mine")
    credential = client.beta.agents.vaults.credentials.create(vault.id, name="c", auth=static())
    elsewhere = client.beta.agents.vaults.create(name="another")
    calls = [
        lambda c: c.beta.agents.vaults.retrieve(vault.id),
        lambda c: c.beta.agents.vaults.update(vault.id, name="x"),
        lambda c: c.beta.agents.vaults.delete(vault.id),
        lambda c: c.beta.agents.vaults.credentials.list(vault.id),
        lambda c: c.beta.agents.vaults.credentials.create(vault.id, name="c", auth=static()),
        lambda c: c.beta.agents.vaults.credentials.retrieve(credential.id, vault_id=vault.id),
        lambda c: c.beta.agents.vaults.credentials.update(credential.id, vault_id=vault.id, metadata={}),
        lambda c: c.beta.agents.vaults.credentials.delete(credential.id, vault_id=vault.id),
    ]
    for call in calls:
        with pytest.raises(openai.NotFoundError) as err:
            call(other)
        assert err.value.body["message"] == "Resource not found."
    # a credential addressed through a Vault that does not own it, and malformed ids
    for call in (lambda: client.beta.agents.vaults.credentials.retrieve(credential.id, vault_id=elsewhere.id),
                 lambda: client.beta.agents.vaults.credentials.delete(credential.id, vault_id=elsewhere.id),
                 lambda: client.beta.agents.vaults.credentials.retrieve("cred_nope", vault_id=vault.id),
                 lambda: client.beta.agents.vaults.retrieve("not-a-vault"),
                 lambda: client.beta.agents.vaults.list(after="vault_missing")):
        with pytest.raises(openai.NotFoundError):
            call()
    assert client.beta.agents.vaults.credentials.retrieve(credential.id, vault_id=vault.id).id == credential.id


# ---- credentials -------------------------------------------------------------------------------------------

def test_credential_crud_keeps_secrets_write_only(client, kms, aws):
    vault = client.beta.agents.vaults.create(name="v")
    url = "https://MCP.example.com:443/a/../mcp?x=1"  # kept byte for byte
    bearer = client.beta.agents.vaults.credentials.create(vault.id, name=" static ", auth=static(url),
                                                          metadata={"k": "v"})
    assert bearer.id.startswith("cred_") and bearer.object == "vault.credential" and bearer.vault_id == vault.id
    assert bearer.name == "static" and bearer.metadata == {"k": "v"}
    assert bearer.auth.type == "static_bearer" and bearer.auth.mcp_server_url == url
    assert bearer.auth.to_dict() == {"type": "static_bearer", "mcp_server_url": url}
    o = client.beta.agents.vaults.credentials.create(vault.id, name="oauth", auth=oauth())
    assert o.auth.to_dict() == {
        "type": "mcp_oauth", "mcp_server_url": URL, "expires_at": "2030-01-01T00:00:00Z",
        "refresh": {"client_id": "client-1", "token_endpoint": "https://idp.example.com/token",
                    "token_endpoint_auth": {"type": "client_secret_post"}, "resource": None, "scope": "read"}}
    raw = client.beta.agents.vaults.credentials.with_raw_response.retrieve(o.id, vault_id=vault.id)
    assert_no_secret(raw.text)
    listed = client.beta.agents.vaults.credentials.with_raw_response.list(vault.id)
    assert_no_secret(listed.text)
    assert [c.id for c in client.beta.agents.vaults.credentials.list(vault.id, order="asc")] == [bearer.id, o.id]
    assert [c.id for c in client.beta.agents.vaults.credentials.list(vault.id, metadata={"k": "v"})] == [bearer.id]
    assert list(client.beta.agents.vaults.credentials.list(vault.id, status="archived")) == []
    # nothing in plaintext at rest: the table holds sealed values only
    assert_no_secret(_dump(scan(aws)))
    deleted = client.beta.agents.vaults.credentials.delete(bearer.id, vault_id=vault.id)
    assert deleted.id == bearer.id and deleted.deleted and deleted.object == "vault.credential.deleted"
    with pytest.raises(openai.NotFoundError):
        client.beta.agents.vaults.credentials.retrieve(bearer.id, vault_id=vault.id)
    # deleting a Vault removes its credentials
    client.beta.agents.vaults.delete(vault.id)
    assert not [i for i in scan(aws) if vault.id in i["PK"]["S"]]


def _sealed(store, vault_id, credential_id):
    from agents_core import keys

    return store.get(keys.credential("tenant-a", vault_id, credential_id))["sealed"]


def test_envelope_is_bound_to_tenant_vault_credential_and_url(client, kms, store):
    vault = client.beta.agents.vaults.create()
    credential = client.beta.agents.vaults.credentials.create(vault.id, name="c", auth=static())
    sealed = _sealed(store, vault.id, credential.id)["token"]
    sealer = vault_crypto.default_sealer()
    right = vault_crypto.context("tenant-a", vault.id, credential.id, URL, "token")
    assert sealer.open(sealed, right) == TOKEN
    for wrong in ({**right, "tenant": "tenant-b"}, {**right, "vault_id": "vault_x"},
                  {**right, "credential_id": "cred_x"}, {**right, "mcp_server_url": URL + "/"},
                  {**right, "secret": "access_token"}):
        with pytest.raises(vault_crypto.SecretUnavailable):
            sealer.open(sealed, wrong)
    # the data key is KMS-wrapped: KMS itself refuses it under another context
    with pytest.raises(kms.exceptions.InvalidCiphertextException):
        kms.decrypt(CiphertextBlob=bytes(sealed["key"].value if hasattr(sealed["key"], "value") else sealed["key"]),
                    EncryptionContext={**right, "tenant": "tenant-b"})


def test_rotation_replaces_only_what_is_sent(client, kms, store):
    vault = client.beta.agents.vaults.create()
    sealer = vault_crypto.default_sealer()
    bearer = client.beta.agents.vaults.credentials.create(vault.id, name="c", auth=static())
    rotated = client.beta.agents.vaults.credentials.update(bearer.id, vault_id=vault.id,
                                                           auth={"type": "static_bearer", "token": "sb-new-token"})
    assert rotated.auth.mcp_server_url == URL and rotated.updated_at >= bearer.updated_at
    ctx = vault_crypto.context("tenant-a", vault.id, bearer.id, URL, "token")
    assert sealer.open(_sealed(store, vault.id, bearer.id)["token"], ctx) == "sb-new-token"
    o = client.beta.agents.vaults.credentials.create(vault.id, name="o", auth=oauth())
    # a new access token without an expiry clears the old expiry; the refresh token and secret stay
    after = client.beta.agents.vaults.credentials.update(
        o.id, vault_id=vault.id, auth={"type": "mcp_oauth", "access_token": "oa-new-access",
                                       "refresh": {"scope": None}}, metadata={"m": "1"})
    assert after.auth.expires_at is None and after.auth.refresh.scope is None and after.metadata == {"m": "1"}
    sealed = _sealed(store, vault.id, o.id)
    open_ = lambda name: sealer.open(sealed[name], vault_crypto.context("tenant-a", vault.id, o.id, URL, name))  # noqa: E731
    assert (open_("access_token"), open_("refresh_token"), open_("client_secret")) == \
        ("oa-new-access", REFRESH, CLIENT_SECRET)
    client.beta.agents.vaults.credentials.update(o.id, vault_id=vault.id, auth={
        "type": "mcp_oauth", "expires_at": "2031-01-01T00:00:00+00:00",
        "refresh": {"refresh_token": "oa-new-refresh",
                    "token_endpoint_auth": {"type": "client_secret_post", "client_secret": None}}})
    sealed = _sealed(store, vault.id, o.id)
    assert (open_("access_token"), open_("refresh_token"), open_("client_secret")) == \
        ("oa-new-access", "oa-new-refresh", CLIENT_SECRET)


@pytest.mark.parametrize("auth, message", [
    ({"type": "environment_variable", "secret_name": "API_KEY", "secret_value": "v",
      "networking": {"type": "unrestricted"}}, "Credential type 'environment_variable' is not supported"),
    (static("http://mcp.example.com/mcp"), "expected an absolute https URL"),
    (static("http://127.0.0.1:9/mcp"), "expected an absolute https URL"),  # loopback http: off by default
    (static("https://user:pw@mcp.example.com/mcp"), "expected an absolute https URL"),
    (static("https://mcp.example.com/mcp#frag"), "expected an absolute https URL"),
    (static("mcp.example.com/mcp"), "expected an absolute https URL"),
    (static(token=""), "Invalid 'auth.token'"),
    (static(token="x" * 16385), "Invalid 'auth.token': string too long"),
    (oauth(expires_at="tomorrow"), "RFC 3339"),
    ({**oauth(), "refresh": {**oauth()["refresh"], "token_endpoint": "http://idp.example.com/token"}},
     "auth.refresh.token_endpoint"),
    ({"type": "other"}, "Invalid value: 'other'"),
])
def test_credential_create_rejections_write_nothing(client, kms, aws, auth, message):
    vault = client.beta.agents.vaults.create()
    before = scan(aws)
    with pytest.raises(openai.BadRequestError, match=message) as err:
        client.beta.agents.vaults.credentials.create(vault.id, name="c", auth=auth)
    assert err.value.status_code == 400 and err.value.body["type"] == "invalid_request_error"
    assert_no_secret(json.dumps(err.value.body))
    assert scan(aws) == before


def test_loopback_http_where_the_deployment_allows_it(client, kms, monkeypatch):
    monkeypatch.setenv("VAULT_ALLOW_LOOPBACK_HTTP", "true")
    settings_module.get_settings.cache_clear()
    vault = client.beta.agents.vaults.create()
    assert client.beta.agents.vaults.credentials.create(vault.id, name="c", auth=static("http://127.0.0.1:9/mcp")).id
    with pytest.raises(openai.BadRequestError):
        client.beta.agents.vaults.credentials.create(vault.id, name="c", auth=static("http://10.0.0.1/mcp"))


def test_rotation_rejections(client, kms, aws):
    vault = client.beta.agents.vaults.create()
    bearer = client.beta.agents.vaults.credentials.create(vault.id, name="c", auth=static())
    plain = client.beta.agents.vaults.credentials.create(vault.id, name="p", auth={
        "type": "mcp_oauth", "mcp_server_url": URL, "access_token": ACCESS})
    before = scan(aws)
    for cred, auth, message in [
        (bearer, {"type": "mcp_oauth", "access_token": "x"}, "a rotation keeps it"),
        (plain, {"type": "mcp_oauth", "refresh": {"refresh_token": "x"}}, "no refresh configuration"),
        (bearer, {"type": "environment_variable", "secret_value": "x"}, "environment_variable"),
    ]:
        with pytest.raises(openai.BadRequestError, match=message):
            client.beta.agents.vaults.credentials.update(cred.id, vault_id=vault.id, auth=auth)
    assert scan(aws) == before


# ---- selection at Session creation --------------------------------------------------------------------------

def _tool(session):
    return session.agent.tools[0]


def test_selection_explicit_matching_and_anonymous(client, kms):
    vault = client.beta.agents.vaults.create()
    cred = client.beta.agents.vaults.credentials.create(vault.id, name="c", auth=static())
    other_url = client.beta.agents.vaults.credentials.create(vault.id, name="d", auth=static("https://other.example/mcp"))
    explicit = client.beta.agents.sessions.create(**session_body([mcp(credential_id=cred.id)], [vault.id]))
    assert _tool(explicit).credential_id == cred.id and explicit.vault_ids == [vault.id]
    matched = client.beta.agents.sessions.create(**session_body([mcp()], [vault.id]))
    assert _tool(matched).credential_id == cred.id
    anonymous = client.beta.agents.sessions.create(**session_body([mcp("https://nobody.example/mcp")], [vault.id]))
    assert _tool(anonymous).credential_id is None
    without = client.beta.agents.sessions.create(**session_body([mcp()]))
    assert _tool(without).credential_id is None and without.vault_ids == []
    # frozen: later Vault changes never reselect
    client.beta.agents.vaults.credentials.delete(cred.id, vault_id=vault.id)
    client.beta.agents.vaults.credentials.update(other_url.id, vault_id=vault.id, metadata={"x": "y"})
    assert _tool(client.beta.agents.sessions.retrieve(matched.id)).credential_id == cred.id
    assert client.beta.agents.sessions.retrieve(matched.id).vault_ids == [vault.id]


def test_selection_answers_write_nothing(client, other, kms, aws):
    vault = client.beta.agents.vaults.create()
    second = client.beta.agents.vaults.create()
    cred = client.beta.agents.vaults.credentials.create(vault.id, name="c", auth=static())
    twin = client.beta.agents.vaults.credentials.create(second.id, name="c2", auth=static())
    lone = client.beta.agents.vaults.create()
    foreign_vault = other.beta.agents.vaults.create()
    foreign_cred = other.beta.agents.vaults.credentials.create(foreign_vault.id, name="f", auth=static())
    cases = [
        (session_body([mcp(credential_id=cred.id)]), 400, "MCP credential_id requires an attached vault"),
        (session_body([mcp(credential_id=cred.id)], []), 400, "MCP credential_id requires an attached vault"),
        (session_body([mcp(credential_id="cred_missing")], [vault.id]), 400,
         "MCP credential_id cred_missing was not found in an attached vault"),
        (session_body([mcp(credential_id=foreign_cred.id)], [vault.id]), 400,
         f"MCP credential_id {foreign_cred.id} was not found in an attached vault"),
        (session_body([mcp(credential_id=twin.id)], [vault.id, lone.id]), 400,
         f"MCP credential_id {twin.id} was not found in an attached vault"),
        (session_body([mcp("https://else.example/mcp", credential_id=cred.id)], [vault.id]), 400,
         f"MCP credential_id {cred.id} does not match server_url https://else.example/mcp"),
        (session_body([mcp()], [vault.id, second.id]), 409,
         f"multiple attached vault credentials match MCP server_url {URL}; specify credential_id"),
        (session_body([mcp()], [vault.id, foreign_vault.id]), 404, "Resource not found."),
        (session_body([mcp()], ["vault_missing"]), 404, "Resource not found."),
        (session_body([mcp()], [vault.id] * 11), 400, "Expected an array with maximum length 10"),
    ]
    before = scan(aws)
    for body, status, message in cases:
        with pytest.raises(openai.APIStatusError) as err:
            client.beta.agents.sessions.create(**body)
        assert err.value.status_code == status, (body, err.value.body)
        assert message in err.value.body["message"]
        expected_type = {400: "invalid_request_error", 404: "not_found_error", 409: "conflict_error"}[status]
        assert err.value.body["type"] == expected_type
        if status != 404 and "maximum length" not in message:
            assert err.value.body["param"] is None
    assert scan(aws) == before
    # the 409 goes away with an explicit credential_id
    chosen = client.beta.agents.sessions.create(**session_body([mcp(credential_id=twin.id)], [vault.id, second.id]))
    assert _tool(chosen).credential_id == twin.id


def test_saved_agent_credential_id_authorizes_nothing_by_itself(client, kms):
    vault = client.beta.agents.vaults.create()
    cred = client.beta.agents.vaults.credentials.create(vault.id, name="c", auth=static())
    agent = client.beta.agents.create(model="gpt-5", tools=[mcp(credential_id=cred.id)])
    with pytest.raises(openai.BadRequestError, match="requires an attached vault"):
        client.beta.agents.sessions.create(environment={"type": "none"}, agent_id=agent.id, input="say hi")
    session = client.beta.agents.sessions.create(environment={"type": "none"}, agent_id=agent.id, input="say hi",
                                                 vault_ids=[vault.id])
    assert _tool(session).credential_id == cred.id


def test_a_concurrent_refresh_is_used_not_repeated(client, kms, store):
    """Two dispatches find the same expired token: the one whose commit loses uses the token the other
    committed (never a second refresh with a refresh token that may have rotated)."""
    from agents_core import vaults as core_vaults

    vault = client.beta.agents.vaults.create()
    o = client.beta.agents.vaults.credentials.create(vault.id, name="o", auth={
        **oauth(), "expires_at": "2020-01-01T00:00:00Z"})
    calls = []

    def winner(refresh, token, secret):
        calls.append(("winner", token, secret))
        return {"access_token": "oa-winner-access", "refresh_token": "oa-winner-refresh", "expires_in": 3600}

    def loser(refresh, token, secret):
        calls.append(("loser", token, secret))
        # meanwhile another dispatch refreshes and commits first
        assert core_vaults.bearer(store, "tenant-a", vault.id, o.id, refresher=winner) == "oa-winner-access"
        return {"access_token": "oa-loser-access", "expires_in": 3600}

    assert core_vaults.bearer(store, "tenant-a", vault.id, o.id, refresher=loser) == "oa-winner-access"
    assert calls == [("loser", REFRESH, CLIENT_SECRET), ("winner", REFRESH, CLIENT_SECRET)]
    # the next dispatch: fresh, no refresh at all
    assert core_vaults.bearer(store, "tenant-a", vault.id, o.id, refresher=None) == "oa-winner-access"
    sealed = _sealed(store, vault.id, o.id)
    assert vault_crypto.default_sealer().open(
        sealed["refresh_token"], vault_crypto.context("tenant-a", vault.id, o.id, URL, "refresh_token")) == \
        "oa-winner-refresh"
