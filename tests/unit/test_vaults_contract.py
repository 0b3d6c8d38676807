"""Vault and credential requests and resources (agents_contract.vaults): the request checks with their exact
messages, the public records (never a secret), the URL policy, and credential rotation. Selection at Session
creation is in test_vault_selection.py. Pure: no store, no KMS."""

from __future__ import annotations

import copy

import pytest

from agents_contract import vaults
from agents_contract.errors import InvalidRequest

URL = "https://mcp.example.com/mcp"
TOKEN_ENDPOINT = "https://idp.example.com/token"
POLICY = vaults.UrlPolicy()
SERVER_URL_ERROR = "Invalid 'auth.mcp_server_url': expected an absolute https URL without credentials or fragment."
TOKEN_ENDPOINT_ERROR = ("Invalid 'auth.refresh.token_endpoint': expected an absolute https URL without credentials or "
                        "fragment.")
EXPIRY_ERROR = ("Invalid 'auth.expires_at': expected an RFC 3339 timestamp with a time zone, such as "
                "'2026-01-01T00:00:00Z'.")
Y2030 = 1893456000  # 2030-01-01T00:00:00Z


def too_short(param):
    return (f"Invalid '{param}': string too short. Expected a string with minimum length 1, but got a string with "
            "length 0 instead.")


def too_long(param, length):
    return (f"Invalid '{param}': string too long. Expected a string with maximum length 16384, but got a string "
            f"with length {length} instead.")


def rejection(call, *args):
    with pytest.raises(InvalidRequest) as err:
        call(*args)
    assert err.value.status == 400 and err.value.type == "invalid_request_error"
    return err.value.message, err.value.param


# ---- URLs --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("url, expected", [
    ("https://IDP.Example.com/token", "https://idp.example.com:443"),
    ("http://idp.example.com/token", "http://idp.example.com:80"),
    ("https://idp.example.com:8443/a?b=c", "https://idp.example.com:8443"),
    ("http://127.0.0.1:4444", "http://127.0.0.1:4444"),
])
def test_origin_is_scheme_lowercase_host_and_port(url, expected):
    assert vaults.origin(url) == expected


@pytest.mark.parametrize("host, loopback", [
    ("localhost", True), ("LocalHost", True), ("127.0.0.1", True), ("127.8.9.10", True), ("::1", True),
    ("[::1]", True), ("10.0.0.1", False), ("192.168.1.5", False), ("::2", False), ("example.com", False),
    ("localhost.example.com", False), ("", False),
])
def test_loopback_hosts(host, loopback):
    assert vaults.is_loopback_host(host) is loopback


@pytest.mark.parametrize("url", [
    "https://mcp.example.com:99999/mcp",  # a port out of range
    "https://mcp.example.com:http/mcp",  # a port that is no number
    "https://[::1/mcp",  # an unclosed IPv6 literal
    "https://mcp.example.com/m\x7fcp",
    "https://mcp.example.com/m\tcp",
    "mcp.example.com/mcp",  # not absolute
    "ftp://mcp.example.com/mcp",
    "",
])
def test_a_malformed_server_url_is_rejected(url):
    assert rejection(vaults.check_server_url, url, POLICY) == (SERVER_URL_ERROR, "auth.mcp_server_url")


def test_the_server_url_message_says_when_loopback_http_is_allowed():
    assert rejection(vaults.check_server_url, "http://10.0.0.1/mcp", vaults.UrlPolicy(allow_loopback_http=True),
                     "tools[0].url") == (
        "Invalid 'tools[0].url': expected an absolute https URL (or http on a loopback host) without credentials or "
        "fragment.", "tools[0].url")


