"""Knowledge search: sections, best match, threshold, caching and source quoting."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.contracts import ActionRequest, AgentDefinition
from skills.providers.rules import RulesProvider
from skills.retrieval import folder as knowledge
from skills.retrieval.folder import KnowledgeBase
from skills.retrieval.sections import parse_sections
from skills.retrieval.strict import best_match
from skills.retrieval.terms import terms

FAQ = """\
# 常见问题

团队内部常见问题汇总，有问题先查这里。

## 报销流程

1. 在钉钉审批里提交"费用报销"单。
2. 附上发票照片，发票抬头写公司全称。
3. 直属主管审批后，财务每周三统一打款。

## Wi-Fi 密码

访客网络是 Guest-5G，密码贴在前台。

## VPN setup

Install the VPN client from the IT portal and sign in with your work account.
"""

LEAVE = """\
# 请假制度

## 年假

员工入职满一年后每年有 5 天年假，最多可以结转到次年 3 月底。

## 病假

病假需要提供医院证明，每年带薪病假 10 天。

```text
# 这一行在代码块里，不是标题
```
"""


@pytest.fixture
def kb_dir(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    (root / "hr").mkdir(parents=True)
    (root / "faq.md").write_text(FAQ, encoding="utf-8")
    (root / "hr" / "leave.md").write_text(LEAVE, encoding="utf-8")
    (root / "notes.txt").write_text("报销流程以这里为准", encoding="utf-8")  # not Markdown
    (root / ".drafts").mkdir()
    (root / ".drafts" / "wip.md").write_text("# 报销流程\n草稿", encoding="utf-8")
    return root


def test_sections_follow_heading_levels() -> None:
    sections = parse_sections("faq.md", FAQ)
    assert [(s.heading, s.level) for s in sections] == [
        ("常见问题", 1),
        ("报销流程", 2),
        ("Wi-Fi 密码", 2),
        ("VPN setup", 2),
    ]
    top, reimburse = sections[0], sections[1]
    assert "## 报销流程" in top.content and "Guest-5G" in top.content  # includes children
    assert reimburse.content.startswith("1. 在钉钉审批")
    assert "Guest-5G" not in reimburse.content  # stops at the next same-level heading


def test_headings_in_code_fences_and_preamble() -> None:
    sections = parse_sections("hr/leave.md", LEAVE)
    assert [s.heading for s in sections] == ["请假制度", "年假", "病假"]
    assert "不是标题" in sections[-1].content
    plain = parse_sections("plain.md", "没有标题的笔记：打印机在三楼。")
    assert [(s.heading, s.level) for s in plain] == [("plain", 0)]


def test_terms_drop_stopwords_and_punctuation() -> None:
    found = terms("请问，报销流程是什么？")
    assert {"报销", "销流", "流程"} <= set(found)
    assert not {"请问", "什么", "是", "？", "，"} & set(found)
    assert {"vpn", "client"} <= set(terms("How do I get the VPN clients?"))


@pytest.mark.parametrize(
    ("question", "source", "heading"),
    [
        ("报销流程是什么？", "faq.md", "报销流程"),
        ("怎么报销", "faq.md", "报销流程"),
        ("发票抬头写什么", "faq.md", "报销流程"),
        ("财务什么时候打款", "faq.md", "报销流程"),
        ("wifi 密码是多少", "faq.md", "Wi-Fi 密码"),
        ("年假有多少天", "hr/leave.md", "年假"),
        ("年假能结转吗", "hr/leave.md", "年假"),
        ("病假要什么证明", "hr/leave.md", "病假"),
        ("请假", "hr/leave.md", "请假制度"),
        ("how do I install the VPN client?", "faq.md", "VPN setup"),
    ],
)
def test_best_match(kb_dir: Path, question: str, source: str, heading: str) -> None:
    match = KnowledgeBase(kb_dir).search(question)
    assert match is not None
    assert (match.section.source, match.section.heading) == (source, heading)


@pytest.mark.parametrize(
    "question", ["今天天气怎么样", "公司在哪里", "团队有几个人", "what is the meaning of life"]
)
def test_below_threshold_is_no_match(kb_dir: Path, question: str) -> None:
    assert KnowledgeBase(kb_dir).search(question) is None


def test_single_characters_alone_are_not_evidence() -> None:
    sections = parse_sections("hr/leave.md", LEAVE)
    assert best_match("年 天", sections) is None  # both characters occur, no word does
    assert best_match("年假 天", sections) is not None


def test_ignores_hidden_folders_and_other_files(kb_dir: Path) -> None:
    kb = KnowledgeBase(kb_dir)
    assert kb.file_count == 2
    assert {s.source for s in kb.sections} == {"faq.md", "hr/leave.md"}


def test_missing_or_unset_folder_is_empty(tmp_path: Path) -> None:
    assert KnowledgeBase(tmp_path / "nowhere").file_count == 0
    unset = KnowledgeBase(None)
    assert not unset.configured
    assert unset.search("报销流程") is None


def test_parses_once_and_notices_changes(kb_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[str] = []
    real = knowledge.parse_sections
    monkeypatch.setattr(
        knowledge, "parse_sections", lambda src, text: parsed.append(src) or real(src, text)
    )
    kb = KnowledgeBase(kb_dir)
    kb.search("年假")
    kb.search("病假")
    assert sorted(parsed) == ["faq.md", "hr/leave.md"]

    path = kb_dir / "hr" / "leave.md"
    stat = path.stat()
    path.write_text(LEAVE.replace("5 天年假", "7 天年假"), encoding="utf-8")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    match = kb.search("年假有多少天")
    assert match is not None and "7 天年假" in match.section.content
    assert len(parsed) == 4

    (kb_dir / "new.md").write_text("# 打印机\n打印机在三楼茶水间旁边。", encoding="utf-8")
    match = kb.search("打印机在哪")
    assert match is not None and match.section.source == "new.md"


def test_tie_prefers_the_more_specific_section() -> None:
    sections = parse_sections("faq.md", FAQ)
    match = best_match("发票抬头", sections)  # in both the parent and the child body
    assert match is not None and match.section.heading == "报销流程"


# --------------------------------------------------------------------------- via provider


def test_reply_quotes_the_source(kb_dir: Path) -> None:
    provider = RulesProvider(AgentDefinition(), kb_dir)
    request = provider.answer("年假有多少天？")
    ActionRequest.model_validate(request)
    assert request["kind"] == "reply"
    assert request["text"].startswith("根据《hr/leave.md》“年假”一节：")
    assert "5 天年假" in request["text"]
    english = provider.answer("how do I install the VPN client?")["text"]
    assert english.startswith('From "faq.md", section "VPN setup":')


def test_long_sections_are_trimmed(tmp_path: Path) -> None:
    line = "报销材料说明：发票、行程单、审批截图都要齐全。\n"
    (tmp_path / "long.md").write_text("# 报销材料\n" + line * 200, encoding="utf-8")
    text = RulesProvider(AgentDefinition(), tmp_path).answer("报销材料")["text"]
    assert len(text) <= 1500
    assert text.endswith("……")


def test_no_match_is_an_honest_dont_know(kb_dir: Path) -> None:
    text = RulesProvider(AgentDefinition(), kb_dir).answer("公司在哪里")["text"]
    assert "不知道" in text
    assert "2 个文件" in text
    assert "同事" in text
