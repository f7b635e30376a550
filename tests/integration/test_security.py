"""The injection corpus: nothing leaves the origin, nobody is @-all'd, no secret anywhere."""

import io
import json

from agent.run.pipeline import HONEST_FAILURE
from lab.eval.security import CORPUS, run_corpus, security


async def test_rules_and_hostile_model_hold_the_line(tmp_path):
    for provider in ("rules", "openai"):
        folder = tmp_path / provider
        folder.mkdir()
        report = await run_corpus(provider, folder)
        assert report.passed, report
        assert report.messages == len(CORPUS)
        logged = (folder / f"{provider}.log").read_text()
        assert '"msg": "decision"' in logged  # the grep looked at real logs
        if provider == "openai":
            # The model played along with every attack; the schema refused every one, and
            # each person got only the honest short reply, at their own origin.
            assert report.platform_messages == len(CORPUS) and not report.off_origin
            assert report.refusals["schema_invalid"] >= len(CORPUS)
            requests = json.loads((folder / "openai-report.json").read_text())
            assert HONEST_FAILURE in json.dumps(requests, ensure_ascii=False)
            assert (folder / "openai-model-requests.json").stat().st_size > 1000
        else:
            assert report.platform_messages == len(CORPUS)


async def test_the_secret_grep_would_notice_a_leak(tmp_path, monkeypatch):
    import lab.eval.security as sec

    real = sec.lab_settings

    def leaky(case, workdir, fake, model_url=None):
        (workdir / "leak.txt").write_text(f"oops {fake.app_secret}")
        return real(case, workdir, fake, model_url)

    monkeypatch.setattr(sec, "lab_settings", leaky)
    report = await run_corpus("rules", tmp_path)
    assert report.secret_found_in == ["leak.txt"] and not report.passed


def test_command_exit_status():
    out = io.StringIO()
    assert security(out) == 0
    assert out.getvalue().count("PASS") == 2