@pytest.mark.parametrize("url, policy, allowed", [
    ("https://idp.example.com/token", POLICY, True),
    ("https://10.0.0.1/token", POLICY, True),
    ("http://idp.example.com/token", POLICY, False),
    ("http://127.0.0.1:4444/token", POLICY, False),
    ("http://127.0.0.1:4444/token", vaults.UrlPolicy(allow_loopback_http=True), False),  # MCP servers only
    ("http://127.0.0.1:4444/token", vaults.UrlPolicy(trusted_origins=("loopback",)), True),
    ("http://localhost:4444/token", vaults.UrlPolicy(trusted_origins=("loopback",)), True),
    ("http://idp.internal:8080/token", vaults.UrlPolicy(trusted_origins=("http://idp.internal:8080",)), True),
    ("http://idp.internal/token", vaults.UrlPolicy(trusted_origins=("http://idp.internal:8080",)), False),
    ("https://user:pw@idp.example.com/token", POLICY, False),
    ("https://idp.example.com/token#frag", POLICY, False),
    ("https://idp.example.com:0x1/token", POLICY, False),
])
def test_token_endpoint_rules(url, policy, allowed):
    if allowed:
        vaults.check_token_endpoint(url, policy)
    else:
        assert rejection(vaults.check_token_endpoint, url, policy) == (TOKEN_ENDPOINT_ERROR,
                                                                       "auth.refresh.token_endpoint")


# ---- expires_at ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, seconds", [
    ("2030-01-01T00:00:00Z", Y2030),
    ("2030-01-01T01:00:00+01:00", Y2030),
    ("2029-12-31T19:00:00-05:00", Y2030),
    ("2030-01-01T00:00:00.999Z", Y2030),
    ("2030-01-01t00:00:00Z", Y2030),
    ("2030-01-01t00:00:00z", Y2030),  # RFC 3339 5.6: T and Z may be lowercase
])
def test_expiry_is_unix_seconds(value, seconds):
    assert vaults.expiry_seconds(value) == seconds


@pytest.mark.parametrize("value", ["2030-01-01T00:00:00", "2030-01-01", "2030-01-01 00:00:00Z", "soon", "",
                                   "2030-13-01T00:00:00Z", "2030-01-01T25:00:00Z",
                                   # ISO 8601 forms that are not RFC 3339
                                   "20300101T000000Z", "2030-01-01T00:00Z", "2030-W01-1T00:00:00Z",
                                   "2030-01-01T00:00:00+0100"])
def test_an_expiry_without_a_time_zone_or_not_a_timestamp_is_rejected(value):
    assert rejection(vaults.expiry_seconds, value) == (EXPIRY_ERROR, "auth.expires_at")


# ---- vaults ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("body, stored", [
    ({}, {"name": None, "metadata": {}}),
    ({"name": "  Team vault \n", "metadata": {"env": "prod"}}, {"name": "Team vault", "metadata": {"env": "prod"}}),
    ({"name": "é" * 128, "metadata": None}, {"name": "é" * 128, "metadata": {}}),  # 256 UTF-8 bytes
])
def test_vault_create(body, stored):
    assert vaults.parse_vault_create(body) == stored


@pytest.mark.parametrize("body, message, param", [
    ([], "Invalid type for 'body': expected an object, but got an array instead.", None),
    ({"name": None}, "Invalid type for 'name': expected a string, but got null instead.", "name"),
    ({"name": " \t "}, "Invalid 'name': expected 1 to 256 UTF-8 bytes after trimming, but got 0.", "name"),
    ({"name": "é" * 128 + "x"}, "Invalid 'name': expected 1 to 256 UTF-8 bytes after trimming, but got 257.", "name"),
    ({"description": "x"}, "Unknown parameter: 'description'.", "description"),
    ({"metadata": {"": "v"}}, "Invalid property name in 'metadata': '' is too short. Expected a string with minimum "
     "length 1, but got a string with length 0 instead.", "metadata."),
    ({"metadata": {f"k{i}": "v" for i in range(17)}}, "Invalid 'metadata': too many properties. Expected an object "
     "with at most 16 properties, but got an object with 17 properties instead.", "metadata"),
])
def test_vault_create_rejections(body, message, param):
    assert rejection(vaults.parse_vault_create, body) == (message, param)


@pytest.mark.parametrize("body, changes", [
    ({}, {}),
    ({"name": None}, {"name": None}),  # clears the name
    ({"name": " renamed "}, {"name": "renamed"}),
    ({"metadata": {}}, {"metadata": {}}),
    ({"name": "n", "metadata": {"a": "b"}}, {"name": "n", "metadata": {"a": "b"}}),
])
def test_vault_update_replaces_only_what_was_given(body, changes):
    assert vaults.parse_vault_update(body) == changes


