"""``[[robots]]``: one Settings per robot, its own credentials and records, the rest from the
top level; a table that cannot be a robot stops start-up naming it."""

from pathlib import Path

import pytest

from agent.config import ConfigError, Settings, load_settings, validate_settings
from agent.config.robots import env_name, file_name_for

TOML = """
provider = "rules"
max_event_age_s = 120
store_path = "{folder}/dta.db"
client_id = "top-app"
client_secret = "top-secret"

[[robots]]
robot_code = "finance"
client_id = "fin-app"
client_secret = "fin-secret"
agent = {{ name = "小财", role = "财务助理" }}

[[robots]]
client_id = "hr-app"
allow_users = ["u1"]
"""


def write(tmp_path: Path) -> Path:
    path = tmp_path / "dta.toml"
    path.write_text(TOML.format(folder=tmp_path), encoding="utf-8")
    return path


def test_each_robot_is_its_table_over_the_top_level(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path), env={})
    finance, hr = settings.robot_settings()
    assert (finance.robot_code, finance.client_id, finance.agent.name) == (
        "finance",
        "fin-app",
        "小财",
    )
    # its code defaults to its own client_id; nothing of the top level's app is inherited
    assert (hr.robot_code, hr.client_id, hr.client_secret) == ("hr-app", "hr-app", None)
    assert hr.allow_users == ["u1"] and finance.allow_users == []
    assert finance.max_event_age_s == hr.max_event_age_s == 120  # inherited
    # records of their own: a file each, named after the code, beside the top level's
    assert finance.store_path == tmp_path / "finance.db"
    assert hr.store_path == tmp_path / "hr-app.db"
    # every robot's secret is kept out of logs and chat, with the top level's
    assert set(settings.secret_values) == {"top-secret", "fin-secret"}


def test_robot_credentials_come_from_the_environment(tmp_path: Path) -> None:
    env = {env_name("finance", "client_secret"): "from-env", "DTA_ROBOT_HR_APP_CLIENT_SECRET": "x2"}
    finance, hr = load_settings(write(tmp_path), env=env).robot_settings()
    assert finance.client_secret is not None
    assert finance.client_secret.get_secret_value() == "from-env"
    assert hr.client_secret is not None and hr.client_secret.get_secret_value() == "x2"


def test_without_robots_the_top_level_is_the_one_robot() -> None:
    settings = Settings(robot_code="solo")
    assert settings.robot_settings() == [settings]
    assert settings.robot(None) is settings


def test_picking_a_robot_by_code(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path), env={})
    assert settings.robot("finance").client_id == "fin-app"
    with pytest.raises(ConfigError, match=r"several robots \(finance, hr-app\)"):
        settings.robot(None)
    with pytest.raises(ConfigError, match="no robot 'ops'"):
        settings.robot("ops")


@pytest.mark.parametrize(
    ("robots", "top", "said"),
    [
        ([{"client_secret": "x"}], {}, r"robots\[0\]: give robot_code"),
        ([{"robot_code": "a", "health_port": 1}], {}, r"robots\[0\] \(a\): set once"),
        ([{"robot_code": "a"}, {"robot_code": "a"}], {}, r"robots\[1\] \(a\): robot_code 'a'"),
        ([{"robot_code": "a", "max_event_age_s": -1}], {}, r"robots\[0\] \(a\): max_event_age_s"),
        (
            [{"robot_code": "a", "store_path": "x.db"}, {"robot_code": "b", "store_path": "x.db"}],
            {},
            r"robots\[1\] \(b\): its records would share robots\[0\] \(a\)'s store",
        ),
        (
            [{"robot_code": "a"}],
            {"store_url": "postgresql://db/x", "store_schema": "one"},
            "store_schema at the top level",
        ),
        (["finance"], {}, r"robots\.0: Input should be a valid dictionary"),
    ],
    ids=[
        "no-code",
        "process-key",
        "same-code",
        "bad-value",
        "same-store",
        "one-schema",
        "not-a-table",
    ],
)
def test_a_table_that_cannot_be_a_robot_is_refused_by_name(robots, top, said) -> None:
    with pytest.raises(ConfigError, match=said):
        validate_settings({**top, "robots": robots}, "dta.toml")


