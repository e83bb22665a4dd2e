"""Settings: every documented variable exists, defaults hold, bad values name the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.errors import ConfigError
from config.settings import Settings, variables

# The core settings (docs/internals.md, Configuration): the contract this object must cover.
DESIGN_VARIABLES = [
    "BUSBAR_REDIS_URL",
    "BUSBAR_KEY_PREFIX",
    "BUSBAR_ROOT_KEY",
    "PORT",
    "BUSBAR_WEB_WORKERS",
    "BUSBAR_DELIVERY_CONCURRENCY",
    "BUSBAR_ACQUIRE_TIMEOUT",
    "BUSBAR_ALLOW_HTTP",
    "BUSBAR_MAX_EVENT_DATA",
    "BUSBAR_CONNECT_TIMEOUT",
    "BUSBAR_TIMEOUT",
    "BUSBAR_SSL_VERIFY",
    "BUSBAR_MAX_BACKOFF_MS",
    "BUSBAR_HP_HEAL_RATE",
    "BUSBAR_HP_DAMAGE_RATE",
    "BUSBAR_SCRUB_AFTER_MS",
    "BUSBAR_MONITOR_INTERVAL",
    "BUSBAR_REDIS_MAX_MEM",
    "BUSBAR_REDIS_MIN_FREE",
    "BUSBAR_DEFAULT_TTL",
    "BUSBAR_CLEANUP_ENTIRE_QUEUE",
    "BUSBAR_DELIVERY_LOG",
    "BUSBAR_DELIVERY_LOG_MAXLEN",
    "BUSBAR_DELIVERY_LOG_PARTITIONS",
    "BUSBAR_MAX_BODY_BYTES",
    "BUSBAR_LOG_LEVEL",
    "BUSBAR_LOG_FORMAT",
]


def test_every_design_variable_is_a_setting():
    names = {name for name, _, _ in variables()}
    assert set(DESIGN_VARIABLES) <= names


def test_every_setting_is_documented_on_the_configuration_page(project_root: Path):
    page = (project_root / "docs" / "configuration.md").read_text()
    missing = [name for name, _, _ in variables() if f"`{name}`" not in page]
    assert missing == []


def test_defaults_from_the_design():
    s = Settings.from_env({})
    assert (s.key_prefix, s.port, s.delivery_concurrency) == ("busbar:", 17890, 5000)
    assert (s.connect_timeout, s.timeout, s.max_backoff_ms) == (2, 20, 60000)
    assert (s.hp_heal_rate, s.hp_damage_rate, s.scrub_after_ms) == (1, -2, 30000)
    assert (s.max_event_data, s.default_ttl, s.max_body_bytes) == (256 * 1024, 0, 1024 * 1024)
    assert s.delivery_log is True and s.shards == 4 and s.delivery_log_partitions is None
    assert s.allow_http is False and s.ssl_verify is True and s.cleanup_entire_queue is False
    assert s.allow_link_local_callbacks is False
    assert s.root_key is None and s.redis_url is None


@pytest.mark.parametrize("raw", ["1", "true", "TRUE", "yes", "on", " On "])
def test_true_spellings(raw):
    assert Settings.from_env({"BUSBAR_ALLOW_HTTP": raw}).allow_http is True


@pytest.mark.parametrize("raw", ["0", "false", "no", "off", "OFF"])
def test_false_spellings(raw):
    assert Settings.from_env({"BUSBAR_SSL_VERIFY": raw}).ssl_verify is False


def test_empty_value_means_default():
    assert Settings.from_env({"BUSBAR_DELIVERY_CONCURRENCY": ""}).delivery_concurrency == 5000


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"BUSBAR_ALLOW_HTTP": "maybe"}, "BUSBAR_ALLOW_HTTP: expected one of"),
        (
            {"BUSBAR_DELIVERY_CONCURRENCY": "five"},
            "BUSBAR_DELIVERY_CONCURRENCY: expected an integer",
        ),
        ({"BUSBAR_DELIVERY_CONCURRENCY": "0"}, "BUSBAR_DELIVERY_CONCURRENCY: must be at least 1"),
        ({"PORT": "70000"}, "PORT: must be at most 65535"),
        ({"BUSBAR_REDIS_URL": "http://localhost"}, "BUSBAR_REDIS_URL: expected a redis://"),
        ({"BUSBAR_ROOT_KEY": "short"}, "BUSBAR_ROOT_KEY: must be at least 8"),
        ({"BUSBAR_ROOT_KEY": "has:colon-inside"}, "BUSBAR_ROOT_KEY: must be printable"),
        ({"BUSBAR_LOG_FORMAT": "xml"}, "BUSBAR_LOG_FORMAT: expected one of text, json"),
        ({"BUSBAR_HP_DAMAGE_RATE": "3"}, "BUSBAR_HP_DAMAGE_RATE: must be at most 0"),
        ({"BUSBAR_KEY_PREFIX": "bad prefix"}, "BUSBAR_KEY_PREFIX"),
        ({"BUSBAR_CALLBACK_DENY": "10.0.0.0/8, metadata"}, "BUSBAR_CALLBACK_DENY: expected"),
        ({"BUSBAR_CA_BUNDLE": "/no/such/ca.pem"}, "BUSBAR_CA_BUNDLE: no such file"),
        (
            {"BUSBAR_CA_BUNDLE": __file__, "BUSBAR_SSL_VERIFY": "0"},
            "BUSBAR_CA_BUNDLE is set but BUSBAR_SSL_VERIFY is off",
        ),
        (
            {
                "BUSBAR_REDIS_MAX_MEM": str(2 * 1024 * 1024),
                "BUSBAR_REDIS_MIN_FREE": str(4 * 1024 * 1024),
            },
            "BUSBAR_REDIS_MIN_FREE must be smaller than BUSBAR_REDIS_MAX_MEM",
        ),
    ],
)
def test_bad_values_name_the_variable(env, fragment):
    with pytest.raises(ConfigError) as raised:
        Settings.from_env(env)
    assert fragment in raised.value.message


def test_all_problems_are_reported_at_once():
    with pytest.raises(ConfigError) as raised:
        Settings.from_env({"PORT": "x", "BUSBAR_TIMEOUT": "-1"})
    assert "PORT" in raised.value.message and "BUSBAR_TIMEOUT" in raised.value.message


def test_settings_are_frozen():
    s = Settings.from_env({})
    with pytest.raises(AttributeError):
        s.port = 1  # type: ignore[misc]


def test_callback_verify_is_the_ca_bundle_when_set(tmp_path: Path):
    bundle = tmp_path / "ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    assert Settings.from_env({}).callback_verify is True
    assert Settings.from_env({"BUSBAR_SSL_VERIFY": "no"}).callback_verify is False
    assert Settings.from_env({"BUSBAR_CA_BUNDLE": str(bundle)}).callback_verify == str(bundle)


def test_a_redis_password_never_shows_in_a_config_error():
    with pytest.raises(ConfigError) as raised:
        Settings.from_env({"BUSBAR_REDIS_URL": "redis://:hunter2@", "PORT": "x"})
    assert "hunter2" not in raised.value.message and "****" in raised.value.message


def test_the_older_partitions_variable_names_the_shards():
    assert Settings.from_env({"BUSBAR_DELIVERY_LOG_PARTITIONS": "8"}).shards == 8
    with pytest.raises(ConfigError) as raised:
        Settings.from_env({"BUSBAR_DELIVERY_LOG_PARTITIONS": "8", "BUSBAR_SHARDS": "4"})
    assert "BUSBAR_SHARDS" in raised.value.message