@pytest.mark.parametrize("body, message, param", [
    ({"metadata": None}, "Invalid type for 'metadata': expected an object, but got null instead.", "metadata"),
    ({"name": ""}, "Invalid 'name': expected 1 to 256 UTF-8 bytes after trimming, but got 0.", "name"),
    ({"metadata": {"k": "v" * 513}}, "Invalid 'metadata.k': string too long. Expected a string with maximum length "
     "512, but got a string with length 513 instead.", "metadata.k"),
])
def test_vault_update_rejections(body, message, param):
    assert rejection(vaults.parse_vault_update, body) == (message, param)


def test_vault_resource_is_the_public_record():
    record = {"id": "vault_1", "created_at": 10, "name": "n", "metadata": {"a": "b"}, "tenant": "t", "version": 3}
    assert vaults.vault_resource(record) == {"id": "vault_1", "object": "vault", "name": "n", "metadata": {"a": "b"},
                                             "created_at": 10}
    assert vaults.vault_resource({"id": "vault_2", "created_at": 11, "metadata": None}) == {
        "id": "vault_2", "object": "vault", "name": None, "metadata": {}, "created_at": 11}


@pytest.mark.parametrize("values, wanted", [
    ([], {"active", "archived"}),
    (["active"], {"active"}),
    (["archived"], {"archived"}),
    (["active", "archived", "active"], {"active", "archived"}),
])
def test_status_filter(values, wanted):
    assert vaults.status_filter(values) == frozenset(wanted)


@pytest.mark.parametrize("values, bad", [(["deleted"], "deleted"), (["active", "Active"], "Active"), ([""], "")])
def test_status_filter_rejects_other_statuses(values, bad):
    assert rejection(vaults.status_filter, values) == (
        f"Invalid value: '{bad}'. Supported values are: 'active' and 'archived'.", "status")


# ---- credential create ------------------------------------------------------------------------------------------

def static(**auth):
    return {"name": "bearer", "auth": {"type": "static_bearer", "mcp_server_url": URL, "token": "tok", **auth}}


def oauth(refresh=None, **auth):
    body = {"name": "oauth", "auth": {"type": "mcp_oauth", "mcp_server_url": URL, "access_token": "at", **auth}}
    if refresh is not None:
        body["auth"]["refresh"] = {"client_id": "client", "refresh_token": "rt", "token_endpoint": TOKEN_ENDPOINT,
                                   "token_endpoint_auth": {"type": "none"}, **refresh}
    return body


def test_a_static_bearer_credential_keeps_its_token_apart():
    parsed = vaults.parse_credential_create({**static(), "name": " bearer ", "metadata": {"k": "v"}}, POLICY)
    assert parsed == vaults.ParsedCredential(
        name="bearer", metadata={"k": "v"}, auth={"type": "static_bearer", "mcp_server_url": URL}, expires_at=None,
        secrets={"token": "tok"})


def test_an_oauth_credential_without_refresh():
    parsed = vaults.parse_credential_create(oauth(), POLICY)
    assert parsed == vaults.ParsedCredential(
        name="oauth", metadata={}, auth={"type": "mcp_oauth", "mcp_server_url": URL, "expires_at": None,
                                         "refresh": None}, expires_at=None, secrets={"access_token": "at"})


@pytest.mark.parametrize("endpoint_auth, secrets", [
    ({"type": "none"}, {"access_token": "at", "refresh_token": "rt"}),
    ({"type": "client_secret_post", "client_secret": "cs"}, {"access_token": "at", "refresh_token": "rt",
                                                             "client_secret": "cs"}),
    ({"type": "client_secret_basic", "client_secret": "cs"}, {"access_token": "at", "refresh_token": "rt",
                                                              "client_secret": "cs"}),
])
def test_an_oauth_credential_with_refresh(endpoint_auth, secrets):
    parsed = vaults.parse_credential_create(
        oauth({"token_endpoint_auth": endpoint_auth, "scope": "read", "resource": "https://mcp.example.com"},
              expires_at="2030-01-01T00:00:00Z"), POLICY)
    assert parsed.auth == {"type": "mcp_oauth", "mcp_server_url": URL, "expires_at": "2030-01-01T00:00:00Z",
                           "refresh": {"client_id": "client", "token_endpoint": TOKEN_ENDPOINT,
                                       "token_endpoint_auth": {"type": endpoint_auth["type"]},
                                       "resource": "https://mcp.example.com", "scope": "read"}}
    assert parsed.expires_at == Y2030 and parsed.secrets == secrets