def test_on_postgresql_each_robot_has_its_own_schema() -> None:
    settings = validate_settings(
        {"store_url": "postgresql://db/x", "robots": [{"robot_code": "a"}, {"robot_code": "b"}]},
        "t",
    )
    a, b = settings.robot_settings()
    assert a.store_url == b.store_url == "postgresql://db/x"
    assert (a.store_schema, b.store_schema) == (None, None)  # dta_<robot code> by default


def test_card_mode_at_the_top_level_needs_no_credentials_there() -> None:
    robots = [{"robot_code": "a", "client_id": "a", "client_secret": "s"}]
    settings = validate_settings(
        {"reply_mode": "card", "card_template_id": "t", "robots": robots}, "t"
    )
    assert settings.robot_settings()[0].reply_mode == "card"
    with pytest.raises(ConfigError, match="reply_mode 'card' needs client_id"):
        validate_settings(
            {"reply_mode": "card", "card_template_id": "t", "robots": [{"robot_code": "b"}]}, "t"
        )


def test_a_code_makes_a_safe_file_name() -> None:
    assert file_name_for("ding/../x y") == "ding_.._x_y"
    assert env_name("finance-bot", "client_id") == "DTA_ROBOT_FINANCE_BOT_CLIENT_ID"


def test_the_robot_that_ran_before_keeps_its_store(tmp_path: Path) -> None:
    """Moving from one robot to [[robots]]: the robot the top level named keeps the file it
    used (a new one would answer DingTalk's redeliveries of old messages again)."""
    settings = validate_settings(
        {
            "store_path": str(tmp_path / "dta.db"),
            "robot_code": "finance",
            "robots": [{"robot_code": "finance"}, {"robot_code": "hr"}],
        },
        "t",
    )
    finance, hr = settings.robot_settings()
    assert finance.store_path == tmp_path / "dta.db"
    assert hr.store_path == tmp_path / "hr.db"
    # and each robot's media in a folder of its own (pruned by its own keep-days)
    assert finance.media_dir != hr.media_dir and hr.media_dir.name == "hr"


def test_each_robot_keeps_its_runs_in_a_folder_of_its_own(tmp_path: Path) -> None:
    """Each run's message text and media are written under the runs folders: one robot's
    never lie beside another's, unless its table names the folder itself."""
    settings = validate_settings(
        {
            "command_runs_root": str(tmp_path / "runs"),
            "run_dir": str(tmp_path / "debug"),
            "robots": [
                {"robot_code": "finance"},
                {"robot_code": "hr/x", "command_runs_root": str(tmp_path / "hr-runs")},
            ],
        },
        "t",
    )
    finance, hr = settings.robot_settings()
    assert finance.command_runs_root == tmp_path / "runs" / "finance"
    assert hr.command_runs_root == tmp_path / "hr-runs"  # its table's, as given
    assert finance.run_dir == tmp_path / "debug" / "finance"
    assert hr.run_dir == tmp_path / "debug" / "hr_x"  # the code made a safe folder name
    # run_dir unset stays unset; the default runs root is divided all the same
    robots = [{"robot_code": "finance"}, {"robot_code": "hr"}]
    finance, hr = validate_settings({"robots": robots}, "t").robot_settings()
    assert finance.run_dir is None and hr.run_dir is None
    assert finance.command_runs_root == Path(".dta/runs/finance")
    assert hr.command_runs_root == Path(".dta/runs/hr")


def test_one_robot_without_robots_tables_keeps_its_folders(tmp_path: Path) -> None:
    settings = validate_settings(
        {"command_runs_root": str(tmp_path / "runs"), "run_dir": str(tmp_path / "debug")}, "t"
    )
    (only,) = settings.robot_settings()
    assert only.command_runs_root == tmp_path / "runs" and only.run_dir == tmp_path / "debug"
    assert only.media_dir == Path(".dta/media")


def test_two_robots_on_one_postgresql_schema_are_refused() -> None:
    robots = [{"robot_code": "hr"}, {"robot_code": "HR"}]
    with pytest.raises(ConfigError, match=r"robots\[1\] \(HR\): its records would share"):
        validate_settings({"store_url": "postgresql://db/x", "robots": robots}, "t")
    named = [{"robot_code": "a", "store_schema": "dta_hr"}, {"robot_code": "hr"}]
    with pytest.raises(ConfigError, match="would share"):
        validate_settings({"store_url": "postgresql://db/x", "robots": named}, "t")
