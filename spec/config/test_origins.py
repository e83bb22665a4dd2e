"""Where each value `busbar config` shows came from: the shell's environment, `busbar
dev`'s choice for its web and worker, the environment dev was started from, or the
default; and the record dev keeps of them holds no secret."""

from __future__ import annotations

from config.origins import (
    DEFAULT,
    DEV,
    DEV_ENVIRONMENT,
    ENVIRONMENT,
    origins,
    record,
    recorded,
)
from config.settings import Settings, variables

ROOT_KEY = "root-key-never-shown-42"
PASSWORD = "s3cret-redis-pw"


def as_dev(read: dict[str, str], outer: dict[str, str]) -> dict[str, str]:
    settings = Settings.from_env(read)
    return origins(settings, read, outer, outer_label=DEV_ENVIRONMENT, inner_label=DEV)


def test_a_shell_sees_its_own_variables_and_the_defaults():
    environ = {"PORT": "8080", "BUSBAR_ALLOW_HTTP": "yes", "BUSBAR_TIMEOUT": " "}
    where = origins(
        Settings.from_env(environ), environ, environ, outer_label=ENVIRONMENT, inner_label=DEV
    )
    assert where["PORT"] == where["BUSBAR_ALLOW_HTTP"] == ENVIRONMENT
    assert where["BUSBAR_TIMEOUT"] == where["BUSBAR_PUBLIC_URL"] == DEFAULT  # blank is unset


def test_dev_passing_on_the_operators_value_is_the_operators_even_spelled_otherwise():
    outer = {"BUSBAR_ALLOW_HTTP": "yes", "PORT": "8080", "BUSBAR_LOG_LEVEL": "warning"}
    read = {**outer, "BUSBAR_ALLOW_HTTP": "1", "BUSBAR_PUBLIC_URL": "http://127.0.0.1:8080"}
    where = as_dev(read, outer)
    assert (
        where["BUSBAR_ALLOW_HTTP"]
        == where["PORT"]
        == where["BUSBAR_LOG_LEVEL"]
        == (DEV_ENVIRONMENT)
    )
    assert where["BUSBAR_PUBLIC_URL"] == DEV  # dev's own address, not the operator's
    assert where["BUSBAR_TIMEOUT"] == DEFAULT


def test_a_value_dev_changed_is_devs():
    where = as_dev({"BUSBAR_ALLOW_HTTP": "1", "PORT": "9090"}, {"PORT": "8080"})
    assert where["BUSBAR_ALLOW_HTTP"] == where["PORT"] == DEV


def test_a_value_standing_in_for_another_gives_it_its_origin():
    read = {"BUSBAR_DELIVERY_LOG_PARTITIONS": "8"}
    where = as_dev(read, read)
    assert Settings.from_env(read).shards == 8
    assert where["BUSBAR_SHARDS"] == where["BUSBAR_DELIVERY_LOG_PARTITIONS"] == DEV_ENVIRONMENT


def test_a_value_supplied_outside_the_environment_is_the_inner_labels():
    """A running dev supplies the Redis URL to a command whose shell has none."""
    settings = Settings(redis_url="redis://127.0.0.1:4242/0")
    where = origins(settings, {}, {}, outer_label=ENVIRONMENT, inner_label=DEV)
    assert where["BUSBAR_REDIS_URL"] == DEV


def test_the_record_shows_values_as_config_does_with_secrets_masked():
    outer = {"BUSBAR_SECRET_KEY": "a-secret-key-of-sixteen+"}
    read = {
        **outer,
        "BUSBAR_ROOT_KEY": ROOT_KEY,
        "BUSBAR_REDIS_URL": f"redis://app:{PASSWORD}@127.0.0.1:4242/0",
        "BUSBAR_ALLOW_HTTP": "1",
    }
    kept = record(read, outer, {"BUSBAR_ROOT_KEY": "busbar dev, var/root-key"})
    assert kept is not None
    assert kept["BUSBAR_ROOT_KEY"] == {"value": "****", "from": "busbar dev, var/root-key"}
    assert kept["BUSBAR_SECRET_KEY"] == {"value": "****", "from": DEV_ENVIRONMENT}
    assert kept["BUSBAR_REDIS_URL"] == {
        "value": "redis://app:****@127.0.0.1:4242/0",
        "from": DEV,
    }
    assert kept["BUSBAR_ALLOW_HTTP"] == {"value": "true", "from": DEV}
    assert kept["BUSBAR_TIMEOUT"] == {"value": "20", "from": DEFAULT}
    assert set(kept) == {name for name, _, _ in variables()}
    assert ROOT_KEY not in str(kept) and PASSWORD not in str(kept)
    assert "a-secret-key-of-sixteen+" not in str(kept)


def test_a_more_precise_origin_names_only_devs_own_choices():
    read = {"BUSBAR_ROOT_KEY": ROOT_KEY}
    kept = record(read, read, {"BUSBAR_ROOT_KEY": "busbar dev, var/root-key"})
    assert kept is not None and kept["BUSBAR_ROOT_KEY"]["from"] == DEV_ENVIRONMENT


def test_no_record_of_settings_web_would_refuse():
    assert record({"PORT": "eighty"}, {}) is None


def test_only_a_well_formed_record_is_believed():
    good = {"PORT": {"value": "1", "from": DEV}}
    assert recorded({"settings": good}) == good
    assert recorded({}) is None  # a dev of an earlier version
    assert recorded({"settings": {"PORT": {"value": 1, "from": DEV}}}) is None
    assert recorded({"settings": ["PORT"]}) is None