LONG = "x" * 16_385
CREATE_REJECTED = [
    ("environment_variable is not built", {"name": "n", "auth": {"type": "environment_variable", "name": "X"}},
     vaults.ENVIRONMENT_VARIABLE, "auth.type"),
    ("auth is required", {"name": "n"}, "Missing required parameter: 'auth'.", "auth"),
    ("name is required", {"auth": static()["auth"]}, "Missing required parameter: 'name'.", "name"),
    ("a blank name", {**static(), "name": "   "},
     "Invalid 'name': expected 1 to 256 UTF-8 bytes after trimming, but got 0.", "name"),
    ("http MCP server", static(mcp_server_url="http://mcp.example.com/mcp"), SERVER_URL_ERROR, "auth.mcp_server_url"),
    ("an empty token", static(token=""), too_short("auth.token"), "auth.token"),
    ("a token too long", static(token=LONG), too_long("auth.token", 16_385), "auth.token"),
    ("an empty access token", oauth(access_token=""), too_short("auth.access_token"), "auth.access_token"),
    ("an access token too long", oauth(access_token=LONG), too_long("auth.access_token", 16_385),
     "auth.access_token"),
    ("an expiry without a zone", oauth(expires_at="2030-01-01T00:00:00"), EXPIRY_ERROR, "auth.expires_at"),
    ("an empty client id", oauth({"client_id": ""}), too_short("auth.refresh.client_id"), "auth.refresh.client_id"),
    ("an empty refresh token", oauth({"refresh_token": ""}), too_short("auth.refresh.refresh_token"),
     "auth.refresh.refresh_token"),
    ("an http token endpoint", oauth({"token_endpoint": "http://idp.example.com/token"}), TOKEN_ENDPOINT_ERROR,
     "auth.refresh.token_endpoint"),
    ("an empty client secret", oauth({"token_endpoint_auth": {"type": "client_secret_basic", "client_secret": ""}}),
     too_short("auth.refresh.token_endpoint_auth.client_secret"), "auth.refresh.token_endpoint_auth.client_secret"),
    ("a client secret too long",
     oauth({"token_endpoint_auth": {"type": "client_secret_post", "client_secret": LONG}}),
     too_long("auth.refresh.token_endpoint_auth.client_secret", 16_385),
     "auth.refresh.token_endpoint_auth.client_secret"),
    ("a static bearer has no access token", static(access_token="at"), "Unknown parameter: 'auth.access_token'.",
     "auth.access_token"),
]


@pytest.mark.parametrize("what, body, message, param", CREATE_REJECTED, ids=[r[0] for r in CREATE_REJECTED])
def test_credential_create_rejections(what, body, message, param):
    assert rejection(vaults.parse_credential_create, body, POLICY) == (message, param)


def test_a_secret_is_never_echoed_in_a_rejection():
    message, _ = rejection(vaults.parse_credential_create, static(token="s3cr3t" * 3000), POLICY)
    assert "s3cr3t" not in message


def test_environment_variable_is_not_built_with_its_reason():
    assert vaults.ENVIRONMENT_VARIABLE == (
        "Credential type 'environment_variable' is not supported by this deployment yet: it needs the hosted egress "
        "proxy. Use 'static_bearer' or 'mcp_oauth'.")


# ---- credential update (rotation) ---------------------------------------------------------------------------------

STATIC = {"type": "static_bearer", "mcp_server_url": URL}
OAUTH = {"type": "mcp_oauth", "mcp_server_url": URL, "expires_at": "2030-01-01T00:00:00Z",
         "refresh": {"client_id": "client", "token_endpoint": TOKEN_ENDPOINT,
                     "token_endpoint_auth": {"type": "client_secret_basic"}, "resource": None, "scope": "read"}}
OAUTH_NO_REFRESH = {"type": "mcp_oauth", "mcp_server_url": URL, "expires_at": None, "refresh": None}


def with_refresh(**changes):
    return {**OAUTH["refresh"], **changes}


