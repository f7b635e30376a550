"""``dta init``: a working bot to change, in one command.

It writes a commented ``dta.toml`` (the ``rules`` provider, a knowledge folder, a skills
folder, the agent's name), a knowledge file to answer from, an operator skill and an
example ``command``-provider agent — each explaining itself — so ``dta dev`` right after
answers from the knowledge with the agent's name, and every next step is an edit of a file
that is already there. It never overwrites a file unless told to (``--force``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from jinja2 import Environment, PackageLoader

DEFAULT_NAME = "小智"
GITIGNORE = "# dta's local state: stores, dev instances, run folders\n.dta/\n"


def files(target: Path, name: str = DEFAULT_NAME) -> dict[Path, str]:
    """What ``dta init`` writes, by path (relative to ``target``)."""
    env = Environment(loader=PackageLoader("agent", "templates"), keep_trailing_newline=True)
    agent_path = (target / "agents" / "example_agent.py").resolve()
    context = {"name": name, "agent_path": str(agent_path)}

    def render(template: str) -> str:
        return env.get_template(template).render(**context)

    return {
        Path("dta.toml"): render("init_dta.toml.j2"),
        Path("knowledge/faq.md"): render("init_faq.md.j2"),
        Path("skills/team-etiquette/SKILL.md"): render("init_skill.md.j2"),
        Path("agents/example_agent.py"): render("init_agent.py.j2"),
    }


NEXT_STEPS = """
next:
  dta dev                       talk to it locally (type: 报销需要哪些材料？)
  edit knowledge/faq.md         add an answer; ask again in dta dev
  edit dta.toml [agent]         rename it; restart dta dev
  dta dev --model fake          the openai provider against a fake model, offline
  dta doctor                    before `dta run` against a real robot"""


def scaffold(target: Path, out: TextIO, force: bool = False) -> int:
    """Write the files; 0 done, 1 when a file exists (nothing is written then)."""
    planned = files(target)
    existing = [path for path in planned if (target / path).exists()]
    if existing and not force:
        names = ", ".join(str(p) for p in existing)
        print(
            f"dta: {names} already exist(s) in {target}; nothing written (--force overwrites)",
            file=out,
        )
        return 1
    for path, text in planned.items():
        destination = target / path
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_text(text, encoding="utf-8")
        print(f"wrote {destination}", file=out)
    gitignore = target / ".gitignore"
    if not gitignore.exists() or ".dta/" not in gitignore.read_text(encoding="utf-8"):
        with gitignore.open("a", encoding="utf-8") as handle:
            handle.write(GITIGNORE)
        print(f"wrote {gitignore} (.dta/ holds local state)", file=out)
    print(NEXT_STEPS, file=out)
    return 0