# (what, the stored auth, body, the new public auth (None: unchanged), the new expiry, the secrets to store)
ROTATIONS = [
    ("nothing", OAUTH, {}, None, None, {}),
    ("metadata only", STATIC, {"metadata": {"a": "b"}}, None, None, {}),
    ("a new static token", STATIC, {"auth": {"type": "static_bearer", "token": "tok2"}}, STATIC, None,
     {"token": "tok2"}),
    ("an oauth rotation that sends nothing keeps the expiry", OAUTH, {"auth": {"type": "mcp_oauth"}}, OAUTH, Y2030,
     {}),
    ("a new access token without an expiry clears the old one", OAUTH,
     {"auth": {"type": "mcp_oauth", "access_token": "at2"}}, {**OAUTH, "expires_at": None}, None,
     {"access_token": "at2"}),
    ("a null access token keeps the stored one", OAUTH, {"auth": {"type": "mcp_oauth", "access_token": None}}, OAUTH,
     Y2030, {}),
    ("a new access token with its expiry", OAUTH,
     {"auth": {"type": "mcp_oauth", "access_token": "at2", "expires_at": "2030-01-01T01:00:00+01:00"}},
     {**OAUTH, "expires_at": "2030-01-01T01:00:00+01:00"}, Y2030, {"access_token": "at2"}),
    ("a null expiry clears it", OAUTH, {"auth": {"type": "mcp_oauth", "expires_at": None}},
     {**OAUTH, "expires_at": None}, None, {}),
    ("a new refresh token", OAUTH, {"auth": {"type": "mcp_oauth", "refresh": {"refresh_token": "rt2"}}}, OAUTH, Y2030,
     {"refresh_token": "rt2"}),
    ("a null scope clears it", OAUTH, {"auth": {"type": "mcp_oauth", "refresh": {"scope": None}}},
     {**OAUTH, "refresh": with_refresh(scope=None)}, Y2030, {}),
    ("a new scope", OAUTH, {"auth": {"type": "mcp_oauth", "refresh": {"scope": "read write"}}},
     {**OAUTH, "refresh": with_refresh(scope="read write")}, Y2030, {}),
    ("a new client secret", OAUTH, {"auth": {"type": "mcp_oauth", "refresh": {
        "token_endpoint_auth": {"type": "client_secret_basic", "client_secret": "cs2"}}}}, OAUTH, Y2030,
     {"client_secret": "cs2"}),
    ("the endpoint auth type without a secret keeps it", OAUTH, {"auth": {"type": "mcp_oauth", "refresh": {
        "token_endpoint_auth": {"type": "client_secret_basic"}}}}, OAUTH, Y2030, {}),
    ("everything at once", OAUTH, {"metadata": {}, "auth": {
        "type": "mcp_oauth", "access_token": "at2", "expires_at": None, "refresh": {
            "refresh_token": "rt2", "scope": "s", "token_endpoint_auth": {"type": "client_secret_basic",
                                                                          "client_secret": "cs2"}}}},
     {**OAUTH, "expires_at": None, "refresh": with_refresh(scope="s")}, None,
     {"access_token": "at2", "refresh_token": "rt2", "client_secret": "cs2"}),
]


@pytest.mark.parametrize("what, current, body, auth, expires_at, secrets", ROTATIONS, ids=[r[0] for r in ROTATIONS])
def test_credential_rotation(what, current, body, auth, expires_at, secrets):
    stored = copy.deepcopy(current)
    parsed = vaults.parse_credential_update(body, current)
    assert parsed.auth == auth
    assert parsed.expires_at == expires_at and parsed.secrets == secrets
    assert parsed.name is None and parsed.metadata == body.get("metadata")
    assert current == stored  # the stored record is not changed in place


UPDATE_REJECTED = [
    ("environment_variable is not built", STATIC, {"auth": {"type": "environment_variable"}},
     vaults.ENVIRONMENT_VARIABLE, "auth.type"),
    ("null metadata", STATIC, {"metadata": None}, "Invalid type for 'metadata': expected an object, but got null "
     "instead.", "metadata"),
    ("null auth", STATIC, {"auth": None}, "Invalid type for 'auth': expected an object, but got null instead.",
     "auth"),
    ("a rotation keeps the auth type", STATIC, {"auth": {"type": "mcp_oauth", "access_token": "at"}},
     "Invalid 'auth.type': the credential's auth type is 'static_bearer'; a rotation keeps it.", "auth.type"),
    ("a rotation keeps the auth type (oauth)", OAUTH, {"auth": {"type": "static_bearer", "token": "t"}},
     "Invalid 'auth.type': the credential's auth type is 'mcp_oauth'; a rotation keeps it.", "auth.type"),
    ("an empty static token", STATIC, {"auth": {"type": "static_bearer", "token": ""}}, too_short("auth.token"),
     "auth.token"),
    ("an empty access token", OAUTH, {"auth": {"type": "mcp_oauth", "access_token": ""}},
     too_short("auth.access_token"), "auth.access_token"),
    ("an expiry without a zone", OAUTH, {"auth": {"type": "mcp_oauth", "expires_at": "2031-01-01"}}, EXPIRY_ERROR,
     "auth.expires_at"),
    ("no refresh configuration to rotate", OAUTH_NO_REFRESH,
     {"auth": {"type": "mcp_oauth", "refresh": {"refresh_token": "rt2"}}},
     "Invalid 'auth.refresh': the credential has no refresh configuration to rotate.", "auth.refresh"),
    ("an empty refresh token", OAUTH, {"auth": {"type": "mcp_oauth", "refresh": {"refresh_token": ""}}},
     too_short("auth.refresh.refresh_token"), "auth.refresh.refresh_token"),
    ("a rotation keeps the endpoint auth type", OAUTH, {"auth": {"type": "mcp_oauth", "refresh": {
        "token_endpoint_auth": {"type": "client_secret_post", "client_secret": "cs2"}}}},
     "Invalid 'auth.refresh.token_endpoint_auth.type': the credential's token endpoint auth is 'client_secret_basic'; "
     "a rotation keeps it.", "auth.refresh.token_endpoint_auth.type"),
    ("an empty client secret", OAUTH, {"auth": {"type": "mcp_oauth", "refresh": {
        "token_endpoint_auth": {"type": "client_secret_basic", "client_secret": ""}}}},
     too_short("auth.refresh.token_endpoint_auth.client_secret"), "auth.refresh.token_endpoint_auth.client_secret"),
    ("the endpoint is not rotated", OAUTH, {"auth": {"type": "mcp_oauth", "refresh": {
        "token_endpoint": "https://other.example/token"}}}, "Unknown parameter: 'auth.refresh.token_endpoint'.",
     "auth.refresh.token_endpoint"),
    ("the server URL is not rotated", STATIC, {"auth": {"type": "static_bearer", "token": "t", "mcp_server_url": URL}},
     "Unknown parameter: 'auth.mcp_server_url'.", "auth.mcp_server_url"),
]


@pytest.mark.parametrize("what, current, body, message, param", UPDATE_REJECTED, ids=[r[0] for r in UPDATE_REJECTED])
def test_credential_update_rejections(what, current, body, message, param):
    assert rejection(vaults.parse_credential_update, body, current) == (message, param)


# ---- the public credential --------------------------------------------------------------------------------------

def record(auth, **extra):
    return {"id": "cred_1", "vault_id": "vault_1", "name": "n", "metadata": None, "created_at": 1, "updated_at": 2,
            "auth": auth, **extra}


def public(auth):
    return {"id": "cred_1", "object": "vault.credential", "vault_id": "vault_1", "name": "n", "metadata": {},
            "created_at": 1, "updated_at": 2, "auth": auth}


@pytest.mark.parametrize("auth, shown", [
    ({**STATIC, "token": "s3cr3t"}, STATIC),
    ({**OAUTH_NO_REFRESH, "access_token": "s3cr3t"}, OAUTH_NO_REFRESH),
    ({"type": "mcp_oauth", "mcp_server_url": URL}, OAUTH_NO_REFRESH),
    ({**OAUTH, "refresh": {**OAUTH["refresh"], "refresh_token": "s3cr3t",
                           "token_endpoint_auth": {"type": "client_secret_basic", "client_secret": "s3cr3t"}}},
     OAUTH),
    ({**OAUTH, "refresh": {"client_id": "c", "token_endpoint": TOKEN_ENDPOINT,
                           "token_endpoint_auth": {"type": "none"}}},
     {**OAUTH, "refresh": {"client_id": "c", "token_endpoint": TOKEN_ENDPOINT, "token_endpoint_auth": {"type": "none"},
                           "resource": None, "scope": None}}),
], ids=["static", "oauth", "oauth with absent members", "oauth with refresh", "refresh with absent members"])
def test_credential_resource_shows_configuration_never_a_secret(auth, shown):
    resource = vaults.credential_resource(record(auth, sealed={"token": "s3cr3t"}))
    assert resource == public(shown)
    assert "s3cr3t" not in repr(resource)
